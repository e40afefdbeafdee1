"""Rank bodies for test_trace_and_hooks.py (run in fresh processes by multiproc)."""
import threading
import time
from datetime import timedelta

from multiproc import event_store


def hooks_and_durations(rank, world_size, init_method):
    import torch
    import torch.distributed as dist

    dist.init_process_group("ringreduce", init_method=init_method, rank=rank,
                            world_size=world_size)
    pg = dist.group.WORLD
    seen = []

    def hook(info):
        # With timing on, what the collective was active for: no longer than
        # from its start to its end (a collective whose peers were there
        # already can take under the microsecond these are counted in).
        span = (info.time_finished - info.time_started).total_seconds()
        active = info.active_duration.total_seconds()
        seen.append((str(info.op_type), info.seq, info.time_started <= info.time_finished,
                     0 <= active <= span + 1e-3, active, span))
        if info.seq == 2:
            raise RuntimeError("a hook that raises must not stop the others")

    pg._register_on_completion_hook(hook)
    # Whichever path the allreduce takes (one run on the caller's thread is
    # timed only while timing is on: test_work_timing.py).
    pg._enable_collectives_timing()
    t = torch.arange(1000, dtype=torch.float32)
    work = dist.all_reduce(t, async_op=True)
    work.wait()
    duration = work._get_duration()
    dist.all_reduce(t)
    dist.broadcast(t, src=0)
    dist.all_reduce(t)
    pg._wait_for_pending_works()
    return {"seen": list(seen), "duration": duration}


def sends_and_receives(rank, world_size, init_method):
    """Rank 0 sends a float32 and a float8 tensor (moved as bytes) to rank 1,
    which receives one from rank 0 and one from any rank; each returns the
    summaries its flight recorder gives its sends and receives."""
    import json

    import torch
    import torch.distributed as dist
    import torch_ringreduce

    dist.init_process_group("ringreduce", init_method=init_method, rank=rank,
                            world_size=world_size)
    plain = torch.arange(4, dtype=torch.float32)
    bytes_only = torch.zeros(6, dtype=torch.float8_e4m3fn)
    if rank == 0:
        dist.send(plain, dst=1, tag=3)
        dist.send(bytes_only, dst=1, tag=5)
    else:
        dist.recv(plain, src=0, tag=3)
        dist.recv(bytes_only, tag=5)
    entries = json.loads(torch_ringreduce.trace_json())["entries"]
    dist.destroy_process_group()
    return [e["summary"] for e in entries if e["p2p"]]


def skip_one_collective(rank, world_size, init_method):
    """Rank 1 never calls the second allreduce: rank 0 times out there."""
    import torch
    import torch.distributed as dist
    import torch_ringreduce

    dist.init_process_group("ringreduce", init_method=init_method, rank=rank,
                            world_size=world_size, timeout=timedelta(seconds=3))
    events = event_store(init_method, world_size)
    dist.all_reduce(torch.ones(64))
    error = None
    try:
        if rank == 0:
            # Told first: a small asynchronous allreduce may wait for its
            # peers inside the call (RINGREDUCE_ASYNC_ON_CALLER_BYTES).
            events.set("allreduce_posted", b"1")
            work = dist.all_reduce(torch.ones(32), async_op=True)
            work.wait()
        else:
            events.wait(["allreduce_posted"])
            dist.barrier()  # a different collective under the same number, later
    except Exception as e:  # both ranks fail; each writes its trace
        error = str(e)
    return {"error": error, "json": torch_ringreduce.trace_json()}


