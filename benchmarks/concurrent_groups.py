"""Many groups under load at once: ringreduce against gloo, same processes.

    torchrun --standalone --nproc-per-node 3 benchmarks/concurrent_groups.py \
        [--ops-per-thread 3000] [--depth 16] [--max-elements 262144] [--idle-groups 8]

Three overlapping groups (the world, ranks {0,1}, ranks {1,2}); each member
rank drives each of its groups from a Python thread of its own, keeping up to
`--depth` asynchronous collectives in flight, `--ops-per-thread` in all,
mixing all_reduce, all_gather_into_tensor, reduce_scatter_tensor, broadcast
and all_to_all_single from 1 element to `--max-elements` float32 elements
(the same pseudo-random sequence on every member). Every result is checked
against what the inputs imply. The backends run one after the other, twice
(ring, gloo, none, ring, ...); each figure is the slowest rank's wall time,
and per backend the CPU seconds the process used and its context switches.
"none" does all the Python work (tensors, expectations, checks) without the
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

OPS = ["all_reduce", "all_gather_into_tensor", "reduce_scatter_tensor", "broadcast",
       "all_to_all_single"]


def expected_and_run(op, group, members, me, count, seed, dry=False):
    """Starts `op` asynchronously; returns (work, check) where check() says
    whether the result is right. Inputs: rank r's element i is
    r * 1000 + i % 1000 + seed % 7, small integers, exact in float32. With
    `dry`, everything but the collective: the same tensors and the same check,
    whose verdict the caller ignores."""
    n = len(members)
    pos = members.index(me)
    base = seed % 7

    def value(rank, index):
        return rank * 1000 + index % 1000 + base

    idx = torch.arange(count, dtype=torch.float32) % 1000
    mine = me * 1000 + idx + base
    if op == "all_reduce":
        t = mine.clone()
        work = dry or dist.all_reduce(t, group=group, async_op=True)
        want = sum(r * 1000 for r in members) + n * (idx + base)
        return work, lambda: torch.equal(t, want)
    if op == "broadcast":
        root = members[seed % n]
        t = mine.clone()
        work = dry or dist.broadcast(t, src=root, group=group, async_op=True)
        return work, lambda: torch.equal(t, root * 1000 + idx + base)
    if op == "all_gather_into_tensor":
        out = torch.empty(count * n)
        work = dry or dist.all_gather_into_tensor(out, mine, group=group, async_op=True)
        want = torch.cat([r * 1000 + idx + base for r in members])
        return work, lambda: torch.equal(out, want)
    big_idx = torch.arange(count * n, dtype=torch.float32) % 1000
    if op == "reduce_scatter_tensor":
        inp = me * 1000 + big_idx + base
        out = torch.empty(count)
        work = dry or dist.reduce_scatter_tensor(out, inp, group=group, async_op=True)
        want = (sum(r * 1000 for r in members) + n * (big_idx + base))[pos * count:(pos + 1) * count]
        return work, lambda: torch.equal(out, want)
    # all_to_all_single: block j of rank r's input goes to member j.
    inp = me * 1000 + big_idx + base
    out = torch.empty(count * n)
    work = dry or dist.all_to_all_single(out, inp, group=group, async_op=True)
    want = torch.cat([(r * 1000 + big_idx + base)[pos * count:(pos + 1) * count] for r in members])
    return work, lambda: torch.equal(out, want)


def drive(group, members, me, args, seed, failures, dry):
    rng = random.Random(seed)  # the same sequence on every member of the group
    in_flight = []
    for i in range(args.ops_per_thread):
        op = OPS[rng.randrange(len(OPS))]
        count = max(1, int(args.max_elements ** rng.random()))
        in_flight.append(expected_and_run(op, group, members, me, count, rng.randrange(1 << 30),
                                          dry))
        if len(in_flight) >= args.depth:
            work, check = in_flight.pop(0)
            if not dry:
                work.wait()
            if not check() and not dry:
                failures.append(f"{op} #{i} on rank {me}")
    for work, check in in_flight:
        if not dry:
            work.wait()
        if not check() and not dry:
            failures.append(f"final check on rank {me}")


def run_load(backend, args, rank):
    """backend "none": the same Python work (tensors, expectations, checks)
    without the collectives: the floor under both backends' times."""
    layouts = [[0, 1, 2], [0, 1], [1, 2]]
    dry = backend == "none"
    groups = [(None if dry else dist.new_group(ranks, backend=backend), ranks)
              for ranks in layouts]
    dist.barrier()
    failures = []
    usage0 = resource.getrusage(resource.RUSAGE_SELF)
    start = time.perf_counter()
    threads = [threading.Thread(target=drive,
                                args=(g, members, rank, args, 1234 + k, failures, dry))
               for k, (g, members) in enumerate(groups) if rank in members]
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
    p.add_argument("--max-elements", type=int, default=262144, help="1 MiB of float32")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--idle-groups", type=int, default=8)
    p.add_argument("--idle-seconds", type=float, default=5.0)
    args = p.parse_args()
    dist.init_process_group("gloo")  # the control plane; the measured groups are new ones
    rank, world = dist.get_rank(), dist.get_world_size()
    assert world == 3, "three overlapping groups need world 3"
    torch.set_num_threads(1)
    results = {"ringreduce": [], "gloo": [], "none": []}
    if rank == 0:
        print(f"# 3 overlapping groups (world, {{0,1}}, {{1,2}}), a thread per group and rank, "
              f"{args.ops_per_thread} ops per thread, {args.depth} in flight, 1..{args.max_elements}"
              f" float32 elements; slowest rank")
        print(f"# {'backend':>10} | {'wall s':>7} {'cpu s':>7} {'ctx sw':>8} | failures")
    for _ in range(args.rounds):
        for backend in ("ringreduce", "gloo", "none"):
            (wall, cpu, switches, failed), failures = run_load(backend, args, rank)
            results[backend].append(wall)
            if rank == 0:
                print(f"  {backend:>10} | {wall:7.2f} {cpu:7.2f} {switches:8.0f} | {failed:.0f} "
                      + "; ".join(failures[:3]), flush=True)
    if rank == 0:
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
