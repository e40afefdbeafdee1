"""Training runs on a DeviceMesh inside each rank, once per backend: HSDP
(FSDP2 on a 2-D mesh, replicate x shard) and tensor parallelism (DTensor,
whose collectives are torch's functional collectives)."""
import torch
import torch.distributed as dist

from fsdp_cases import gloo_store, small_model, train_steps


def _hsdp(backend, rank, world, init_method, steps=5, dtype=torch.float64):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    dist.init_process_group(backend, init_method=init_method, rank=rank, world_size=world)
    mesh = init_device_mesh("cpu", (2, world // 2), mesh_dim_names=("replicate", "shard"))
    groups = {name: dist.get_backend(mesh.get_group(name)) for name in ("replicate", "shard")}
    model = small_model(dtype)
    for layer in model:
        if isinstance(layer, torch.nn.Linear):
            fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    params = train_steps(model, rank, steps, dtype)
    dist.destroy_process_group()
    return {"params": params, "groups": groups}


def _tensor_parallel(backend, rank, world, init_method, steps=5, dtype=torch.float64):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import (ColwiseParallel, RowwiseParallel,
                                                   parallelize_module)

    dist.init_process_group(backend, init_method=init_method, rank=rank, world_size=world)
    mesh = init_device_mesh("cpu", (world,))
    model = parallelize_module(small_model(dtype), mesh,
                               {"0": ColwiseParallel(), "2": RowwiseParallel()})
    params = train_steps(model, rank, steps, dtype, same_batch=True)
    dist.destroy_process_group()
    return {"params": params}


def hsdp_both(rank, world, init_method):
    # gloo's world on a file of its own (fsdp_cases.gloo_store).
    return {"ring": _hsdp("ringreduce", rank, world, init_method),
            "gloo": _hsdp("gloo", rank, world, gloo_store(init_method))}


def tensor_parallel_both(rank, world, init_method):
    return {"ring": _tensor_parallel("ringreduce", rank, world, init_method),
            "gloo": _tensor_parallel("gloo", rank, world, gloo_store(init_method))}
