"""The device ring (RINGREDUCE_CUDA_ALGO=ring) on the one GPU of the test
machine: UCX moves device segments between the ranks (cuda_ipc, cuda_copy)
and the fused kernel reduces each received segment on the device. Needs a
UCX that registers CUDA memory (pip's libucx-cu13: scripts/gpu_check.sh
quick builds against it when .gpu/ carries it); skipped, saying why,
without one or without a GPU."""
import glob
import importlib.util
import os
import shutil
import sys

import pytest
import torch

sys.path.insert(0, __file__.rsplit("/tests/", 1)[0] + "/tests/python")
sys.path.insert(0, os.path.dirname(__file__))
from multiproc import run_world  # noqa: E402


def _loaded_ucx_folder():
    """The folder of the libucs this process loaded with ringreduce's module
    (the loader's answer, /proc/self/maps), or None."""
    from torch_ringreduce import _C  # noqa: F401  (loads UCX)
    with open("/proc/self/maps") as maps:
        for line in maps:
            path = line.split()[-1]
            if os.path.basename(path).startswith("libucs.so"):
                return os.path.dirname(os.path.realpath(path))
    return None


def _why_not_here():
    """Why the device ring cannot run on this machine, from the machine
    alone (not from what ringreduce says of itself): no GPU, or a UCX without
    its CUDA transports (Debian's; pip's libucx-cu13 ships them as
    ucx/libuct_cuda.so beside libucs). "" where it can."""
    if not torch.cuda.is_available():
        return "no CUDA device on this machine"
    folder = _loaded_ucx_folder()
    if folder is None or not glob.glob(os.path.join(folder, "ucx", "libuct_cuda.so*")):
        return (f"the UCX loaded ({folder or 'not found'}) has no CUDA transports "
                "(ucx/libuct_cuda.so)")
    return ""


_WHY = _why_not_here()
pytestmark = pytest.mark.skipif(bool(_WHY), reason=_WHY or "-")


def test_ucx_registers_device_memory_where_a_gpu_and_its_cuda_transports_are():
    """What ringreduce reports (and chooses the device ring by) agrees with
    the machine: a GPU and UCX's CUDA module mean device memory over UCX."""
    from torch_ringreduce import _C
    info = _C.ucx_device_memory()
    assert info["cuda_module"], info
    assert info["cuda"], f"UCX {_C.ucx_version()} does not register CUDA memory here: {info}"


@pytest.mark.parametrize("world", [2, 4])
def test_every_collective_against_the_oracle(world):
    import ring_cases
    results = run_world(world, ring_cases.sweep, env={"RINGREDUCE_CUDA_ALGO": "ring"},
                        timeout=600)
    for rank, result in enumerate(results):
        assert result["checked"] > 0, f"rank {rank} checked nothing"
        assert not result["failures"], f"rank {rank}: " + "\n".join(result["failures"][:20])


@pytest.mark.parametrize("wire", ["fp16", "bf16"])
def test_a_sixteen_bit_wire_gives_the_host_rings_bits(wire):
    import ring_cases
    env = {"RINGREDUCE_CUDA_ALGO": "ring", "RINGREDUCE_WIRE_DTYPE": wire}
    for rank, result in enumerate(run_world(2, ring_cases.wire, env=env, timeout=300)):
        assert result["checked"] == 12, f"rank {rank} checked {result['checked']}, not 2 x 6"
        assert not result["failures"], f"rank {rank}: " + "\n".join(result["failures"][:20])


# No setting; no spin (every wait for a device ticket sleeps at once on the
# fd the device writes, DeviceSteps::wakeFd); the CUDA autotuner (the device
# ring against NCCL, both timed on the device: backend/device_trial_clock.h).
SETTINGS = {"default": {}, "nospin": {"RINGREDUCE_SPIN_US": "0", "RINGREDUCE_WAIT_SPIN_US": "0"},
            "autotune": {"RINGREDUCE_AUTOTUNE": "1"}}


@pytest.mark.parametrize("per_node,settings",
                         [(1, "default"), (2, "default"), (1, "nospin"), (2, "autotune")])
def test_across_emulated_nodes_the_ring_is_chosen_and_exact(per_node, settings):
    """Two emulated nodes (network namespaces with their own hostname and
    boot id, so neither UCX nor ringreduce takes them for one machine),
    `per_node` ranks each on the one GPU, torchrun on each:
    across nodes with UCX moving CUDA memory, `auto` takes the device ring,
    and with two ranks per node its allreduce runs in two levels."""
    # No link rate is set, so no tc: iproute2's ip is checked by the
    # emulation itself (nodes.Unavailable below, with the reason).
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("needs root and util-linux's unshare")
    repo = __file__.rsplit("/tests/", 1)[0]
    spec = importlib.util.spec_from_file_location(
        "emulated_torchrun", os.path.join(repo, "benchmarks", "emulated_torchrun.py"))
    nodes = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(nodes)
    env = dict(os.environ, UCX_NET_DEVICES="eth1", RINGREDUCE_DEBUG="INFO",
               **SETTINGS[settings])
    command = ["torchrun", "--nnodes", "2", "--nproc-per-node", str(per_node),
               "--rdzv-backend", "c10d",
               "--rdzv-endpoint", "node0:29400", "--rdzv-id", "device-ring",
               os.path.join(repo, "tests", "gpu", "ring_nodes_script.py")]
    try:
        results = nodes.run(2, command, timeout=300, env=env)
    except nodes.Unavailable as why:
        pytest.skip(str(why))
    for node, (code, out, err) in enumerate(results):
        assert code == 0, f"node {node} exited {code}:\n{err[-3000:]}"
        assert "the device ring" in err, err[-3000:]
        assert ("two levels" in err) == (per_node > 1), err[-3000:]
        assert "RESULT ok" in out, out[-3000:]
    if settings == "autotune":
        logs = "".join(err for _, _, err in results)
        # One physical GPU under every emulated node: NCCL refuses ranks that
        # share it, so there is no second candidate to time (seen on an H200,
        # 2026-11-28: "NCCL path unavailable: two ranks share a GPU").
        for reason in ("NCCL could not be set up", "NCCL path unavailable"):
            if reason in logs:
                line = next(l for l in logs.splitlines() if reason in l)
                pytest.skip(f"no NCCL candidate across the emulated nodes: {line.split('INFO ')[-1]}")
        assert "autotune: CUDA allreduce across nodes" in logs, logs[-3000:]
