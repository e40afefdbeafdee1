"""Sends and receives when something goes wrong: a peer killed mid-loop, a
peer stopped or never calling, an abort from another thread. Both forms a
pipeline uses: isend/irecv (posted on the issuing thread when nothing is
queued ahead; batch_isend_irecv issues the same), the same inside torch's
coalescing manager (a block whose posts run on the caller's thread at its
end) and isend/irecv polled with is_completed() (a poll moves the messages
on its own thread). Each waits as the user's code would, on the Works the
call returned."""
import pytest

import p2p_failure_cases
from multiproc import TRANSPORTS, run_world

FORMS = ["send_recv", "block", "poll"]


@pytest.mark.parametrize("form", FORMS)
def test_a_killed_peer_is_reported_fast_by_every_rank_that_waits_for_it(form, tmp_path):
    victim = 1
    kill_file = str(tmp_path / "killed_at")
    results = run_world(3, p2p_failure_cases.killed_mid_loop, form, victim, kill_file,
                        env=TRANSPORTS["shm"], timeout=120, may_die={victim}, exit_path=True)
    assert results[victim] is None
    for rank in (0, 2):
        r = results[rank]
        assert "wrong" not in r, r  # every step before the kill carried the right values
        assert r["step"] == 20, r
        kind, message = r["first"]
        assert kind == "DistBackendError", r
        assert f"on rank {rank} failed: rank {victim} is gone" in message, message
        assert "recv p2p#" in message, message
        # Far below the group's 60 s timeout.
        assert r["latency"] < 5.0, r


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("mode", ["stop", "absent"])
def test_a_silent_peer_ends_the_wait_at_the_timeout_naming_it(form, mode):
    timeout_s = 4.0
    results = run_world(3, p2p_failure_cases.stopped_or_absent, form, mode, timeout_s,
                        timeout=120, may_die={2} if mode == "stop" else (), exit_path=True)
    for rank in (0, 1):
        r = results[rank]
        kind, message = r["outcome"]
        assert kind == "DistBackendError", r
        assert f"timed out after 4000 ms on rank {rank}" in message, message
        assert "still waiting to receive 64 bytes from rank 2" in message, message
        # At the timeout, within 10% (plus 1 s of slack: 3 ranks share 2 cores).
        assert 0.9 * timeout_s <= r["elapsed"] < 1.1 * timeout_s + 1.0, r


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("how", ["shrink", "abort"])
def test_an_abort_from_another_thread_ends_the_wait(form, how):
    """shrink_group(SHRINK_ABORT), after which the shrunk group carries on,
    or ProcessGroup.abort()."""
    results = run_world(3, p2p_failure_cases.aborted_from_a_watchdog, form, how, timeout=120,
                        exit_path=True)
    for rank in (0, 1):
        r = results[rank]
        assert r["watchdog_done"], r
        kind, message = r["error"]
        assert kind == "DistBackendError", r
        assert "recv p2p#" in message and f"on rank {rank}" in message, message
        # The group's timeout is 60 s: the abort ended the wait.
        assert r["blocked_s"] < 30, r
        if how == "abort":
            # The abort's reason, whether its shutdown abandoned the receive
            # or the waiting caller saw the abort first.
            assert f"process group '0' was aborted on rank {rank} (ProcessGroup.abort())" in message, message
            continue
        assert "aborted" in message and "SHRINK_ABORT" in message, message
        other = 1 - rank
        assert r["after"] == (float(other + 1), float(other + 1)), r
