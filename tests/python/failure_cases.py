"""Rank-side bodies of the failure tests."""
import datetime
import os
import signal
import time

import torch
import torch.distributed as dist

from multiproc import event_store


def _die(kill_file):
    with open(kill_file, "w") as f:
        f.write(repr(time.time()))
    os.kill(os.getpid(), signal.SIGKILL)


# The op each form of _collective_as names in its errors.
FORM_OPS = {"all_reduce": "allreduce", "coalesced": "allreduce_coalesced",
            "gather_coalesced": "all_gather_into_tensor_coalesced",
            "scatter_coalesced": "reduce_scatter_tensor_coalesced",
            "alltoall_uneven": "all_to_all_single",
            "device_coalesced": "allreduce_coalesced",
            "list_gather_coalesced": "all_gather_coalesced",
            "gather": "gather", "scatter": "scatter", "all_to_all_list": "all_to_all",
            "all_reduce_async": "allreduce", "funcol_all_gather": "all_gather_into_tensor",
            "all_reduce_polled": "allreduce", "all_reduce_turns": "allreduce",
            "all_reduce_future": "allreduce", "all_reduce_hooked": "allreduce",
            "all_gather_read": "all_gather_into_tensor", "all_to_all_read": "all_to_all_single",
            "gather_read": "gather", "alltoall_uneven_read": "all_to_all_single",
            "all_to_all_list_read": "all_to_all", "broadcast_beyond_buffers": "broadcast"}


HOOK_ERROR = "Got the following error when running the callback: "


def raised_by_backend(kind, message):
    """(kind, message) of what the backend raised: torch's Future.then()
    wraps what a completion hook raised (here, the failed collective's
    error, which the hook's done.value() re-raises) in a RuntimeError
    whose message begins with HOOK_ERROR and the original's type name."""
    if kind == "RuntimeError" and message.startswith(HOOK_ERROR):
        inner = message[len(HOOK_ERROR):]
        name, _, rest = inner.partition(": ")
        return name, rest
    return kind, message


