"""The frameworks our users reach us through, run as the README shows them:
PyTorch Lightning's DDPStrategy (Lightning starting the processes itself,
and under torchrun) and Hugging Face Accelerate (under torchrun). Each
example trains to the same bits over ringreduce as over gloo, on every rank.

scripts/test.sh installs lightning and accelerate; where they cannot be
installed (no package index) these tests are skipped, and say so.
"""
import os
import re
import signal
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]
LINE = re.compile(r"rank (\d) of 2: backend (\w+), (?:(\w+), )?loss ([\d.]+) -> ([\d.]+), "
                  r"weights ([0-9a-f]{16})")


def _run(cmd, timeout=240):
    """Runs `cmd` in a session of its own and kills the whole session
    afterwards, so that no process it started (Lightning's and torchrun's
    workers included) outlives the test, whether it finishes, fails or hangs."""
    env = dict(os.environ, UCX_NET_DEVICES="lo", OMP_NUM_THREADS="1",
               PYTHONWARNINGS="ignore")
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        pytest.fail(f"{' '.join(cmd)} did not finish within {timeout} s:\n{err[-3000:]}")
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    assert proc.returncode == 0, f"{' '.join(cmd)} exited {proc.returncode}:\n{err[-3000:]}"
    return out


def _ranks(out):
    """{rank: (backend, wrapper, first loss, last loss, weights digest)},
    from the example's lines."""
    found = {int(m[1]): (m[2], m[3], float(m[4]), float(m[5]), m[6]) for m in LINE.finditer(out)}
    assert sorted(found) == [0, 1], out
    return found


def _trains_like_gloo(ring, gloo):
    for rank in (0, 1):
        backend, wrapper, first, last, weights = ring[rank]
        assert backend == "ringreduce", ring
        assert last < first / 4, ring  # it trained
        # Same losses and the same final weights, bit for bit, as gloo.
        assert ring[rank][1:] == gloo[rank][1:], (ring, gloo)
    assert ring[0][4] == ring[1][4], ring  # every rank holds the same weights


def _both_backends(cmd):
    return tuple(_ranks(_run(cmd + ["--backend", backend])) for backend in ("ringreduce", "gloo"))


@pytest.fixture(scope="module")
def lightning_launched():
    """Lightning's own launcher, on each backend (shared by the tests below)."""
    pytest.importorskip("lightning", reason="lightning is not installed "
                        "(scripts/test.sh installs it where an index is reachable)")
    return _both_backends([sys.executable, "examples/lightning_ddp.py", "--devices", "2"])


def test_lightning_starts_its_own_processes_on_ringreduce(lightning_launched):
    _trains_like_gloo(*lightning_launched)


def test_lightning_under_torchrun_on_ringreduce(lightning_launched):
    ring = _ranks(_run(TORCHRUN + ["examples/lightning_ddp.py"]))
    assert {r: v[0] for r, v in ring.items()} == {0: "ringreduce", 1: "ringreduce"}
    # The launcher changes nothing.
    assert ring == lightning_launched[0], (ring, lightning_launched[0])


def test_accelerate_uses_the_group_it_finds():
    pytest.importorskip("accelerate", reason="accelerate is not installed "
                        "(scripts/test.sh installs it where an index is reachable)")
    ring, gloo = _both_backends(TORCHRUN + ["examples/accelerate_ddp.py"])
    _trains_like_gloo(ring, gloo)
    assert ring[0][1] == ring[1][1] == "DistributedDataParallel", ring
