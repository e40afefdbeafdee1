"""python -m torch_ringreduce.tune: measure the settings that matter on this
machine and write them to a config file that groups read at creation
(RINGREDUCE_CONFIG=PATH; variables set in the environment still win).

    python -m torch_ringreduce.tune --sizes 4KiB,1MiB,64MiB --output ringreduce.conf
    python -m torch_ringreduce.tune --ddp-bucket-mb 25 --model-params 120e6 --output ringreduce.conf

It starts --nproc ranks (2 by default) on this machine over loopback, each a
process of its own, and measures float32 SUM allreduces of the sizes named
(or DDP's buckets: the 1 MiB first bucket, full --ddp-bucket-mb buckets and
the remainder of --model-params float32 parameters). Each candidate setting
runs in a group of its own, made with the candidate in the environment, so
every group reads it at creation like a real job would. The search goes one
setting at a time, each stage keeping the best so far:

  1. RINGREDUCE_ALGORITHM     auto (the cost model), ring, halving_doubling, direct
  2. RINGREDUCE_SEGMENT_BYTES the ring's pipeline segment (when the ring may run)
  3. RINGREDUCE_SPIN_US / RINGREDUCE_WAIT_SPIN_US   poll before sleeping
  4. RINGREDUCE_WIRE_DTYPE    bf16 or fp16 on the wire (lossy): only with --allow-lossy-wire

A candidate is scored by the geometric mean over the sizes of its time over
the current best's (the slowest rank's median latency per size, the best of
--rounds rounds that visit the candidates in turn) and replaces it only when at
least --margin (3%) faster, so noise does not pick. RINGREDUCE_CUDA_ONESHOT_BYTES
and RINGREDUCE_CUDA_ALGO concern CUDA tensors and are not tuned here (CPU
tensors only). The before/after table compares the settings this run started
with (the environment, and RINGREDUCE_CONFIG if set) with the chosen ones.

Every process it starts is killed by --timeout at the latest.
"""
import argparse
import json
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

ALGORITHMS = ("auto", "ring", "halving_doubling", "direct")
SEGMENT_BYTES = (64 << 10, 128 << 10, 256 << 10, 1 << 20, 4 << 20)
# (RINGREDUCE_SPIN_US, RINGREDUCE_WAIT_SPIN_US)
SPINS = ((0, 0), (0, 100), (50, 300), (50, 1000), (50, 5000), (200, 1000), (200, 5000))
QUICK_SPINS = ((0, 100), (50, 1000), (50, 5000))
WIRE_DTYPES = ("none", "bf16", "fp16")
TUNED_KEYS = ("RINGREDUCE_ALGORITHM", "RINGREDUCE_SEGMENT_BYTES", "RINGREDUCE_SPIN_US",
              "RINGREDUCE_WAIT_SPIN_US", "RINGREDUCE_WIRE_DTYPE")
DDP_FIRST_BUCKET = 1 << 20  # torch.distributed's _DEFAULT_FIRST_BUCKET_BYTES

_UNITS = {"": 1, "b": 1, "k": 1 << 10, "kib": 1 << 10, "kb": 1000, "m": 1 << 20, "mib": 1 << 20,
          "mb": 1000 ** 2, "g": 1 << 30, "gib": 1 << 30, "gb": 1000 ** 3}


def parse_size(text):
    """'4KiB' -> 4096, '1MiB', '64M', '1000000', '1.5MB' -> bytes."""
    match = re.fullmatch(r"\s*([0-9.]+(?:e[0-9]+)?)\s*([a-zA-Z]*)\s*", text)
    if not match or match.group(2).lower() not in _UNITS:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (e.g. 4KiB, 1MiB, 64MiB)")
    size = int(float(match.group(1)) * _UNITS[match.group(2).lower()])
    if size < 4:
        raise argparse.ArgumentTypeError(f"size {text!r} is below one float32")
    return size


def format_size(size):
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= scale and size % scale == 0:
            return f"{size // scale} {unit}"
    return f"{size} B"


