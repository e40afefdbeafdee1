"""The ranks that only send in a rooted collective on the host channel return
before the ranks that read them call theirs, with every result exact
(senders_leave_cases.py); what their next collective does where a reader
never comes is in test_failures.py (test_stopped_rank_times_out_at_the_timeout_naming_it)."""
import pytest

from multiproc import run_world
from senders_leave_cases import senders_leave_before_readers_come


@pytest.mark.parametrize("world_size", [2, 3])
def test_senders_return_before_their_readers_call(world_size):
    for rank, failures in enumerate(run_world(world_size, senders_leave_before_readers_come,
                                              timeout=240)):
        assert failures == [], f"rank {rank}: {failures}"
