"""Bad input raises a clear exception and leaves the group usable; a missing
rank produces a timeout error naming the op, its sequence number and ranks."""
import pytest

from error_cases import bad_inputs, timeout_then_fail_fast
from multiproc import run_world


@pytest.mark.parametrize("world_size", [1, 2])
def test_bad_input_raises_clearly_and_group_survives(world_size):
    for rank, result in enumerate(run_world(world_size, bad_inputs, timeout=120)):
        assert result["problems"] == {}, f"rank {rank}: {result['problems']}"
        assert result["usable"], f"rank {rank}: group unusable after bad input"


def test_missing_rank_times_out_with_op_seq_and_ranks():
    result = run_world(2, timeout_then_fail_fast, timeout=120)[0]
    kind, message = result["wait"]
    assert kind == "DistBackendError", result["wait"]
    # "allreduce #2": the second collective of the group.
    for needle in ("allreduce #2", "timed out after 2000 ms", "on rank 0", "rank 1"):
        assert needle in message, message
    # Bounded by the group timeout, not hung (generous upper bound for CI).
    assert 1.9 <= result["elapsed"] < 30, result["elapsed"]
    assert result["future"][0] == "DistBackendError" and "allreduce #2" in result["future"][1]
    kind, message = result["later"]
    assert kind == "DistBackendError" and "unusable after an earlier failure" in message, message
    assert "allreduce #3" in message and "allreduce #2" in message, message
    assert result["later_elapsed"] < 10
