"""dist.shrink_group on ringreduce: on a healthy group, after a rank was
killed mid-training (DDP carries on at world 2 with exactly a world of two's
parameters), with bad arguments, a rank that does not come, and a store
whose host died."""
import pytest
import torch
from torch.distributed import distributed_c10d as c10d

import shrink_cases
from multiproc import run_world
from shrink_cases import _ints


@pytest.mark.parametrize("world,excluded,flags", [
    (4, (1,), c10d.SHRINK_DEFAULT),   # a middle rank: the ranks after it are renumbered
    (4, (0, 2), c10d.SHRINK_ABORT),   # with an allreduce in flight that ranks 0 and 2 never join
])
def test_shrink_a_healthy_group(world, excluded, flags):
    results = run_world(world, shrink_cases.healthy, excluded, flags, timeout=150, exit_path=True)
    staying = [r for r in range(world) if r not in excluded]
    expected_sum = sum(_ints(r) for r in staying)
    for new_rank, rank in enumerate(staying):
        r = results[rank]
        assert torch.equal(r["before"], torch.full((4,), float(world))), r["before"]
        n = len(staying)
        assert r["rank_size"] == (new_rank, n, new_rank, n), r["rank_size"]
        assert r["default_is_new"], "the shrunk group should be the default group"
        assert r["backend"] == "ProcessGroupRing", r["backend"]
        for key in ("results", "results_default_group"):
            got = r[key]
            assert torch.equal(got["sum"], expected_sum), key
            assert torch.equal(got["broadcast"], _ints(staying[0])), key
            assert all(torch.equal(g, _ints(s)) for g, s in zip(got["gathered"], staying)), key
        if flags == c10d.SHRINK_ABORT:
            kind, message = r["pending"]
            # Aborted by the shrink (this rank's, or another staying rank's
            # that told it), not at the 60 s timeout.
            assert kind == "DistBackendError", r["pending"]
            assert "SHRINK_ABORT" in message or "gave up on the group" in message, message
            assert "timed out" not in message, message


def test_bad_shrink_arguments_raise_and_leave_the_group_usable():
    results = run_world(2, shrink_cases.bad_arguments, timeout=120, exit_path=True)
    for rank, r in enumerate(results):
        errors = r["errors"]
        assert r["supports"] is True
        assert torch.equal(r["after"], torch.full((6,), 3.0))
        # torch's own checks.
        assert errors["torch_empty"][0] == "ValueError", errors["torch_empty"]
        assert errors["torch_out_of_range"][0] == "ValueError", errors["torch_out_of_range"]
        assert errors["torch_self"][0] == "RuntimeError", errors["torch_self"]
        assert errors["torch_flags"][0] == "ValueError", errors["torch_flags"]
        # What torch passes on to the backend, and what a direct caller sends.
        kind, message = errors["torch_options"]
        assert kind == "TypeError" and "pg_options must be" in message and "timedelta" in message, \
            errors["torch_options"]
        where = f"shrink of group '0' on rank {rank}"
        expect = {
            "empty": "ranks_to_exclude is empty",
            "out_of_range": "rank -1 is not in the group of size 2",
            "duplicate": f"rank {1 - rank} is excluded twice",
            "self": "this rank is excluded, so it must not call shrink_group",
            "all": "",  # this rank is among them: either message names the problem
            "flags": "shrink_flags 2 is neither SHRINK_DEFAULT (0) nor SHRINK_ABORT (1)",
        }
        for name, text in expect.items():
            kind, message = errors[name]
            assert kind == "ValueError" and where in message and text in message, (name, message)
        kind, message = errors["options"]
        assert kind == "TypeError" and "str" in message, errors["options"]


def test_shrink_names_a_rank_that_does_not_come_and_a_retry_meets_afresh():
    results = run_world(3, shrink_cases.rank_missing, timeout=120, exit_path=True)
    kind, message = results[0]["first"]
    assert kind == "DistBackendError", results[0]["first"]
    assert "rank(s) 1 did not call shrink_group within 2000 ms" in message, message
    assert "excluding rank(s) 2" in message, message
    # Rank 1 came after rank 0 gave up: it meets no one (rank 0's arrival
    # belonged to the attempt that failed), and says so.
    kind, message = results[1]["second"]
    assert kind == "DistBackendError", results[1]["second"]
    assert "rank(s) 0 did not call shrink_group within 3000 ms" in message, message
    for rank in (0, 1):
        new_rank, size, total = results[rank]["retry"]
        assert (new_rank, size) == (rank, 2)
        assert torch.equal(total, _ints(0) + _ints(1))
        assert results[rank]["retry_timeout"] == 60.0


def test_shrink_default_lets_a_receive_in_flight_complete():
    results = run_world(3, shrink_cases.receive_in_flight, 4.0, timeout=150, exit_path=True)
    assert results[0]["received"] is True, results[0]["received"]
    for rank in (0, 1):
        assert torch.equal(results[rank]["sum"], _ints(0) + _ints(1))


