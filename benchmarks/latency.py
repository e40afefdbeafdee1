"""Latency of small allreduces: ringreduce against gloo in the same processes.

    torchrun --standalone --nproc-per-node 2 benchmarks/latency.py [--sizes 4,256,4096,65536]

Two patterns, each for every size:
- back-to-back: one allreduce right after the other (a tight loop);
- after-compute: 2 ms of busy CPU work before each allreduce, the way the
  first DDP bucket of every step arrives (the group has been idle, its
  threads may have gone to sleep).

Each op is timed on every rank from the call to wait() returning; the figure
for an op is the slowest rank's, as a user waits for the slowest. Backends
are interleaved in rounds so drift of the machine hits both alike. Prints
p50/p90/p99 per backend, the ratio gloo p50 / ringreduce p50, and ("last")
the p50 of the time from the last rank's call to the last rank's return:
the backend's own latency once every rank has arrived, without their skew;
and ("cs") the voluntary context switches per op of the busiest rank: each
is a thread that went to sleep and had to be woken, which costs 5-200 us
depending on the machine, so this count explains latency even when a busy
machine makes the times noisy.

(benchmarks/concurrent_groups.py measures the CPU that idle groups use.)
"""
import argparse
import os
import resource
import time

import torch
import torch.distributed as dist

import torch_ringreduce  # noqa: F401  registers "ringreduce"


def busy(seconds):
    end = time.perf_counter() + seconds
    x = 0
    while time.perf_counter() < end:
        x += 1
    return x


def time_ops(group, tensor, iters, compute_s, switches=None):
    """(start, end) of each op on this rank's clock (CLOCK_MONOTONIC: the
    ranks of one machine share it). Adds to `switches` the process's
    voluntary context switches (a thread went to sleep) during the ops."""
    spans = []
    for _ in range(iters):
        if compute_s:
            busy(compute_s)
        before = resource.getrusage(resource.RUSAGE_SELF).ru_nvcsw
        start = time.perf_counter()
        dist.all_reduce(tensor, group=group)
        spans.append((start, time.perf_counter()))
        if switches is not None:
            switches.append(resource.getrusage(resource.RUSAGE_SELF).ru_nvcsw - before)
    return spans


def per_op(spans, group):
    """Per op: the slowest rank's time, and the time from the last rank's
    arrival to the last rank's completion (what the backend adds once every
    rank is there, without the ranks' skew)."""
    local = torch.tensor(spans, dtype=torch.float64)
    times = local[:, 1] - local[:, 0]
    dist.all_reduce(times, op=dist.ReduceOp.MAX, group=group)
    last = local.clone()
    dist.all_reduce(last, op=dist.ReduceOp.MAX, group=group)
    return times, last[:, 1] - last[:, 0]


def percentiles(samples):
    ordered = samples.sort().values
    def at(q):
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))].item() * 1e6
    return at(0.5), at(0.9), at(0.99)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="4,256,4096,65536",
                        help="message sizes in bytes, comma separated")
    parser.add_argument("--iters", type=int, default=400, help="ops per size, pattern, backend")
    parser.add_argument("--rounds", type=int, default=4,
                        help="the iterations are split into this many interleaved rounds")
    parser.add_argument("--compute-ms", type=float, default=2.0)
    parser.add_argument("--patterns", default="back-to-back,after-compute")
    args = parser.parse_args()

    dist.init_process_group("ringreduce")
    rank, world = dist.get_rank(), dist.get_world_size()
    groups = {"ringreduce": dist.group.WORLD, "gloo": dist.new_group(backend="gloo")}
    torch.set_num_threads(1)

    if rank == 0:
        print(f"# allreduce latency, float32 SUM, world {world}; per op the slowest rank; "
              f"{args.iters} ops per cell in {args.rounds} interleaved rounds; times in us")
        print(f"# {'pattern':>13} {'bytes':>7} | {'ring p50':>8} {'p90':>7} {'p99':>7} | "
              f"{'gloo p50':>8} {'p90':>7} {'p99':>7} | {'gloo/ring p50':>13} | "
              f"{'ring last':>9} {'gloo last':>9} | {'ring cs':>7} {'gloo cs':>7}")
    per_round = max(1, args.iters // args.rounds)
    for pattern in args.patterns.split(","):
        compute_s = args.compute_ms / 1e3 if pattern == "after-compute" else 0.0
        for size in (int(s) for s in args.sizes.split(",")):
            count = max(1, size // 4)
            tensor = torch.ones(count, dtype=torch.float32)
            samples = {name: [] for name in groups}
            switches = {name: [] for name in groups}
            for name, group in groups.items():  # warm-up
                time_ops(group, tensor, 20, compute_s)
            for _ in range(args.rounds):
                for name, group in groups.items():
                    samples[name] += time_ops(group, tensor, per_round, compute_s, switches[name])
            stats, after_last, sleeps = {}, {}, {}
            for name, spans in samples.items():
                times, arrival = per_op(spans, groups["gloo"])
                stats[name], after_last[name] = percentiles(times), percentiles(arrival)[0]
                mean = torch.tensor([sum(switches[name]) / len(switches[name])])
                dist.all_reduce(mean, op=dist.ReduceOp.MAX, group=groups["gloo"])
                sleeps[name] = mean.item()
            if rank == 0:
                r, g = stats["ringreduce"], stats["gloo"]
                print(f"  {pattern:>13} {size:>7} | {r[0]:8.1f} {r[1]:7.1f} {r[2]:7.1f} | "
                      f"{g[0]:8.1f} {g[1]:7.1f} {g[2]:7.1f} | {g[0] / r[0]:12.1f}x | "
                      f"{after_last['ringreduce']:9.1f} {after_last['gloo']:9.1f} | "
                      f"{sleeps['ringreduce']:7.2f} {sleeps['gloo']:7.2f}", flush=True)

    dist.destroy_process_group()


if __name__ == "__main__":
    main()
