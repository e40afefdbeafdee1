"""A rank killed mid-job: survivors get a clear error fast, not at the timeout,
and still exit by themselves."""
import pytest

from failure_cases import (FORM_OPS, broadcast_peer_absent, killed_mid_job,
                           killed_mid_large_transfer, monitored_barrier, raised_by_backend,
                           stopped_or_late)
from multiproc import TRANSPORTS, run_world


# The transports, and shared memory with no rank reading another's memory:
# the gathers of large blocks then go through the host channel's buffers,
# the form their timed choice takes where reading in place is the slower.
KILL_ENVS = {**TRANSPORTS,
             "shm_buffers": {**TRANSPORTS["shm"], "RINGREDUCE_CROSS_MEMORY": "0"}}


@pytest.mark.parametrize("transport,nbytes,from_thread,form", [
    ("shm", 4096, False, "all_reduce"), ("shm", 4 << 20, False, "all_reduce"),
    ("tcp", 4096, False, "all_reduce"), ("tcp", 4 << 20, False, "all_reduce"),
    # Killed from a timer during 2 MiB allreduces, each two turns of the channel.
    ("shm", 2 << 20, True, "all_reduce"),
    # Killed while its peers read and write its memory (cma).
    ("shm", 64 << 20, True, "all_reduce"),
    # The coalescing manager's blocks, each one collective on the channel.
    ("shm", 256 << 10, True, "coalesced"), ("shm", 256 << 10, True, "gather_coalesced"),
    ("shm", 256 << 10, True, "scatter_coalesced"),
    # The manager given a device (DeepSpeed's all_gather_coalesced), its call on the caller's thread.
    ("shm", 256 << 10, True, "device_coalesced"),
    # torch's deprecated all_gather_coalesced, one message on the channel.
    ("shm", 256 << 10, True, "list_gather_coalesced"),
    # Split sizes, on the caller's thread.
    ("shm", 256 << 10, True, "alltoall_uneven"),
    # The rooted and list forms, their lists read and written where they are.
    ("shm", 64 << 10, True, "gather"), ("shm", 64 << 10, True, "scatter"),
    ("shm", 64 << 10, True, "all_to_all_list"),
    # Asynchronous callers, whose part may be up on the channel before they queue the call.
    ("shm", 64 << 10, True, "all_reduce_async"), ("shm", 64 << 10, True, "funcol_all_gather"),
    # ... and one that polls is_completed() instead of waiting.
    ("shm", 64 << 10, True, "all_reduce_polled"),
    # ... and one that waits through its future, or a completion hook chained to it.
    ("shm", 64 << 10, True, "all_reduce_future"), ("shm", 64 << 10, True, "all_reduce_hooked"),
    # Blocks read from the peers' memory, the victim killed while they may be read.
    ("shm", 64 << 10, True, "all_gather_read"), ("shm", 64 << 10, True, "all_to_all_read"),
    ("shm", 64 << 10, True, "gather_read"), ("shm", 64 << 10, True, "alltoall_uneven_read"),
    ("shm", 64 << 10, True, "all_to_all_list_read"),
    # The same blocks through the channel's buffers (the gathers' other timed form).
    ("shm_buffers", 64 << 10, True, "all_gather_read"),
    ("shm_buffers", 64 << 10, True, "all_to_all_read")])
def test_sigkilled_rank_is_reported_fast_by_every_survivor(transport, nbytes, from_thread, form,
                                                            tmp_path):
    victim = 1
    kill_file = str(tmp_path / "killed_at")
    results = run_world(3, killed_mid_job, victim, kill_file, nbytes, from_thread, form,
                        env=KILL_ENVS[transport], timeout=120, may_die={victim}, exit_path=True)
    assert results[victim] is None
    for rank in (0, 2):
        r = results[rank]
        kind, message = raised_by_backend(*r["first"])
        assert kind == "DistBackendError", r["first"]
        assert f"rank {victim} is gone" in message and f"on rank {rank}" in message, message
        assert f"{FORM_OPS[form]} #" in message, message
        # Far below the 60 s group timeout: the bound is 5 s.
        assert r["latency"] < 5.0, r
        kind, later = raised_by_backend(*r["later"])
        assert kind == "DistBackendError" and "unusable after an earlier failure" in later, later
        assert f"rank {victim} is gone" in later
        assert r["later_s"] < 2.0, r


# A broadcast of two ranks past the host channel's buffers, both ways it
# goes: the channel's large broadcast (through the buffers, or read in place
# where the cores are wanted), or (no channel) one message over the transport.
BEYOND_BUFFERS = {"channel": {}, "chain": {"RINGREDUCE_SHM_BYTES": "0"}}


# The root or the receiver killed from a timer while they copy.
@pytest.mark.parametrize("path", sorted(BEYOND_BUFFERS))
@pytest.mark.parametrize("victim", [0, 1])
def test_sigkilled_rank_of_a_broadcast_of_two_is_reported_fast(victim, path, tmp_path):
    survivor = 1 - victim
    kill_file = str(tmp_path / "killed_at")
    results = run_world(2, killed_mid_job, victim, kill_file, 4096, True,
                        "broadcast_beyond_buffers", env={**TRANSPORTS["shm"], **BEYOND_BUFFERS[path]},
                        timeout=120, may_die={victim}, exit_path=True)
    assert results[victim] is None
    r = results[survivor]
    kind, message = raised_by_backend(*r["first"])
    assert kind == "DistBackendError", r["first"]
    assert f"rank {victim} is gone" in message and f"on rank {survivor}" in message, message
    assert "broadcast #" in message, message
    assert r["latency"] < 5.0, r


