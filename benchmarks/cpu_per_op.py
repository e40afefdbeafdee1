"""One allreduce size on ringreduce alone, over and over: per rank the median
time per op (with p10 and p90), the CPU it took (user and system, from
getrusage), the context switches, and how much of the tensor sits on 2 MiB
pages. For finding where a large collective's time goes when the cores are
the limit (several ranks on one machine).

    torchrun --standalone --nproc-per-node 4 benchmarks/cpu_per_op.py --mib 64 --iters 60
"""
import argparse
import os
import resource
import time

import torch
import torch.distributed as dist

import torch_ringreduce  # noqa: F401  (registers the backend)


def huge_page_mib(address):
    """AnonHugePages of the mapping that holds `address`, in MiB."""
    inside = False
    with open("/proc/self/smaps") as smaps:
        for line in smaps:
            fields = line.split()
            head = fields[0].split("-")
            if len(head) == 2 and all(c in "0123456789abcdef" for c in head[0] + head[1]):
                begin, end = int(head[0], 16), int(head[1], 16)
                inside = begin <= address < end
            elif inside and fields[0] == "AnonHugePages:":
                return int(fields[1]) // 1024
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--mib", type=int, default=64, help="float32 tensor size in MiB")
    p.add_argument("--iters", type=int, default=60)
    p.add_argument("--warmup", type=int, default=5)
    args = p.parse_args()
    dist.init_process_group("ringreduce")
    rank = dist.get_rank()
    x = torch.ones(args.mib << 18)
    for _ in range(args.warmup):
        dist.all_reduce(x)
    dist.barrier()
    before, start = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    samples = []
    for _ in range(args.iters):
        t = time.perf_counter()
        dist.all_reduce(x)
        samples.append(time.perf_counter() - t)
    after = resource.getrusage(resource.RUSAGE_SELF)
    samples.sort()
    n = len(samples)
    per_op = lambda a, b: (b - a) / args.iters * 1e3  # noqa: E731
    line = (f"rank {rank}: {args.mib} MiB, huge pages {huge_page_mib(x.data_ptr())} MiB, "
            f"median {samples[n // 2] * 1e3:.1f} ms (p10 {samples[n // 10] * 1e3:.1f}, "
            f"p90 {samples[n * 9 // 10] * 1e3:.1f}), per op user "
            f"{per_op(before.ru_utime, after.ru_utime):.2f} ms, sys "
            f"{per_op(before.ru_stime, after.ru_stime):.2f} ms; context switches "
            f"{after.ru_nvcsw - before.ru_nvcsw} voluntary, "
            f"{after.ru_nivcsw - before.ru_nivcsw} involuntary")
    lines = [None] * dist.get_world_size()
    dist.all_gather_object(lines, line)
    if rank == 0:
        print("\n".join(lines), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
