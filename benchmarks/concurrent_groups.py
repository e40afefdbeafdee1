"""Many groups under load at once: ringreduce against gloo, same processes.

    torchrun --standalone --nproc-per-node 3 benchmarks/concurrent_groups.py \
        [--ops-per-thread 3000] [--depth 16] [--max-elements 262144] [--idle-groups 8]

Three overlapping groups (the world, ranks {0,1}, ranks {1,2}); each member
rank drives each of its groups from a Python thread of its own, keeping up to
`--depth` asynchronous collectives in flight, `--ops-per-thread` in all,
mixing all_reduce, all_gather_into_tensor, reduce_scatter_tensor, broadcast
and all_to_all_single from 1 element to `--max-elements` float32 elements
(`--cases` distinct ones, the same pseudo-random sequence on every member,
prepared with their expected results before the clock starts). Every result
is checked against what the inputs imply. The backends run one after the other, twice
(ring, gloo, none, ring, ...); each figure is the slowest rank's wall time,
and per backend the CPU seconds the process used and its context switches.
"none" does the timed Python work (buffer resets and checks) without the
collectives: the floor under both backends' times.

Then `--idle-groups` more ringreduce groups are created and left idle with
the rest: the CPU the process uses over a few idle seconds.
"""
import argparse
import random
import resource
import threading
import time

import torch
import torch.distributed as dist

import torch_ringreduce  # noqa: F401  registers "ringreduce"

# torch 2.13 renamed these (the old names warn); older torch has only the old.
_all_gather_single = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
_reduce_scatter_single = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor

OPS = ["all_reduce", "all_gather_into_tensor", "reduce_scatter_tensor", "broadcast",
       "all_to_all_single"]


class Case:
    """One collective of the load, prepared before the clock starts: its
    inputs, output buffers and the result every rank must see, so that the
    timed loop only resets in-place buffers, launches and compares. Inputs:
    rank r's element i is r * 1000 + i % 1000 + seed % 7, small integers,
    exact in float32."""

    def __init__(self, op, members, me, count, seed):
        n = len(members)
        pos = members.index(me)
        base = seed % 7
        self.op = op
        idx = torch.arange(count, dtype=torch.float32) % 1000
        self.mine = me * 1000 + idx + base
        big_idx = torch.arange(count * n, dtype=torch.float32) % 1000
        if op == "all_reduce":
            self.out = self.mine.clone()
            self.want = sum(r * 1000 for r in members) + n * (idx + base)
        elif op == "broadcast":
            self.root = members[seed % n]
            self.out = self.mine.clone()
            self.want = self.root * 1000 + idx + base
        elif op == "all_gather_into_tensor":
            self.out = torch.empty(count * n)
            self.want = torch.cat([r * 1000 + idx + base for r in members])
        elif op == "reduce_scatter_tensor":
            self.inp = me * 1000 + big_idx + base
            self.out = torch.empty(count)
            self.want = (sum(r * 1000 for r in members)
                         + n * (big_idx + base))[pos * count:(pos + 1) * count]
        else:  # all_to_all_single: block j of rank r's input goes to member j
            self.inp = me * 1000 + big_idx + base
            self.out = torch.empty(count * n)
            self.want = torch.cat([(r * 1000 + big_idx + base)[pos * count:(pos + 1) * count]
                                   for r in members])

    def launch(self, group, dry):
        """Starts the collective asynchronously (with `dry`, only the buffer
        reset); returns its work, or None."""
        if self.op in ("all_reduce", "broadcast"):
            self.out.copy_(self.mine)  # in place: reset from the last use
        else:
            self.out.zero_()
        if dry:
            return None
        if self.op == "all_reduce":
            return dist.all_reduce(self.out, group=group, async_op=True)
        if self.op == "broadcast":
            return dist.broadcast(self.out, src=self.root, group=group, async_op=True)
        if self.op == "all_gather_into_tensor":
            return _all_gather_single(self.out, self.mine, group=group, async_op=True)
        if self.op == "reduce_scatter_tensor":
            return _reduce_scatter_single(self.out, self.inp, group=group, async_op=True)
        return dist.all_to_all_single(self.out, self.inp, group=group, async_op=True)

    def right(self):
        return torch.equal(self.out, self.want)


def prepare(members, me, args, seed):
    """The thread's cases: `args.cases` distinct ones (the same pseudo-random
    sequence on every member of the group), used in turn. A case comes back
    only after more operations than can be in flight, so its buffers are
    free again."""
    assert args.cases > args.depth
    rng = random.Random(seed)
    cases = []
    for _ in range(args.cases):
        op = OPS[rng.randrange(len(OPS))]
        count = max(1, int(args.max_elements ** rng.random()))
        cases.append(Case(op, members, me, count, rng.randrange(1 << 30)))
    return cases


