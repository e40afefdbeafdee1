"""FSDP2 (fully_shard) training run inside each rank, once per backend."""
import torch
import torch.distributed as dist


def small_model(dtype):
    """The same weights on every rank."""
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.ReLU(), torch.nn.Linear(32, 16),
                               torch.nn.ReLU(), torch.nn.Linear(16, 1)).to(dtype)


def train_steps(model, rank, steps, dtype, same_batch=False):
    """Adam steps on random batches, each rank its own (or, with
    `same_batch`, all the same: tensor parallelism splits one batch's work);
    returns the final parameters, whole."""
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    gen = torch.Generator().manual_seed(100 + (0 if same_batch else rank))
    for _ in range(steps):
        x = torch.randn(6, 8, generator=gen, dtype=dtype)
        loss = (model(x) - x[:, :1]).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    # Parameters left unsharded or unparallelised are plain tensors.
    return [(p.full_tensor() if hasattr(p, "full_tensor") else p).detach().clone()
            for p in model.parameters()]


def _train(backend, rank, world, init_method, steps, dtype=torch.float64, divide_by=None):
    from torch.distributed.fsdp import fully_shard

    dist.init_process_group(backend, init_method=init_method, rank=rank, world_size=world)
    model = small_model(dtype)
    for layer in model:
        if isinstance(layer, torch.nn.Linear):
            fully_shard(layer)
    fully_shard(model)
    if divide_by is not None:
        # A divide factor other than the group size: FSDP2 reduce-scatters
        # float32 with PREMUL_SUM(1 / factor), which gloo refuses; gloo runs
        # with sums only and FSDP divides apart.
        for module in model.modules():  # each fully_shard unit has its own setting
            if hasattr(module, "set_gradient_divide_factor"):
                module.set_gradient_divide_factor(divide_by)
                module.set_force_sum_reduction_for_comms(backend == "gloo")
    params = train_steps(model, rank, steps, dtype)
    dist.destroy_process_group()
    return params


def gloo_store(init_method):
    """A file of its own for gloo's world after ringreduce's: gloo re-initialised
    on a file another default group used hung in its connect now and then
    (1 in 10-20 runs after a pipelining run: tests/python/test_pipelining.py)."""
    return init_method + "-gloo"


def fsdp_both(rank, world, init_method):
    # Two groups in sequence: destroy + init again.
    ring = _train("ringreduce", rank, world, init_method, steps=6)
    gloo = _train("gloo", rank, world, gloo_store(init_method), steps=6)
    return {"ring": ring, "gloo": gloo}


def fsdp_divided_both(rank, world, init_method):
    kwargs = dict(steps=6, dtype=torch.float32, divide_by=2.0 * world)
    ring = _train("ringreduce", rank, world, init_method, **kwargs)
    gloo = _train("gloo", rank, world, gloo_store(init_method), **kwargs)
    return {"ring": ring, "gloo": gloo}
