"""GPU latency against its floor, all in the same run: a plain torch kernel in
the same loop as the allreduce, NCCL at world 1, ranks sharing one GPU at
worlds 1, 2 and 4, and a bandwidth sweep against the device's copy rate.

    python benchmarks/cuda_latency.py [--worlds 1,2,4] [--iters 200] [--bytes 4K]
        [--variants auto] [--nccl-worlds 1] [--bw-max-bytes 256M] [--no-bw]
        [--budget-s 0] [--device cuda|cpu]

For each world one set of rank processes measures, one after the other and
in the same loop:
  kernel       a plain torch kernel, x.add_(0): the floor (torch's own
               launch path, on the same processes)
  allreduce    dist.all_reduce(x) on ringreduce, one set of processes per
               --variants entry (RINGREDUCE_* settings); NCCL's at the
               worlds of --nccl-worlds (it refuses ranks sharing a GPU)
Two figures for each:
  back to back mean per call over --iters calls issued without waiting,
               one synchronize after them
  per call     p50 / p90 over --iters calls, each after a barrier and a
               synchronize, the tensor written (fill_) first, as backward
               writes gradients; fill_ + op + synchronize
Both are last rank out minus last rank in: CLOCK_MONOTONIC is one clock
for every process of a host, so the ranks' stamps subtract.
bandwidth      per call (after a barrier, nothing written first), median,
               from 1 MiB to --bw-max-bytes at every world of two ranks or
               more: 2NS/t (each of N ranks' S bytes read once and written
               once) against dst.copy_(src) (bytes read + written per
               second) measured in the same run, and against the same
               reads and writes done by torch kernels in one process
               (two_shot_reference: the memory bound of a two-shot on one
               GPU, (3N-1)S bytes).
Under MPS (scripts/gpu_quick.sh starts a daemon of its own) the ranks'
kernels run at once, as on distinct GPUs; without it they are time-sliced,
and the sweep measures the slicing. The targets of issue 44 follow the
tables, against figures of this run only.
--device cpu runs the same harness on CPU tensors, with gloo where NCCL
would be: a check of the script where there is no GPU (its figures say
nothing about one). Timings are figures to record, never test assertions.
"""
import argparse
import multiprocessing as mp
import os
import statistics
import tempfile
import time

# The ranks' threads as torchrun leaves them (one each): the spawned ranks
# inherit this, and the oversubscription warning stays quiet.
os.environ.setdefault("OMP_NUM_THREADS", "1")

import torch  # noqa: E402

# RINGREDUCE_* settings per variant: "auto" is the default (on one node the
# device-flags path, as "flags"); "oneshot" the IPC kernel with event
# barriers and host messages, the default for small tensors before
# 2026-11-27.
VARIANTS = {
    "auto": {},
    "flags": {"RINGREDUCE_CUDA_ALGO": "flags"},
    "oneshot": {"RINGREDUCE_CUDA_ALGO": "oneshot"},
}
# NCCL's own switch for several ranks on one GPU (2.30 and newer, experimental).
NCCL_ENV = {"NCCL_MULTI_RANK_GPU_ENABLE": "1"}
BW_MIN_BYTES = 1 << 20


def _parse_bytes(text):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(text[:-1]) * units[text[-1]] if text[-1] in units else int(text)


def _human(n):
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n // size} {unit}"
    return f"{n} B"


def _now():
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC)


def _percentile(values, q):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * q))]


# ---- in each rank process ------------------------------------------------

def _median_seconds(once, sync, warm, calls):
    """once()'s time per call, each synchronized, the median of `calls`
    after `warm` untimed ones."""
    for _ in range(warm):
        once()
    sync()
    times = []
    for _ in range(calls):
        t0 = _now()
        once()
        sync()
        times.append((_now() - t0) / 1e9)
    return statistics.median(times)


