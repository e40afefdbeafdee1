"""nccl-tests style benchmark of one collective: ringreduce against gloo in the
same run, on the same tensors.

    torchrun --standalone --nproc-per-node 2 benchmarks/collectives.py --op all_reduce
    (ops: all_reduce, reduce_scatter_tensor, reduce_scatter (the list form),
     all_gather_into_tensor, broadcast, all_to_all_single)

`bytes` is the size nccl-tests reports: the buffer of all_reduce and
broadcast, the whole (world-sized) buffer of the others. Time is the median
over iterations of the slowest rank. algbw = bytes / time; busbw = algbw x
the nccl-tests factor: 2(n-1)/n for all_reduce, (n-1)/n for reduce-scatter,
all-gather and all-to-all, 1 for broadcast. ratio = gloo time / ringreduce
time (above 1: ringreduce is faster), at the median (p50) and at the 90th
percentile (p90, each rank's, the slowest rank's taken). With --plot
FILE.png (matplotlib), rank 0 also draws bus bandwidth and latency against
message size.

Two ways to time, both ops on the same tensors: lockstep (the default), one
collective right after the other on a tensor nobody touches in between; and
--written, where each collective's input is first written whole (a fill,
not timed), as backward writes the gradients before DDP reduces them: the
data then comes from the writer's cache or memory, not from the last
collective's.
"""
import argparse
import math
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist

import torch_ringreduce  # noqa: F401  (registers "ringreduce")

# torch 2.13 renamed these (the old names warn); older torch has only the old.
_all_gather_single = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
_reduce_scatter_single = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import plot  # noqa: E402

DTYPES = {"float32": torch.float32, "float64": torch.float64, "float16": torch.float16,
          "bfloat16": torch.bfloat16, "int32": torch.int32, "int64": torch.int64}