def ddp_bucket_sizes(bucket_mb, model_params=None):
    """The allreduce sizes DDP issues for float32 gradients: a first bucket of
    1 MiB, then buckets of bucket_mb MiB, the last one holding the rest."""
    cap = int(bucket_mb * (1 << 20))
    if model_params is None:
        return sorted({min(DDP_FIRST_BUCKET, cap), cap})
    total = int(model_params) * 4
    sizes, left = [], total
    for bucket in [min(DDP_FIRST_BUCKET, cap)] + [cap] * (total // max(cap, 1) + 1):
        if left <= 0:
            break
        sizes.append(min(bucket, left))
        left -= bucket
    return sorted({s - s % 4 for s in sizes if s >= 4})


def read_config(path):
    """The KEY=VALUE lines of a config file as a dict (the rules csrc/core/config/config.cpp
    applies: '#' comments and blank lines skipped, spaces trimmed)."""
    settings = {}
    with open(path) as lines:
        for number, line in enumerate(lines, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            if "=" not in line:
                raise ValueError(f"{path} line {number}: {line!r} is not KEY=VALUE")
            key, value = (part.strip() for part in line.split("=", 1))
            settings[key] = value
    return settings


def iterations(size, quick):
    """Timed allreduces per size: about 512 MiB (quick: 128 MiB) moved, within bounds.
    The same on every rank (the ranks must issue the same collectives)."""
    budget, low, high = ((128 << 20), 3, 15) if quick else ((512 << 20), 5, 50)
    return max(low, min(high, budget // size))


# --------------------------------------------------------------------------- ranks

def _make_group(dist, env):
    """A new ringreduce group made with `env` in the environment, and its settings."""
    import torch_ringreduce

    saved = {key: os.environ.get(key) for key in env}
    os.environ.update({key: str(value) for key, value in env.items()})
    try:
        group = dist.new_group(backend="ringreduce")
        return group, torch_ringreduce.config(group)
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _time(dist, torch, group, size, quick):
    """This rank's median latency (seconds) for `size` bytes on `group`."""
    tensor = torch.ones(size // 4)
    count = iterations(size, quick)
    for _ in range(max(2, count // 4)):
        dist.all_reduce(tensor, group=group)
    times = []
    for _ in range(count):
        start = time.perf_counter()
        dist.all_reduce(tensor, group=group)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _check(dist, torch, group, size):
    """One allreduce whose result is exact in every wire dtype (small integers)."""
    world = dist.get_world_size(group)
    check = torch.full((size // 4,), float(dist.get_rank(group) + 1))
    dist.all_reduce(check, group=group)
    if not torch.equal(check, torch.full_like(check, world * (world + 1) / 2)):
        raise RuntimeError("wrong allreduce result while tuning")


def _compare(dist, torch, envs, sizes, quick, rounds):
    """Per candidate environment: the slowest rank's best median per size over
    `rounds` rounds that visit every candidate's group in turn (so a busy
    moment of the machine hits them all), and each group's settings. Each
    size goes through every group before the next size, so the candidates
    are compared within moments of each other (a loaded machine's latency
    drifts over seconds)."""
    made = [_make_group(dist, env) for env in envs]
    best = torch.full((len(envs), len(sizes)), float("inf"), dtype=torch.float64)
    try:
        for group, _ in made:
            _check(dist, torch, group, max(sizes))  # connected, warm and right
        for size in sorted(sizes):
            order = list(range(len(made)))
            for _ in range(rounds):
                for index in order:
                    median = _time(dist, torch, made[index][0], size, quick)
                    best[index, sizes.index(size)] = min(best[index, sizes.index(size)], median)
                order.reverse()  # no candidate always first
    finally:
        for group, _ in made:
            dist.destroy_process_group(group)
    # Every rank decides from the same figures: the slowest rank's.
    dist.all_reduce(best, op=dist.ReduceOp.MAX)
    return best.tolist(), [settings for _, settings in made]


def _worker(plan_path):
    import datetime

    import torch
    import torch.distributed as dist

    import torch_ringreduce  # noqa: F401  registers the backend

    torch.set_num_threads(1)
    with open(plan_path) as f:
        plan = json.load(f)
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dist.init_process_group("ringreduce", init_method=plan["init_method"], rank=rank,
                            world_size=world, timeout=datetime.timedelta(seconds=plan["timeout"]))
    sizes, quick, rounds = plan["sizes"], plan["quick"], plan["rounds"]
    log = []

    def note(text):
        if rank == 0:
            print(text, flush=True)
            log.append(text)

    # The settings this run starts from: the environment (and RINGREDUCE_CONFIG).
    group, start_settings = _make_group(dist, {})
    dist.destroy_process_group(group)
    start = {key: start_settings[key] for key in TUNED_KEYS}
    chosen = dict(start)

    def stage(name, candidates):
        """Measures the current choice and each candidate (settings over it);
        keeps the fastest when it beats the current by the margin."""
        candidates = [c for c in candidates
                      if not all(chosen[key] == str(value) for key, value in c.items())]
        if not candidates:
            return
        times, _ = _compare(dist, torch, [chosen] + [dict(chosen, **c) for c in candidates],
                            sizes, quick, rounds)
        scores = [statistics.geometric_mean(t / b for t, b in zip(row, times[0]))
                  for row in times]
        winner = min(range(len(scores)), key=scores.__getitem__)
        keep = winner > 0 and scores[winner] < 1.0 - plan["margin"]
        label = lambda c: "/".join(str(v) for v in c.values())  # noqa: E731
        if plan["verbose"]:
            for label_env, row in zip([{}] + candidates, times):
                note(f"  {label_env or 'current'}: "
                     + ", ".join(f"{t * 1e6:.1f}" for t in row) + " us")
        note(f"{name} (time / current): current {scores[0]:.2f}, "
             + ", ".join(f"{label(c)} {score:.2f}" for c, score in zip(candidates, scores[1:]))
             + (f" -> {label(candidates[winner - 1])}" if keep else " -> unchanged"))
        if keep:
            chosen.update({key: str(value) for key, value in candidates[winner - 1].items()})

    stage("RINGREDUCE_ALGORITHM", [{"RINGREDUCE_ALGORITHM": a} for a in ALGORITHMS])
    if chosen["RINGREDUCE_ALGORITHM"] in ("auto", "ring"):
        segments = [s for s in SEGMENT_BYTES if s < max(sizes) // 2]
        stage("RINGREDUCE_SEGMENT_BYTES",
              [{"RINGREDUCE_SEGMENT_BYTES": s} for s in (segments[::2] if quick else segments)])
    stage("RINGREDUCE_SPIN_US/RINGREDUCE_WAIT_SPIN_US",
          [{"RINGREDUCE_SPIN_US": s, "RINGREDUCE_WAIT_SPIN_US": w}
           for s, w in (QUICK_SPINS if quick else SPINS)])
    if plan["allow_lossy_wire"]:
        stage("RINGREDUCE_WIRE_DTYPE (lossy)", [{"RINGREDUCE_WIRE_DTYPE": w} for w in WIRE_DTYPES])
    # Before and after, measured alike: interleaved rounds, one more than a stage's.
    (before, after), _ = _compare(dist, torch, [start, chosen], sizes, quick, rounds + 1)
    if rank == 0:
        with open(plan["result"], "w") as f:
            json.dump({"before": before, "after": after, "chosen": chosen, "start": start,
                       "log": log}, f)
    dist.barrier()
    dist.destroy_process_group()


# --------------------------------------------------------------------------- launcher

def _launch(plan, nproc, timeout):
    """Runs the ranks; returns rank 0's result. Kills them all on any failure."""
    env = dict(os.environ)
    env.pop("RINGREDUCE_AUTOTUNE", None)  # measured settings, not tuned ones
    env.setdefault("OMP_NUM_THREADS", "1")
    env.setdefault("UCX_NET_DEVICES", "lo")
    procs = []
    deadline = time.monotonic() + timeout
    try:
        for rank in range(nproc):
            procs.append(subprocess.Popen(
                [sys.executable, "-m", "torch_ringreduce.tune", "--_worker", plan["plan_path"]],
                env=dict(env, RANK=str(rank), WORLD_SIZE=str(nproc)), start_new_session=True))
        while any(p.poll() is None for p in procs):
            failed = [p for p in procs if p.returncode not in (None, 0)]
            if failed:
                raise RuntimeError(f"a tuning rank exited with status {failed[0].returncode}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"tuning took longer than --timeout {timeout} s")
            time.sleep(0.1)
        if any(p.returncode != 0 for p in procs):
            raise RuntimeError("a tuning rank failed: " +
                               ", ".join(str(p.returncode) for p in procs))
    finally:
        for p in procs:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                p.wait()
    with open(plan["result"]) as f:
        return json.load(f)


def _write_config(path, result, args, sizes):
    lines = [f"# ringreduce settings measured by python -m torch_ringreduce.tune on "
             f"{socket.gethostname()}, {time.strftime('%Y-%m-%d %H:%M')}",
             f"# world {args.nproc}, float32 SUM allreduces of "
             f"{', '.join(format_size(s) for s in sizes)}{' (quick)' if args.quick else ''}",
             "# Use: RINGREDUCE_CONFIG=this-file (variables set in the environment win).",
             "# RINGREDUCE_CUDA_ONESHOT_BYTES / RINGREDUCE_CUDA_ALGO: not tuned (CPU tensors "
             "only here)."]
    for key in TUNED_KEYS:
        if key == "RINGREDUCE_WIRE_DTYPE" and not args.allow_lossy_wire:
            continue  # never chosen without --allow-lossy-wire: left to the environment
        lines.append(f"{key}={result['chosen'][key]}")
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write("\n".join(lines) + "\n")
    os.replace(tmp, path)


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m torch_ringreduce.tune",
                                     description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=lambda text: [parse_size(s) for s in text.split(",")],
                        help="allreduce sizes to tune for, e.g. 4KiB,1MiB,64MiB")
    parser.add_argument("--ddp-bucket-mb", type=float,
                        help="tune for DDP's buckets of this cap (default 25, DDP's own)")
    parser.add_argument("--model-params", type=float,
                        help="with --ddp-bucket-mb: the model's parameter count (float32)")
    parser.add_argument("--nproc", type=int, default=2, help="ranks on this machine (2)")
    parser.add_argument("--quick", action="store_true", help="fewer candidates and iterations")
    parser.add_argument("--allow-lossy-wire", action="store_true",
                        help="also try 16-bit wire dtypes for float32 (lossy)")
    parser.add_argument("--margin", type=float, default=0.03,
                        help="how much faster a candidate must be to replace the best (0.03)")
    parser.add_argument("--rounds", type=int,
                        help="times each candidate is measured, interleaved (2; --quick 1)")
    parser.add_argument("--verbose", action="store_true",
                        help="print every candidate's median per size")
    parser.add_argument("--output", help="config file to write (KEY=VALUE lines)")
    parser.add_argument("--timeout", type=float,
                        help="seconds before every rank is killed (300; --quick 120)")
    parser.add_argument("--_worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args._worker:
        return _worker(args._worker)
    if args.sizes and (args.ddp_bucket_mb or args.model_params):
        parser.error("--sizes or --ddp-bucket-mb/--model-params, not both")
    if args.nproc < 2:
        parser.error("--nproc must be at least 2")
    sizes = sorted(set(args.sizes or ddp_bucket_sizes(args.ddp_bucket_mb or 25,
                                                       args.model_params)))
    sizes = [s - s % 4 for s in sizes]
    timeout = args.timeout or (120 if args.quick else 300)
    folder = tempfile.mkdtemp(prefix="ringreduce_tune_")
    try:
        plan = {"sizes": sizes, "quick": args.quick,
                "rounds": args.rounds or (1 if args.quick else 2),
                "allow_lossy_wire": args.allow_lossy_wire, "verbose": args.verbose,
                "margin": args.margin, "timeout": timeout,
                "init_method": f"file://{os.path.join(folder, 'store')}",
                "result": os.path.join(folder, "result.json"),
                "plan_path": os.path.join(folder, "plan.json")}
        with open(plan["plan_path"], "w") as f:
            json.dump(plan, f)
        print(f"tuning world {args.nproc} for {', '.join(format_size(s) for s in sizes)} "
              f"(timeout {timeout:.0f} s)", flush=True)
        result = _launch(plan, args.nproc, timeout)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    print("\nRINGREDUCE_CUDA_ONESHOT_BYTES: not tuned (CUDA tensors; this tool measures CPU)")
    print("\nsetting                     before -> after")
    for key in TUNED_KEYS:
        print(f"{key:<27} {result['start'][key]} -> {result['chosen'][key]}")
    print(f"\n{'size':>10} {'before (us)':>12} {'after (us)':>12} {'after/before':>13}")
    for size, old, new in zip(sizes, result["before"], result["after"]):
        print(f"{format_size(size):>10} {old * 1e6:>12.1f} {new * 1e6:>12.1f} {new / old:>13.2f}")
    if args.output:
        _write_config(args.output, result, args, sizes)
        print(f"\nwrote {args.output}: use it with RINGREDUCE_CONFIG={args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
