"""GPU benchmark: our fused kernel against the device's own copy bandwidth,
and allreduce of N ranks sharing one GPU on ringreduce, gloo's CUDA path and
NCCL (where NCCL accepts N ranks on one GPU), all in the same run.

    python benchmarks/cuda_allreduce.py [--worlds 2,4] [--max-bytes 1G]

copy bw     dst.copy_(src): bytes read + bytes written per second.
kernel bw   the fused reduce-copy kernel (bytes read + written per second),
            as a ring step uses it (2 sources -> 1 destination) and as the
            two-shot does (N -> N), and its ratio to copy bw (target >= 90%).
allreduce   median time over iterations of the slowest rank; effective
            bandwidth 2NS/t (every rank's input read once and output written
            once is 2NS bytes of HBM traffic for N ranks on one GPU), its
            ratio to copy bw (target >= 75% from 64 MiB), and ringreduce's
            speed-up over gloo (target >= 10x from 1 MiB).
Timings are figures to record, never test assertions.
"""
import argparse
import os
import statistics
import tempfile
import time

# The ranks' threads as torchrun leaves them (one each): the spawned ranks
# inherit this, and the oversubscription warning stays quiet.
os.environ.setdefault("OMP_NUM_THREADS", "1")

import torch  # noqa: E402

from cuda_latency import spawn_ranks  # noqa: E402


def _parse_bytes(text):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(text[:-1]) * units[text[-1]] if text[-1] in units else int(text)


def _human(n):
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n // size} {unit}"
    return f"{n} B"


def _time_cuda(fn, iters, warmup=3):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    return statistics.median(times)


def copy_and_kernel_bandwidth(nbytes, worlds):
    import torch.distributed as dist
    from torch_ringreduce import _C
    n = nbytes // 4
    src = torch.ones(n, device="cuda")
    dst = torch.empty_like(src)
    copy_t = _time_cuda(lambda: dst.copy_(src), 20)
    copy_bw = 2 * nbytes / copy_t
    rows = [("copy (read 1, write 1)", copy_bw, 1.0)]
    for nsrc, ndst in [(2, 1)] + [(w, w) for w in worlds]:
        # One slice per rank, as the two-shot kernel of one rank sees it;
        # the whole buffer for the ring-step shape.
        per = n if (nsrc, ndst) == (2, 1) else n // nsrc
        srcs = [torch.ones(per, device="cuda") for _ in range(nsrc)]
        dsts = [torch.empty(per, device="cuda") for _ in range(ndst)]
        t = _time_cuda(lambda: _C._reduce_copy(srcs, dsts, dist.ReduceOp.SUM), 20)
        bw = (nsrc + ndst) * per * 4 / t
        rows.append((f"fused reduce-copy {nsrc} -> {ndst}", bw, bw / copy_bw))
    return copy_bw, rows


