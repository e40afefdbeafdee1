"""The multi-process harness itself: a world that overruns says where each
late rank is, so a hang in CI can be diagnosed from its log alone."""
import pytest

from harness_cases import rank_one_sleeps_in_a_named_place
from multiproc import WorldFailed, run_world


def test_an_overrunning_world_reports_the_late_ranks_stacks():
    with pytest.raises(WorldFailed) as failure:
        run_world(2, rank_one_sleeps_in_a_named_place, timeout=15)
    message = str(failure.value)
    assert "did not finish within 15 s; ranks done: [0]" in message, message
    assert "--- rank 1 (pid" in message and "--- rank 0" not in message, message
    # Python's stack of the late rank, down to the function it is stuck in.
    assert "_asleep_past_the_world_timeout" in message, message
    assert "rank_one_sleeps_in_a_named_place" in message, message
