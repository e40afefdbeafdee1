"""FSDP2 on CPU over ringreduce ends at gloo's parameters from the same seed."""
import pytest
import torch

from fsdp_cases import fsdp_both, fsdp_divided_both
from multiproc import run_world


@pytest.mark.parametrize("world_size", [2, 3])
def test_fsdp2_matches_gloo(world_size):
    results = run_world(world_size, fsdp_both, timeout=240)
    for rank, r in enumerate(results):
        assert len(r["ring"]) == len(r["gloo"]) == 6
        for i, (mine, theirs) in enumerate(zip(r["ring"], r["gloo"])):
            if world_size == 2:
                assert torch.equal(mine, theirs), (rank, i)  # sums of two: one order
            else:
                torch.testing.assert_close(mine, theirs, rtol=1e-12, atol=1e-12)
            assert torch.equal(mine, results[0]["ring"][i])  # replicas agree


def test_fsdp2_with_a_gradient_divide_factor_takes_premul_sum():
    results = run_world(2, fsdp_divided_both, timeout=240)
    for rank, r in enumerate(results):
        assert len(r["ring"]) == len(r["gloo"]) == 6
        for i, (mine, theirs) in enumerate(zip(r["ring"], r["gloo"])):
            # Scaled then summed against summed then divided: float32 rounding.
            torch.testing.assert_close(mine, theirs, rtol=1e-5, atol=1e-6)
            assert torch.equal(mine, results[0]["ring"][i])  # replicas agree
