"""Ranks that call the same collectives in different forms (at once, async,
coalesced, functional) still meet in each, with exact results
(mixed_forms_cases.py)."""
import pytest

from mixed_forms_cases import each_rank_its_own_form, killed_amid_forms
from multiproc import TRANSPORTS, run_world


def _check(results, steps):
    for rank, r in enumerate(results):
        assert r["failed"] == 0, f"rank {rank}: {r['failed']} wrong results, first: {r['failures']}"
        # Both forms on every rank, so that ranks met in a collective they
        # called differently.
        assert r["forms"]["at once"] > steps // 4 and r["forms"]["asynchronous"] > steps // 4, r
        # And torch's manager given a device (DeepSpeed's form) among them.
        assert r["forms"]["device block"] > 0, r
    return results


@pytest.mark.parametrize("world", [2, 3])
def test_each_rank_calls_the_same_collectives_in_its_own_form(world):
    steps = 800
    results = _check(run_world(world, each_rank_its_own_form, steps, 100 + world,
                               env=TRANSPORTS["shm"], timeout=240), steps)
    # The caller's-thread paths and the queued ones both ran on every rank.
    for rank, r in enumerate(results):
        assert r["direct"] > 0 and r["queued"] > 0, f"rank {rank}: {r}"


def test_each_rank_its_own_form_with_the_neighbour_check():
    # RINGREDUCE_CHECK_COLLECTIVES queues every collective (the engine
    # declines the caller's thread) and checks each against its neighbour's.
    steps = 400
    results = _check(run_world(2, each_rank_its_own_form, steps, 7,
                               env={**TRANSPORTS["shm"], "RINGREDUCE_CHECK_COLLECTIVES": "1"},
                               timeout=240), steps)
    for rank, r in enumerate(results):
        assert r["direct"] == 0 and r["queued"] > 0, f"rank {rank}: {r}"


@pytest.mark.parametrize("die_at", [37, 222])
def test_a_rank_killed_amid_mixed_forms_is_reported_fast_by_every_survivor(die_at, tmp_path):
    victim = 2
    results = run_world(3, killed_amid_forms, die_at, victim, die_at, str(tmp_path / "killed_at"),
                        env=TRANSPORTS["shm"], timeout=120, may_die={victim}, exit_path=True)
    assert results[victim] is None
    for rank in (0, 1):
        r = results[rank]
        assert r["error"] is not None, f"rank {rank} ran 1000 steps past its peer's death"
        kind, message = r["error"]
        assert kind == "DistBackendError", r
        assert f"rank {victim} is gone" in message and f"on rank {rank}" in message, message
        # The bound for a dead peer: far below the group's timeout.
        assert r["latency"] < 5.0, r


def test_a_rank_killed_before_its_peers_first_reach_it_costs_them_no_ucx_error_lines(tmp_path,
                                                                                   capfd):
    # A draw of tests/python/seed_sweep.py --kill: rank 1 dies before step 0,
    # and rank 2's first collective connects to it through UCX's shared
    # memory, whose segment went with the process. UcxTransport::endpoint
    # tries again for 50 ms; each try printed two UCX errors (102 lines above
    # the DistBackendError). They are held now (held_ucx_errors.h).
    victim = 1
    results = run_world(3, killed_amid_forms, 678000, victim, 0, str(tmp_path / "killed_at"),
                        env=TRANSPORTS["shm"], timeout=120, may_die={victim}, exit_path=True)
    assert results[victim] is None
    for rank in (0, 2):
        kind, message = results[rank]["error"]
        assert kind == "DistBackendError" and f"rank {victim} is gone" in message, message
        assert results[rank]["latency"] < 5.0, results[rank]
    printed = capfd.readouterr()  # UCX prints to stdout
    assert "UCX  ERROR" not in printed.out + printed.err, (printed.out + printed.err)[-3000:]


def test_no_survivor_aborts_reading_a_buffer_a_peer_gave_up(tmp_path):
    # A draw of tests/python/seed_sweep.py --kill (world 4, every asynchronous
    # call queued): rank 2 dies at step 97, amid reduce_scatters over UCX. A
    # survivor that learnt it first gave up and freed its tensors while
    # another still read its rendezvous send (cma): process_vm_readv failed
    # with EFAULT, and UCX's FATAL log aborted 1-2 survivors in 10 of 24 runs
    # (peer_gone_log_filter.h); run_world raises for a survivor that died.
    # Three runs here.
    victim = 2
    env = {**TRANSPORTS["shm"], "RINGREDUCE_ASYNC_ON_CALLER_BYTES": "0"}
    for attempt in range(3):
        results = run_world(4, killed_amid_forms, 366099, victim, 97,
                            str(tmp_path / f"killed_at{attempt}"), env=env, timeout=120,
                            may_die={victim}, exit_path=True)
        assert results[victim] is None
        for rank in (0, 1, 3):
            kind, message = results[rank]["error"]
            assert kind == "DistBackendError" and f"rank {victim} is gone" in message, message
            assert results[rank]["latency"] < 5.0, results[rank]


def test_no_survivor_smashes_its_stack_when_a_rank_dies_before_its_first_collective(tmp_path):
    # Draws of tests/python/seed_sweep.py --kill over tcp (world 3): rank 0
    # dies before its first collective. The last rank's neighbour check had
    # posted its receive (into itself, on the stack) when its send to dead
    # rank 0 could not be posted; the constructor threw and left the
    # receive posted, and rank 1's fingerprint later landed in another
    # frame: "stack smashing detected" in 5 of 6 runs of each seed. Two
    # seeds here.
    victim = 0
    for seed in (3, 976685):
        results = run_world(3, killed_amid_forms, seed, victim, 0,
                            str(tmp_path / f"killed_{seed}"), env=TRANSPORTS["tcp"], timeout=120,
                            may_die={victim}, exit_path=True)
        assert results[victim] is None
        for rank in (1, 2):
            kind, message = results[rank]["error"]
            assert kind == "DistBackendError" and f"rank {victim} is gone" in message, message
            assert results[rank]["latency"] < 5.0, results[rank]
