"""Rank bodies for test_abort_from_another_thread.py (run by multiproc)."""
import threading
import time
from datetime import timedelta

from multiproc import event_store


def shrink_abort_from_a_watchdog(rank, world_size, init_method, form="all_reduce"):
    """Ranks 0 and 1 block in a small allreduce that rank 2 (alive, never
    calling) does not join; a watchdog thread on each calls
    shrink_group([2], SHRINK_ABORT), as torchft and elastic agents do. The
    blocked allreduce must end with the abort, not at the group's timeout,
    and the shrunk group must work. `form`: failure_cases._collective_as."""
    import torch
    import torch.distributed as dist
    from torch.distributed import distributed_c10d as c10d
    from failure_cases import _collective_as

    dist.init_process_group("ringreduce", init_method=init_method, rank=rank,
                            world_size=world_size, timeout=timedelta(seconds=60))
    events = event_store(init_method, world_size)
    dist.all_reduce(torch.ones(8))  # the whole world once (its channel is open)
    if rank == 2:
        events.wait(["done0", "done1"])
        return {}
    result = {}

    def watchdog():
        time.sleep(0.5)  # the main thread is in its allreduce by then
        begun = time.monotonic()
        result["group"] = dist.shrink_group([2], shrink_flags=c10d.SHRINK_ABORT)
        result["shrink_s"] = time.monotonic() - begun

    thread = threading.Thread(target=watchdog)
    start = time.monotonic()
    thread.start()
    try:
        _collective_as(form, torch.ones(8))  # rank 2 never joins
        result["error"] = None
    except Exception as e:
        result["error"] = str(e)
    result["blocked_s"] = time.monotonic() - start
    thread.join(timeout=60)
    result["watchdog_done"] = not thread.is_alive()
    group = result.pop("group", None)
    if group is not None:
        x = torch.full((4,), float(rank + 1))
        dist.all_reduce(x, group=group)
        result["after"] = x.tolist()
    events.set(f"done{rank}", b"1")
    return result
