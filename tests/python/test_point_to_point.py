"""send/recv, tags, any source, self, isend/irecv, batch_isend_irecv; the
coalescing manager and the coalesced collectives; subgroups."""
import pytest

from multiproc import TRANSPORTS, run_world
from oracle import DTYPES
from p2p_cases import coalescing, point_to_point, sparse_allreduce, subgroups


@pytest.mark.parametrize("world_size", [1, 2, 3, 4])
def test_point_to_point(world_size):
    for rank, report in enumerate(run_world(world_size, point_to_point, env=TRANSPORTS["shm"])):
        assert report["failures"] == [], f"rank {rank}: {report['failures']}"
        # Every rank: the ring per dtype, self, the allreduce and the late
        # irecv; beyond one rank, batch_isend_irecv; rank 0 any source, rank 1 tags.
        least = len(DTYPES) + 3 + (world_size > 1) + (rank == 0 or (rank == 1 and world_size > 1))
        assert report["checked"] >= least, (rank, report["checked"], least)


@pytest.mark.parametrize("world_size", [1, 3])
def test_coalescing_manager_and_coalesced_collectives(world_size):
    for rank, failures in enumerate(run_world(world_size, coalescing)):
        assert failures == [], f"rank {rank}: {failures}"


@pytest.mark.parametrize("world_size", [2, 3])
def test_reversed_and_single_rank_subgroups(world_size):
    for rank, report in enumerate(run_world(world_size, subgroups)):
        assert report["failures"] == [], f"rank {rank}: {report['failures']}"
        assert report["checked"] >= 6


@pytest.mark.parametrize("world_size", [1, 3])
def test_sparse_allreduce_matches_dense_sum_and_gloo(world_size):
    for rank, failures in enumerate(run_world(world_size, sparse_allreduce)):
        assert failures == [], f"rank {rank}: {failures}"
