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
    total, other = src.clone(), torch.ones(8, dtype=torch.float64)
    # Tensors of two dtypes in one allreduce_coalesced are queued at any size
    # (every other collective of one rank runs at once); each doubles them.
    # (torch's Python refuses two dtypes; the group's own method takes them.)
    opts = dist.AllreduceCoalescedOptions()
    opts.reduceOp = dist._make_nccl_premul_sum(2.0)
    works = [dist.group.WORLD.allreduce_coalesced([total, other], opts) for _ in range(4)]
    work = dist.all_reduce(total, async_op=True)  # of what they write, issued before they finish
    work.wait()
    ordered = all(w.is_completed() for w in works) and torch.equal(total, src * 16)
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


def every_collective_alone(rank, world_size, init_method):
    """Every other collective and call form at world 1 (copiesAlone): its
    values, a Work complete as it returns (run on the caller's thread), one
    sequence number each, and the queued form's error where sizes differ."""
    from torch.distributed.distributed_c10d import _coalescing_manager

    dist.init_process_group("ringreduce", init_method=init_method, rank=rank,
                            world_size=world_size)
    torch.manual_seed(5)
    src = torch.randn(24)
    kept = src.clone()
    values, at_once, steps = {}, {}, {}

    def run(name, call, check):
        before = _seq()
        work = call()
        works = work.works if hasattr(work, "works") else [work]  # a coalescing manager's
        # (all_gather_coalesced returns a Future.)
        at_once[name] = all(w is None or (w.is_completed() if hasattr(w, "is_completed")
                                          else w.done()) for w in works)
        if work is not None:
            work.wait()
        steps[name] = _seq() - before
        values[name] = bool(check())

    out = [torch.empty(24)]
    run("all_gather", lambda: dist.all_gather(out, src, async_op=True),
        lambda: torch.equal(out[0], kept))
    same = [src]
    run("all_gather_in_place", lambda: dist.all_gather(same, src, async_op=True),
        lambda: torch.equal(src, kept))
    gathered = [torch.empty(24)]
    run("gather", lambda: dist.gather(src, gather_list=gathered, dst=0, async_op=True),
        lambda: torch.equal(gathered[0], kept))
    scattered = torch.empty(24)
    run("scatter", lambda: dist.scatter(scattered, scatter_list=[src], src=0, async_op=True),
        lambda: torch.equal(scattered, kept))
    a2a = torch.empty(24)
    run("all_to_all_single", lambda: dist.all_to_all_single(a2a, src, async_op=True),
        lambda: torch.equal(a2a, kept))
    split = torch.empty(6, 4)
    run("all_to_all_single_splits",
        lambda: dist.all_to_all_single(split, src.view(6, 4), [6], [6], async_op=True),
        lambda: torch.equal(split.view(-1), kept))
    listed = [torch.empty(3, 8)]
    run("all_to_all", lambda: dist.all_to_all(listed, [src.view(3, 8)], async_op=True),
        lambda: torch.equal(listed[0].view(-1), kept))
    rs = torch.empty(24)
    run("reduce_scatter", lambda: dist.reduce_scatter(rs, [src], async_op=True),
        lambda: torch.equal(rs, kept))
    rs_premul = torch.empty(24)
    run("reduce_scatter_premul",
        lambda: dist.reduce_scatter(rs_premul, [src], op=dist._make_nccl_premul_sum(0.5),
                                    async_op=True),
        lambda: torch.equal(rs_premul, kept * 0.5))
    reduced = src.clone()
    run("reduce_premul",
        lambda: dist.reduce(reduced, dst=0, op=dist._make_nccl_premul_sum(0.25), async_op=True),
        lambda: torch.equal(reduced, kept * 0.25))
    run("barrier", lambda: dist.barrier(async_op=True), lambda: True)
    # The coalescing managers: one allreduce_coalesced, all_gather_into_tensor_coalesced
    # or reduce_scatter_tensor_coalesced each (given a device: the backend's block too).
    flat = src.clone()
    views = list(flat.view(4, 6).unbind(0))

    def manager_all_reduce(device=None):
        with _coalescing_manager(device=device, async_ops=True) as cm:
            for v in views:
                dist.all_reduce(v, op=dist._make_nccl_premul_sum(2.0))
        return cm

    run("manager_all_reduce", lambda: manager_all_reduce(), lambda: torch.equal(flat, kept * 2))
    run("device_manager_all_reduce", lambda: manager_all_reduce(torch.device("cpu")),
        lambda: torch.equal(flat, kept * 4))
    outs = [torch.empty(6) for _ in range(4)]

    def manager_all_gather():
        with _coalescing_manager(device=torch.device("cpu"), async_ops=True) as cm:
            for o, v in zip(outs, src.view(4, 6).unbind(0)):
                dist.all_gather_into_tensor(o, v)
        return cm

    run("device_manager_all_gather", manager_all_gather,
        lambda: torch.equal(torch.cat(outs), kept))
    rs_outs = [torch.empty(6) for _ in range(4)]

    def manager_reduce_scatter():
        with _coalescing_manager(async_ops=True) as cm:
            for o, v in zip(rs_outs, src.view(4, 6).unbind(0)):
                dist.reduce_scatter_tensor(o, v, op=dist._make_nccl_premul_sum(3.0))
        return cm

    run("manager_reduce_scatter", manager_reduce_scatter,
        lambda: torch.equal(torch.cat(rs_outs), kept * 3))
    lists = [[torch.empty(6) for _ in range(4)]]
    run("all_gather_coalesced",
        lambda: dist.all_gather_coalesced(lists, list(src.view(4, 6).unbind(0)), async_op=True),
        lambda: torch.equal(torch.cat(lists[0]), kept))
    # One tensor given twice to allreduce_coalesced is scaled once, as the fused buffer does.
    twice = src.clone()
    opts = dist.AllreduceCoalescedOptions()
    opts.reduceOp = dist._make_nccl_premul_sum(2.0)
    run("coalesced_twice", lambda: dist.group.WORLD.allreduce_coalesced([twice, twice], opts),
        lambda: torch.equal(twice, kept * 2))
    # An output that is not its values in order (transposed) takes them by torch's copy.
    strided = [torch.empty(6, 4).t()]
    run("strided_output", lambda: dist.all_gather(strided, src.view(4, 6), async_op=True),
        lambda: torch.equal(strided[0], kept.view(4, 6)))
    # An output overlapping its input elsewhere takes the input as it was.
    buf = torch.arange(10, dtype=torch.float32)
    shifted = [buf[4:10]]
    run("overlapping", lambda: dist.all_gather(shifted, buf[0:6], async_op=True),
        lambda: torch.equal(buf, torch.tensor([0., 1, 2, 3, 0, 1, 2, 3, 4, 5])))
    values["input_kept"] = torch.equal(src, kept)
    errors = {}
    for name, call in [
        ("all_to_all_single_sizes",
         lambda: dist.all_to_all_single(torch.empty(5), torch.empty(6), [5], [6])),
        ("all_to_all_sizes", lambda: dist.all_to_all([torch.empty(5)], [torch.empty(6)])),
    ]:
        try:
            call()
            errors[name] = None
        except Exception as error:  # the message is what the test checks
            errors[name] = f"{type(error).__name__}: {error}"
    # After errors the group still works, alone as before.
    tail = torch.empty(24)
    run("after_errors", lambda: dist.all_gather([tail], src, async_op=True),
        lambda: torch.equal(tail, kept))
    dist.destroy_process_group()
    return {"values": values, "at_once": at_once, "steps": steps, "errors": errors}


def calls_after_abort_alone(rank, world_size, init_method):
    """After ProcessGroup.abort() (here from another thread) a group of one
    runs nothing on the caller's thread: every form raises, naming itself."""
    import threading

    dist.init_process_group("ringreduce", init_method=init_method, rank=rank,
                            world_size=world_size)
    dist.all_gather([torch.empty(4)], torch.ones(4))
    aborter = threading.Thread(target=dist.group.WORLD._get_backend(torch.device("cpu")).abort)
    aborter.start()
    aborter.join()
    errors = {}
    for name, call in [
        ("all_gather", lambda: dist.all_gather([torch.empty(4)], torch.ones(4))),
        ("all_to_all", lambda: dist.all_to_all([torch.empty(4)], [torch.ones(4)])),
        ("gather", lambda: dist.gather(torch.ones(4), gather_list=[torch.empty(4)], dst=0)),
        ("barrier", lambda: dist.barrier()),
    ]:
        try:
            call()
            errors[name] = None
        except Exception as error:  # the message is what the test checks
            errors[name] = str(error)
    return errors