@pytest.mark.parametrize("bind", [False, True], ids=["unbound", "bound_to_fake_cuda"])
def test_a_non_default_group_shrinks_with_its_ranks_and_settings(bind):
    results = run_world(4, shrink_cases.non_default_group_and_settings, bind, timeout=180,
                        exit_path=True)
    given = dict(shrink_cases.GIVEN)
    for rank, r in enumerate(results):
        assert r["parent"]["config"] == given, r["parent"]
    for rank, place in ((1, 0), (3, 1)):
        r = results[rank]
        # Global ranks 1 and 3, as torch records them.
        assert r["ranks"] == [1, 3], r["ranks"]
        assert r["global_of_1"] == 3 and r["group_of_3"] == 1, r
        assert r["place"] == (place, 2), r["place"]
        assert r["bound"] == (f"cuda:{rank}" if bind else "None"), r["bound"]
        # The subgroup's settings, timeout and timing.
        assert r["settings"] == {"config": given, "timeout": 50.0, "segment": "65536",
                                 "eager": "8192"}, r["settings"]
        assert r["timed"] is True
        assert torch.equal(r["sum"], _ints(1) + _ints(3))
        assert all(torch.equal(g, _ints(m)) for g, m in zip(r["gathered"], (1, 3)))
    for rank in (0, 1, 3):
        r = results[rank]
        # The caller's options change the one setting they name; the rest,
        # and the timeout, are the default group's.
        assert r["world_settings"] == {
            "config": dict(given, RINGREDUCE_SEGMENT_BYTES="131072"), "timeout": 45.0,
            "segment": "131072", "eager": "8192"}, r["world_settings"]
        assert r["world_ranks"] == [0, 1, 3], r["world_ranks"]
        assert r["world_bound"] == (f"cuda:{rank}" if bind else "None"), r["world_bound"]
        assert torch.equal(r["world_sum"], _ints(0) + _ints(1) + _ints(3))


def test_ddp_carries_on_after_a_rank_is_killed_and_the_rest_shrink(tmp_path, capsys):
    victim = 2
    kill_file = str(tmp_path / "killed_at")
    results = run_world(3, shrink_cases.ddp_killed_then_shrunk, victim, kill_file, timeout=180,
                        may_die={victim}, exit_path=True)
    assert results[victim] is None
    with open(kill_file) as f:
        killed_at = float(f.read())
    zero, one = results[0], results[1]
    for rank, r in ((0, zero), (1, one)):
        kind, message = r["failure"]
        assert kind in ("DistBackendError", "RuntimeError"), r["failure"]
        assert f"rank {victim} is gone" in message, message
        assert r["old_ddp_freed"], "the recipe's `del ddp` should free the old DDP"
        assert r["rank_size"] == (rank, 2)
        assert torch.equal(r["check"], torch.full((1,), 2.0))
    # Before the kill: the world of three's parameters (its allreduce adds
    # three terms, in an order of its own: a float32 tolerance).
    for got, want in zip(zero["before"], zero["reference_before"]):
        torch.testing.assert_close(got, want)
    assert not all(torch.equal(a, b) for a, b in zip(zero["start"], zero["before"]))
    # After it: exactly what two ranks compute from the same parameters, on
    # both ranks that stayed.
    for r in (zero, one):
        for got, want, before in zip(r["after"], zero["reference_after"], zero["before"]):
            assert torch.equal(got, want)
            assert not torch.equal(got, before)
    with capsys.disabled():
        for rank, r in ((0, zero), (1, one)):
            print(f"\n[shrink timing, rank {rank}] kill -> failure seen "
                  f"{r['failed_at'] - killed_at:.3f} s, -> shrunk {r['shrunk_at'] - killed_at:.3f} s,"
                  f" -> first collective on the shrunk group done "
                  f"{r['first_collective_at'] - killed_at:.3f} s")


def test_shrink_after_the_store_host_died_says_why_it_cannot(tmp_path):
    kill_file = str(tmp_path / "killed_at")
    results = run_world(3, shrink_cases.store_host_killed, kill_file, timeout=120, may_die={0},
                        exit_path=True)
    for rank in (1, 2):
        r = results[rank]
        kind, message = r["failure"]
        assert kind == "DistBackendError" and "rank 0 is gone" in message, r["failure"]
        kind, message = r["outcome"]
        assert kind == "DistBackendError", r["outcome"]
        assert "the store is unreachable" in message or "the store failed" in message, message
        assert "rank 0 with init_method=tcp://" in message and "restart the job" in message, \
            message


def test_a_shrunk_group_shrinks_again():
    results = run_world(4, shrink_cases.shrink_twice, timeout=120, exit_path=True)
    for rank, first, second in ((1, (0, 3), (0, 2)), (3, (2, 3), (1, 2))):
        r = results[rank]
        assert r["first"] == first and r["second"] == second, r
        # The global ranks torch records: the second shrink drops group
        # rank 1 of [1, 2, 3], which is global rank 2.
        assert r["first_ranks"] == [1, 2, 3] and r["second_ranks"] == [1, 3], r
        assert torch.equal(r["sum"], _ints(1) + _ints(3))
