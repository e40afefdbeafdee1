"""What each rank runs in the compiled-model tests (issue 56, item 5): a
tensor-parallel MLP block, as DTensor's and torch's TP layers issue it, whose
row-parallel half's partial sums are summed with the functional all_reduce
(`funcol.all_reduce`, which a compiled graph runs as
`_c10d_functional.all_reduce_` and `wait_tensor`), compiled with
torch.compile. On CUDA with mode="reduce-overhead", CUDA graphs capture the
collective and replay it; on the CPU the same block is compiled without
them (the case's own check, here).

Weights and inputs are small integers in float32 (TF32 off), so every
product and sum is exact: each step's result must equal, bit for bit, the
sum over every rank's partial computed here on the CPU from the ranks'
seeds, and the eager block's."""
import statistics
import time

import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol

D, H, ROWS = 64, 128, 8  # model width, this rank's hidden shard, tokens


def _weights(rank, device):
    """Rank `rank`'s column shard of the first layer and row shard of the
    second, from its own seed (any rank can make any rank's)."""
    g = torch.Generator().manual_seed(1234 + rank)
    w1 = torch.randint(-1, 2, (D, H), generator=g).float()
    w2 = torch.randint(-1, 2, (H, D), generator=g).float()
    return w1.to(device), w2.to(device)


def _input(step, device):
    g = torch.Generator().manual_seed(99 + step)
    return torch.randint(-2, 3, (ROWS, D), generator=g).float().to(device)


def _expected(step, world):
    x = _input(step, "cpu")
    total = torch.zeros(ROWS, D)
    for r in range(world):
        w1, w2 = _weights(r, "cpu")
        total += torch.relu(x @ w1) @ w2
    return total


def _median_step_us(fn, x, sync, steps):
    times = []
    for _ in range(steps):
        sync()
        start = time.perf_counter()
        fn(x)
        sync()
        times.append((time.perf_counter() - start) * 1e6)
    return statistics.median(times)


def compiled_tensor_parallel(rank, world, init_method, device, mode, steps, timeout_s):
    """The block eager and compiled (`mode`), `steps` steps on new inputs:
    how many results were wrong, whether CUDA graphs were skipped and why,
    and the median step of each."""
    from datetime import timedelta

    from torch._dynamo.utils import counters

    if device == "cuda":
        torch.cuda.set_device(0)
        torch.backends.cuda.matmul.allow_tf32 = False
    dist.init_process_group("ringreduce", init_method=init_method, rank=rank,
                            world_size=world, timeout=timedelta(seconds=timeout_s))
    group = dist.group.WORLD
    w1, w2 = _weights(rank, device)

    def block(x):
        partial = torch.relu(x @ w1) @ w2
        return funcol.all_reduce(partial, "sum", group)

    compiled = torch.compile(block, mode=mode, fullgraph=True)
    failures = []
    checked = 0
    for step in range(steps):
        x = _input(step, device)
        want = _expected(step, world)
        eager = block(x).cpu()  # waits on the collective's result
        got = compiled(x).cpu()
        for name, value in (("eager", eager), ("compiled", got)):
            checked += 1
            if not torch.equal(value, want):
                wrong = int((value != want).sum())
                failures.append(f"step {step}: {name} block, {wrong} of {want.numel()} values "
                                f"differ from the sum of every rank's partial")
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    x = _input(steps, device)
    for fn in (block, compiled):  # both warm
        for _ in range(3):
            fn(x)
    eager_us = _median_step_us(block, x, sync, 50)
    compiled_us = _median_step_us(compiled, x, sync, 50)
    skips = {reason: count for reason, count in counters["inductor"].items()
             if reason.startswith("cudagraph_skips") and count}
    dist.barrier()
    dist.destroy_process_group()
    return {"checked": checked, "failures": failures, "cudagraph_skips": skips,
            "eager_us": eager_us, "compiled_us": compiled_us}


