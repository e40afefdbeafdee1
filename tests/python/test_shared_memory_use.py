"""What the groups of a process take of shared memory: the host channel only
at a group's first CPU collective (never for a group that runs none), in
memory with no name in /dev/shm; and a job that fits Docker's default 64 MB
/dev/shm beside its DataLoader's workers."""
import json
import os
import shutil
import subprocess
import sys

import pytest

from multiproc import LOOPBACK_ENV, run_world
import shm_cases

HERE = os.path.dirname(os.path.abspath(__file__))


def test_a_group_maps_its_channel_at_its_first_cpu_collective_and_no_sooner():
    for result in run_world(2, shm_cases.channel_opened_at_first_cpu_collective,
                            env=LOOPBACK_ENV, timeout=120):
        assert result["after init and 8 subgroups"] == 0, result
        assert result["after the default group's allreduce"] == 1, result
        assert result["after two subgroups' allreduces"] == 3, result
        assert result["after a second allreduce there"] == 3, result
        assert result["result"] == [16.0] * 16  # each of the 4 allreduces doubled it


def test_ucx_takes_its_shared_memory_receive_buffers_in_1_mib_chunks():
    """UCX's own 512 segments of 8 KiB per chunk took 4.1 MiB of /dev/shm per
    rank and group; ringreduce asks for 128 (UCX_MM_RX_BUFS_GROW)."""
    for result in run_world(2, shm_cases.ucx_receive_chunks, env=dict(LOOPBACK_ENV), timeout=120):
        assert result["sum"] == 2.0
        assert 0 < result["largest"] <= (5 << 20) // 4, result  # about 1 MiB, at most 1.25


_MESH_SCRIPT = """
import json, sys
sys.path.insert(0, {here!r})
from multiproc import LOOPBACK_ENV, run_world
import shm_cases
out = {{}}
for backend in ("ringreduce", "gloo"):
    results = run_world(4, shm_cases.mesh_training, backend, env=LOOPBACK_ENV, timeout=240)
    out[backend] = [[w.flatten().tolist() for w in r["weights"]] for r in results]
    out[backend + "_losses"] = [r["losses"] for r in results]
print("RESULT " + json.dumps(out))
"""


def _private_dev_shm_works():
    if shutil.which("unshare") is None:
        return "unshare (util-linux) is not installed"
    probe = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "sh", "-c",
         "mount -t tmpfs -o size=64m tmpfs /dev/shm"], capture_output=True, text=True)
    if probe.returncode != 0:
        return "cannot mount a private /dev/shm here: " + probe.stderr.strip()
    return None


def test_a_2d_mesh_with_dataloader_workers_trains_to_gloos_bits_in_a_64_mb_dev_shm():
    """Docker's default --shm-size: world 4 on a 2 x 2 DeviceMesh (a default
    group and two subgroups per rank), each rank with two DataLoader workers
    that pass batches through /dev/shm, all in a private 64 MB tmpfs mounted
    on /dev/shm in this test's own mount namespace."""
    why = _private_dev_shm_works()
    if why:
        pytest.skip(why)
    script = _MESH_SCRIPT.format(here=HERE)
    proc = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "sh", "-c",
         'mount -t tmpfs -o size=64m tmpfs /dev/shm && exec "$0" -c "$1"', sys.executable,
         script],
        capture_output=True, text=True, timeout=600, cwd=HERE)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, proc.stdout[-3000:] + proc.stderr[-6000:]
    out = json.loads(lines[-1][len("RESULT "):])
    assert out["ringreduce"] == out["gloo"]
    assert out["ringreduce_losses"] == out["gloo_losses"]
    # Every rank ends with the same weights (dp averaged them alike).
    assert all(w == out["ringreduce"][0] for w in out["ringreduce"])
