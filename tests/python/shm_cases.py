"""Rank bodies for test_shared_memory_use.py (run by multiproc)."""


def channel_segments():
    """The host channel segments this process maps (one per group that has
    opened its channel): anonymous files, named in /proc/self/maps."""
    with open("/proc/self/maps") as maps:
        names = {line.split()[-2] if line.rstrip().endswith("(deleted)") else line.split()[-1]
                 for line in maps if "memfd:ringreduce-" in line}
    return len(names)


def channel_opened_at_first_cpu_collective(rank, world_size, init_method):
    import torch
    import torch.distributed as dist

    dist.init_process_group("ringreduce", init_method=init_method, rank=rank,
                            world_size=world_size)
    subgroups = [dist.new_group(list(range(world_size))) for _ in range(8)]
    seen = {"after init and 8 subgroups": channel_segments()}
    t = torch.ones(16)
    dist.all_reduce(t)
    seen["after the default group's allreduce"] = channel_segments()
    for group in subgroups[:2]:
        dist.all_reduce(t, group=group)
    seen["after two subgroups' allreduces"] = channel_segments()
    dist.all_reduce(t, group=subgroups[0])
    seen["after a second allreduce there"] = channel_segments()
    seen["result"] = t.tolist()
    dist.destroy_process_group()
    return seen


class _Numbers(object):
    """64 samples of 8 features, deterministic."""

    def __len__(self):
        return 64

    def __getitem__(self, index):
        import torch

        g = torch.Generator().manual_seed(index)
        return torch.randn(8, generator=g), torch.randn(1, generator=g)


def mesh_training(rank, world_size, init_method, backend):
    """A 2 x 2 DeviceMesh (dp x tp on CPU), batches from a DataLoader whose
    workers pass them through shared memory: gradients averaged over the dp
    dimension, the loss over tp. Returns the final weights."""
    import torch
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh

    dist.init_process_group(backend, init_method=init_method, rank=rank,
                            world_size=world_size)
    mesh = init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp"))
    dp, tp = mesh.get_group("dp"), mesh.get_group("tp")
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    dp_rank = mesh.get_local_rank("dp")
    # multiproc's ranks are daemonic (killed with the test), and Python then
    # refuses them children: the DataLoader's workers end with their
    # iterator, so the rank may have them.
    import multiprocessing
    multiprocessing.current_process()._config["daemon"] = False
    samples = torch.utils.data.Subset(_Numbers(), list(range(dp_rank, 64, 2)))
    # Workers forked from the rank, as under torchrun. This rank was started
    # by multiproc's forkserver, which made that its default start method, and
    # forkserver workers each import torch afresh: 11-17 s an epoch here.
    loader = torch.utils.data.DataLoader(samples, batch_size=4, num_workers=2,
                                         multiprocessing_context="fork")
    losses = []
    for epoch in range(2):
        for x, y in loader:
            optimizer.zero_grad()
            loss = torch.nn.functional.mse_loss(model(x), y)
            loss.backward()
            for p in model.parameters():
                dist.all_reduce(p.grad, group=dp)
                p.grad /= 2
            seen = loss.detach().clone()
            dist.all_reduce(seen, group=tp)
            losses.append(seen.item())
            optimizer.step()
    dist.barrier()
    weights = [p.detach().clone() for p in model.parameters()]
    dist.destroy_process_group()
    return {"weights": weights, "losses": losses}


def ucx_receive_chunks(rank, world_size, init_method):
    """The largest of UCX's shared-memory segments this rank maps once its
    group has moved a message over UCX (its receive buffers come in chunks)."""
    import torch
    import torch.distributed as dist

    dist.init_process_group("ringreduce", init_method=init_method, rank=rank,
                            world_size=world_size)
    t = torch.ones(2 << 20)  # 8 MiB: past the host channel, through UCX
    dist.all_reduce(t)
    sizes = {}
    with open("/proc/self/maps") as maps:
        for line in maps:
            fields = line.split()
            if len(fields) > 5 and "/dev/shm/ucx_shm_posix_" in fields[5]:
                start, end = (int(x, 16) for x in fields[0].split("-"))
                sizes[fields[5]] = sizes.get(fields[5], 0) + end - start
    dist.destroy_process_group()
    return {"largest": max(sizes.values()) if sizes else 0, "sum": t[0].item()}
