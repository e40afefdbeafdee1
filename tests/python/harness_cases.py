"""Rank-side bodies of the test harness's own tests."""
import time


def rank_one_sleeps_in_a_named_place(rank, world, init_method):
    """Rank 1 never returns (it sleeps in a function whose name the harness
    must report); the other ranks return at once. No process group: the
    harness alone is under test."""
    if rank == 1:
        _asleep_past_the_world_timeout()
    return rank


def _asleep_past_the_world_timeout():
    time.sleep(3600)
