"""Ranks and torch's own intra-op threads on the same cores: allreduce latency
right after a parallel torch op, as launchers other than torchrun leave the
threads, against the remedies.

    python benchmarks/threads_oversubscription.py [--world 2] [--sizes 262144,4194304]
        [--configs default,omp1,passive] [--iters 200] [--repeats 2]

torchrun sets OMP_NUM_THREADS=1 for its workers; `mp.spawn` and plain
`python` do not, so every rank gets as many intra-op threads as the cores it
may run on, and OpenMP's idle threads spin for a while after each parallel
op (libgomp's OMP_WAIT_POLICY), on the cores the other ranks and the
collectives need. This script starts `--world` ranks itself (multiprocessing
spawn, as `mp.spawn` does) once per configuration:

- default: OMP_NUM_THREADS removed from the environment (torch's default);
- omp1:    OMP_NUM_THREADS=1 (what torchrun sets);
- passive: OMP_NUM_THREADS removed, OMP_WAIT_POLICY=PASSIVE (idle OpenMP
           threads sleep at once instead of spinning).

Each rank, per size and backend (ringreduce, and gloo in the same processes,
interleaved in rounds): writes the tensor with `fill_` (a parallel op from
32768 elements on, as backward writes gradients), then all_reduce; after
`--sleep-us` of sleep instead when given. Per op the slowest rank's time;
p50 and p90 in ms. Also prints torch's intra-op threads per rank and whether
ringreduce warned about them at group creation. `--repeats` runs every
configuration that many times, alternated, so that the machine's drift hits
all of them alike.
"""
import argparse
import multiprocessing
import os
import sys
import tempfile
import time
import warnings

CONFIGS = {
    "default": {},
    "omp1": {"OMP_NUM_THREADS": "1"},
    "passive": {"OMP_WAIT_POLICY": "PASSIVE"},
}
REMOVED = ("OMP_NUM_THREADS", "OMP_WAIT_POLICY", "MKL_NUM_THREADS", "LOCAL_WORLD_SIZE")


def _rank(rank, world, init_method, args, results):
    import torch
    import torch.distributed as dist

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        import torch_ringreduce  # noqa: F401

        dist.init_process_group("ringreduce", init_method=init_method, rank=rank,
                                world_size=world)
    warned = any("intra-op threads" in str(w.message) for w in caught)
    groups = {"ringreduce": dist.group.WORLD, "gloo": dist.new_group(backend="gloo")}
    rows = []
    for size in args.sizes:
        tensor = torch.empty(size // 4, dtype=torch.float32)
        per_round = max(1, args.iters // args.rounds)
        times = {name: [] for name in groups}
        for name, group in groups.items():  # warm-up
            for i in range(20):
                tensor.fill_(i)
                dist.all_reduce(tensor, group=group)
        for _ in range(args.rounds):
            for name, group in groups.items():
                for i in range(per_round):
                    tensor.fill_(float(i % 7 + rank))
                    if args.sleep_us:
                        time.sleep(args.sleep_us / 1e6)
                    start = time.perf_counter()
                    dist.all_reduce(tensor, group=group)
                    times[name].append(time.perf_counter() - start)
        for name in groups:
            slowest = torch.tensor(times[name], dtype=torch.float64)
            dist.all_reduce(slowest, op=dist.ReduceOp.MAX, group=groups["gloo"])
            ordered = slowest.sort().values
            p50 = ordered[len(ordered) // 2].item() * 1e3
            p90 = ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))].item() * 1e3
            rows.append((name, size, p50, p90))
    results.put((rank, torch.get_num_threads(), warned, rows))
    dist.destroy_process_group()


def run_config(name, args):
    """Starts the ranks with the configuration's environment; rank 0's rows,
    every rank's thread count and warning."""
    ctx = multiprocessing.get_context("spawn")
    results = ctx.Queue()
    saved = dict(os.environ)
    for key in REMOVED:
        os.environ.pop(key, None)
    os.environ.update(CONFIGS[name])
    with tempfile.TemporaryDirectory(prefix="threads-bench-") as tmp:
        init_method = f"file://{os.path.join(tmp, 'store')}"
        procs = [ctx.Process(target=_rank, args=(r, args.world, init_method, args, results))
                 for r in range(args.world)]
        try:
            for p in procs:
                p.start()
        finally:
            os.environ.clear()
            os.environ.update(saved)
        try:
            got = [results.get(timeout=args.timeout) for _ in procs]
        finally:
            for p in procs:
                p.join(timeout=30)
                if p.is_alive():
                    p.kill()
                    p.join()
    got.sort()
    return got[0][3], [g[1] for g in got], [g[2] for g in got]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--world", type=int, default=2)
    parser.add_argument("--sizes", default="262144,4194304", help="bytes, comma separated")
    parser.add_argument("--configs", default="default,omp1,passive",
                        help="among " + ",".join(CONFIGS))
    parser.add_argument("--iters", type=int, default=200, help="ops per cell and backend")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--sleep-us", type=float, default=0.0,
                        help="sleep between the write and the allreduce")
    parser.add_argument("--timeout", type=float, default=300.0)
    args = parser.parse_args()
    args.sizes = [int(s) for s in args.sizes.split(",")]
    configs = args.configs.split(",")
    for name in configs:
        if name not in CONFIGS:
            sys.exit(f"unknown configuration {name!r}: one of {', '.join(CONFIGS)}")

    pause = f" and {args.sleep_us:g} us of sleep" if args.sleep_us else ""
    print(f"# allreduce after fill_ of the tensor{pause}, float32 SUM, world {args.world}, "
          f"{len(os.sched_getaffinity(0))} CPUs; per op the slowest rank; {args.iters} ops "
          f"per cell in {args.rounds} interleaved rounds; ms")
    print(f"# {'config':>8} {'threads':>7} {'warned':>6} {'bytes':>8} | {'ring p50':>8} "
          f"{'p90':>6} | {'gloo p50':>8} {'p90':>6} | {'gloo/ring p50':>13}")
    for _ in range(args.repeats):
        for name in configs:
            rows, threads, warned = run_config(name, args)
            cells = {(backend, size): (p50, p90) for backend, size, p50, p90 in rows}
            for size in args.sizes:
                r, g = cells[("ringreduce", size)], cells[("gloo", size)]
                print(f"  {name:>8} {'/'.join(map(str, threads)):>7} "
                      f"{'yes' if all(warned) else 'no' if not any(warned) else 'some':>6} "
                      f"{size:>8} | {r[0]:8.3f} {r[1]:6.2f} | {g[0]:8.3f} {g[1]:6.2f} | "
                      f"{g[0] / r[0]:12.2f}x", flush=True)


if __name__ == "__main__":
    main()
