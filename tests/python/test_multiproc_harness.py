"""The multi-process harness itself: a world that overruns says where each
late rank is, so a hang in CI can be diagnosed from its log alone; ranks
that need their exit path run it, and a failed exit is reported."""
import os

import pytest

from harness_cases import (exit_handlers, rank_one_sleeps_in_a_named_place,
                           rank_zero_raises_and_rank_one_waits)
from multiproc import WorldFailed, run_world


def _overrun(fn, timeout):
    """The message of a world of 2 running `fn` that overruns."""
    with pytest.raises(WorldFailed) as failure:
        run_world(2, fn, timeout=timeout)
    return str(failure.value)


def test_an_overrunning_world_reports_the_late_ranks_stacks():
    message = _overrun(rank_one_sleeps_in_a_named_place, 5)
    assert "did not finish within 5 s; ranks done: [0]" in message, message
    assert "--- rank 1 (pid" in message and "--- rank 0" not in message, message
    # Python's stack of the late rank, down to the function it is stuck in.
    assert "_asleep_past_the_world_timeout" in message, message
    assert "rank_one_sleeps_in_a_named_place" in message, message


def test_an_overrun_after_a_rank_raised_says_what_it_raised():
    """A rank that raised alone leaves its peers waiting: the world overruns,
    and the message gives that rank's traceback before the late ranks'
    stacks (it was lost before: only the stacks were printed)."""
    message = _overrun(rank_zero_raises_and_rank_one_waits, 5)
    assert "ranks done: [0]" in message, message
    assert "--- rank 0 raised ---" in message, message
    assert "rank 0's own reason, which the overrun message must carry" in message, message
    assert "--- rank 1 (pid" in message, message


def test_a_phase_deadline_stops_the_world_first_and_says_so(monkeypatch):
    """Under a bounded caller (scripts/gpu_quick.sh's phases set
    RINGREDUCE_PHASE_DEADLINE) a world stops at that deadline, before its own
    longer timeout, with the late rank's stacks: the phase's `timeout`
    would kill it with nothing said."""
    import time

    monkeypatch.setenv("RINGREDUCE_PHASE_DEADLINE", str(int(time.time()) + 6))
    message = _overrun(rank_one_sleeps_in_a_named_place, 600)
    assert "(what was left of the phase: RINGREDUCE_PHASE_DEADLINE)" in message, message
    assert "ranks done: [0]" in message, message
    assert "_asleep_past_the_world_timeout" in message, message


@pytest.mark.parametrize("start", ["forked", "spawned"])
def test_ranks_that_need_their_exit_path_get_it(start, tmp_path, monkeypatch):
    """exit_path=True: each rank's atexit handlers run as it exits, whether
    it was forked from the rank server (whose own end for a fork, os._exit,
    runs none) or spawned afresh, and an exit that fails is reported."""
    if start == "spawned":
        monkeypatch.setenv("RINGREDUCE_TEST_SPAWN", "1")
    else:  # a suite run with RINGREDUCE_TEST_SPAWN=1 still checks the forked kind here
        monkeypatch.delenv("RINGREDUCE_TEST_SPAWN", raising=False)
    with pytest.raises(WorldFailed) as failure:
        run_world(2, exit_handlers, str(tmp_path), timeout=60, exit_path=True)
    assert "rank(s) [1] exited with [3]" in str(failure.value), str(failure.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["exited.0", "exited.1"]
    from multiprocessing import forkserver

    parent = forkserver._forkserver._forkserver_pid if start == "forked" else os.getpid()
    for rank in (0, 1):
        assert (tmp_path / f"exited.{rank}").read_text() == str(parent), (start, rank)
