"""The ranks that only send in a rooted collective on the host channel return
before the ranks that read them call theirs, with every result exact
(senders_leave_cases.py); what their next collective does where a reader
never comes is in test_failures.py (test_stopped_rank_times_out_at_the_timeout_naming_it)."""
import pytest

from multiproc import run_world
from senders_leave_cases import (senders_leave_before_readers_come,
                                 two_roots_learn_it_at_their_next_collective)


@pytest.mark.parametrize("world_size", [2, 3])
def test_senders_return_before_their_readers_call(world_size):
    for rank, failures in enumerate(run_world(world_size, senders_leave_before_readers_come,
                                              timeout=240)):
        assert failures == [], f"rank {rank}: {failures}"


def test_two_roots_of_one_broadcast_learn_it_at_their_next_collective():
    """A mismatch between two ranks that both only send completes both calls
    (as gloo's does), keeps each root's data, and fails the next collective
    on both ranks, naming the broadcast, rather than running it."""
    results = run_world(2, two_roots_learn_it_at_their_next_collective, timeout=120)
    for rank, (data, error) in enumerate(results):
        assert data == [float(rank)] * 16, f"rank {rank}: a root's tensor changed: {data}"
        assert error is not None, f"rank {rank}: the next all_reduce ran after a mismatch"
        assert f"broadcast #2 on rank {rank}: rank {1 - rank} is in a different collective" in error, error
        assert "raised by allreduce #3, which did not run" in error, error
