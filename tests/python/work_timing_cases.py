"""Rank bodies for test_work_timing.py: Work._get_duration(),
get_future_result() and ProcessGroup._enable_collectives_timing() on every
kind of Work: the group of one's on-caller path (the Work of a collective run
from the caller's thread), queued host collectives, a coalesced block, a
timeout and a group that failed."""
import datetime

from multiproc import event_store


def _on_caller_ops(dist, torch, seed):
    """One Work of each op the group of one runs from the caller's thread,
    with its data checked exactly."""
    generator = torch.Generator().manual_seed(seed)
    x = torch.randint(-1000, 1000, (65536,), generator=generator, dtype=torch.int64)
    t = x.clone()
    works = {"allreduce": dist.all_reduce(t, async_op=True)}
    out = torch.empty_like(x)
    works["all_gather_into_tensor"] = dist.all_gather_into_tensor(out, x, async_op=True)
    scattered = torch.empty_like(x)
    works["reduce_scatter_tensor"] = dist.reduce_scatter_tensor(scattered, x, async_op=True)
    b = x.clone()
    works["broadcast"] = dist.broadcast(b, src=0, async_op=True)
    for work in works.values():
        work.wait()
    exact = all(torch.equal(y, x) for y in (t, out, scattered, b))
    return works, exact


def _durations(works):
    found = {}
    for name, work in works.items():
        try:
            found[name] = work._get_duration()
        except RuntimeError as error:
            found[name] = str(error)
    return found


def group_of_one(rank, world_size, init_method, seed):
    import torch
    import torch.distributed as dist
    import torch_ringreduce

    dist.init_process_group("ringreduce", init_method=init_method, rank=rank,
                            world_size=world_size)
    pg = dist.group.WORLD
    hooked = []
    pg._register_on_completion_hook(lambda info: hooked.append(info))
    works, exact = _on_caller_ops(dist, torch, seed)
    out = {"exact_untimed": exact, "untimed": _durations(works),
           "results": {name: int(work.get_future_result().wait()) for name, work in works.items()}}
    pg._wait_for_pending_works()
    out["hook_seconds"] = [info.active_duration.total_seconds() for info in hooked]
    out["hook_ops"] = [(str(info.op_type).split(".")[-1], info.seq) for info in hooked]
    pg._enable_collectives_timing()
    works, exact = _on_caller_ops(dist, torch, seed + 1)
    out["exact_timed"] = exact
    out["timed"] = _durations(works)
    # They did run on the caller's thread: the flight recorder says so.
    out["trace"] = torch_ringreduce.trace_json()
    return out


def timed_from_the_environment(rank, world_size, init_method, seed):
    """RINGREDUCE_ENABLE_TIMING or TORCH_NCCL_ENABLE_TIMING is set (by the test)."""
    import torch
    import torch.distributed as dist

    dist.init_process_group("ringreduce", init_method=init_method, rank=rank,
                            world_size=world_size)
    works, exact = _on_caller_ops(dist, torch, seed)
    return {"exact": exact, "timed": _durations(works)}


def queued_and_coalesced(rank, world_size, init_method, seed):
    import torch
    import torch.distributed as dist

    dist.init_process_group("ringreduce", init_method=init_method, rank=rank,
                            world_size=world_size)
    out = {}

    def inputs(s):
        return [torch.randint(-1000, 1000, (3000,), generator=torch.Generator().manual_seed(
            s * 100 + r), dtype=torch.int64) for r in range(world_size)]

    # Untimed, a queued Work has no duration either, as on the caller's
    # thread (one rule, ProcessGroupNCCL's), and says how to get one.
    gathered = [torch.empty(3000, dtype=torch.int64) for _ in range(world_size)]
    work = dist.all_gather(gathered, torch.zeros(3000, dtype=torch.int64), async_op=True)
    work.wait()
    try:
        out["untimed"] = work._get_duration()
    except RuntimeError as error:
        out["untimed"] = str(error)
    dist.group.WORLD._enable_collectives_timing()
    # Ops that are always queued on the executor (no on-caller path takes
    # them).
    xs = inputs(seed)
    gathered = [torch.empty_like(xs[0]) for _ in range(world_size)]
    work = dist.all_gather(gathered, xs[rank], async_op=True)
    work.wait()
    out["all_gather"] = (all(torch.equal(g, x) for g, x in zip(gathered, xs)),
                         work._get_duration(), int(work.get_future_result().wait()))
    t = xs[rank].clone()
    work = dist.reduce(t, dst=0, async_op=True)
    work.wait()
    out["reduce"] = (rank != 0 or torch.equal(t, sum(xs)), work._get_duration(),
                     int(work.get_future_result().wait()))
    # A coalesced block: one Work for both, from its first part's start.
    a_in, b_in = inputs(seed + 1), inputs(seed + 2)
    a, b = a_in[rank].clone(), b_in[rank].clone()
    with dist._coalescing_manager(async_ops=True) as manager:
        dist.all_reduce(a)
        dist.all_reduce(b)
    manager.wait()
    out["coalesced_works"] = len(manager.works)
    combined = manager.works[-1]
    out["coalesced"] = (torch.equal(a, sum(a_in)) and torch.equal(b, sum(b_in)),
                        combined._get_duration(), int(combined.get_future_result().wait()))
    # Asked for before it completes: the future completes with it.
    c = torch.ones(10)
    work = dist.all_reduce(c, async_op=True)
    future = work.get_future_result()
    out["early_result"] = int(future.wait())
    work.wait()
    out["early_sum"] = c.tolist()
    # An allreduce, on whichever path it takes.
    xs = inputs(seed + 3)
    t = xs[rank].clone()
    work = dist.all_reduce(t, async_op=True)
    work.wait()
    out["allreduce"] = (torch.equal(t, sum(xs)), work._get_duration(),
                        int(work.get_future_result().wait()))
    return out


