"""Collectives while other processes keep the cores busy: ringreduce against
gloo in the same processes, with K pure-CPU processes running beside the ranks.

    OMP_NUM_THREADS=1 torchrun --standalone --nproc-per-node 2 benchmarks/busy_cores.py \
        [--busy 0,2,4,8] [--sizes 4096,65536,262144,1048576,4194304] [--iters 60] \
        [--ddp-steps 20] [--backends ringreduce,fixed,ucx,gloo] \
        [--ops all_reduce,async_all_gather_into_tensor,functional_all_gather_tensor,...]

Real jobs are rarely alone on their cores: DataLoader workers decode and
augment beside the ranks, and clusters share nodes. For each K in --busy,
rank 0 starts K processes that spin on the CPU (and kills them afterwards);
then every size is timed on each backend, the backends taking turns in
rounds so that the load's ups and downs hit them alike. Each op comes after
--gap-us of compute with its tensor written just before it (as backward
writes a gradient bucket; each backend its own tensors, since a path may
move a buffer that comes back onto 2 MiB pages), and is timed on every rank from the call to
wait() returning; the figure for an op is the slowest rank's
(benchmarks/latency.py). Prints p50 and p90 per backend, and gloo's over
each ringreduce group's (above 1: faster than gloo).

Ops (--ops; a size is the bytes each rank writes before the op): all_reduce
(the default), all_gather_into_tensor and reduce_scatter_tensor (what FSDP and
ZeRO-3 issue for every layer; the scatter's output is the size over the
world) and broadcast from rank 0 (ZeRO's parameters at start); each also as
async_<op> (`async_op=True` and `wait()`: DDP's buckets, FSDP's and ZeRO's
prefetches), and functional_all_reduce, functional_all_gather_tensor and
functional_reduce_scatter_tensor (torch's functional collectives and
`wait_tensor`, eager: what DTensor calls).

Backends: "ringreduce" as configured (its waits adapt to the load,
core/base/spin_budget.h), "fixed" a second ringreduce group made with
RINGREDUCE_ADAPTIVE_SPIN=0 (the spins decided once at group creation, as
before the spin budget: the "before" figures, in the same processes), "ucx"
a ringreduce group made with RINGREDUCE_SHM_BYTES=0 (no host channel: UCX
and cma alone), and "gloo".

Then a DDP step (--ddp-steps > 0): a small transformer encoder per backend,
fed by a DataLoader with --workers worker processes per rank whose every
sample costs --sample-ms of CPU (decoding, augmenting), the backends'
steps alternating on the same batches (which goes first after a batch, as
the workers start on the next one, rotates). Prints the median and p90 step of
the slowest rank per backend and the ratio to gloo's.
"""
import argparse
import atexit
import itertools
import os
import subprocess
import sys
import time
import warnings

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_ringreduce  # noqa: F401,E402  registers "ringreduce"
from ddp_step import Runner, build_model  # noqa: E402
from build_info import loaded_build  # noqa: E402
from latency import busy, per_op, percentiles  # noqa: E402

BUSY_LOOP = "while True: pass"


class BusyProcesses:
    """K processes spinning on the CPU for as long as the block lasts."""

    def __init__(self, count):
        self.count = count
        self.procs = []

    def __enter__(self):
        for _ in range(self.count):
            self.procs.append(subprocess.Popen([sys.executable, "-c", BUSY_LOOP]))
        atexit.register(self.stop)
        return self

    def stop(self):
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
        for proc in self.procs:
            proc.wait(timeout=10)
        self.procs = []

    def __exit__(self, *exc):
        self.stop()


def make_groups(names):
    groups = {}
    for name in names:
        if name == "ringreduce":
            groups[name] = dist.group.WORLD
        elif name == "fixed":
            # The spins as before the spin budget (read when a group is made).
            os.environ["RINGREDUCE_ADAPTIVE_SPIN"] = "0"
            groups[name] = dist.new_group(backend="ringreduce")
            del os.environ["RINGREDUCE_ADAPTIVE_SPIN"]
        elif name == "ucx":
            # The host channel off: UCX and cma alone (issue 53's "at least
            # the UCX path's own figure").
            os.environ["RINGREDUCE_SHM_BYTES"] = "0"
            groups[name] = dist.new_group(backend="ringreduce")
            del os.environ["RINGREDUCE_SHM_BYTES"]
        elif name == "gloo":
            groups[name] = dist.new_group(backend="gloo")
        else:
            raise SystemExit(f"unknown backend {name!r}: ringreduce, fixed, ucx or gloo")
    return groups


def op_call(name, tensor, world):
    """The timed call of op `name` on `tensor` (written before each call),
    with any output it needs made once. "async_<op>" is <op> with
    `async_op=True` and `wait()`; "functional_<op>" torch's functional
    collective (which allocates its output at each call) and `wait_tensor`."""
    if name.startswith("functional_"):
        return functional_call(name[len("functional_"):], tensor)
    asynchronous = name.startswith("async_")
    issue = sync_call(name[len("async_"):] if asynchronous else name, tensor, world)
    if asynchronous:
        return lambda group: issue(group, True).wait()
    return lambda group: issue(group, False)


