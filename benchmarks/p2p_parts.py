"""Where a point-to-point exchange's time goes, call by call, beside torch's floor.

    OMP_NUM_THREADS=1 UCX_NET_DEVICES=lo python3 benchmarks/p2p_parts.py \
        [--sizes 64,65536] [--iters 3000] [--backends fake,ringreduce] [--compute-us 0]

A world of 2 (spawned processes). Each rank, back to back: `isend` its tensor
to the other rank, `irecv` the other's, wait for the send, wait for the
receive (a pipeline stage boundary, as collective_anchors.py's `send_recv`),
the input written before each exchange. Printed per backend and size, from
rank 0: the median exchange, and the mean/median of each of the four calls (us);
then the median exchange of the slower rank per iteration. torch's `fake`
backend moves nothing: its calls are torch's Python and dispatcher alone,
so a call's time above the fake's is the backend's, and the two waits above
the fake's are the message's way (and the two ranks' timelines meeting).
The first fifth of the iterations is not counted. `cpu unit` is a fixed
piece of pure Python timed after each exchange: these VMs' cores now and then
run at half their speed for seconds at a time, our processes or none (2026-12-07,
an EPYC Zen 3: the unit at 2.6 us, then 4.4-5.2 us with nothing else running),
so an exchange read beside its unit tells a slow core from a slow backend.
`--compute-us` busies each
rank's core that long before each exchange (untimed), as a pipeline stage
computes before it sends: the peer's message then comes while the receiver
waits, not already there.
"""
import argparse
import os
import statistics
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from build_info import loaded_build

PARTS = ("isend", "irecv", "wait send", "wait recv")


def init(rank, backend, port):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    if backend == "fake":
        from torch.testing._internal.distributed.fake_pg import FakeStore

        dist.init_process_group("fake", rank=rank, world_size=2, store=FakeStore())
        return
    if backend == "ringreduce":
        import torch_ringreduce  # noqa: F401
    dist.init_process_group(backend, rank=rank, world_size=2)


def busy(seconds):
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def cpu_unit():
    """The same pure-Python work every time (the core's speed of the moment)."""
    return sum(range(300))


def exchange_times(rank, elements, iters, compute_s):
    """Per counted iteration: the four calls' seconds, then cpu_unit's."""
    inp, out = torch.empty(elements), torch.empty(elements)
    peer = 1 - rank
    clock = time.perf_counter
    rows = []
    for i in range(iters):
        inp.fill_(i)
        if compute_s:
            busy(compute_s)
        t0 = clock()
        sent = dist.isend(inp, peer)
        t1 = clock()
        got = dist.irecv(out, peer)
        t2 = clock()
        sent.wait()
        t3 = clock()
        got.wait()
        t4 = clock()
        cpu_unit()
        t5 = clock()
        if i >= iters // 5:
            rows.append((t1 - t0, t2 - t1, t3 - t2, t4 - t3, t5 - t4))
    return rows


def run(rank, backend, sizes, iters, port, compute_s):
    init(rank, backend, port)
    for size in sizes:
        rows = exchange_times(rank, size // 4, iters, compute_s)
        whole = torch.tensor([sum(r[:4]) for r in rows], dtype=torch.float64)
        slowest = None
        if backend != "fake":
            both = whole.clone()
            dist.all_reduce(both, op=dist.ReduceOp.MAX)
            slowest = both.median().item()
        if rank == 0:
            # The mean of each call, then its median: a call that sometimes
            # waits long shows as a mean far above its median.
            parts = "  ".join(
                f"{name} {statistics.fmean(r[k] for r in rows) * 1e6:6.2f}"
                f"/{statistics.median(r[k] for r in rows) * 1e6:.2f}"
                for k, name in enumerate(PARTS))
            slow = f"  slower rank {slowest * 1e6:7.1f}" if slowest is not None else ""
            unit = statistics.median(r[4] for r in rows) * 1e6
            print(f"{backend:10s} {size:9d} B  exchange p50 {whole.median().item() * 1e6:7.1f} us"
                  f"  |  {parts}{slow}  |  cpu unit {unit:.2f}", flush=True)
    if backend != "fake":
        dist.barrier()
    dist.destroy_process_group()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="64,65536", help="bytes of float32, comma separated")
    parser.add_argument("--iters", type=int, default=3000)
    parser.add_argument("--backends", default="fake,ringreduce")
    parser.add_argument("--compute-us", type=float, default=0,
                        help="busy work before each exchange, us (0: back to back)")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    if "ringreduce" in args.backends.split(","):
        print(f"# {loaded_build()}", flush=True)
    for n, backend in enumerate(args.backends.split(",")):
        port = 29500 + (os.getpid() + n) % 2000
        mp.spawn(run, args=(backend, sizes, args.iters, port, args.compute_us * 1e-6), nprocs=2)


if __name__ == "__main__":
    main()