def make_op(name, nbytes, dtype, world, rank):
    """Returns (callable(group), bus factor, the input tensors) for a collective
    over `nbytes`."""
    esize = torch.empty((), dtype=dtype).element_size()
    if name == "all_reduce":
        t = torch.ones(nbytes // esize, dtype=dtype)
        return (lambda g: dist.all_reduce(t, group=g)), 2 * (world - 1) / world, [t]
    if name == "broadcast":
        t = torch.ones(nbytes // esize, dtype=dtype)
        return (lambda g: dist.broadcast(t, src=0, group=g)), 1.0, [t]
    per_rank = max(1, nbytes // esize // world)
    factor = (world - 1) / world
    if name == "reduce_scatter_tensor":
        inp, out = torch.ones(per_rank * world, dtype=dtype), torch.empty(per_rank, dtype=dtype)
        return (lambda g: _reduce_scatter_single(out, inp, group=g)), factor, [inp]
    if name == "reduce_scatter":
        blocks = [torch.ones(per_rank, dtype=dtype) for _ in range(world)]
        out = torch.empty(per_rank, dtype=dtype)
        return (lambda g: dist.reduce_scatter(out, blocks, group=g)), factor, blocks
    if name == "all_gather_into_tensor":
        inp, out = torch.ones(per_rank, dtype=dtype), torch.empty(per_rank * world, dtype=dtype)
        return (lambda g: _all_gather_single(out, inp, group=g)), factor, [inp]
    if name == "all_to_all_single":
        inp, out = torch.ones(per_rank * world, dtype=dtype), torch.empty(per_rank * world, dtype=dtype)
        return (lambda g: dist.all_to_all_single(out, inp, group=g)), factor, [inp]
    raise ValueError(name)


def timed(fn, group, warmup, iters, inputs=None):
    """(p50, p90) in seconds, each the slowest rank's; with `inputs`, every op's
    input tensors are written whole first (not timed)."""
    def write():
        for t in inputs or ():
            t.fill_(1)

    for _ in range(warmup):
        write()
        fn(group)
    samples = []
    for _ in range(iters):
        write()
        start = time.perf_counter()
        fn(group)
        samples.append(time.perf_counter() - start)
    samples.sort()
    p90 = samples[min(len(samples) - 1, math.ceil(0.9 * len(samples)) - 1)]
    local = torch.tensor([statistics.median(samples), p90], dtype=torch.float64)
    dist.all_reduce(local, op=dist.ReduceOp.MAX, group=group)  # the slowest rank's
    return local[0].item(), local[1].item()


def settle(fn, ring, gloo, seconds):
    """Blocks of ops on both backends until rank 0 has spent `seconds` (every
    rank runs the same number: rank 0's clock decides, through gloo)."""
    start = time.perf_counter()
    while True:
        for group in (ring, gloo):
            for _ in range(20):
                fn(group)
        more = torch.tensor([float(time.perf_counter() - start < seconds)])
        dist.broadcast(more, src=0, group=gloo)
        if more.item() == 0.0:
            return


def ucx_ceiling(nbytes, iters=30, port=13377):
    """UCX's own one-way tag bandwidth (GB/s) between two processes on this
    machine, by ucx-utils' ucx_perftest (server and client both here): the
    shared-memory ceiling a host collective can approach. None if it cannot run."""
    import shutil
    import subprocess

    if shutil.which("ucx_perftest") is None:
        return None
    args = ["-t", "tag_bw", "-s", str(nbytes), "-n", str(iters), "-p", str(port)]
    server = subprocess.Popen(["ucx_perftest", *args], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.5)
        out = subprocess.run(["ucx_perftest", "localhost", *args], capture_output=True,
                             text=True, timeout=120).stdout
    except (subprocess.SubprocessError, OSError):
        return None
    finally:
        server.kill()
        server.wait()
    for line in out.splitlines():
        if line.startswith("Final:"):
            return float(line.split()[-3]) * 1e6 / 1e9  # "bandwidth (MB/s) overall"
    return None


def parse_args(default_op=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    if default_op is None:
        p.add_argument("--op", required=True,
                       choices=["all_reduce", "reduce_scatter_tensor", "reduce_scatter",
                                "all_gather_into_tensor", "broadcast", "all_to_all_single"])
    p.add_argument("--min-bytes", type=int, default=4)
    p.add_argument("--max-bytes", type=int, default=64 << 20)
    p.add_argument("--step-factor", type=int, default=4)
    p.add_argument("--dtype", choices=sorted(DTYPES), default="float32")
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--settle-seconds", type=float, default=1.0,
                   help="before the first size, alternate both backends at it for this long: "
                        "the first few hundred ops after start-up run up to 3x slower on a "
                        "loaded or oversubscribed machine, for both backends")
    p.add_argument("--written", action="store_true",
                   help="write each op's input whole before it (not timed), as backward "
                        "writes gradients; default: lockstep, back to back on untouched tensors")
    p.add_argument("--iters", type=int, default=20,
                   help="timed iterations per size (fewer for the largest sizes)")
    p.add_argument("--plot", metavar="FILE.png",
                   help="rank 0 writes bus bandwidth and latency against size (needs matplotlib)")
    p.add_argument("--ucx-ceiling", action="store_true",
                   help="also measure UCX's own one-way bandwidth at the largest size "
                        "(ucx_perftest) and give the largest size's busbw against it")
    args = p.parse_args()
    if args.plot and not plot.available():
        if os.environ.get("RANK", "0") == "0":
            print(plot.MISSING, file=sys.stderr)
        sys.exit(2)
    if default_op is not None:
        args.op = default_op
    return args


def main(default_op=None):
    import warnings

    warnings.filterwarnings("ignore", category=FutureWarning)  # deprecated *_tensor names
    args = parse_args(default_op)
    dist.init_process_group("ringreduce")
    world, rank = dist.get_world_size(), dist.get_rank()
    gloo = dist.new_group(backend="gloo")
    ring = dist.group.WORLD
    dtype = DTYPES[args.dtype]
    esize = torch.empty((), dtype=dtype).element_size()
    if rank == 0:
        mode = "each input written first" if args.written else "lockstep"
        print(f"# {args.op}, {args.dtype}, world {world}, {mode}, p50 and p90 of {args.iters} "
              f"iterations after {args.warmup} warm-up; times in us, bandwidths (of p50) in GB/s")
        print(f"# {'bytes':>10} | {'ring us':>9} {'p90':>9} {'algbw':>7} {'busbw':>7} | "
              f"{'gloo us':>9} {'p90':>9} {'algbw':>7} {'busbw':>7} | {'ratio':>6} {'p90':>6}")
    size = max(args.min_bytes, esize * (1 if args.op in ("all_reduce", "broadcast") else world))
    rows = []  # (bytes, ringreduce time, gloo time): p50s
    settle(make_op(args.op, size, dtype, world, rank)[0], ring, gloo, args.settle_seconds)
    while size <= args.max_bytes:
        fn, factor, inputs = make_op(args.op, size, dtype, world, rank)
        inputs = inputs if args.written else None
        iters = max(3, min(args.iters, int(args.iters * (4 << 20) / size) or 3))
        ring_t, ring_90 = timed(fn, ring, args.warmup, iters, inputs)
        gloo_t, gloo_90 = timed(fn, gloo, args.warmup, iters, inputs)
        rows.append((size, ring_t, gloo_t))
        if rank == 0:
            ring_bw, gloo_bw = size / ring_t / 1e9, size / gloo_t / 1e9
            print(f"  {size:>10} | {ring_t * 1e6:>9.1f} {ring_90 * 1e6:>9.1f} {ring_bw:>7.2f} "
                  f"{ring_bw * factor:>7.2f} | {gloo_t * 1e6:>9.1f} {gloo_90 * 1e6:>9.1f} "
                  f"{gloo_bw:>7.2f} {gloo_bw * factor:>7.2f} | {gloo_t / ring_t:>6.2f} "
                  f"{gloo_90 / ring_90:>6.2f}", flush=True)
        size *= args.step_factor
    if rank == 0 and args.plot and rows:
        sizes = [r[0] for r in rows]
        series = {name: ([r[i] for r in rows], [r[0] / r[i] / 1e9 * factor for r in rows])
                  for i, name in ((1, "ringreduce"), (2, "gloo"))}
        plot.write(args.plot, f"{args.op}, {args.dtype}, world {world}", sizes, series)
        print(f"# wrote {args.plot}", flush=True)
    if args.ucx_ceiling and rows:
        dist.barrier(group=gloo)
        if rank == 0:
            biggest, ring_t = rows[-1][0], rows[-1][1]
            busbw = biggest / ring_t / 1e9 * factor
            ceiling = ucx_ceiling(biggest)
            if ceiling:
                print(f"# UCX tag bandwidth (ucx_perftest tag_bw, {biggest} B, one way): "
                      f"{ceiling:.2f} GB/s; ringreduce busbw at {biggest} B: {busbw:.2f} GB/s "
                      f"= {100 * busbw / ceiling:.0f}% of it")
            else:
                print("# ucx_perftest unavailable: no UCX ceiling")
        dist.barrier(group=gloo)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
