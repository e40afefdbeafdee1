"""The host allreduce algorithms through the backend: the whole collective
sweep (every op x dtype against local references and gloo) with
RINGREDUCE_ALGORITHM forced to each algorithm, and with auto, on worlds of 3
and 4 ranks; reduce_scatter and allgather (halving/doubling on powers of
two) through the second sweep. All ranks share this host, so the selector's
exchange of host identities finds one node and two_level runs its one-node
form."""
import pytest

from collective_cases import run_sweep, run_sweep_more
from multiproc import TRANSPORTS, run_world

ALGORITHMS = ["auto", "ring", "halving_doubling", "two_level", "direct"]


def _sweep(world_size, algorithm, sweep, checked, gloo_checked):
    env = dict(TRANSPORTS["shm"], RINGREDUCE_ALGORITHM=algorithm)
    reports = run_world(world_size, sweep, env=env, timeout=300)
    for rank, report in enumerate(reports):
        assert report["failures"] == [], f"rank {rank}:\n" + "\n".join(report["failures"][:20])
        assert report["checked"] > checked
        assert report["gloo_checked"] > gloo_checked, report["gloo_skipped"]


@pytest.mark.parametrize("algorithm", ALGORITHMS)
@pytest.mark.parametrize("world_size", [3, 4])
def test_every_algorithm_matches_references(world_size, algorithm):
    _sweep(world_size, algorithm, run_sweep, 800, 50)


@pytest.mark.parametrize("algorithm", ["auto", "halving_doubling"])
@pytest.mark.parametrize("world_size", [2, 4])
def test_reduce_scatter_and_gathers_match_references(world_size, algorithm):
    _sweep(world_size, algorithm, run_sweep_more, 400, 20)


def _create_group(rank, world, init_method):
    import torch.distributed as dist

    try:
        dist.init_process_group("ringreduce", init_method=init_method, rank=rank,
                                world_size=world)
    except Exception as error:  # torch may wrap the creator's ValueError
        return str(error)
    return "created"


def test_a_bad_algorithm_name_lists_the_choices():
    messages = run_world(1, _create_group, env={"RINGREDUCE_ALGORITHM": "tree"}, timeout=120)
    assert "auto, ring, halving_doubling, two_level, direct" in messages[0], messages[0]
