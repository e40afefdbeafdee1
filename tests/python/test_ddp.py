"""DDP on CPU ends at gloo's parameters from the same seed and data."""
import pytest
import torch

from ddp_cases import run_ddp_pair
from multiproc import run_world


@pytest.mark.parametrize("world_size,find_unused", [(2, False), (2, True), (3, True)])
def test_ddp_matches_gloo(world_size, find_unused):
    states = run_world(world_size, run_ddp_pair, find_unused, timeout=240)
    reference = states[0]["gloo"]
    for rank, state in enumerate(states):
        ring, gloo = state["ring"], state["gloo"]
        assert ring.keys() == gloo.keys()
        for name in ring:
            if "running_" not in name and "num_batches" not in name:
                # Parameters agree across replicas exactly. (BatchNorm buffers
                # are broadcast before each forward, then updated locally.)
                assert torch.equal(ring[name], states[0]["ring"][name]), (rank, name)
            if world_size == 2:
                # Parameters and buffers equal gloo's exactly: a sum of two
                # values has one order.
                assert torch.equal(ring[name], gloo[name]), (rank, name)
            else:
                # Three ranks sum in a different order than gloo: float64 rounding only.
                torch.testing.assert_close(ring[name], gloo[name], rtol=1e-12, atol=1e-12)
        # The training did something: parameters moved and buffers were updated.
        assert not torch.equal(ring["head.weight"], torch.zeros_like(ring["head.weight"]))
        assert ring["body.1.num_batches_tracked"].item() == 12
    assert torch.equal(reference["body.0.weight"], states[-1]["gloo"]["body.0.weight"])
