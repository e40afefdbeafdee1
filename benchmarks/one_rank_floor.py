"""The cost of a collective call with no peer: world 1, one process, CPU.

torch's `fake` backend (does nothing) is the floor: torch's Python and
dispatcher. ringreduce minus fake is what our backend adds per call; gloo
is the reference. A 4 KiB allreduce back to back, the median of 7 runs of
5000 calls after 2000 warm-up calls, and x.add_(0) in the same process.

    python3 benchmarks/one_rank_floor.py            # fake, ringreduce, gloo, twice
    python3 benchmarks/one_rank_floor.py ringreduce # one backend
"""
import os
import statistics
import subprocess
import sys
import time


def measure(backend, port):
    import torch
    import torch.distributed as dist

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    if backend == "fake":
        from torch.testing._internal.distributed.fake_pg import FakeStore
        dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=1)
    else:
        import torch_ringreduce  # noqa: F401  (registers the backend)
        dist.init_process_group(backend, rank=0, world_size=1)
    x = torch.ones(1024)
    for _ in range(2000):
        dist.all_reduce(x)
    runs = []
    for _ in range(7):
        start = time.perf_counter_ns()
        for _ in range(5000):
            dist.all_reduce(x)
        runs.append((time.perf_counter_ns() - start) / 5000 / 1000)
    start = time.perf_counter_ns()
    for _ in range(5000):
        x.add_(0)
    kernel = (time.perf_counter_ns() - start) / 5000 / 1000
    print(f"{backend:10s} 4 KiB allreduce, world 1: {statistics.median(runs):6.2f} us/call "
          f"(min {min(runs):.2f}); x.add_(0) {kernel:.2f} us", flush=True)
    dist.destroy_process_group()


def main():
    if len(sys.argv) > 1 and sys.argv[1] != "--child":
        backends = sys.argv[1:]
    else:
        backends = ["fake", "ringreduce", "gloo"] * 2
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        measure(sys.argv[2], int(sys.argv[3]))
        return
    for i, backend in enumerate(backends):  # a fresh process each
        subprocess.run([sys.executable, __file__, "--child", backend, str(29650 + i)],
                       check=True, timeout=300)


if __name__ == "__main__":
    main()
