"""DeepSpeed ZeRO training inside each rank, one backend per world: DeepSpeed
takes torch.distributed's default group as its own (deepspeed.comm keeps it
for the process), so the ranks start the group and DeepSpeed finds it."""
import logging
import os
import warnings

import torch
import torch.distributed as dist


def small_model():
    """The same weights on every rank."""
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(), torch.nn.Linear(64, 32),
                               torch.nn.ReLU(), torch.nn.Linear(32, 1))


def ringreduce_collectives():
    """Collectives run so far by every ringreduce group of this process."""
    cpu = torch.device("cpu")
    return sum(pg._get_backend(cpu)._get_sequence_number_for_group()
               for pg in dist.distributed_c10d._world.pg_map
               if dist.get_backend(pg) == "ringreduce")


def zero_training(rank, world, init_method, backend, stage, steps):
    """`steps` ZeRO-`stage` steps of SGD on each rank's own batches; returns
    the losses, the whole final parameters (gathered, for stage 3) and how
    many collectives ringreduce ran for them (0 over gloo)."""
    warnings.filterwarnings("ignore")
    dist.init_process_group(backend, init_method=init_method, rank=rank, world_size=world)
    os.environ["LOCAL_RANK"] = str(rank)  # as torchrun sets it: DeepSpeed asks for it
    import deepspeed

    deepspeed.utils.logger.setLevel(logging.WARNING)
    model = small_model()
    config = {"train_micro_batch_size_per_gpu": 8, "zero_optimization": {"stage": stage},
              "zero_allow_untested_optimizer": True, "steps_per_print": 1 << 30}
    engine, *_ = deepspeed.initialize(model=model, config=config,
                                      optimizer=torch.optim.SGD(model.parameters(), lr=0.05))
    first = ringreduce_collectives()
    gen = torch.Generator().manual_seed(100 + rank)
    losses = []
    for _ in range(steps):
        x = torch.randn(8, 16, generator=gen)
        loss = (engine(x) - x[:, :1]).pow(2).mean()
        engine.backward(loss)
        engine.step()
        losses.append(loss.item())
    # What DeepSpeed issued went through ringreduce (ZeRO-1 and 2 on a group
    # DeepSpeed makes, ZeRO-3 on the default one).
    collectives = ringreduce_collectives() - first
    params = list(engine.module.parameters())
    with deepspeed.zero.GatheredParameters(params, enabled=stage == 3):
        final = [p.detach().clone() for p in params]
    dist.barrier()
    dist.destroy_process_group()
    return {"losses": losses, "params": final, "collectives": collectives}
