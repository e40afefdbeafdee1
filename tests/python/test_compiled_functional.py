"""A model compiled with torch.compile whose collective is the functional
all_reduce (a tensor-parallel MLP block, as DTensor's TP layers issue it;
compiled_cases.py): the compiled graph runs `_c10d_functional.all_reduce_`
and `wait_tensor` through ringreduce (the host channel, on the calling
thread or queued), and every step's result equals, bit for bit, the sum of
every rank's partial and the eager block's. Its CUDA form, captured into
CUDA graphs (mode="reduce-overhead"), is tests/gpu/test_compiled_cuda_graphs.py."""
import pytest

import compiled_cases
from multiproc import run_world


@pytest.mark.parametrize("world", [2, 3])
def test_a_compiled_tensor_parallel_block_sums_exactly(world):
    steps = 6
    results = run_world(world, compiled_cases.compiled_tensor_parallel, "cpu", "default", steps,
                        60, timeout=300)
    for rank, result in enumerate(results):
        # Both blocks, eager and compiled, at every step.
        assert result["checked"] == 2 * steps, (rank, result)
        assert not result["failures"], f"rank {rank}: " + "\n".join(result["failures"][:10])