def drive(group, cases, me, args, failures, dry):
    in_flight = []
    for i in range(args.ops_per_thread):
        case = cases[i % len(cases)]
        in_flight.append((case, case.launch(group, dry)))
        if len(in_flight) >= args.depth:
            done, work = in_flight.pop(0)
            if work is not None:
                work.wait()
            if not done.right() and not dry:
                failures.append(f"{done.op} #{i} on rank {me}")
    for done, work in in_flight:
        if work is not None:
            work.wait()
        if not done.right() and not dry:
            failures.append(f"final {done.op} on rank {me}")


def run_load(backend, args, rank):
    """backend "none": the same timed Python work (buffer resets, checks)
    without the collectives: the floor under both backends' times."""
    layouts = [[0, 1, 2], [0, 1], [1, 2]][:args.groups]
    dry = backend == "none"
    groups = [(None if dry else dist.new_group(ranks, backend=backend), ranks)
              for ranks in layouts]
    failures = []
    work_lists = [(g, prepare(members, rank, args, 1234 + k))
                  for k, (g, members) in enumerate(groups) if rank in members]
    dist.barrier()
    usage0 = resource.getrusage(resource.RUSAGE_SELF)
    start = time.perf_counter()
    threads = [threading.Thread(target=drive, args=(g, cases, rank, args, failures, dry))
               for g, cases in work_lists]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - start
    usage1 = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (usage1.ru_utime + usage1.ru_stime) - (usage0.ru_utime + usage0.ru_stime)
    switches = (usage1.ru_nvcsw + usage1.ru_nivcsw) - (usage0.ru_nvcsw + usage0.ru_nivcsw)
    stats = torch.tensor([wall, cpu, switches, len(failures)], dtype=torch.float64)
    dist.all_reduce(stats, op=dist.ReduceOp.MAX)
    for g, members in groups:
        if rank in members and g is not None:
            dist.destroy_process_group(g)
    return stats.tolist(), failures


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ops-per-thread", type=int, default=3000)
    p.add_argument("--depth", type=int, default=16)
    p.add_argument("--groups", type=int, default=3, choices=(1, 2, 3),
                   help="how many of the three groups to load (1: the world alone)")
    p.add_argument("--cases", type=int, default=64,
                   help="distinct prepared collectives per thread, used in turn")
    p.add_argument("--max-elements", type=int, default=262144, help="1 MiB of float32")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--idle-groups", type=int, default=8)
    p.add_argument("--idle-seconds", type=float, default=5.0)
    p.add_argument("--backends", default="ringreduce,gloo,none",
                   help="which loads to run, in this order each round (e.g. ringreduce "
                        "alone, under a profiler)")
    args = p.parse_args()
    dist.init_process_group("gloo")  # the control plane; the measured groups are new ones
    rank, world = dist.get_rank(), dist.get_world_size()
    assert world == 3, "three overlapping groups need world 3"
    torch.set_num_threads(1)
    backends = args.backends.split(",")
    unknown = set(backends) - {"ringreduce", "gloo", "none"}
    assert not unknown, f"unknown --backends {sorted(unknown)}"
    results = {backend: [] for backend in backends}
    if rank == 0:
        print(f"# 3 overlapping groups (world, {{0,1}}, {{1,2}}), a thread per group and rank, "
              f"{args.ops_per_thread} ops per thread, {args.depth} in flight, 1..{args.max_elements}"
              f" float32 elements; slowest rank")
        print(f"# {'backend':>10} | {'wall s':>7} {'cpu s':>7} {'ctx sw':>8} | failures")
    for _ in range(args.rounds):
        for backend in backends:
            (wall, cpu, switches, failed), failures = run_load(backend, args, rank)
            results[backend].append(wall)
            if rank == 0:
                print(f"  {backend:>10} | {wall:7.2f} {cpu:7.2f} {switches:8.0f} | {failed:.0f} "
                      + "; ".join(failures[:3]), flush=True)
    if rank == 0 and {"ringreduce", "gloo", "none"} <= set(backends):
        ring, gloo = min(results["ringreduce"]), min(results["gloo"])
        floor = min(results["none"])
        print(f"# best of {args.rounds}: ringreduce {ring:.2f} s, gloo {gloo:.2f} s: "
              f"{gloo / ring:.2f}x gloo; the Python work alone (\"none\") {floor:.2f} s, "
              f"above it: ringreduce {ring - floor:.2f} s, gloo {gloo - floor:.2f} s: "
              f"{(gloo - floor) / max(ring - floor, 1e-9):.2f}x")
    if args.idle_groups:
        idle = [dist.new_group(backend="ringreduce") for _ in range(args.idle_groups)]
        for g in idle:
            dist.all_reduce(torch.ones(4), group=g)  # wire them up, then leave them
        time.sleep(1.0)
        before = resource.getrusage(resource.RUSAGE_SELF)
        start = time.perf_counter()
        time.sleep(args.idle_seconds)
        after = resource.getrusage(resource.RUSAGE_SELF)
        share = ((after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)) / (
            time.perf_counter() - start)
        t = torch.tensor([share])
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        if rank == 0:
            print(f"# {args.idle_groups} idle ringreduce groups over {args.idle_seconds:.0f} s: "
                  f"busiest rank used {100 * t.item():.2f}% of a core")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
