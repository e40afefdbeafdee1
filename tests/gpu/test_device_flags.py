"""The device-flags path (RINGREDUCE_CUDA_ALGO=flags) on the one GPU of the
test machine, ranks sharing it: without MPS the ranks meet through stream
memory operations, under MPS (scripts/gpu_check.sh starts a daemon and sets
RINGREDUCE_TEST_MPS=1) through flags in the kernels, and then CUDA graphs
capture the collectives. Skipped, visibly, without a CUDA device."""
import os
import re
import sys

import pytest
import torch

sys.path.insert(0, __file__.rsplit("/tests/", 1)[0] + "/tests/python")
sys.path.insert(0, os.path.dirname(__file__))
from multiproc import run_world  # noqa: E402

import flags_cases  # noqa: E402

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(),
                                reason="no CUDA device on this machine")

UNDER_MPS = os.environ.get("RINGREDUCE_TEST_MPS") == "1"
# scripts/gpu_check.sh quick: fewer combinations, to fit its time.
QUICK = os.environ.get("RINGREDUCE_TEST_QUICK") == "1"
FLAGS = {"RINGREDUCE_CUDA_ALGO": "flags", "RINGREDUCE_CUDA_BUFFER_BYTES": str(64 << 10)}
# Without MPS the automatic choice is stream memory operations; flags in
# the kernels only where MPS runs them at once.
SYNCS = ["auto", "memops"] + (["flags"] if UNDER_MPS else [])
WORLDS = [2, 4] if QUICK else [1, 2, 4]
if QUICK:
    SYNCS = ["flags"] if UNDER_MPS else ["auto"]


def _env(sync, **more):
    return {**FLAGS, "RINGREDUCE_CUDA_SYNC": sync, **more}


def _no_failures(results):
    for rank, result in enumerate(results):
        assert result["checked"] > 0, f"rank {rank} checked nothing"
        assert not result["failures"], f"rank {rank}: " + "\n".join(result["failures"][:20])


@pytest.mark.parametrize("world", WORLDS)
@pytest.mark.parametrize("sync", SYNCS)
def test_every_collective_against_the_oracle(world, sync):
    _no_failures(run_world(world, flags_cases.sweep, env=_env(sync), timeout=600))


@pytest.mark.parametrize("world", [2] if QUICK else [2, 4])
def test_tensors_that_cannot_be_shared_go_through_the_buffers(world):
    env = _env("auto", PYTORCH_CUDA_ALLOC_CONF="expandable_segments:True")
    _no_failures(run_world(world, flags_cases.sweep, env=env, timeout=600))


@pytest.mark.parametrize("world", [2] if QUICK else [2, 4])
def test_direct_collectives_complete_at_once_in_stream_order(world):
    _no_failures(run_world(world, flags_cases.direct_and_streams, env=_env("auto"),
                           timeout=300))


@pytest.mark.skipif(not UNDER_MPS, reason="CUDA graphs capture the flags path only where the "
                    "ranks' kernels run at once (MPS on this one-GPU machine)")
@pytest.mark.parametrize("world", [2, 4])
def test_a_captured_graph_replays_exactly(world):
    _no_failures(run_world(world, flags_cases.graph_capture, 1000, env=_env("flags"),
                           timeout=600))


def test_what_cannot_be_captured_says_why():
    sync = "flags" if UNDER_MPS else "memops"
    for result in run_world(2, flags_cases.capture_refused, env=_env(sync), timeout=300):
        assert "cannot be captured" in result["messages"]["broadcast"], result
        if UNDER_MPS:
            assert result["messages"]["all_reduce"] == "captured", result
        else:
            assert "stream memory operations" in result["messages"]["all_reduce"], result
        assert result["after"] == [2.0] * 16


@pytest.mark.parametrize("sync", SYNCS)
def test_a_killed_peer_fails_the_survivors_within_the_timeout(sync):
    results = run_world(3, flags_cases.killed_peer, env=_env(sync), timeout=300, may_die=(1,))
    for rank in (0, 2):
        result = results[rank]
        # What the user reads names a rank (this one's device collective,
        # or the one that is gone) and why it failed.
        message = result["message"]
        assert message != "no error", result
        assert re.search(r"\brank [012]\b", message), result
        assert any(why in message for why in ("timed out", "is gone", "stopped")), result
        assert result["seconds"] < 40, result


@pytest.mark.parametrize("world", [2])
def test_peer_access_off_takes_nccl_or_the_host_with_the_oracles_results(world):
    """The fallback a pair without (or with broken) peer access gets, forced
    on the one GPU: every rank alike, exact, and the group says why."""
    results = run_world(world, flags_cases.peer_access_off, env={"RINGREDUCE_CUDA_P2P": "off"},
                        timeout=600)
    _no_failures(results)
    for rank, result in enumerate(results):
        assert "RINGREDUCE_CUDA_P2P=off on rank 0" in result["paths"], (rank, result["paths"])
        assert "device flags: unavailable" in result["paths"], (rank, result["paths"])
