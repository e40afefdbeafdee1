"""A model compiled with torch.compile whose collective is the functional
all_reduce (a tensor-parallel MLP block, as DTensor's TP layers issue it;
compiled_cases.py): the compiled graph runs `_c10d_functional.all_reduce_`
and `wait_tensor` through ringreduce (the host channel, on the calling
thread or queued), and every step's result equals, bit for bit, the sum of
every rank's partial and the eager block's. Its CUDA form, captured into
CUDA graphs (mode="reduce-overhead"), is tests/gpu/test_compiled_cuda_graphs.py.
And DDP compiled as torch compiles it (compiled autograd, the gradients'
buckets as functional allreduces in the backward graph) trains bit for bit
as the same compiled DDP on gloo, and so does FSDP2 with its blocks or its
whole model compiled (its collectives eager, from FSDP's hooks)."""
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


def test_compiled_ddp_trains_as_on_gloo():
    steps = 5
    for rank, result in enumerate(run_world(2, compiled_cases.compiled_ddp_against_gloo, steps,
                                            timeout=300)):
        assert not result["differing"], (rank, result["differing"][:10])
        # The backward ran through compiled autograd (its graph holds the
        # functional allreduces), and the gradients went through ringreduce:
        # one bucket of all 2632 parameters per step.
        assert result["captures"] >= 1, (rank, result)
        assert len(result["allreduces"]) == steps, (rank, result["allreduces"])
        assert all(s.startswith("2632 x ") for s in result["allreduces"]), (rank, result)


@pytest.mark.parametrize("how", ["blocks", "whole"])
def test_compiled_fsdp2_trains_as_on_gloo(how):
    """FSDP2 under torch.compile, each block compiled or the whole model:
    torch 2.13 runs FSDP's hooks, and so its all-gathers and
    reduce-scatters, eagerly around the compiled graphs (dynamo breaks the
    whole model's graph there); these train to gloo's bits."""
    steps = 4
    for rank, result in enumerate(run_world(2, compiled_cases.compiled_fsdp2_against_gloo, steps,
                                            how, timeout=300)):
        assert not result["differing"], (rank, result["differing"])
        assert result["parameter_types"] == ["DTensor"], (rank, result)  # still sharded
        if how == "whole":
            assert result["graph_breaks"] >= 1, (rank, result)
        # Every step gathered the parameters and reduce-scattered the
        # gradients through ringreduce: four units (three blocks and the root).
        assert result["ops"].get("all_gather_into_tensor", 0) >= 4 * steps, (rank, result)
        assert result["ops"].get("reduce_scatter_tensor", 0) == 4 * steps, (rank, result)
