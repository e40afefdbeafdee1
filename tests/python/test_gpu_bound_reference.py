"""benchmarks/cuda_latency.py's same-run bound (two_shot_reference): the
reads and writes of a two-shot allreduce of N ranks on one GPU done by torch
kernels in one process. Its time is the bound the GPU check reports ours
against, so it must do the collective's work: every "rank's" output is the
sum of every input. Checked on CPU tensors (the same torch calls)."""
import os
import sys

import pytest
import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks"))
import cuda_latency  # noqa: E402


@pytest.mark.parametrize("world", [2, 3, 4])
def test_every_output_is_the_sum_of_every_input(world):
    once, inputs, outputs = cuda_latency.two_shot_reference("cpu", 4096, world)
    assert inputs.shape == outputs.shape == (world, 1024)
    # Integers in float32: every sum exact, whatever the order of the adds.
    draw = torch.Generator().manual_seed(world)
    inputs.copy_(torch.randint(-1000, 1000, inputs.shape, generator=draw))
    outputs.fill_(float("nan"))
    once()
    assert torch.equal(outputs, inputs.sum(dim=0).expand(world, -1))