def _collective_as(form, tensor):
    """One collective on `tensor`: a plain allreduce, or four calls on its
    quarters in torch's coalescing manager, each block one collective on the
    channel: all_reduce ("coalesced": one allreduce_coalesced, the tensors
    reduced in place), all_gather_into_tensor ("gather_coalesced") or
    reduce_scatter_tensor ("scatter_coalesced": the quarters' chunks of
    their reduction), the tensors one message; or ("alltoall_uneven") an
    all_to_all_single with split sizes, each rank sending rank r + 1 more;
    or ("device_coalesced") the coalesced all_reduce in the manager given a
    device, bracketed by the backend's startCoalescing and endCoalescing; or
    ("list_gather_coalesced") torch's deprecated all_gather_coalesced of the
    quarters, one output list per rank, one message on the channel; or
    ("gather", "scatter", "all_to_all_list") the rooted and list forms, each
    rank's block an n-th of the tensor, the lists read and written where
    they are (root: rank 0); or ("all_reduce_async", "funcol_all_gather")
    an asynchronous allreduce of a small slice waited for, or an eager
    functional all_gather and its wait_tensor (a rank whose peers are not
    there yet puts its part up on the channel and queues the call); or
    ("all_reduce_polled") that asynchronous allreduce polled with
    is_completed() until it ends, then waited for (raising its error); or
    ("all_reduce_future", "all_reduce_hooked") that asynchronous allreduce
    waited for through its future (what DDP's reducer waits on), or through
    a completion hook chained with then() (DDP's Python comm hooks); or
    ("all_reduce_turns") an allreduce of 3 MiB whatever `tensor` is: three
    turns of the host channel's 1 MiB buffers; or ("all_gather_read",
    "all_to_all_read", "gather_read") an all_gather_into_tensor of 256 KiB per
    rank, an all_to_all_single of 256 KiB blocks or a gather of 8 MiB per rank
    to rank 0 (beyond the channel's buffers), whatever `tensor` is: each rank
    (the root) reads its peers' blocks from their memory (cross_memory_gather.h);
    or ("alltoall_uneven_read", "all_to_all_list_read") all_to_all_single
    with split sizes of 256-768 KiB blocks, or all_to_all of lists of 256 KiB
    blocks: the uneven form reads them from the peers' memory after its first
    turn (alltoall.h); or ("broadcast_beyond_buffers") a broadcast of 5 MiB
    from rank 0 whatever `tensor` is: past the channel's 4 MiB, the
    channel's large broadcast (large_broadcast.h), or with
    RINGREDUCE_SHM_BYTES=0 the chain over the transport, whose root waits for
    a rank that never came only in the collective's check."""
    if form == "all_reduce":
        return dist.all_reduce(tensor)
    if form == "all_gather_read":
        shard = torch.ones(64 << 10)
        return dist.all_gather_into_tensor(torch.empty(dist.get_world_size() * shard.numel()),
                                           shard)
    if form == "all_to_all_read":
        blocks = torch.ones(dist.get_world_size() * (64 << 10))
        return dist.all_to_all_single(torch.empty_like(blocks), blocks)
    if form == "alltoall_uneven_read":
        world, rank, unit = dist.get_world_size(), dist.get_rank(), 64 << 10
        sends = [unit * (1 + (rank + dst) % world) for dst in range(world)]
        recvs = [unit * (1 + (src + rank) % world) for src in range(world)]
        return dist.all_to_all_single(torch.empty(sum(recvs)), torch.ones(sum(sends)), recvs,
                                      sends)
    if form == "all_to_all_list_read":
        world = dist.get_world_size()
        return dist.all_to_all([torch.empty(64 << 10) for _ in range(world)],
                               [torch.ones(64 << 10) for _ in range(world)])
    if form == "gather_read":
        block = torch.ones(2 << 20)
        gathered = [torch.empty_like(block) for _ in range(dist.get_world_size())]
        return dist.gather(block, gathered if dist.get_rank() == 0 else None, dst=0)
    # Past the channel's 4 MiB (test_failures.py's tests of a broadcast of
    # two use it, on the channel and by the chain).
    if form == "broadcast_beyond_buffers":
        return dist.broadcast(torch.ones(5 << 18), src=0)
    if form == "all_reduce_turns":
        return dist.all_reduce(torch.ones(3 << 18))
    if form == "all_reduce_async":
        return dist.all_reduce(tensor[:256], async_op=True).wait()
    if form == "all_reduce_future":
        return dist.all_reduce(tensor[:256], async_op=True).get_future().wait()
    if form == "all_reduce_hooked":
        future = dist.all_reduce(tensor[:256], async_op=True).get_future()
        return future.then(lambda done: done.value()).wait()
    if form == "all_reduce_polled":
        work = dist.all_reduce(tensor[:256], async_op=True)
        while not work.is_completed():  # ends at the latest at the op's timeout
            pass
        return work.wait()
    if form == "funcol_all_gather":
        import torch.distributed._functional_collectives as funcol

        return funcol.wait_tensor(funcol.all_gather_tensor(tensor[:256], 0, dist.group.WORLD))
    if form in ("gather", "scatter", "all_to_all_list"):
        world, rank = dist.get_world_size(), dist.get_rank()
        m = max(1, tensor.numel() // world)
        blocks = [tensor[:m].clone() for _ in range(world)]
        if form == "gather":
            return dist.gather(tensor[:m], blocks if rank == 0 else None, dst=0)
        if form == "scatter":
            return dist.scatter(torch.empty(m), blocks if rank == 0 else None, src=0)
        return dist.all_to_all([torch.empty(m) for _ in range(world)], blocks)
    if form == "alltoall_uneven":
        world, rank = dist.get_world_size(), dist.get_rank()
        unit = tensor.numel() // (2 * world * world)
        sends = [unit * (1 + (rank + dst) % world) for dst in range(world)]
        recvs = [unit * (1 + (src + rank) % world) for src in range(world)]
        return dist.all_to_all_single(torch.empty(sum(recvs)), tensor[:sum(sends)], recvs, sends)
    from torch.distributed.distributed_c10d import _coalescing_manager

    world = dist.get_world_size()
    parts = tensor.chunk(4)
    if form == "list_gather_coalesced":
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)
            return dist.all_gather_coalesced([[torch.empty_like(p) for p in parts]
                                              for _ in range(world)], list(parts))
    if form == "device_coalesced":
        with _coalescing_manager(device=tensor.device):
            for part in parts:
                dist.all_reduce(part)
        return None
    with _coalescing_manager():
        for part in parts:
            if form == "coalesced":
                dist.all_reduce(part)
            elif form == "gather_coalesced":
                dist.all_gather_into_tensor(torch.empty(part.numel() * world), part)
            else:
                dist.reduce_scatter_tensor(torch.empty(part.numel() // world), part[:part.numel()
                                                                                  // world * world])


def killed_mid_job(rank, world, init_method, victim, kill_file, nbytes, from_thread=False,
                   form="all_reduce"):
    """Every rank loops over collectives (`form`: _collective_as); `victim`
    SIGKILLs itself mid-loop: between two allreduces, or `from_thread` from a
    timer while its main thread is inside one (at 64 MiB most of an allreduce
    is cma's copies)."""
    import threading

    # Half the world's time limit: a survivor that waits to its deadline
    # still returns, and the test shows what it waited for.
    dist.init_process_group("ringreduce", init_method=init_method, rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=60))
    tensor = torch.ones(nbytes // 4)
    for i in range(1000000):
        if rank == victim and i == 20:
            if not from_thread:
                _die(kill_file)
            threading.Timer(0.003, _die, (kill_file,)).start()
        try:
            _collective_as(form, tensor)
        except Exception as error:
            failed_at = time.time()
            first = (type(error).__name__, str(error))
            break
    start = time.monotonic()
    try:
        dist.all_reduce(torch.ones(4))
        later = "no error"
    except Exception as error:
        later = (type(error).__name__, str(error))
    later_s = time.monotonic() - start
    with open(kill_file) as f:
        killed_at = float(f.read())
    return {"first": first, "latency": failed_at - killed_at, "later": later, "later_s": later_s,
            "iteration": i}


def stopped_or_late(rank, world, init_method, mode, timeout_s, form="all_reduce"):
    """Rank 2 is either stopped (SIGSTOP) or late by a second at collective #2
    (`form`: _collective_as)."""
    dist.init_process_group("ringreduce", init_method=init_method, rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=timeout_s))
    dist.all_reduce(torch.ones(4))  # #1: everyone connected
    if rank == 2:
        if mode == "stop":
            os.kill(os.getpid(), signal.SIGSTOP)  # the test harness kills it later
        time.sleep(1.0)
    start = time.monotonic()
    t = torch.full((1 << 16,), float(rank))
    try:
        _collective_as(form, t)
        outcome = ("ok", t[0].item())
    except Exception as error:
        outcome = (type(error).__name__, str(error))
    result = {"outcome": outcome, "elapsed": time.monotonic() - start}
    if mode == "stop" and outcome[0] == "ok":
        # A rank that only sends in #2 (a scatter's root, a gather's other
        # ranks) left it without waiting for rank 2: its next collective
        # waits for rank 2 to have been in #2, and times out naming #2.
        start = time.monotonic()
        try:
            dist.all_reduce(torch.ones(4))
            result["next"] = ("ok", None)
        except Exception as error:
            result["next"] = (type(error).__name__, str(error))
        result["next_elapsed"] = time.monotonic() - start
    return result


def broadcast_peer_absent(rank, world, init_method, mode, timeout_s):
    """Rank 0 broadcasts 5 MiB (beyond the channel's buffers: the channel's
    large broadcast, or the transport's chain, one message between two ranks) to
    a rank 1 that stays alive but never calls it; `mode` "stop":
    rank 0 waits to the group's timeout, "abort": a watchdog thread on rank 0
    aborts the group 0.5 s into the wait."""
    import threading

    dist.init_process_group("ringreduce", init_method=init_method, rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=timeout_s))
    events = event_store(init_method, world)
    dist.all_reduce(torch.ones(4))  # #1: everyone connected
    if rank == 1:
        events.wait(["done0"])
        return {}
    if mode == "abort":
        threading.Timer(0.5, dist.group.WORLD.abort).start()
    start = time.monotonic()
    try:
        _collective_as("broadcast_beyond_buffers", None)
        outcome = ("ok", None)
    except Exception as error:
        outcome = (type(error).__name__, str(error))
    result = {"outcome": outcome, "elapsed": time.monotonic() - start}
    events.set("done0", "1")
    return result


