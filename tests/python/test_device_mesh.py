"""A DeviceMesh over ringreduce ends at gloo's parameters from the same seed:
HSDP (FSDP2 on a 2-D replicate x shard mesh, world 4, whose mesh groups are
ringreduce subgroups) and tensor parallelism (DTensor's functional
collectives, world 2)."""
import torch

from mesh_cases import hsdp_both, tensor_parallel_both
from multiproc import run_world


def _same_as_gloo(results):
    for rank, r in enumerate(results):
        ring, gloo = r["ring"]["params"], r["gloo"]["params"]
        assert len(ring) == len(gloo) == 6
        for i, (mine, theirs) in enumerate(zip(ring, gloo)):
            # Every reduction adds two values (world 2, or two per mesh
            # dimension): one order, so the same bits.
            assert torch.equal(mine, theirs), (rank, i, (mine - theirs).abs().max())
            assert torch.equal(mine, results[0]["ring"]["params"][i])  # replicas agree


def test_hsdp_on_a_two_dimensional_mesh_matches_gloo():
    results = run_world(4, hsdp_both, timeout=300)
    _same_as_gloo(results)
    for r in results:
        assert r["ring"]["groups"] == {"replicate": "ringreduce", "shard": "ringreduce"}


def test_tensor_parallel_matches_gloo():
    _same_as_gloo(run_world(2, tensor_parallel_both, timeout=240))