def _copy_rate(device, nbytes, sync):
    """dst.copy_(src): bytes read + written per second, the median of 20."""
    src = torch.ones(nbytes // 4, device=device)
    dst = torch.empty_like(src)
    return 2 * nbytes / _median_seconds(lambda: dst.copy_(src), sync, 3, 20)


def two_shot_reference(device, nbytes, world):
    """The memory traffic of a two-shot allreduce of `world` ranks' `nbytes`
    each on one GPU, in one process, as torch kernels: every input read once
    and summed into the first output, which is then copied to the other
    world - 1 ((3N-1)S bytes read and written). Returns (once, inputs,
    outputs): calling once() does it; row r of each is "rank" r's."""
    inputs = torch.ones(world, max(1, nbytes // 4), device=device)
    outputs = torch.empty_like(inputs)

    def once():
        torch.sum(inputs, dim=0, out=outputs[0])
        outputs[1:].copy_(outputs[0].expand(world - 1, -1))

    return once, inputs, outputs


def _reference_time(device, nbytes, world, sync):
    """two_shot_reference's time per call (synchronized), the median of 10:
    what the collective's own reads and writes take at this GPU's memory rate,
    with no synchronisation between ranks."""
    once, _, _ = two_shot_reference(device, nbytes, world)
    return _median_seconds(once, sync, 2, 10)


def _stamps(op, x, iters, barrier, sync):
    """Back to back: (first in, last out) of `iters` calls; per call: one
    (in, out) pair each, after a barrier, the tensor written first."""
    for _ in range(5):
        op()
    sync()
    barrier()
    sync()
    start = _now()
    for _ in range(iters):
        op()
    sync()
    back_to_back = (start, _now())
    calls = []
    for _ in range(iters):
        barrier()
        sync()
        t_in = _now()
        x.fill_(1.0)
        op()
        sync()
        calls.append((t_in, _now()))
    return {"b2b": back_to_back, "calls": calls}


def _rank(rank, world, init_file, backend, env, cfg, out):
    os.environ.update(env)
    import torch.distributed as dist
    if backend == "ringreduce":
        import torch_ringreduce  # noqa: F401
    cuda = cfg["device"] == "cuda"
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    try:
        if cuda:
            torch.cuda.set_device(0)
        dist.init_process_group(backend, init_method=f"file://{init_file}", rank=rank,
                                world_size=world)
        x = torch.ones(max(1, cfg["bytes"] // 4), device=cfg["device"])
        result = {}
        if rank == 0:
            result["device"] = torch.cuda.get_device_name(0) if cuda else "cpu"
        # The kernel first: the floor, on the processes the collective then runs on.
        result["kernel"] = _stamps(lambda: x.add_(0), x, cfg["iters"], dist.barrier, sync)
        result["allreduce"] = _stamps(lambda: dist.all_reduce(x), x, cfg["iters"], dist.barrier,
                                      sync)
        if world > 1 and cfg["bw_sizes"]:
            sweep = {}
            for nbytes in cfg["bw_sizes"]:
                y = torch.ones(nbytes // 4, device=cfg["device"])
                for _ in range(2):
                    dist.all_reduce(y)
                calls = []
                for _ in range(max(5, min(cfg["iters"], 50, int(4e9 // nbytes)))):
                    dist.barrier()
                    sync()
                    t_in = _now()
                    dist.all_reduce(y)
                    sync()
                    calls.append((t_in, _now()))
                sweep[nbytes] = calls
                del y
            result["bw"] = sweep
        if rank == 0 and cfg["copy_bytes"]:
            result["copy"] = _copy_rate(cfg["device"], cfg["copy_bytes"], sync)
        if rank == 0 and world > 1 and cfg["bw_sizes"]:
            # The same-run bound: the peers wait in destroy_process_group.
            result["bound"] = {n: _reference_time(cfg["device"], n, world, sync)
                               for n in cfg["bw_sizes"]}
        out.put((rank, result))
        dist.destroy_process_group()
    except Exception as error:  # reported in the table (e.g. NCCL refusing)
        first_line = (str(error).splitlines() or [""])[0]
        out.put((rank, f"{type(error).__name__}: {first_line[:90]}"))


def _pingpong(role, pipe, iters, out):
    """Two processes pass a turn back and forth with interprocess CUDA
    events and a pipe: what a cross-process step costs at least without
    MPS (the old event barriers' cost per step)."""
    torch.cuda.set_device(0)
    mine = torch.cuda.Event(interprocess=True)
    pipe.send(mine.ipc_handle())
    theirs = torch.cuda.Event.from_ipc_handle(0, pipe.recv())
    stream = torch.cuda.current_stream()
    times = []
    for i in range(iters + 10):
        t0 = _now()
        if role == 0:
            mine.record(stream)
            pipe.send(i)
            pipe.recv()
            stream.wait_event(theirs)
            stream.synchronize()
        else:
            pipe.recv()
            stream.wait_event(theirs)
            mine.record(stream)
            pipe.send(i)
        if i >= 10:
            times.append((_now() - t0) / 1e9)
    if role == 0:
        out.put(statistics.median(times) / 2)


# ---- in the parent -------------------------------------------------------

def event_pingpong(iters, timeout):
    """One hop of the event ping-pong, seconds, or why not."""
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    a, b = ctx.Pipe()
    procs = [ctx.Process(target=_pingpong, args=(role, pipe, iters, out), daemon=True)
             for role, pipe in ((0, a), (1, b))]
    for p in procs:
        p.start()
    try:
        return out.get(timeout=timeout)
    except Exception as error:
        return f"did not finish ({type(error).__name__})"
    finally:
        for p in procs:
            p.join(timeout=10)
            if p.is_alive():
                p.kill()

def spawn_ranks(target, args_of, world, timeout):
    """Runs `target(*args_of(rank, queue))` in `world` spawned processes, each
    putting (rank, value) on the queue: every rank's value (rank -> value),
    or why not (a string: the first value that is one, which ends the wait
    10 s later, since the others may wait for that rank forever)."""
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    got = {}
    procs = [ctx.Process(target=target, args=args_of(r, out), daemon=True) for r in range(world)]
    for p in procs:
        p.start()
    deadline = time.monotonic() + timeout
    try:
        while len(got) < world and time.monotonic() < deadline:
            try:
                rank, value = out.get(timeout=2)
                got[rank] = value
                if isinstance(value, str):
                    deadline = min(deadline, time.monotonic() + 10)
            except Exception:
                if not any(p.is_alive() for p in procs) and out.empty():
                    break
    finally:
        for p in procs:
            p.join(timeout=10)
            if p.is_alive():
                p.kill()
                p.join(timeout=5)
    errors = [v for v in got.values() if isinstance(v, str)]
    if errors:
        return errors[0]
    if len(got) < world:
        missing = [r for r in range(world) if r not in got]
        return (f"rank(s) {missing} did not finish within {timeout:.0f} s"
                if time.monotonic() >= deadline else f"rank(s) {missing} exited without a result")
    return got


def _spawn(world, backend, env, cfg, timeout):
    """Every rank's result (rank -> dict), or why not (a string)."""
    with tempfile.TemporaryDirectory() as tmp:
        init_file = os.path.join(tmp, "store")
        return spawn_ranks(_rank, lambda r, out: (r, world, init_file, backend, env, cfg, out),
                           world, timeout)


def _latency(got, name, world):
    """Back-to-back mean and per-call p50 / p90, seconds, last rank out
    minus last rank in."""
    ranks = [got[r][name] for r in range(world)]
    calls = len(ranks[0]["calls"])
    b2b = (max(r["b2b"][1] for r in ranks) - max(r["b2b"][0] for r in ranks)) / 1e9 / calls
    per_call = [(max(r["calls"][i][1] for r in ranks) - max(r["calls"][i][0] for r in ranks)) / 1e9
                for i in range(calls)]
    return b2b, _percentile(per_call, 0.5), _percentile(per_call, 0.9)


def _sweep(got, world):
    """Per size: the median per call, seconds."""
    sizes = got[0]["bw"].keys()
    return {n: statistics.median(
        max(got[r]["bw"][n][i][1] for r in range(world)) -
        max(got[r]["bw"][n][i][0] for r in range(world))
        for i in range(len(got[0]["bw"][n]))) / 1e9 for n in sizes}


class Run:
    """Every set of rank processes of this run, and what they measured."""

    def __init__(self, args):
        self.args = args
        self.cuda = args.device == "cuda"
        self.started = time.monotonic()
        # row name -> world -> (b2b, p50, p90) seconds, or why not
        self.rows = {"kernel x.add_(0)": {}}
        self.ratios = {}    # row name -> world -> (b2b x, p50 x) against its own kernel
        self.sweeps = {}    # world -> size -> seconds, the first variant
        self.bounds = {}    # world -> size -> seconds of two_shot_reference
        self.copy = None    # bytes read + written per second
        self.device = None

    def left(self):
        if not self.args.budget_s:
            return float("inf")
        return self.args.budget_s - (time.monotonic() - self.started)

    def measure(self, row, backend, world, env, sweep):
        timeout = min(self.args.world_timeout, self.left())
        if timeout < 15:
            self.rows.setdefault(row, {})[world] = "skipped: the time budget is spent"
            print(f"# {row}, world {world}: skipped (budget)", flush=True)
            return
        cfg = {"device": self.args.device, "bytes": self.args.bytes, "iters": self.args.iters,
               "bw_sizes": self.args.bw_sizes if sweep else [],
               "copy_bytes": self.args.copy_bytes if self.copy is None else 0}
        t0 = time.monotonic()
        got = _spawn(world, backend, env, cfg, timeout)
        print(f"# {row}, world {world}: {time.monotonic() - t0:.1f} s"
              f"{'' if isinstance(got, dict) else ' (' + got + ')'}", flush=True)
        if isinstance(got, str):
            self.rows.setdefault(row, {})[world] = got
            return
        self.device = self.device or got[0].get("device")
        if "copy" in got[0]:
            self.copy = got[0]["copy"]
        kernel = _latency(got, "kernel", world)
        op = _latency(got, "allreduce", world)
        # The floor from the first set of processes of each world.
        self.rows.setdefault("kernel x.add_(0)", {}).setdefault(world, kernel)
        self.rows.setdefault(row, {})[world] = op
        self.ratios.setdefault(row, {})[world] = (op[0] / kernel[0], op[1] / kernel[1])
        if sweep and "bw" in got[0]:
            self.sweeps[world] = _sweep(got, world)
            self.bounds[world] = got[0].get("bound", {})


def _cell(value):
    if isinstance(value, tuple):
        return " / ".join(f"{v * 1e6:.1f}" for v in value)
    return "(below)" if isinstance(value, str) else "-"


def _verdict(value, limit):
    return f"{value:.2f}x (target <= {limit}x): {'met' if value <= limit else 'MISSED'}"


def print_tables(run, worlds, first_row):
    args = run.args
    print(f"\n## allreduce {_human(args.bytes)} float32, us: back-to-back mean / per-call p50 / "
          f"p90 (last rank out minus last rank in; per call: fill_ + op + synchronize after a "
          f"barrier)")
    print(f"{'':<22}" + "".join(f"{'world ' + str(w):>26}" for w in worlds))
    for name, cells in run.rows.items():
        print(f"{name:<22}" + "".join(f"{_cell(cells.get(w)):>26}" for w in worlds))
    for name, cells in run.rows.items():
        for w in worlds:
            if isinstance(cells.get(w), str):
                print(f"{name}, world {w}: {cells[w]}")
    print("\n## against the plain kernel on the same processes: back to back x / per call p50 x")
    print(f"{'':<22}" + "".join(f"{'world ' + str(w):>26}" for w in worlds))
    for name, cells in run.ratios.items():
        print(f"{name:<22}" + "".join(
            f"{(f'{cells[w][0]:.2f}x / {cells[w][1]:.2f}x' if w in cells else '-'):>26}"
            for w in worlds))
    if run.sweeps:
        copy = f"{run.copy / 1e9:.1f} GB/s" if run.copy else "not measured"
        print(f"\n## allreduce bandwidth, {first_row}: 2NS/t against the copy rate of this run "
              f"({copy}, dst.copy_(src), {_human(args.copy_bytes)}, read + written)")
        sweep_worlds = sorted(run.sweeps)
        print("(of bound: the time of the same reads and writes done by torch kernels in one "
              "process, two_shot_reference, over ours)")
        print(f"{'size':>9}" + "".join(f"{'w' + str(w) + ' us':>11}{'GB/s':>9}{'of copy':>9}"
                                       f"{'of bound':>10}" for w in sweep_worlds))
        for n in args.bw_sizes:
            line = f"{_human(n):>9}"
            for w in sweep_worlds:
                t = run.sweeps[w].get(n)
                bound = run.bounds.get(w, {}).get(n)
                eff = 2 * w * n / t if t else 0
                line += (f"{t * 1e6:>11.1f}{eff / 1e9:>9.1f}"
                         f"{(f'{eff / run.copy:.0%}' if run.copy else '-'):>9}"
                         f"{(f'{bound / t:.0%}' if bound else '-'):>10}" if t else
                         f"{'-':>11}{'-':>9}{'-':>9}{'-':>10}")
            print(line)
    # Issue 44's targets, from this run's figures only.
    mine = run.ratios.get(first_row, {})
    rows = run.rows.get(first_row, {})
    mps = os.environ.get("RINGREDUCE_TEST_MPS") == "1"
    caveat = ("" if mps else " (MPS is off: the world 2 and 4 targets assume it)") if run.cuda \
        else " (CPU tensors: says nothing about a GPU)"
    print(f"\n## issue 44 targets, {first_row}{caveat}")
    if 1 in mine:
        print(f"world 1 back to back vs kernel   {_verdict(mine[1][0], 1.3)}")
        print(f"world 1 per call p50 vs kernel   {_verdict(mine[1][1], 1.2)}")
    if 2 in mine:
        print(f"world 2 back to back vs kernel   {_verdict(mine[2][0], 1.5)}")
        print(f"world 2 per call p50 vs kernel   {_verdict(mine[2][1], 1.5)}")
    if isinstance(rows.get(2), tuple) and isinstance(rows.get(4), tuple):
        print(f"world 4 per call p50 vs world 2  {_verdict(rows[4][1] / rows[2][1], 1.2)}")
    for w, sweep in sorted(run.sweeps.items()):
        large = [n for n in sweep if n >= 64 << 20]
        if large and run.copy:
            worst = min(2 * w * n / sweep[n] / run.copy for n in large)
            print(f"world {w} from 64 MiB, 2NS/t      {worst:.0%} of copy (target >= 60%): "
                  f"{'met' if worst >= 0.6 else 'MISSED'}")
    for w, sweep in sorted(run.sweeps.items()):
        bounds = run.bounds.get(w, {})
        large = [n for n in sweep if n >= 16 << 20 and bounds.get(n)]
        if large:
            worst = min(bounds[n] / sweep[n] for n in large)
            print(f"world {w} from 16 MiB, of bound  {worst:.0%} (issue 56's target >= 85% "
                  f"under MPS): {'met' if worst >= 0.85 else 'MISSED'}")


def main():
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__.split("\n\n", 2)[2])
    parser.add_argument("--worlds", default="1,2,4", help="ranks sharing the GPU (default 1,2,4)")
    parser.add_argument("--bytes", default="4K", help="the latency tensor's size (default 4K)")
    parser.add_argument("--iters", type=int, default=200, help="calls per figure (default 200)")
    parser.add_argument("--variants", default="auto",
                        help=f"ringreduce settings, comma-separated: {', '.join(VARIANTS)} "
                             "(default auto; the first also runs the sweep)")
    parser.add_argument("--nccl-worlds", default="1",
                        help="worlds NCCL is tried at (default 1; it refuses ranks sharing a "
                             "GPU); 'none' for none")
    parser.add_argument("--bw-max-bytes", default="256M",
                        help="the sweep's largest size (default 256M; from 1M, x4)")
    parser.add_argument("--copy-bytes", default="256M",
                        help="the copy-rate buffer (default 256M)")
    parser.add_argument("--no-bw", action="store_true", help="no bandwidth sweep")
    parser.add_argument("--pingpong", action="store_true",
                        help="also one hop of an interprocess-event ping-pong between two "
                             "processes (the cross-process floor without MPS; cuda only)")
    parser.add_argument("--world-timeout", type=float, default=120,
                        help="seconds one set of rank processes may take (default 120)")
    # Under scripts/gpu_quick.sh: the phase's limit, less time to print.
    phase = float(os.environ.get("RINGREDUCE_PHASE_LIMIT_S", "0") or 0)
    parser.add_argument("--budget-s", type=float, default=max(0.0, phase - 20),
                        help="seconds for the whole run: later worlds are skipped, and the "
                             "tables printed, when it is spent (default: the phase's "
                             "RINGREDUCE_PHASE_LIMIT_S less 20 under scripts/gpu_quick.sh, "
                             "else no limit)")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda",
                        help="cpu: the same harness on CPU tensors, gloo for NCCL (a check "
                             "of the script without a GPU)")
    args = parser.parse_args()
    args.bytes = _parse_bytes(args.bytes)
    args.copy_bytes = _parse_bytes(args.copy_bytes)
    args.bw_sizes = []
    n = BW_MIN_BYTES
    while not args.no_bw and n <= _parse_bytes(args.bw_max_bytes):
        args.bw_sizes.append(n)
        n *= 4
    worlds = [int(w) for w in args.worlds.split(",")]
    variants = args.variants.split(",")
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        parser.error(f"unknown variant(s) {', '.join(unknown)}: {', '.join(VARIANTS)}")
    reference = "nccl" if args.device == "cuda" else "gloo"
    reference_worlds = ([] if args.nccl_worlds == "none" else
                        [int(w) for w in args.nccl_worlds.split(",")])

    run = Run(args)
    mps = os.environ.get("CUDA_MPS_PIPE_DIRECTORY", "")
    print(f"# torch {torch.__version__}, MPS "
          f"{'on (' + mps + ')' if os.environ.get('RINGREDUCE_TEST_MPS') == '1' else 'off'}, "
          f"device {args.device}, {args.iters} calls per figure", flush=True)
    first_row = f"ringreduce {variants[0]}"
    # World by world, ringreduce first, so that a spent budget costs the rest.
    for world in worlds:
        for i, name in enumerate(variants):
            run.measure(f"ringreduce {name}", "ringreduce", world, VARIANTS[name], i == 0)
        if world in reference_worlds:
            run.measure(reference, reference, world, NCCL_ENV if reference == "nccl" else {},
                        False)
    hop = event_pingpong(args.iters, 60) if args.pingpong and run.cuda else None
    print(f"\n# {run.device or args.device}")
    if hop is not None:
        print(f"event ping-pong, one hop: "
              f"{hop if isinstance(hop, str) else f'{hop * 1e6:.1f} us'}")
    print_tables(run, worlds, first_row)


if __name__ == "__main__":
    main()