def monitored_barrier(rank, world, init_method):
    """All ranks pass one monitored barrier; then ranks 2 and 3 skip the next,
    staying in the group until ranks 0 and 1 have their outcome (an event:
    a rank that left would be reported as gone, not as missing)."""
    dist.init_process_group("ringreduce", init_method=init_method, rank=rank, world_size=world)
    events = event_store(init_method, world)
    # torch's dist.monitored_barrier() admits only gloo by name; the process
    # group's own method reaches ringreduce's implementation.
    pg = dist.group.WORLD
    pg.monitored_barrier(datetime.timedelta(seconds=20), False)
    result = {"first": "passed"}
    if rank in (0, 1):
        try:
            pg.monitored_barrier(datetime.timedelta(seconds=2), True)
            result["second"] = "passed"
        except Exception as error:
            result["second"] = (type(error).__name__, str(error))
        events.set(f"rank {rank} is done", b"1")
    else:
        events.wait(["rank 0 is done", "rank 1 is done"])
    return result


def per_op_timeout(rank, world, init_method):
    """A 1.5 s timeout on one allreduce overrides the group's 60 s. Rank 1
    skips it and stays in the group until rank 0 has its outcome."""
    dist.init_process_group("ringreduce", init_method=init_method, rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=60))
    events = event_store(init_method, world)
    dist.all_reduce(torch.ones(2))
    if rank == 1:
        events.wait(["rank 0 is done"])  # skips the next collective
        return {}
    opts = dist.AllreduceOptions()
    opts.timeout = datetime.timedelta(seconds=1.5)
    start = time.monotonic()
    try:
        dist.group.WORLD.allreduce([torch.ones(100)], opts).wait()
        outcome = "no error"
    except Exception as error:
        outcome = (type(error).__name__, str(error))
    elapsed = time.monotonic() - start
    events.set("rank 0 is done", b"1")
    return {"outcome": outcome, "elapsed": elapsed}