def sync_call(name, tensor, world):
    """(group, async_op) -> the Work of op `name`, or None."""
    if name == "all_reduce":
        return lambda group, a: dist.all_reduce(tensor, group=group, async_op=a)
    if name == "all_gather_into_tensor":
        gathered = torch.empty(world * tensor.numel(), dtype=tensor.dtype)
        return lambda group, a: dist.all_gather_into_tensor(gathered, tensor, group=group,
                                                            async_op=a)
    if name == "reduce_scatter_tensor":
        if tensor.numel() % world:
            raise SystemExit(f"reduce_scatter_tensor: {tensor.numel()} elements do not split "
                             f"over {world} ranks")
        scattered = torch.empty(tensor.numel() // world, dtype=tensor.dtype)
        return lambda group, a: dist.reduce_scatter_tensor(scattered, tensor, group=group,
                                                           async_op=a)
    if name == "broadcast":
        # The group's rank 0 (a global rank: the groups span the world).
        return lambda group, a: dist.broadcast(tensor, src=0, group=group, async_op=a)
    raise SystemExit(f"unknown op {name!r}: {OPS_HELP}")


def functional_call(name, tensor):
    """As DTensor and compiled graphs call them, eagerly."""
    import torch.distributed._functional_collectives as funcol
    # torch 2.13 names the tensor forms deprecated (for the *_single ones
    # that do the same); DTensor still calls them.
    warnings.filterwarnings("ignore", category=FutureWarning)
    if name == "all_reduce":
        return lambda group: funcol.wait_tensor(funcol.all_reduce(tensor, "sum", group))
    if name == "all_gather_tensor":
        return lambda group: funcol.wait_tensor(funcol.all_gather_tensor(tensor, 0, group))
    if name == "reduce_scatter_tensor":
        return lambda group: funcol.wait_tensor(
            funcol.reduce_scatter_tensor(tensor, "sum", 0, group))
    raise SystemExit(f"unknown op functional_{name!r}: {OPS_HELP}")


OPS_HELP = ("all_reduce, all_gather_into_tensor, reduce_scatter_tensor or broadcast, each also "
            "as async_<op>; functional_all_reduce, functional_all_gather_tensor or "
            "functional_reduce_scatter_tensor")


def time_after_gap(group, call, tensor, source, iters, gap_s):
    """(start, end) per op, each after `gap_s` of compute and a write of the
    whole tensor."""
    spans = []
    for _ in range(iters):
        busy(gap_s)
        tensor.copy_(source)
        start = time.perf_counter()
        call(group)
        spans.append((start, time.perf_counter()))
    return spans


def collectives(args, groups, control, rank):
    names = list(groups)
    rings = [n for n in names if n != "gloo"]
    per_round = max(1, args.iters // args.rounds)
    world = dist.get_world_size()
    ops = [o for o in args.ops.split(",") if o]
    for k in (int(x) for x in args.busy.split(",") if x):
        with BusyProcesses(k if rank == 0 else 0):
            dist.barrier(group=control)
            time.sleep(args.settle_s)
            for op in ops:
                if rank == 0:
                    load = os.getloadavg()[0]
                    print(f"\n# {op}, {k} busy processes (load average {load:.1f}); per op the "
                          f"slowest rank, us; {per_round * args.rounds} ops per cell after "
                          f"{args.gap_us:.0f} us of compute")
                    head = " | ".join(f"{n + ' p50':>15} {'p90':>7}" for n in names)
                    ratios = " ".join(f"{'gloo/' + n + ' p50':>19} {'p90':>5}" for n in rings)
                    print(f"# {'bytes':>8} | {head} | {ratios}")
                for size in (int(s) for s in args.sizes.split(",")):
                    time_size(args, groups, control, rank, op, size, world, per_round)
            dist.barrier(group=control)


def time_size(args, groups, control, rank, op, size, world, per_round):
    names = list(groups)
    rings = [n for n in names if n != "gloo"]
    count = max(1, size // 4)
    source = torch.rand(count, generator=torch.Generator().manual_seed(rank))
    # Each group its own tensors, as each would have alone: what one path
    # does to a buffer's pages (2 MiB pages for a buffer that comes back,
    # core/base/huge_pages.h) must not show in another's figure.
    tensors = {n: torch.empty(count, dtype=torch.float32) for n in names}
    calls = {n: op_call(op, tensors[n], world) for n in names}
    for n, group in groups.items():  # warm-up
        time_after_gap(group, calls[n], tensors[n], source, 3, args.gap_us / 1e6)
    samples = {n: [] for n in names}
    # Every order of the groups in turn: in a fixed one, whichever
    # follows gloo's block (whose calls sleep) always starts on
    # cores that are just waking up.
    orders = list(itertools.permutations(names))
    for i in range(args.rounds):
        for name in orders[i % len(orders)]:
            samples[name] += time_after_gap(groups[name], calls[name], tensors[name], source,
                                            per_round, args.gap_us / 1e6)
    stats = {n: percentiles(per_op(s, control)[0]) for n, s in samples.items()}
    if rank == 0:
        cells = " | ".join(f"{stats[n][0]:15.1f} {stats[n][1]:7.1f}" for n in names)
        g = stats.get("gloo")
        ratios = " ".join(
            f"{g[0] / stats[n][0]:18.2f}x {g[1] / stats[n][1]:4.2f}x" for n in rings
        ) if g else ""
        print(f"  {size:>8} | {cells} | {ratios}", flush=True)


class CpuHeavySamples(torch.utils.data.Dataset):
    """Sequences whose every sample costs `sample_ms` of CPU in the worker."""

    def __init__(self, length, d_model, sample_ms):
        self.length, self.d_model, self.sample_s = length, d_model, sample_ms / 1e3

    def __len__(self):
        return self.length

    def __getitem__(self, index):
        busy(self.sample_s)
        return torch.randn(64, self.d_model, generator=torch.Generator().manual_seed(index))


def ddp_steps(args, groups, control, rank):
    names = list(groups)
    base = build_model(args.layers, args.d_model)
    # "fixed" is a ringreduce group: wrap it as one.
    runners = {n: Runner(base, "ringreduce", dict(groups, ringreduce=groups[n]))
               if n in ("fixed", "ucx") else Runner(base, n, groups) for n in names}
    data = CpuHeavySamples(args.batch * (args.ddp_steps + args.warmup) * 2, args.d_model,
                           args.sample_ms)
    loader = torch.utils.data.DataLoader(data, batch_size=args.batch, num_workers=args.workers,
                                         shuffle=False, persistent_workers=False)
    steps = {n: [] for n in names}
    for i, batch in enumerate(loader):
        if i >= args.warmup + args.ddp_steps:
            break
        # Each batch taken sets the workers to work on the next one: the step
        # right after it runs beside them. The backends take that turn in turn.
        order = names[i % len(names):] + names[:i % len(names)]
        for name in order:
            wall, _, _ = runners[name].step(batch)
            if i >= args.warmup:
                steps[name].append(wall)
    slowest = {}
    for name, times in steps.items():
        t = torch.tensor(times, dtype=torch.float64)
        dist.all_reduce(t, op=dist.ReduceOp.MAX, group=control)
        slowest[name] = t.sort().values
    if rank == 0:
        params = sum(p.numel() for p in base.parameters())
        print(f"\n# DDP step: {args.layers}-layer encoder d_model {args.d_model} "
              f"({params / 1e6:.1f}M parameters), batch {args.batch}, DataLoader "
              f"num_workers={args.workers} per rank, {args.sample_ms} ms of CPU per sample; "
              f"{args.ddp_steps} steps per backend, slowest rank, ms")
        g = slowest.get("gloo")
        for name, t in slowest.items():
            p50, p90 = t[len(t) // 2].item() * 1e3, t[int(0.9 * len(t))].item() * 1e3
            ratio = ""
            if g is not None and name != "gloo":
                ratio = (f"  gloo/{name}: p50 {g[len(g) // 2].item() * 1e3 / p50:.2f}x "
                         f"p90 {g[int(0.9 * len(g))].item() * 1e3 / p90:.2f}x")
            print(f"  {name:>10}: p50 {p50:8.1f}  p90 {p90:8.1f}{ratio}", flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--busy", default="0,2,4,8", help="busy process counts, comma separated")
    p.add_argument("--sizes", default="4096,65536,262144,1048576,4194304",
                   help="message sizes in bytes, comma separated")
    p.add_argument("--ops", default="all_reduce",
                   help="comma separated: " + OPS_HELP)
    p.add_argument("--iters", type=int, default=60, help="ops per size, backend and K")
    p.add_argument("--rounds", type=int, default=6,
                   help="the ops are split into this many interleaved rounds")
    p.add_argument("--gap-us", type=float, default=200.0, help="compute before each op")
    p.add_argument("--settle-s", type=float, default=0.5,
                   help="after starting the busy processes, before timing")
    p.add_argument("--backends", default="ringreduce,fixed,gloo")
    p.add_argument("--ddp-steps", type=int, default=20, help="0: no DDP part")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--workers", type=int, default=2, help="DataLoader workers per rank")
    p.add_argument("--sample-ms", type=float, default=4.0, help="CPU per sample in a worker")
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--d-model", type=int, default=256)
    args = p.parse_args()
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))

    dist.init_process_group("ringreduce")
    rank = dist.get_rank()
    groups = make_groups(args.backends.split(","))
    control = groups.get("gloo") or dist.new_group(backend="gloo")
    if rank == 0:
        print(f"# busy_cores: world {dist.get_world_size()}, {os.cpu_count()} CPUs, "
              f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS')}, backends {args.backends}")
        print(f"# {loaded_build()}", flush=True)
    collectives(args, groups, control, rank)
    if args.ddp_steps > 0:
        ddp_steps(args, groups, control, rank)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
