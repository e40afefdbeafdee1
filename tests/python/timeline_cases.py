"""Rank bodies for test_timeline.py (run in fresh processes by multiproc)."""
import time


def several_collectives(rank, world_size, init_method):
    """Collectives on the default group, some queued behind each other, one on
    a second group, then a second default group after destroy_process_group.
    Returns what each group ran, in order: (group, op, bytes, dtype)."""
    import torch
    import torch.distributed as dist

    ran = []
    dist.init_process_group("ringreduce", init_method=init_method, rank=rank,
                            world_size=world_size)
    world = dist.group.WORLD.group_name
    dist.all_reduce(torch.ones(1 << 20))  # 4 MiB: long enough reductions to be drawn
    ran.append((world, "allreduce", 4 << 20, "Float"))
    dist.all_reduce(torch.arange(10))
    ran.append((world, "allreduce", 80, "Long"))
    dist.broadcast(torch.zeros(100), src=1)
    ran.append((world, "broadcast", 400, "Float"))
    dist.barrier()
    ran.append((world, "barrier", 0, "none"))
    # Queued behind one another: on rank 0 the first waits for rank 1, which
    # comes late, so the other two are queued meanwhile.
    tensors = [torch.ones(1 << 20) for _ in range(3)]
    if rank == 1:
        time.sleep(0.5)
    works = [dist.all_reduce(t, async_op=True) for t in tensors]
    for work in works:
        work.wait()
    ran += [(world, "allreduce", 4 << 20, "Float")] * 3
    pair = dist.new_group([0, 1])
    dist.all_reduce(torch.ones(16, dtype=torch.float64), group=pair)
    ran.append((pair.group_name, "allreduce", 128, "Double"))
    dist.destroy_process_group()

    dist.init_process_group("ringreduce", init_method=init_method + "2", rank=rank,
                            world_size=world_size)
    dist.all_reduce(torch.ones(8))
    ran.append((dist.group.WORLD.group_name, "allreduce", 32, "Float"))
    dist.destroy_process_group()
    return ran