def abort_and_start_again(rank, world_size, init_method, form="async"):
    """Rank 0 aborts its group from a second thread while its allreduce
    waits for rank 1, which joins only after the abort. `form`: "sync", a
    blocking allreduce (async_op=False), which runs on the calling thread
    past the queue: the abort must reach it there too; "async"; or
    "coalesced", two allreduces in torch's coalescing manager (one fused
    allreduce_coalesced, which runs like an asynchronous one); or
    "gather_coalesced", two all_gather_into_tensor calls in a blocking
    coalescing manager (one collective, on the calling thread); or
    "alltoall_uneven", a blocking all_to_all_single with split sizes (on the
    calling thread)."""
    import torch
    import torch.distributed as dist
    from torch.distributed.distributed_c10d import _coalescing_manager

    sync = form in ("sync", "gather_coalesced", "alltoall_uneven")

    dist.init_process_group("ringreduce", init_method=init_method, rank=rank,
                            world_size=world_size, timeout=timedelta(seconds=60))
    events = event_store(init_method, world_size)
    dist.all_reduce(torch.ones(8))
    result = {}
    if rank == 0:
        aborted = {}

        def abort():
            if sync:
                time.sleep(0.5)  # the caller is inside all_reduce by then
            begun = time.monotonic()
            dist.group.WORLD.abort()
            aborted["seconds"] = time.monotonic() - begun
            events.set("aborted", b"1")

        # Whether the abort comes before or during wait(), the wait must
        # fail: no order between them is needed.
        aborter = threading.Thread(target=abort)
        start = time.monotonic()
        try:
            if form == "gather_coalesced":
                aborter.start()
                with _coalescing_manager():  # rank 1 never joins
                    dist.all_gather_into_tensor(torch.empty(8 * world_size), torch.ones(8))
                    dist.all_gather_into_tensor(torch.empty(3 * world_size), torch.ones(3))
            elif form == "alltoall_uneven":
                aborter.start()
                splits = [3] + [1] * (world_size - 1)  # rank 1 never joins
                dist.all_to_all_single(torch.empty(sum(splits)), torch.ones(sum(splits)),
                                       splits, splits)
            elif sync:
                aborter.start()
                dist.all_reduce(torch.ones(8))  # rank 1 never joins
            elif form == "coalesced":
                with _coalescing_manager(async_ops=True) as manager:
                    dist.all_reduce(torch.ones(8))
                    dist.all_reduce(torch.ones(3))
                aborter.start()
                manager.wait()
            else:
                work = dist.all_reduce(torch.ones(8), async_op=True)
                aborter.start()
                work.wait()
            result["error"] = None
        except Exception as e:
            result["error"] = str(e)
        result["seconds"] = time.monotonic() - start
        aborter.join(timeout=30)
        result["aborter_done"] = not aborter.is_alive()
        result["abort_seconds"] = aborted.get("seconds")
    else:
        # Joins only once rank 0 gave up: it must not complete rank 0's
        # pending allreduce.
        events.wait(["aborted"])
        try:
            dist.all_reduce(torch.ones(8))
            result["error"] = None
        except Exception as e:
            result["error"] = str(e)
    dist.destroy_process_group()
    # A new group works after the abort.
    dist.init_process_group("ringreduce", init_method=init_method + ".again", rank=rank,
                            world_size=world_size)
    t = torch.full((4,), float(rank + 1))
    dist.all_reduce(t)
    result["after"] = t.tolist()
    return result


def one_rank_skips_an_allreduce(rank, world_size, init_method):
    """Three ranks; rank 2 skips the second of two small blocking
    allreduces (it waits until the others have failed, then leaves): ranks 0
    and 1 time out there, each writes its flight recorder, and the trace
    reader names rank 2."""
    import torch
    import torch.distributed as dist

    dist.init_process_group("ringreduce", init_method=init_method, rank=rank,
                            world_size=world_size, timeout=timedelta(seconds=3))
    events = event_store(init_method, world_size)
    dist.all_reduce(torch.ones(1024))
    error = None
    if rank == 2:
        events.wait(["failed0", "failed1"])
    else:
        try:
            dist.all_reduce(torch.ones(1024))
        except Exception as e:
            error = str(e)
        events.set(f"failed{rank}", b"1")
    return {"error": error}
