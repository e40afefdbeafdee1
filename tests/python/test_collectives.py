"""Every op x dtype x world size 1-4 against local references and gloo, over
UCX's TCP path and over its shared-memory transports."""
import pytest

from collective_cases import run_sweep, run_sweep_more
from multiproc import TRANSPORTS, run_world


@pytest.mark.parametrize("transport", sorted(TRANSPORTS))
@pytest.mark.parametrize("world_size", [1, 2, 3, 4])
def test_collectives_match_references(world_size, transport):
    reports = run_world(world_size, run_sweep, env=TRANSPORTS[transport], timeout=300)
    for rank, report in enumerate(reports):
        assert report["failures"] == [], f"rank {rank}:\n" + "\n".join(report["failures"][:20])
        assert report["checked"] > 800
        # gloo takes part in every world: the comparison really ran.
        assert report["gloo_checked"] > 50, report["gloo_skipped"]


@pytest.mark.parametrize("transport", sorted(TRANSPORTS))
@pytest.mark.parametrize("world_size", [1, 2, 3, 4])
def test_more_collectives_match_references(world_size, transport):
    """reduce, reduce_scatter (list and tensor), gather, scatter, all_to_all
    (list, single, uneven splits) and the object collectives."""
    reports = run_world(world_size, run_sweep_more, env=TRANSPORTS[transport], timeout=300)
    for rank, report in enumerate(reports):
        assert report["failures"] == [], f"rank {rank}:\n" + "\n".join(report["failures"][:20])
        assert report["checked"] > 400
        assert report["gloo_checked"] > 20, report["gloo_skipped"]


def test_collectives_match_references_with_oversubscribed_yielding_waits():
    """Four ranks as torchrun would start them on a machine with fewer cores
    (LOCAL_WORLD_SIZE=4; RINGREDUCE_SPIN_YIELD=1 forces the mode where cores
    are plenty): waits poll and yield, and every result is still exact."""
    env = dict(TRANSPORTS["shm"], LOCAL_WORLD_SIZE="4", RINGREDUCE_SPIN_YIELD="1")
    reports = run_world(4, run_sweep, env=env, timeout=300)
    for rank, report in enumerate(reports):
        assert report["failures"] == [], f"rank {rank}:\n" + "\n".join(report["failures"][:20])
        assert report["checked"] > 800
