"""Ranks that call the same collectives in different forms (at once, async,
coalesced, functional) still meet in each, with exact results
(mixed_forms_cases.py)."""
import pytest

from mixed_forms_cases import each_rank_its_own_form
from multiproc import TRANSPORTS, run_world


def _check(results, steps):
    for rank, r in enumerate(results):
        assert r["failed"] == 0, f"rank {rank}: {r['failed']} wrong results, first: {r['failures']}"
        # Both forms on every rank, so that ranks met in a collective they
        # called differently.
        assert r["forms"]["at once"] > steps // 4 and r["forms"]["asynchronous"] > steps // 4, r
    return results


@pytest.mark.parametrize("world", [2, 3])
def test_each_rank_calls_the_same_collectives_in_its_own_form(world):
    steps = 1000
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
