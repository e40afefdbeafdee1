"""Rank-side bodies of test_point_to_point_failures.py: a pipeline's stage
boundaries (each rank sends to and receives from both its neighbours, as
forward and backward do) when a peer dies, stops, never comes, or another
thread aborts the group.

`form`: "send_recv" (isend and irecv, each posted on the issuing thread when
nothing is queued ahead: what batch_isend_irecv issues, the backend not
asking torch to coalesce it), "block" (the same inside torch's coalescing
manager given a device, as NCCL-minded code and torch's batch_isend_irecv for
such backends issue them: held until the block ends, then posted on the
caller's thread) or "poll" (isend and irecv whose Works are polled with
is_completed() until they say so, then waited: a poll moves the messages
itself, so it meets the failure there)."""
import datetime
import os
import signal
import threading
import time

import torch
import torch.distributed as dist

from failure_cases import _die
from multiproc import event_store


def _exchange(form, tensor, group=None):
    """One step of a ring run both ways on `tensor`'s size: to and from the
    next rank and the one before (at world 3 every rank talks to both
    others). Returns what came from the one before and from the next."""
    rank, world = dist.get_rank(group), dist.get_world_size(group)
    nxt, prv = (rank + 1) % world, (rank - 1) % world
    if group is not None:
        nxt = dist.get_global_rank(group, nxt)
        prv = dist.get_global_rank(group, prv)
    from_prv, from_nxt = torch.empty_like(tensor), torch.empty_like(tensor)
    ops = [(dist.isend, tensor, nxt), (dist.isend, tensor, prv),
           (dist.irecv, from_prv, prv), (dist.irecv, from_nxt, nxt)]
    if form == "block":
        from torch.distributed.distributed_c10d import _coalescing_manager

        with _coalescing_manager(group, torch.device("cpu"), async_ops=True) as block:
            for op, t, peer in ops:
                op(t, peer, group)
        works = block.works
    else:
        works = [op(t, peer, group) for op, t, peer in ops]
    if form == "poll":
        limit = time.monotonic() + 120  # past the group's timeout: a poll must end by then
        for work in works:
            while not work.is_completed() and time.monotonic() < limit:
                pass
    for work in works:
        work.wait()
    return from_prv[0].item(), from_nxt[0].item()


def killed_mid_loop(rank, world, init_method, form, victim, kill_file):
    """Every rank loops over ring steps; `victim` SIGKILLs itself at step 20.
    The survivors' first error and how long after the kill it came."""
    dist.init_process_group("ringreduce", init_method=init_method, rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=60))
    tensor = torch.full((16,), float(rank))
    first = None
    for step in range(100000):
        if rank == victim and step == 20:
            _die(kill_file)
        try:
            got = _exchange(form, tensor)
        except Exception as error:
            failed_at = time.time()
            first = (type(error).__name__, str(error))
            break
        if got != (float((rank - 1) % world), float((rank + 1) % world)):
            return {"wrong": got, "step": step}
    with open(kill_file) as f:
        killed_at = float(f.read())
    return {"first": first, "latency": failed_at - killed_at, "step": step}


def stopped_or_absent(rank, world, init_method, form, mode, timeout_s):
    """Rank 2 is stopped (SIGSTOP: alive, silent) or never calls
    ("absent": it waits on the store) at the second ring step; the others'
    outcome and how long it took."""
    dist.init_process_group("ringreduce", init_method=init_method, rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=timeout_s))
    events = event_store(init_method, world)
    tensor = torch.full((16,), float(rank))
    _exchange(form, tensor)  # every endpoint has carried a message
    if rank == 2:
        if mode == "stop":
            os.kill(os.getpid(), signal.SIGSTOP)  # the test harness kills it later
        events.wait(["done0", "done1"], datetime.timedelta(seconds=120))
        return {}
    start = time.monotonic()
    try:
        _exchange(form, tensor)
        outcome = ("ok", None)
    except Exception as error:
        outcome = (type(error).__name__, str(error))
    elapsed = time.monotonic() - start
    events.set(f"done{rank}", b"1")
    return {"outcome": outcome, "elapsed": elapsed}


def aborted_from_a_watchdog(rank, world, init_method, form, how):
    """Ranks 0 and 1 wait in a ring step that rank 2 (alive, never calling)
    does not join; after 0.5 s a watchdog thread on each shrinks rank 2 away
    with SHRINK_ABORT (`how` "shrink") or aborts the group ("abort"). The
    wait must end with the abort, not at the group's 60 s timeout, and the
    shrunk group must carry the next step."""
    from torch.distributed import distributed_c10d as c10d

    dist.init_process_group("ringreduce", init_method=init_method, rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=60))
    events = event_store(init_method, world)
    _exchange(form, torch.full((16,), float(rank)))
    if rank == 2:
        events.wait(["done0", "done1"], datetime.timedelta(seconds=120))
        return {}
    result = {}

    def watchdog():
        time.sleep(0.5)  # the main thread waits by then
        if how == "abort":
            dist.group.WORLD.abort()
        else:
            result["group"] = dist.shrink_group([2], shrink_flags=c10d.SHRINK_ABORT)

    thread = threading.Thread(target=watchdog)
    start = time.monotonic()
    thread.start()
    try:
        _exchange(form, torch.full((16,), float(rank)))
        result["error"] = None
    except Exception as error:
        result["error"] = (type(error).__name__, str(error))
    result["blocked_s"] = time.monotonic() - start
    thread.join(timeout=60)
    result["watchdog_done"] = not thread.is_alive()
    group = result.pop("group", None)
    if group is not None:
        # A 2-rank ring: each rank's next is its previous.
        result["after"] = _exchange(form, torch.full((16,), float(rank + 1)), group)
    events.set(f"done{rank}", b"1")
    return result
