"""nccl-tests style allreduce benchmark: ringreduce against gloo in the same run.

    torchrun --standalone --nproc-per-node 2 benchmarks/allreduce.py

Both backends run in the same processes on the same tensors. Time per size is
the median over iterations of the slowest rank (max across ranks). busbw =
algbw * 2(n-1)/n, as nccl-tests reports for allreduce. ratio = gloo time /
ringreduce time (above 1: ringreduce is faster).
"""
import argparse
import statistics
import time

import torch
import torch.distributed as dist

import torch_ringreduce  # noqa: F401  (registers "ringreduce")

DTYPES = {"float32": torch.float32, "float64": torch.float64, "float16": torch.float16,
          "bfloat16": torch.bfloat16, "int32": torch.int32, "int64": torch.int64}


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--min-bytes", type=int, default=4)
    p.add_argument("--max-bytes", type=int, default=64 << 20)
    p.add_argument("--step-factor", type=int, default=4)
    p.add_argument("--dtype", choices=sorted(DTYPES), default="float32")
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--iters", type=int, default=20,
                   help="timed iterations per size (fewer for the largest sizes)")
    return p.parse_args()


def time_allreduce(tensor, group, warmup, iters):
    for _ in range(warmup):
        dist.all_reduce(tensor, group=group)
    samples = []
    for _ in range(iters):
        start = time.perf_counter()
        dist.all_reduce(tensor, group=group)
        samples.append(time.perf_counter() - start)
    local = torch.tensor([statistics.median(samples)], dtype=torch.float64)
    # The slowest rank's median is the collective's time.
    dist.all_reduce(local, op=dist.ReduceOp.MAX, group=group)
    return local.item()


def main():
    args = parse_args()
    dist.init_process_group("ringreduce")
    world = dist.get_world_size()
    rank = dist.get_rank()
    gloo = dist.new_group(backend="gloo")
    ring = dist.group.WORLD
    dtype = DTYPES[args.dtype]
    esize = torch.empty((), dtype=dtype).element_size()
    bus_factor = 2 * (world - 1) / world

    if rank == 0:
        print(f"# allreduce SUM, {args.dtype}, world {world}, median of {args.iters} iterations "
              f"after {args.warmup} warm-up; times in us, bandwidths in GB/s")
        print(f"# {'bytes':>10} {'count':>10} | {'ring us':>9} {'algbw':>7} {'busbw':>7} | "
              f"{'gloo us':>9} {'algbw':>7} {'busbw':>7} | {'ratio':>6}")
    size = max(args.min_bytes, esize)
    while size <= args.max_bytes:
        count = size // esize
        tensor = torch.ones(count, dtype=dtype)
        iters = max(3, min(args.iters, int(args.iters * (4 << 20) / max(size, 1)) or 3))
        ring_t = time_allreduce(tensor, ring, args.warmup, iters)
        gloo_t = time_allreduce(tensor, gloo, args.warmup, iters)
        nbytes = count * esize
        if rank == 0:
            ring_bw, gloo_bw = nbytes / ring_t / 1e9, nbytes / gloo_t / 1e9
            print(f"  {nbytes:>10} {count:>10} | {ring_t * 1e6:>9.1f} {ring_bw:>7.2f} "
                  f"{ring_bw * bus_factor:>7.2f} | {gloo_t * 1e6:>9.1f} {gloo_bw:>7.2f} "
                  f"{gloo_bw * bus_factor:>7.2f} | {gloo_t / ring_t:>6.2f}", flush=True)
        size *= args.step_factor
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
