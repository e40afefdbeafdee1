"""An abort from another thread ends a collective the main thread is blocked
in, whichever way that collective runs (a small blocking one runs on the
calling thread through the host channel): what a watchdog relies on.
test_trace_and_hooks.py covers ProcessGroup.abort(); this, shrink_group's."""
import pytest

from failure_cases import FORM_OPS
from multiproc import LOOPBACK_ENV, run_world
import abort_cases


@pytest.mark.parametrize("path,form", [
    ("host channel", "all_reduce"), ("ucx", "all_reduce"),
    # An allreduce in three turns of the channel (3 MiB).
    ("host channel", "all_reduce_turns"),
    # The coalescing manager given a device: its one call on the caller's
    # thread inside the backend's coalescing block, and queued there.
    ("host channel", "device_coalesced"), ("ucx", "device_coalesced"),
    # torch's deprecated all_gather_coalesced, on the caller's thread and queued.
    ("host channel", "list_gather_coalesced"), ("ucx", "list_gather_coalesced"),
    # all_to_all's lists, read and written where they are on the caller's thread.
    ("host channel", "all_to_all_list"),
    # An asynchronous caller: its part put up on the channel, the call queued, then waited for.
    ("host channel", "all_reduce_async"),
    # ... polled with is_completed() instead: the worker runs it, and the abort ends it there.
    ("host channel", "all_reduce_polled"),
    # ... waited for through its future, or a hook chained to it: the worker runs it at once.
    ("host channel", "all_reduce_future"), ("host channel", "all_reduce_hooked"),
    # Blocks read from the peers' memory: the abort ends the wait for their turn.
    ("host channel", "all_gather_read"), ("host channel", "all_to_all_read"),
    ("host channel", "gather_read"), ("host channel", "alltoall_uneven_read"),
    ("host channel", "all_to_all_list_read")])
def test_shrink_abort_from_a_watchdog_thread_ends_the_blocked_allreduce(path, form):
    env = dict(LOOPBACK_ENV)
    if path == "ucx":
        env["RINGREDUCE_SHM_BYTES"] = "0"
    results = run_world(3, abort_cases.shrink_abort_from_a_watchdog, form, env=env, timeout=120,
                        exit_path=True)
    op = FORM_OPS[form]
    for rank in (0, 1):
        r = results[rank]
        assert r["watchdog_done"], r
        assert r["error"] is not None and f"{op} #2" in r["error"], r
        assert "aborted" in r["error"], r
        # The group's timeout is 60 s: the abort ended it.
        assert r["blocked_s"] < 30, r
        assert r["after"] == [3.0] * 4, r
