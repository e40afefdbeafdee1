"""torch.distributed.pipelining (PiPPy's schedules, a pipeline's stage
boundaries as isend/irecv between neighbouring ranks) trained once per
backend on the same model, batches and seeds."""
import torch
import torch.distributed as dist


def _stage_module(stage, stages):
    """Stage `stage` of a small MLP cut into `stages` pieces, the same weights
    on every run."""
    torch.manual_seed(1000 + stage)
    width = 24
    layers = [torch.nn.Linear(8 if stage == 0 else width, width), torch.nn.Tanh()]
    if stage == stages - 1:
        layers.append(torch.nn.Linear(width, 1))
    return torch.nn.Sequential(*layers).double()


def _train(group, rank, world, schedule_name, steps):
    from torch.distributed import pipelining

    module = _stage_module(rank, world)
    stage = pipelining.PipelineStage(module, rank, world, torch.device("cpu"), group=group)
    loss_fn = torch.nn.functional.mse_loss
    schedule = getattr(pipelining, schedule_name)(stage, n_microbatches=4, loss_fn=loss_fn)
    opt = torch.optim.SGD(module.parameters(), lr=0.05)
    # One batch, every step: its loss falls as the stages learn it.
    x = torch.randn(16, 8, generator=torch.Generator().manual_seed(7), dtype=torch.float64)
    y = x.sum(dim=1, keepdim=True).sin()
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        step_losses = []
        if rank == 0:
            schedule.step(x)
        elif rank == world - 1:
            schedule.step(target=y, losses=step_losses)
        else:
            schedule.step()
        opt.step()
        losses.append([l.item() for l in step_losses])
    return {"losses": losses, "params": [p.detach().clone() for p in module.parameters()]}


def pipelined_both(rank, world, init_method, schedule_name, steps):
    # One world, ringreduce's, and a gloo group of the same ranks beside it
    # (a second default group on the same FileStore would find the first
    # one's gloo addresses there).
    dist.init_process_group("ringreduce", init_method=init_method, rank=rank, world_size=world)
    gloo = dist.new_group(backend="gloo")
    ring = _train(dist.group.WORLD, rank, world, schedule_name, steps)
    theirs = _train(gloo, rank, world, schedule_name, steps)
    dist.destroy_process_group()
    return {"ring": ring, "gloo": theirs}