def _rank(rank, world, init_file, backend, sizes, env, out):
    os.environ.update(env)
    import torch.distributed as dist
    import torch_ringreduce  # noqa: F401
    torch.cuda.set_device(0)
    try:
        dist.init_process_group(backend, init_method=f"file://{init_file}", rank=rank,
                                world_size=world)
        results = {}
        for nbytes in sizes:
            x = torch.ones(nbytes // 4, device="cuda")
            iters = max(3, min(50, int(4e9 // max(nbytes, 1) // (20 if backend == "gloo" else 1))))
            for _ in range(3):
                dist.all_reduce(x)
            torch.cuda.synchronize()
            times = []
            for _ in range(iters):
                dist.barrier()
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                dist.all_reduce(x)
                torch.cuda.synchronize()
                times.append(time.perf_counter() - t0)
            results[nbytes] = times
        out.put((rank, results))
        dist.destroy_process_group()
    except Exception as error:  # reported in the table (e.g. NCCL refusing)
        out.put((rank, f"{type(error).__name__}: {str(error).splitlines()[0][:100]}"))


def allreduce_times(backend, world, sizes, env=None, timeout=1800):
    with tempfile.TemporaryDirectory() as tmp:
        got = spawn_ranks(_rank, lambda r, out: (r, world, os.path.join(tmp, "store"), backend,
                                                 sizes, env or {}, out), world, timeout)
    if isinstance(got, str):
        return got
    # Per iteration, the slowest rank; then the median.
    return {n: statistics.median(max(got[r][n][i] for r in range(world))
                                 for i in range(len(got[0][n]))) for n in sizes}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--worlds", default="2,4")
    parser.add_argument("--min-bytes", default="4K")
    parser.add_argument("--max-bytes", default="1G")
    parser.add_argument("--gloo-max-bytes", default="256M")
    # Each a set of RINGREDUCE_* settings: "auto" the default (on one node
    # the device-flags path, as "flags"), "twoshot" the IPC kernels with
    # event barriers and host messages (the default before 2026-11-27).
    parser.add_argument("--variants", default="auto",
                        help="comma-separated: auto, flags, twoshot, ring (the device ring), "
                             "host")
    parser.add_argument("--no-gloo", action="store_true")
    args = parser.parse_args()
    variants = {"auto": {}, "flags": {"RINGREDUCE_CUDA_ALGO": "flags"},
                "twoshot": {"RINGREDUCE_CUDA_ALGO": "twoshot"},
                "ring": {"RINGREDUCE_CUDA_ALGO": "ring"}, "host": {"RINGREDUCE_CUDA_ALGO": "host"}}
    worlds = [int(w) for w in args.worlds.split(",")]
    sizes, n = [], _parse_bytes(args.min_bytes)
    while n <= _parse_bytes(args.max_bytes):
        sizes.append(n)
        n *= 4
    gloo_sizes = [s for s in sizes if s <= _parse_bytes(args.gloo_max_bytes)]

    print(f"# {torch.cuda.get_device_name(0)}, torch {torch.__version__}", flush=True)
    copy_bw, rows = copy_and_kernel_bandwidth(1 << 30, worlds)
    tables = []
    for world in worlds:
        gloo = "not run" if args.no_gloo else allreduce_times("gloo", world, gloo_sizes)
        nccl = allreduce_times("nccl", world, sizes, env={"NCCL_MULTI_RANK_GPU_ENABLE": "1"})
        for name in args.variants.split(","):
            ring = allreduce_times("ringreduce", world, sizes, env=variants[name])
            tables.append((f"{world} ranks, ringreduce {name}", world, ring, gloo, nccl))

    print("\n## Device bandwidth (1 GiB buffers)")
    print(f"{'kernel':<28}{'GB/s':>10}{'of copy':>10}")
    for name, bw, ratio in rows:
        print(f"{name:<28}{bw / 1e9:>10.1f}{ratio:>9.0%}")
    for title, world, ring, gloo, nccl in tables:
        print(f"\n## allreduce float32, {title} on one GPU (effective bw = 2NS/t)")
        if isinstance(nccl, str):
            print(f"NCCL: {nccl}")
        if isinstance(gloo, str):
            print(f"gloo: {gloo}")
        if isinstance(ring, str):
            print(f"ringreduce: {ring}")
            continue
        print(f"{'size':>9}{'ring us':>11}{'ring GB/s':>11}{'of copy':>9}"
              f"{'gloo us':>12}{'x gloo':>8}{'nccl us':>11}")
        for s in sizes:
            t = ring[s]
            eff = 2 * world * s / t
            g = gloo.get(s) if isinstance(gloo, dict) else None
            c = nccl.get(s) if isinstance(nccl, dict) else None
            print(f"{_human(s):>9}{t * 1e6:>11.1f}{eff / 1e9:>11.1f}{eff / copy_bw:>8.0%}"
                  f"{(f'{g * 1e6:.1f}' if g else '-'):>12}{(f'{g / t:.1f}' if g else '-'):>8}"
                  f"{(f'{c * 1e6:.1f}' if c else '-'):>11}")


if __name__ == "__main__":
    main()
