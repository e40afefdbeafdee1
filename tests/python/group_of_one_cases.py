"""Rank bodies for test_group_of_one.py: a process group of one rank, whose
collectives complete on the caller's thread (csrc/backend/ops/group_of_one.cpp)."""
import torch
import torch.distributed as dist


def _seq():
    return dist.group.WORLD._get_backend(torch.device("cpu"))._get_sequence_number_for_group()


def allreduce_alone(rank, world_size, init_method):
    dist.init_process_group("ringreduce", init_method=init_method, rank=rank,
                            world_size=world_size)
    out = {"values": {}, "completed_at_once": True, "seq_steps": [], "futures": [], "errors": {}}
    torch.manual_seed(3)
    cases = [
        ("sum", torch.randn(1000), dist.ReduceOp.SUM, 1.0),
        ("avg", torch.randn(1000), dist.ReduceOp.AVG, 1.0),
        ("max", torch.randn(7, 9), dist.ReduceOp.MAX, 1.0),
        ("min", torch.randn(7, 9).t(), dist.ReduceOp.MIN, 1.0),  # not contiguous
        ("product", torch.randn(33, dtype=torch.float64), dist.ReduceOp.PRODUCT, 1.0),
        ("band", torch.randint(0, 1 << 20, (100,)), dist.ReduceOp.BAND, 1.0),
        ("premul", torch.randn(500), dist._make_nccl_premul_sum(0.25), 0.25),
        ("complex", torch.randn(64, dtype=torch.complex64), dist.ReduceOp.SUM, 1.0),
        ("empty", torch.empty(0), dist.ReduceOp.SUM, 1.0),
    ]
    for name, tensor, op, factor in cases:
        expected = tensor.clone() * factor if factor != 1.0 else tensor.clone()
        before = _seq()
        work = dist.all_reduce(tensor, op=op, async_op=True)
        out["completed_at_once"] &= work.is_completed()
        work.wait()
        out["seq_steps"].append(_seq() - before)
        out["values"][name] = torch.equal(tensor, expected)
        future_value = work.get_future().wait()
        # torch hands every backend a complex tensor as its real view.
        seen = torch.view_as_real(expected) if expected.is_complex() else expected
        out["futures"].append(len(future_value) == 1 and torch.equal(future_value[0], seen))
    # A callback chained on the future sees the result.
    t = torch.ones(10)
    fut = dist.all_reduce(t, async_op=True).get_future().then(lambda f: f.value()[0] * 3)
    out["then"] = torch.equal(fut.wait(), torch.full((10,), 3.0))
    # Bad input raises as at any size, naming op and dtype.
    for name, call in [
        ("avg_bool", lambda: dist.all_reduce(torch.ones(4, dtype=torch.bool),
                                             op=dist.ReduceOp.AVG)),
        ("band_float", lambda: dist.all_reduce(torch.ones(4), op=dist.ReduceOp.BAND)),
        ("expanded", lambda: dist.all_reduce(torch.ones(1).expand(4))),
    ]:
        try:
            call()
            out["errors"][name] = None
        except Exception as error:  # the message is what the test checks
            out["errors"][name] = f"{type(error).__name__}: {error}"
    dist.destroy_process_group()
    return out


def allreduce_alone_behind_queued_work(rank, world_size, init_method):
    """Queued collectives first: the group-of-one allreduce must not pass them
    (it reads what they wrote), and inside a coalescing block it is queued."""
    dist.init_process_group("ringreduce", init_method=init_method, rank=rank,
                            world_size=world_size)
    src = torch.arange(1 << 16, dtype=torch.float32)
    gathered = [torch.empty(1 << 16)]
    # The list form is queued at any size (the tensor form runs at once).
    works = [dist.all_gather(gathered, src, async_op=True) for _ in range(4)]
    total = gathered[0]  # all_reduce of what the gathers write, issued before they finish
    work = dist.all_reduce(total, async_op=True)
    work.wait()
    ordered = all(w.is_completed() for w in works) and torch.equal(total, src)
    a, b = torch.ones(8), torch.full((8,), 2.0)
    with dist._coalescing_manager(async_ops=True) as manager:
        dist.all_reduce(a)
        dist.all_reduce(b)
    manager.wait()
    coalesced = torch.equal(a, torch.ones(8)) and torch.equal(b, torch.full((8,), 2.0))
    dist.destroy_process_group()
    after_destroy = None
    try:
        dist.all_reduce(torch.ones(2))
    except Exception as error:
        after_destroy = str(error)
    return {"ordered": ordered, "coalesced": coalesced, "after_destroy": after_destroy}


def hooks_and_trace_alone(rank, world_size, init_method):
    import torch_ringreduce

    dist.init_process_group("ringreduce", init_method=init_method, rank=rank,
                            world_size=world_size)
    seen = []
    dist.group.WORLD._register_on_completion_hook(lambda info: seen.append(
        (str(info.op_type), info.seq)))
    for _ in range(3):
        dist.all_reduce(torch.ones(16))
    dist.group.WORLD._wait_for_pending_works()
    json_text = torch_ringreduce.trace_json()
    paths = dist.group.WORLD._get_backend(torch.device("cpu"))._cuda_paths()
    dist.destroy_process_group()
    return {"seen": seen, "json": json_text, "paths": paths}


def ddp_alone(rank, world_size, init_method, backend):
    """Three DDP steps at world 1 on `backend`: the weights, bit for bit."""
    torch.manual_seed(0)
    dist.init_process_group(backend, init_method=init_method, rank=rank, world_size=world_size)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))
    ddp = torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=0.001)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
    for step in range(3):
        x = torch.randn(16, 32)
        opt.zero_grad()
        ddp(x).square().mean().backward()
        opt.step()
    weights = [p.detach().clone() for p in model.parameters()]
    dist.destroy_process_group()
    return weights


def other_collectives_alone(rank, world_size, init_method):
    """all_gather_into_tensor and reduce_scatter_tensor copy (the input stays
    as it was), broadcast leaves the tensor be; each completes at once."""
    dist.init_process_group("ringreduce", init_method=init_method, rank=rank,
                            world_size=world_size)
    src = torch.randn(300)
    kept = src.clone()
    results = {}
    before = _seq()
    gathered = torch.empty(1, 300)
    w1 = dist.all_gather_into_tensor(gathered, src, async_op=True)
    results["gather"] = torch.equal(gathered[0], src)
    scattered = torch.empty(300)
    w2 = dist.reduce_scatter_tensor(scattered, src, async_op=True)
    results["scatter"] = torch.equal(scattered, src)
    premul = torch.empty(300)
    w3 = dist.reduce_scatter_tensor(premul, src, op=dist._make_nccl_premul_sum(0.5),
                                    async_op=True)
    results["scatter_premul"] = torch.equal(premul, src * 0.5)
    w4 = dist.broadcast(src, src=0, async_op=True)
    results["broadcast"] = torch.equal(src, kept)
    results["input_kept"] = torch.equal(src, kept)
    results["completed_at_once"] = all(w.is_completed() for w in (w1, w2, w3, w4))
    results["seq_steps"] = _seq() - before
    try:
        dist.all_gather_into_tensor(torch.empty(299), src)
        results["wrong_size"] = None
    except Exception as error:
        results["wrong_size"] = str(error)
    dist.destroy_process_group()
    return results
