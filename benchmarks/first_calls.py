"""A fresh group's first calls: what a short benchmark or the first steps of a
training run see, call by call, before anything has warmed up.

    OMP_NUM_THREADS=1 UCX_NET_DEVICES=lo torchrun --standalone --nproc-per-node 2 \\
        benchmarks/first_calls.py [--sizes 64,4096,65536] [--calls 600] [--compute-ms 2]

For each size a new ringreduce group (a new host channel, nothing of it
touched yet) runs `--calls` synchronous allreduces, each after `--compute-ms`
of busy CPU work with its tensor written just before it; per window of calls
it prints the slowest rank's p50 and p90 and the calling thread's minor page
faults per call (the more of the ranks). A gloo group's calls, taking turns
with ringreduce's window by window, give the same-run reference.
"""
import argparse
import os
import resource
import time

import torch
import torch.distributed as dist

import torch_ringreduce  # noqa: F401  (registers the backend)
from build_info import loaded_build


def busy(seconds):
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def minor_faults():
    return resource.getrusage(resource.RUSAGE_THREAD).ru_minflt


def timed_calls(group, tensor, calls, compute_s):
    """Per call: (seconds, minor faults) on this rank."""
    out = []
    for _ in range(calls):
        tensor.fill_(1.0)
        busy(compute_s)
        faults = minor_faults()
        start = time.perf_counter()
        dist.all_reduce(tensor, group=group)
        out.append((time.perf_counter() - start, minor_faults() - faults))
    return out


def slowest(values, reference, op):
    t = torch.tensor(values, dtype=torch.float64)
    dist.all_reduce(t, op=op, group=reference)
    return t


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="64,4096,65536", help="bytes, comma separated")
    parser.add_argument("--calls", type=int, default=600)
    parser.add_argument("--window", type=int, default=100, help="calls per printed row")
    parser.add_argument("--compute-ms", type=float, default=2.0)
    args = parser.parse_args()
    dist.init_process_group("ringreduce")
    rank = dist.get_rank()
    reference = dist.new_group(backend="gloo")
    compute_s = args.compute_ms / 1e3
    if rank == 0:
        print(f"# {loaded_build()}")
        print(f"# world {dist.get_world_size()}, torch {torch.__version__}, "
              f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}, "
              f"{args.compute_ms} ms of compute before each call; per call the slowest rank, us")
        print("#   bytes |    calls | ringreduce p50    p90 faults/call |  gloo p50    p90")
    for size in (int(s) for s in args.sizes.split(",")):
        group = dist.new_group(backend="ringreduce")  # its channel is made at its first call
        tensor = torch.ones(max(1, size // 4))
        for first in range(0, args.calls, args.window):
            ring = timed_calls(group, tensor, args.window, compute_s)
            gloo = timed_calls(reference, tensor, args.window, compute_s)
            seconds = slowest([s for s, _ in ring], reference, dist.ReduceOp.MAX) * 1e6
            faults = slowest([float(f) for _, f in ring], reference, dist.ReduceOp.MAX)
            gloo_us = slowest([s for s, _ in gloo], reference, dist.ReduceOp.MAX) * 1e6
            if rank == 0:
                q = torch.tensor([0.5, 0.9], dtype=torch.float64)
                r50, r90 = torch.quantile(seconds, q).tolist()
                g50, g90 = torch.quantile(gloo_us, q).tolist()
                print(f"{size:9} | {first:4}-{first + args.window - 1:<4} | "
                      f"{r50:14.1f} {r90:6.1f} {faults.mean().item():11.2f} | "
                      f"{g50:8.1f} {g90:6.1f}", flush=True)
        dist.destroy_process_group(group)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
