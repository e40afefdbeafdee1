"""Where this VM has put its cores right now, as shared-memory collectives feel it.

    python3 benchmarks/placement_probe.py [--bytes 65536] [--iters 400]

Two processes, pinned to two cores: one writes a shared buffer (torch's
copy_), the other copies it out, in turns, each writing the lines the other
read the turn before, as a shared-memory channel without moving turns would
(docs/TUNING.md, "Writes into the host channel"). Prints the writer's median
copy beside the same copy into a private buffer, in us. On the 2-vCPU EPYC
VM, 64 KiB took 1.3 us, 7-10 us ("cores close") or 28 us ("cores apart"),
the state changing within minutes; Open MPI's and DeepSpeed's figures move
with it. The benchmarks print it before and after a run, so that two runs
can be told apart: compare figures only between runs whose probes agree.
"""
import argparse
import multiprocessing as mp
import os
import statistics
import time


def _pin(core):
    try:
        os.sched_setaffinity(0, {core % os.cpu_count()})
    except (AttributeError, OSError):
        pass


def _reader(shared, flag, iters, core):
    import torch

    _pin(core)
    out = torch.empty_like(shared[0])
    for i in range(1, iters + 1):
        while flag[0].item() < 2 * i - 1:
            pass
        out.copy_(shared[i & 1])
        flag[0] = 2 * i


def measure(nbytes=65536, iters=400):
    """(writer's median us into lines the peer just read, the same into a private buffer)."""
    import torch

    torch.set_num_threads(1)
    n = max(1, nbytes // 4)
    shared = torch.zeros(2, n).share_memory_()
    flag = torch.zeros(1, dtype=torch.int64).share_memory_()
    ctx = mp.get_context("fork")
    reader = ctx.Process(target=_reader, args=(shared, flag, iters, 1))
    reader.start()
    _pin(0)
    source = torch.rand(n)
    times = []
    for i in range(1, iters + 1):
        while flag[0].item() < 2 * i - 2:
            pass
        source.add_(1)  # written just before, as a rank's input is
        start = time.perf_counter()
        shared[i & 1].copy_(source)
        times.append(time.perf_counter() - start)
        flag[0] = 2 * i - 1
    reader.join(30)
    private = torch.empty(n)
    alone = []
    for _ in range(iters):
        source.add_(1)
        start = time.perf_counter()
        private.copy_(source)
        alone.append(time.perf_counter() - start)
    return statistics.median(times[iters // 10:]) * 1e6, statistics.median(alone) * 1e6


def describe(nbytes=65536):
    """One line for a benchmark's output."""
    shared, private = measure(nbytes)
    return (f"placement probe: {nbytes // 1024} KiB into lines a peer just read "
            f"{shared:.1f} us (private {private:.1f} us)")


def run_probe(python, nbytes=65536):
    """The probe's line from a fresh process (safe beside MPI's), or why not."""
    import subprocess

    try:
        done = subprocess.run([python, os.path.abspath(__file__), "--bytes", str(nbytes)],
                              capture_output=True, text=True, timeout=120)
        lines = done.stdout.strip().splitlines()
        return lines[-1] if done.returncode == 0 and lines else f"placement probe failed: {done.stderr.strip()[-200:]}"
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"placement probe failed: {e}"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bytes", type=int, default=65536)
    parser.add_argument("--iters", type=int, default=400)
    args = parser.parse_args()
    shared, private = measure(args.bytes, args.iters)
    print(f"placement probe: {args.bytes // 1024} KiB into lines a peer just read "
          f"{shared:.1f} us (private {private:.1f} us)")


if __name__ == "__main__":
    main()
