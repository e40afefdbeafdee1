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


def rank_zero_raises_and_rank_one_waits(rank, world, init_method):
    """Rank 0 raises at once; rank 1 then waits for it forever, as a peer
    left in a collective by a rank that raised alone would."""
    if rank == 0:
        raise RuntimeError("rank 0's own reason, which the overrun message must carry")
    _asleep_past_the_world_timeout()


def exit_handlers(rank, world, init_method, marker_dir):
    """Each rank registers an exit handler that leaves a file behind, naming
    the rank's parent (the rank server for a forked rank, the test for a
    spawned one); rank 1's then ends the process with status 3, as a crash
    in a group's teardown at exit would. No process group: the harness
    alone is under test."""
    import atexit
    import os

    def leave_a_mark():
        with open(os.path.join(marker_dir, f"exited.{rank}"), "w") as f:
            f.write(str(os.getppid()))
        if rank == 1:
            os._exit(3)

    atexit.register(leave_a_mark)
    return rank
