"""Small allreduces while K other processes keep the cores busy, call by call, with how often the
calling thread slept and was preempted: the host channel (the default group, "channel") against
a group without it ("ucx": RINGREDUCE_SHM_BYTES=0, UCX and cma), alternated in the same processes.

    OMP_NUM_THREADS=1 UCX_NET_DEVICES=lo torchrun --standalone --nproc-per-node 2 \\
        benchmarks/preempted_calls.py [--busy 4] [--bytes 4096] [--calls 40] [--rounds 6]

Each call comes after 200 us of compute with its tensor written just before (as in
busy_cores.py); per call the slowest rank's time, and the more of the two ranks' voluntary
(sleeps) and involuntary (preemptions) context switches of the calling thread. A run is mostly in
one of two modes: no rank preempted (tens of us) or one waiting for a time slice (hundreds); the
groups compare within a run, in the same mode (benchmarks/RESULTS.md, "Busy cores").
"""
import argparse
import os
import resource
import subprocess
import sys
import time

import torch
import torch.distributed as dist

import torch_ringreduce  # noqa: F401  registers "ringreduce"

COMPUTE_S = 200e-6


def switches():
    """(voluntary, involuntary) context switches of this thread so far."""
    usage = resource.getrusage(resource.RUSAGE_THREAD)
    return usage.ru_nvcsw, usage.ru_nivcsw


def timed_call(tensor, group):
    """One allreduce after the compute: (seconds, sleeps, preemptions) of the call."""
    tensor.fill_(1.0)
    end = time.perf_counter() + COMPUTE_S
    while time.perf_counter() < end:
        pass
    vol, invol = switches()
    start = time.perf_counter()
    dist.all_reduce(tensor, group=group)
    seconds = time.perf_counter() - start
    vol_after, invol_after = switches()
    return seconds, vol_after - vol, invol_after - invol


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--busy", type=int, default=4, help="busy processes beside the ranks")
    parser.add_argument("--bytes", type=int, default=4096)
    parser.add_argument("--calls", type=int, default=40, help="calls per group and round")
    parser.add_argument("--rounds", type=int, default=6)
    args = parser.parse_args()
    dist.init_process_group("ringreduce")
    rank = dist.get_rank()
    os.environ["RINGREDUCE_SHM_BYTES"] = "0"
    groups = {"channel": None, "ucx": dist.new_group(backend="ringreduce")}
    del os.environ["RINGREDUCE_SHM_BYTES"]
    gloo = dist.new_group(backend="gloo")
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
            for _ in range(args.busy)] if rank == 0 else []
    try:
        time.sleep(0.5)
        tensor = torch.ones(args.bytes // 4)
        rows = {name: [] for name in groups}
        for round_ in range(args.rounds):
            order = list(groups) if round_ % 2 == 0 else list(reversed(list(groups)))
            for name in order:
                rows[name] += [timed_call(tensor, groups[name]) for _ in range(args.calls)]
    finally:
        for process in busy:
            process.kill()
    for name, calls in rows.items():
        table = torch.tensor(calls, dtype=torch.float64)
        dist.all_reduce(table, op=dist.ReduceOp.MAX, group=gloo)
        if rank == 0:
            seconds = table[:, 0].sort().values
            print(f"{name:8s} p50 {seconds[len(seconds) // 2] * 1e6:7.1f} "
                  f"p90 {seconds[int(len(seconds) * 0.9)] * 1e6:7.1f} us  "
                  f"sleeps/call {table[:, 1].mean():.2f} preemptions/call {table[:, 2].mean():.2f}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
