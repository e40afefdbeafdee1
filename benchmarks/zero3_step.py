"""DeepSpeed ZeRO-3 training steps of a small MLP on the CPU, ringreduce
against gloo (issue 53, step-level figures).

    OMP_NUM_THREADS=1 UCX_NET_DEVICES=lo python3 benchmarks/zero3_step.py \
        [--world 2] [--rounds 4] [--layers 4] [--width 1024] [--batch 32] [--steps 30] \
        [--warmup 3] [--backends gloo,ringreduce,ucx] [--quick]

needs deepspeed (`pip install --no-deps deepspeed` and its light dependencies,
see shared notes ANCHORS.md); DS_ACCELERATOR=cpu is set for the ranks. It
launches itself: one world per backend and round, the backends alternating
(gloo, ringreduce, then ringreduce, gloo, ...), because DeepSpeed takes its
groups from torch.distributed's default group, so one process group backend
per process ("ucx": ringreduce with its host channel off,
RINGREDUCE_SHM_BYTES=0, UCX and cma alone, the path before issue 53). In
each, torch.distributed starts with that backend and
`deepspeed.initialize` (ZeRO stage 3, the MLP, torch's SGD) uses it for
every collective: parameters all-gathered before each module's forward and
backward (all_gather_into_tensor), gradients reduce-scattered
(reduce_scatter_tensor), broadcasts, barriers and an all_reduce per step.
Every rank also trains an unsharded copy with no communication ("none", the
compute), taking turns step by step with the ZeRO-3 engine. A step is
forward, backward and the optimizer's step; per step the slowest rank's time
counts; steps of every round are pooled. Printed: p50, p90 and mean per
configuration, "exposed" (p50 minus "none"'s), ringreduce / gloo (and ucx /
gloo) at p50 and p90 and for exposed. `--quick` is a smoke run: its figures mean nothing.
"""
import argparse
import copy
import importlib.util
import json
import os
import sys
import tempfile
import time
import warnings

import torch

from anchor_harness import remove_deepspeed_segments
from rank_processes import free_port, start_ranks, wait_for_ranks
from step_timing import (add_step_arguments, build_mlp, parsed_step_arguments, print_table,
                         slowest_per_step)


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--world", type=int, default=2)
    p.add_argument("--rounds", type=int, default=4, help="worlds per backend, alternating")
    add_step_arguments(p)
    p.add_argument("--backends", default="gloo,ringreduce")
    p.add_argument("--child", help=argparse.SUPPRESS)  # backend,output file
    args = parsed_step_arguments(p)
    if args.quick:
        args.rounds = 1
    return args


def launch(args):
    if importlib.util.find_spec("deepspeed") is None:
        print("# DeepSpeed skipped: not installed (pip install --no-deps deepspeed and its "
              "light dependencies)", flush=True)
        return 0
    steps = {"none": []}
    backends = args.backends.split(",")
    with tempfile.TemporaryDirectory() as folder:
        for r in range(args.rounds):
            for backend in (backends if r % 2 == 0 else backends[::-1]):
                output = os.path.join(folder, f"{backend}-{r}.json")
                env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()),
                           WORLD_SIZE=str(args.world), LOCAL_WORLD_SIZE=str(args.world),
                           DS_ACCELERATOR="cpu")
                env.setdefault("OMP_NUM_THREADS", "1")  # as torchrun leaves it
                if backend == "ucx":
                    env["RINGREDUCE_SHM_BYTES"] = "0"
                command = [sys.executable, os.path.abspath(__file__)] + sys.argv[1:] + [
                    "--child", f"{backend},{output}"]
                status = wait_for_ranks(start_ranks(command, env, args.world), 1800)
                remove_deepspeed_segments()  # its shm op's, should the engine have made them
                if status:
                    print(f"# {backend} world of round {r} failed ({status})", flush=True)
                    return status
                with open(output) as f:
                    for name, samples in json.load(f).items():
                        steps.setdefault(name, []).extend(samples)
    print_table(f"# DeepSpeed ZeRO-3 step, MLP {args.layers}x{args.width}, batch {args.batch}, "
                f"world {args.world}, torch {torch.__version__}; per step the slowest rank, "
                f"{args.rounds} world(s) per backend alternating, ZeRO-3 and the compute "
                f"taking turns in each", steps, compute="none")
    return 0


def child(args):
    import logging
    import torch.distributed as dist
    import torch_ringreduce  # noqa: F401  registers "ringreduce"

    warnings.filterwarnings("ignore")
    backend, output = args.child.split(",", 1)
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    # DeepSpeed finds it started and uses it.
    dist.init_process_group("ringreduce" if backend == "ucx" else backend)
    import deepspeed
    deepspeed.utils.logger.setLevel(logging.WARNING)
    rank = dist.get_rank()
    side = dist.new_group(backend="gloo")  # the barriers between steps and the final maxima
    base = build_mlp(args.layers, args.width)
    plain = copy.deepcopy(base)
    plain_optimizer = torch.optim.SGD(plain.parameters(), lr=1e-4)
    sharded = copy.deepcopy(base)
    config = {"train_micro_batch_size_per_gpu": args.batch, "zero_optimization": {"stage": 3},
              "zero_allow_untested_optimizer": True, "steps_per_print": 1 << 30}
    engine, *_ = deepspeed.initialize(model=sharded, config=config,
                                      optimizer=torch.optim.SGD(sharded.parameters(), lr=1e-4))

    def plain_step(batch):
        plain_optimizer.zero_grad(set_to_none=True)
        plain(batch).square().mean().backward()
        plain_optimizer.step()

    def zero3_step(batch):
        engine.backward(engine(batch).square().mean())
        engine.step()

    batch = torch.randn(args.batch, args.width, generator=torch.Generator().manual_seed(rank))
    local = {"none": [], backend: []}
    for i in range(args.warmup + args.steps):
        for name, step in (("none", plain_step), (backend, zero3_step)):
            dist.barrier(group=side)
            start = time.perf_counter()
            step(batch)
            if i >= args.warmup:
                local[name].append(time.perf_counter() - start)
    steps = {name: slowest_per_step(samples, side) for name, samples in local.items()}
    if rank == 0:
        with open(output, "w") as f:
            json.dump(steps, f)
    dist.barrier(group=side)
    dist.destroy_process_group()


if __name__ == "__main__":
    arguments = parse_args()
    sys.exit(child(arguments) if arguments.child else launch(arguments))
