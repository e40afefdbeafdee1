"""What a wait costs the CPU when one rank is late: rank 1 computes D ms before each small
allreduce and rank 0 does not, so rank 0 waits D ms a call. Per D and backend, rank 0's CPU per
call (its calling thread's run time from /proc/self/task/<tid>/schedstat, and the whole
process's from getrusage: the workers too), its voluntary context switches per call, and the
late rank's call time at p50 and p90 (what it pays for the waiter's sleep: the wake-up).

    OMP_NUM_THREADS=1 UCX_NET_DEVICES=lo torchrun --standalone --nproc-per-node 2 \\
        benchmarks/late_peer.py [--late-ms 0,0.5,2,5] [--bytes 4096] [--iters 300]

A waiter that spins the whole D holds a core that other processes (DataLoader workers, a
neighbour's job) could have; one that sleeps at once makes the late rank pay the wake-up. The
groups (ringreduce, gloo; --backends) take turns in the same processes, block by block.
"""
import argparse
import os
import resource
import threading
import time

import torch
import torch.distributed as dist

import torch_ringreduce  # noqa: F401  registers "ringreduce"


def thread_cpu_ns():
    """Run time of the calling thread so far, ns (finer than getrusage's ticks)."""
    with open(f"/proc/self/task/{threading.get_native_id()}/schedstat") as stat:
        return int(stat.read().split()[0])


def process_cpu_s():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def compute(seconds):
    """The late rank's work: a busy loop (holds its core, as a forward pass would)."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def block(group, tensor, late_s, iters, rank):
    """One block of `iters` calls: rank 0's CPU figures, and every rank's call times."""
    dist.barrier(group=group)
    thread0, process0 = thread_cpu_ns(), process_cpu_s()
    switches0 = resource.getrusage(resource.RUSAGE_THREAD).ru_nvcsw
    computed = 0.0
    calls = []
    for _ in range(iters):
        if rank == 1 and late_s > 0:
            start = time.perf_counter()
            compute(late_s)
            computed += time.perf_counter() - start
        tensor.fill_(1.0)
        start = time.perf_counter()
        dist.all_reduce(tensor, group=group)
        calls.append(time.perf_counter() - start)
    thread_us = (thread_cpu_ns() - thread0) / 1e3 - computed * 1e6
    process_us = (process_cpu_s() - process0 - computed) * 1e6
    switches = resource.getrusage(resource.RUSAGE_THREAD).ru_nvcsw - switches0
    calls.sort()
    return [thread_us / iters, process_us / iters, switches / iters,
            calls[len(calls) // 2] * 1e6, calls[int(len(calls) * 0.9)] * 1e6]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--late-ms", default="0,0.5,2,5",
                        help="comma-separated: rank 1's compute before each call, ms")
    parser.add_argument("--bytes", type=int, default=4096, help="float32 tensor size")
    parser.add_argument("--iters", type=int, default=300, help="calls per block")
    parser.add_argument("--rounds", type=int, default=2, help="blocks per backend and D")
    parser.add_argument("--backends", default="ringreduce,gloo")
    args = parser.parse_args()

    dist.init_process_group("ringreduce")
    rank = dist.get_rank()
    if dist.get_world_size() != 2:
        raise SystemExit("late_peer.py: run it with --nproc-per-node 2")
    backends = args.backends.split(",")
    groups = {name: dist.new_group(backend=name) for name in backends}
    tensor = torch.ones(max(1, args.bytes // 4))
    for group in groups.values():
        for _ in range(50):
            dist.all_reduce(tensor, group=group)
    if rank == 0:
        print(f"# world 2, {args.bytes} B float32 allreduce, rank 1 computes D ms before each "
              f"call; {args.iters} calls a block, {args.rounds} blocks per cell, medians of the "
              f"blocks; torch {torch.__version__}")
        print(f"# {'D ms':>5} {'backend':>10} | rank 0 per call: {'thread CPU us':>13} "
              f"{'process CPU us':>14} {'sleeps':>6} | rank 1 call {'p50 us':>7} {'p90 us':>7}")
    for late_ms in [float(value) for value in args.late_ms.split(",")]:
        rows = {name: [] for name in backends}
        for _ in range(args.rounds):
            for name in backends:
                rows[name].append(block(groups[name], tensor, late_ms / 1e3, args.iters, rank))
        for name in backends:
            mine = torch.tensor(rows[name], dtype=torch.float64).median(dim=0).values
            both = [torch.zeros_like(mine) for _ in range(2)]
            dist.all_gather(both, mine)
            if rank == 0:
                waiter, late = both[0], both[1]
                print(f"  {late_ms:5.2f} {name:>10} | {'':17}{waiter[0]:13.1f} {waiter[1]:14.1f} "
                      f"{waiter[2]:6.2f} | {'':11}{late[3]:7.1f} {late[4]:7.1f}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main()
