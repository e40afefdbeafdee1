"""Steady-state time per op of a plain loop of allreduces (no per-op
timing, no barriers: ranks pipeline one op into the next as a training loop
does), ringreduce against gloo in the same processes.

    torchrun --standalone --nproc-per-node 4 benchmarks/loop_rate.py [--bytes 4] [--chunks 12]

Each backend runs `--chunks` chunks of `--ops` ops, alternating backends
chunk by chunk; the figure is the median of the last half of the chunks (the
first few hundred ops after start-up run 2-5x slower with either backend on
a loaded or oversubscribed machine). Rank 0 prints us per op per chunk.
"""
import argparse
import statistics
import time

import torch
import torch.distributed as dist

import torch_ringreduce  # noqa: F401  registers "ringreduce"


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bytes", type=int, default=4)
    p.add_argument("--chunks", type=int, default=12)
    p.add_argument("--ops", type=int, default=50)
    args = p.parse_args()
    dist.init_process_group("ringreduce")
    gloo = dist.new_group(backend="gloo")
    tensor = torch.ones(max(1, args.bytes // 4))
    times = {"ringreduce": [], "gloo": []}
    for _ in range(args.chunks):
        for name, group in (("ringreduce", None), ("gloo", gloo)):
            dist.barrier(group=gloo)
            start = time.perf_counter()
            for _ in range(args.ops):
                dist.all_reduce(tensor, group=group)
            times[name].append((time.perf_counter() - start) / args.ops * 1e6)
    if dist.get_rank() == 0:
        steady = {name: statistics.median(t[len(t) // 2:]) for name, t in times.items()}
        print(f"# all_reduce {args.bytes} B, world {dist.get_world_size()}, chunks of "
              f"{args.ops} ops; us per op")
        for name, t in times.items():
            print(f"{name:>10} | " + " ".join(f"{x:.0f}" for x in t) + f" | steady {steady[name]:.1f}")
        print(f"# steady: ringreduce {steady['ringreduce']:.1f} us, gloo {steady['gloo']:.1f} us: "
              f"{steady['gloo'] / steady['ringreduce']:.2f}x gloo", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