def killed_mid_large_transfer(rank, world, init_method, kill_file, mib, victim):
    """Rank 0 sends rank 1 a large tensor and `victim` SIGKILLs itself while
    its peer copies through UCX's cma rendezvous: rank 0 dying while rank 1
    reads its memory (UCX's get), or rank 1 dying while rank 0 writes into
    its memory (UCX_RNDV_SCHEME=put_zcopy), each on an endpoint that has sent
    before: where UCX used to abort the survivor's process. The survivor's
    outcome, and how long after the kill it came."""
    dist.init_process_group("ringreduce", init_method=init_method, rank=rank, world_size=world)
    small = torch.ones(4)
    if rank == 1:
        dist.send(small, 0)  # each rank's endpoint to the other has sent before
        dist.recv(small, 0)
    else:
        dist.recv(small, 1)
        dist.send(small, 1)
    big = torch.ones(mib << 18)
    dist.barrier()
    if rank == victim:
        if rank == 0:
            dist.isend(big, 1)
        else:
            dist.irecv(big, 0)
        time.sleep(0.02)  # its peer has the rendezvous and is copying
        _die(kill_file)
    try:
        if rank == 0:
            dist.send(big, 1)
        else:
            dist.recv(big, 0)
        return {"error": None}
    except Exception as e:  # what the user's code would catch
        now = time.time()
        with open(kill_file) as f:
            killed = float(f.read())
        return {"error": (type(e).__name__, str(e)), "latency": now - killed}