def timeout_then_failed_group(rank, world_size, init_method):
    """Rank 1 never enters rank 0's all_gather: rank 0's Work times out
    (TIMEOUT), and the next one fails at once on the failed group
    (COMM_ERROR)."""
    import torch
    import torch.distributed as dist

    dist.init_process_group("ringreduce", init_method=init_method, rank=rank,
                            world_size=world_size, timeout=datetime.timedelta(seconds=3))
    events = event_store(init_method, world_size)
    dist.all_reduce(torch.ones(8))
    if rank == 1:
        events.wait(["rank0_done"])
        return {}
    out = {}
    dist.group.WORLD._enable_collectives_timing()
    # all_gather: queued on the executor, whatever on-caller paths there are.
    gathered = [torch.empty(16) for _ in range(world_size)]
    work = dist.all_gather(gathered, torch.ones(16), async_op=True)
    result = work.get_future_result()  # asked before the end
    try:
        work.wait()
        out["error"] = None
    except Exception as error:  # DistBackendError
        out["error"] = str(error)
    out["timeout_result"] = int(result.wait())
    out["timeout_duration"] = work._get_duration()
    later = dist.all_gather(gathered, torch.ones(16), async_op=True)
    try:
        later.wait()
    except Exception:
        pass
    out["later_result"] = int(later.get_future_result().wait())
    try:
        later._get_duration()
        out["later_duration"] = None
    except RuntimeError as error:
        out["later_duration"] = str(error)
    events.set("rank0_done", b"1")
    return out


def starts_when_it_runs(rank, world_size, init_method):
    """Rank 0 queues two all_gathers; rank 1 joins the first only once rank
    0 has released it (after a pause, so that the second waits in the queue
    meanwhile). The second's duration runs from when it starts, after the
    first completed: it fits between the release and the end of rank 0's
    wait. Its time in the queue, from before the release, would not."""
    import time

    import torch
    import torch.distributed as dist

    dist.init_process_group("ringreduce", init_method=init_method, rank=rank,
                            world_size=world_size)
    pg = dist.group.WORLD
    pg._enable_collectives_timing()
    hooked = []
    pg._register_on_completion_hook(
        lambda info: hooked.append(info.active_duration.total_seconds() * 1000))
    events = event_store(init_method, world_size)
    x = torch.full((1000,), float(rank))
    # A group's first collective on CPU tensors waits for every rank to come
    # to it (its host channel opens there, as NCCL's lazy communicator does):
    # done before rank 1 holds back.
    dist.barrier()

    def gather():
        return [torch.empty(1000) for _ in range(world_size)]

    if rank == 1:
        events.wait(["released"])
        dist.all_gather(gather(), x)
        dist.all_gather(gather(), x)
        return {}
    first = dist.all_gather(gather(), x, async_op=True)
    second = dist.all_gather(gather(), x, async_op=True)
    time.sleep(0.5)  # no assert depends on it: it makes the queueing visible
    released = time.monotonic()
    events.set("released", "1")
    first.wait()
    second.wait()
    done = time.monotonic()
    pg._wait_for_pending_works()
    return {"first_ms": first._get_duration(), "second_ms": second._get_duration(),
            "released_to_done_ms": (done - released) * 1000, "hooked_ms": hooked}


def cuda_durations(rank, world_size, init_method, seed):
    """CUDA tensors: untimed Works say so; once timing is on, durations come
    from CUDA events (read after the device finished). The path is the
    environment's (device flags by default on one node, or host staging)."""
    import torch
    import torch.distributed as dist

    device = torch.device("cuda", rank % torch.cuda.device_count())
    torch.cuda.set_device(device)
    dist.init_process_group("ringreduce", init_method=init_method, rank=rank,
                            world_size=world_size)
    def inputs(s):
        return [torch.randint(-1000, 1000, (2048,), generator=torch.Generator().manual_seed(
            s * 100 + r), dtype=torch.int64) for r in range(world_size)]

    def run(s):
        xs = inputs(s)
        t = xs[rank].to(device)
        work = dist.all_reduce(t, async_op=True)
        work.wait()
        torch.cuda.current_stream().synchronize()
        try:
            duration = work._get_duration()
        except RuntimeError as error:
            duration = str(error)
        return torch.equal(t.cpu(), sum(xs)), duration, int(work.get_future_result().wait())

    out = {"untimed": [run(seed + i) for i in range(3)]}
    dist.group.WORLD._enable_collectives_timing()
    out["timed"] = [run(seed + 10 + i) for i in range(3)]
    return out
