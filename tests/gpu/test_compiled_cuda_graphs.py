"""A tensor-parallel block whose collective is the functional all_reduce,
compiled with torch.compile(mode="reduce-overhead") on CUDA (issue 56, item
5; tests/python/compiled_cases.py): CUDA graphs capture ringreduce's
collective (the device-flags path, which graphs capture where the ranks'
kernels run at once: MPS on this one-GPU machine) and replay it; every
step's result equals, bit for bit, the sum of every rank's partial and the
eager block's, and inductor skipped no graph. Prints each rank's median
step, eager and compiled (scripts/gpu_quick.sh's compile phase runs it with
-s). Skipped, visibly, without a CUDA device or MPS."""
import os
import sys

import pytest
import torch

sys.path.insert(0, __file__.rsplit("/tests/", 1)[0] + "/tests/python")
from multiproc import run_world  # noqa: E402

import compiled_cases  # noqa: E402

pytestmark = [
    pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device on this machine"),
    pytest.mark.skipif(os.environ.get("RINGREDUCE_TEST_MPS") != "1",
                       reason="CUDA graphs capture the flags path only where the ranks' kernels "
                              "run at once (MPS on this one-GPU machine)"),
]

# TORCH_LOGS=perf_hints: a graph inductor does not capture says why on stderr.
FLAGS = {"RINGREDUCE_CUDA_ALGO": "flags", "RINGREDUCE_CUDA_SYNC": "flags", "TORCH_LOGS": "perf_hints"}


@pytest.mark.parametrize("world", [2, 4])
def test_a_compiled_block_replays_its_collective_in_cuda_graphs_exactly(world):
    steps = 12
    results = run_world(world, compiled_cases.compiled_tensor_parallel, "cuda",
                        "reduce-overhead", steps, 40, env=FLAGS, timeout=240)
    for rank, result in enumerate(results):
        print(f"world {world} rank {rank}: median step eager {result['eager_us']:.1f} us, "
              f"compiled with CUDA graphs {result['compiled_us']:.1f} us")
        assert result["checked"] == 2 * steps, (rank, result)
        assert not result["failures"], f"rank {rank}: " + "\n".join(result["failures"][:10])
        # Captured, not run eagerly behind the graph: inductor says why it
        # skipped a graph (a CPU op, a mutated input, an op it cannot capture).
        assert not result["cudagraph_skips"], (rank, result["cudagraph_skips"])
