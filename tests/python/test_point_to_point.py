"""send/recv, tags, any source, self, isend/irecv, batch_isend_irecv; the
coalescing manager and the coalesced collectives; subgroups."""
import pytest

from multiproc import TRANSPORTS, run_world
from p2p_cases import coalescing, point_to_point, sparse_allreduce, subgroups


@pytest.mark.parametrize("world_size", [1, 2, 3, 4])
def test_point_to_point(world_size):
    for rank, failures in enumerate(run_world(world_size, point_to_point, env=TRANSPORTS["shm"])):
        assert failures == [], f"rank {rank}: {failures}"


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
