"""A pipeline-parallel training step (torch.distributed.pipelining) over
ringreduce and over a gloo group of the same ranks, the two taking turns.

Each rank is one stage of an MLP (256 wide, 8 microbatches of 8 rows: 8 KiB
per microbatch at a stage boundary; --width and --rows change them); a
step's stage boundaries are batch_isend_irecv between neighbouring ranks.
Per schedule, the last stage prints each backend's step time (p50, p90 over
the timed steps; every step starts after a gloo barrier).

    OMP_NUM_THREADS=1 UCX_NET_DEVICES=lo torchrun --standalone --nproc-per-node 2 \\
        benchmarks/pipeline_step.py
"""
import argparse
import os
import statistics
import time

import torch
import torch.distributed as dist
from torch.distributed import pipelining

import torch_ringreduce  # noqa: F401  registers the backend


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--schedules", default="ScheduleGPipe,Schedule1F1B")
    parser.add_argument("--rounds", type=int, default=6, help="turns per backend")
    parser.add_argument("--steps", type=int, default=25, help="steps per turn")
    parser.add_argument("--warmup", type=int, default=10, help="first steps per backend not counted")
    parser.add_argument("--width", type=int, default=256, help="the MLP's width")
    parser.add_argument("--rows", type=int, default=8,
                        help="rows per microbatch: a stage boundary moves rows x width x 4 bytes")
    return parser.parse_args()


def stage_schedule(rank, world, group, schedule_name, width=256):
    torch.manual_seed(rank)
    layers = [torch.nn.Linear(64 if rank == 0 else width, width), torch.nn.Tanh()]
    if rank == world - 1:
        layers.append(torch.nn.Linear(width, 1))
    stage = pipelining.PipelineStage(torch.nn.Sequential(*layers), rank, world,
                                     torch.device("cpu"), group=group)
    return getattr(pipelining, schedule_name)(stage, n_microbatches=8,
                                              loss_fn=torch.nn.functional.mse_loss)


def main():
    args = parse_args()
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dist.init_process_group("ringreduce")
    groups = {"ringreduce": dist.group.WORLD, "gloo": dist.new_group(backend="gloo")}
    x, y = torch.randn(8 * args.rows, 64), torch.randn(8 * args.rows, 1)
    for schedule_name in args.schedules.split(","):
        schedules = {name: stage_schedule(rank, world, group, schedule_name, args.width)
                     for name, group in groups.items()}
        times = {name: [] for name in groups}
        for _ in range(args.rounds):
            for name, schedule in schedules.items():
                for _ in range(args.steps):
                    dist.barrier(group=groups["gloo"])
                    start = time.perf_counter()
                    if rank == 0:
                        schedule.step(x)
                    elif rank == world - 1:
                        schedule.step(target=y, losses=[])
                    else:
                        schedule.step()
                    times[name].append((time.perf_counter() - start) * 1e3)
        if rank == world - 1:
            cells = []
            for name, values in times.items():
                counted = sorted(values[args.warmup:])
                cells.append(f"{name} p50 {statistics.median(counted):.2f} ms "
                             f"p90 {counted[int(0.9 * len(counted))]:.2f}")
            print(f"{schedule_name}, world {world}: " + "  ".join(cells), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