def compiled_ddp_against_gloo(rank, world, init_method, steps):
    """DDP as torch's compiled DDP runs it (optimize_ddp="python_reducer"):
    the forward compiled, the backward through compiled autograd, whose
    graph sums each bucket of gradients with the functional all_reduce.
    One model on ringreduce, one on a gloo group, the same seed and data,
    trained side by side: their parameters after each step, compared bit
    for bit (at world 2 a sum of two is the same in any order); whether
    compiled autograd captured the backward; the sizes of ringreduce's
    allreduces (its flight recorder)."""
    import json

    import torch._dynamo
    import torch.nn as nn
    from torch._dynamo.utils import counters
    from torch.nn.parallel import DistributedDataParallel as DDP

    import torch_ringreduce

    torch._dynamo.config.optimize_ddp = "python_reducer"
    dist.init_process_group("ringreduce", init_method=init_method, rank=rank, world_size=world)
    gloo = dist.new_group(backend="gloo")

    def trained_on(group):
        torch.manual_seed(0)
        model = DDP(nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 8)),
                    process_group=group)
        return model, torch.compile(model), torch.optim.SGD(model.parameters(), lr=0.1)

    ring, on_gloo = trained_on(None), trained_on(gloo)
    differing = []
    for step in range(steps):
        g = torch.Generator().manual_seed(1000 * rank + step)
        x = torch.randn(16, 32, generator=g)
        for _, compiled, optimizer in (ring, on_gloo):
            loss = compiled(x).square().mean()
            with torch._dynamo.compiled_autograd._enable(torch.compile(backend="inductor")):
                loss.backward()
            optimizer.step()
            optimizer.zero_grad()
        for (name, a), b in zip(ring[0].module.named_parameters(), on_gloo[0].module.parameters()):
            if not torch.equal(a, b):
                differing.append(f"step {step}: {name}")
    entries = json.loads(torch_ringreduce.trace_json())["entries"]
    allreduces = [e["summary"] for e in entries if e["op"] == "allreduce"]
    result = {"differing": differing, "captures": counters["compiled_autograd"]["captures"],
              "allreduces": allreduces}
    dist.destroy_process_group()
    return result


def compiled_fsdp2_against_gloo(rank, world, init_method, steps, how):
    """FSDP2 (fully_shard) under torch.compile, as users compile it in
    torch 2.13: `how` "blocks" compiles each block (torchtitan's way: the
    blocks' compute in compiled graphs, FSDP's hooks around them), "whole"
    compiles the root module (dynamo breaks its graph at FSDP's hooks,
    which torch marks not to trace, so the all-gathers and reduce-scatters
    run eagerly between the compiled pieces). One model sharded over the
    ringreduce group, one over a gloo group, the same seed and data, trained
    side by side: their full parameters after the last step, compared bit
    for bit (at world 2 a sum of two is the same in any order); the
    parameters' types (still sharded DTensors); how many graph breaks
    dynamo took; ringreduce's collectives by op (its flight recorder)."""
    import collections
    import json

    import torch.nn as nn
    from torch._dynamo.utils import counters
    from torch.distributed.device_mesh import DeviceMesh
    from torch.distributed.fsdp import fully_shard

    import torch_ringreduce

    dist.init_process_group("ringreduce", init_method=init_method, rank=rank, world_size=world)
    gloo = dist.new_group(backend="gloo")

    def trained_on(group):
        mesh = DeviceMesh.from_group(group or dist.group.WORLD, "cpu")
        torch.manual_seed(0)
        blocks = [nn.Sequential(nn.Linear(16, 16), nn.ReLU()) for _ in range(3)]
        model = nn.Sequential(*blocks, nn.Linear(16, 1))
        for block in blocks:
            fully_shard(block, mesh=mesh)
        fully_shard(model, mesh=mesh)
        if how == "blocks":
            for block in blocks:
                block.compile()
            forward = model
        else:
            forward = torch.compile(model)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
        g = torch.Generator().manual_seed(100 + rank)
        for _ in range(steps):
            x = torch.randn(8, 16, generator=g)
            (forward(x) - x[:, :1]).pow(2).mean().backward()
            optimizer.step()
            optimizer.zero_grad()
        return model

    ring, on_gloo = trained_on(None), trained_on(gloo)
    differing = [name for (name, a), b in zip(ring.named_parameters(), on_gloo.parameters())
                 if not torch.equal(a.full_tensor(), b.full_tensor())]
    entries = json.loads(torch_ringreduce.trace_json())["entries"]
    result = {"differing": differing,
              "parameter_types": sorted({type(p).__name__ for p in ring.parameters()}),
              "graph_breaks": sum(counters["graph_break"].values()),
              "ops": dict(collections.Counter(e["op"] for e in entries))}
    dist.destroy_process_group()
    return result