# ... and a receiver that never calls it: the root's wait ends at the timeout
# naming the rank, or at an abort from another thread.
@pytest.mark.parametrize("path", sorted(BEYOND_BUFFERS))
@pytest.mark.parametrize("mode", ["stop", "abort"])
def test_broadcast_of_two_to_an_absent_rank_ends_at_the_timeout_or_the_abort(mode, path):
    timeout_s = 4.0
    results = run_world(2, broadcast_peer_absent, mode, timeout_s,
                        env={**TRANSPORTS["shm"], **BEYOND_BUFFERS[path]}, timeout=120,
                        exit_path=True)
    r = results[0]
    kind, message = raised_by_backend(*r["outcome"])
    assert kind == "DistBackendError", r
    assert "broadcast #2" in message, message
    if mode == "stop":
        assert "timed out after 4000 ms" in message and "rank 1" in message, message
        assert 0.9 * timeout_s <= r["elapsed"] < 1.1 * timeout_s + 1.0, r
    else:
        assert "abort" in message, message
        assert r["elapsed"] < 0.5 * timeout_s, r


@pytest.mark.parametrize("victim,scheme", [(0, "get_zcopy"), (1, "put_zcopy")])
def test_rank_killed_while_its_peer_copies_its_memory_leaves_the_peer_alive_and_told(victim, scheme,
                                                                                    tmp_path):
    # UCX logged the failed copy from or into the dead process as fatal and
    # aborted the survivor (transport/ucx/peer_gone_log_filter.h).
    kill_file = str(tmp_path / "killed_at")
    survivor = 1 - victim
    results = run_world(2, killed_mid_large_transfer, kill_file, 256, victim,
                        env={**TRANSPORTS["shm"], "UCX_RNDV_SCHEME": scheme}, timeout=60,
                        may_die={victim}, exit_path=True)
    assert results[victim] is None
    r = results[survivor]  # run_world: it returned and exited by itself with status 0
    assert r["error"] is not None, f"rank {survivor} moved 256 MiB with a rank killed 20 ms into it"
    kind, message = r["error"]
    assert kind == "DistBackendError", r
    assert f"rank {victim} is gone" in message and f"on rank {survivor}" in message, message
    assert r["latency"] < 5.0, r


# The ranks that only send in a form's collective through the host channel
# (root: rank 0): they leave it once their part is up (algorithms/host_channel/turn.h).
SENDS_ONLY = {"gather": (1,), "scatter": (0,)}


@pytest.mark.parametrize("form", sorted(FORM_OPS))
def test_stopped_rank_times_out_at_the_timeout_naming_it(form):
    timeout_s = 4.0
    results = run_world(3, stopped_or_late, "stop", timeout_s, form, timeout=120, may_die={2},
                        exit_path=True)
    op = FORM_OPS[form]
    for rank in (0, 1):
        result, elapsed = results[rank]["outcome"], results[rank]["elapsed"]
        if rank in SENDS_ONLY.get(form, ()):
            # It reads nothing of rank 2 in #2: done there, as gloo's and
            # Open MPI's senders are; its next collective times out, naming #2.
            assert result[0] == "ok", results[rank]
            result, elapsed = results[rank]["next"], results[rank]["next_elapsed"]
        kind, message = raised_by_backend(*result)
        assert kind == "DistBackendError", results[rank]
        assert f"{op} #2 timed out after 4000 ms" in message, message
        assert f"not seen in {op} #2: 2 (" in message, message
        # At the timeout, within 10% (plus 1 s of scheduling slack: 3 ranks
        # share 2 cores). A rank may learn of the failure a few ms before its
        # own deadline, from the peer that started the collective first.
        assert 0.9 * timeout_s <= elapsed < 1.1 * timeout_s + 1.0, results[rank]


def test_rank_late_by_less_than_the_timeout_just_succeeds():
    results = run_world(3, stopped_or_late, "late", 4.0, timeout=120, exit_path=True)
    for rank, r in enumerate(results):
        assert r["outcome"] == ("ok", 0.0 + 1.0 + 2.0), (rank, r)


def test_monitored_barrier_names_every_missing_rank():
    results = run_world(4, monitored_barrier, timeout=120, exit_path=True)
    assert all(r["first"] == "passed" for r in results)
    kind, message = results[0]["second"]
    assert kind == "DistBackendError", results[0]
    assert "rank(s) 2, 3 did not reach the barrier within 2000 ms" in message, message
    # Rank 1's own wait has the same deadline as rank 0's: it either hears
    # rank 0's reason (rank 0 aborts the group) or times out itself.
    kind, message = results[1]["second"]
    assert kind == "DistBackendError", message
    assert ("rank 0 gave up on the group" in message
            and "rank(s) 2, 3 did not reach the barrier" in message) or (
        "rank 0 did not release it" in message), message


def test_per_op_timeout_overrides_the_group_timeout():
    from failure_cases import per_op_timeout

    r = run_world(2, per_op_timeout, timeout=120, exit_path=True)[0]
    kind, message = r["outcome"]
    assert kind == "DistBackendError", r
    # Rank 1 stays in the group (it waits on an event): a timeout, naming it.
    assert "allreduce #2 timed out after 1500 ms on rank 0" in message, message
    assert "rank(s) not seen in allreduce #2: 1 " in message, message
    assert 1.5 <= r["elapsed"] < 1.1 * 1.5 + 1.0, r
