"""What RINGREDUCE_TIMELINE costs a DDP training step: steps/s of a small
DDP model, world 2 on this machine, with the timeline off and on.

    python benchmarks/timeline_overhead.py [--blocks 40] [--steps 10]

The variable is read when a group is made, so each rank makes two groups
of the same two ranks, the default one without the timeline and a second
one with it, and trains one copy of the model over each (DDP). Blocks of
--steps steps alternate between the two (off, on, then on, off, ...), so
that the load of a shared machine, which drifts over seconds, hits both
alike; a whole run would not. The figure of a block is the slower rank's
steps/s. Printed: steps/s off and on over all blocks, their ratio (0.97 is
a 3% cost), the median and spread of the per-pair ratios, the CPU time
(user + system, every thread) both ranks spent per step, and the size of
rank 0's timeline.

The model is an MLP of 1.6 M parameters with 1 MB DDP buckets: seven
allreduces per step, queued behind each other as backward produces them,
each cut into segments whose waits and reductions the timeline records.
"""
import argparse
import multiprocessing
import os
import resource
import statistics
import tempfile
import time


def rank_main(rank, world, tmp, blocks, steps, control, results):
    os.environ["OMP_NUM_THREADS"] = "1"
    os.environ.setdefault("UCX_NET_DEVICES", "lo")
    os.environ.pop("RINGREDUCE_TIMELINE", None)
    import torch
    import torch.distributed as dist
    import torch.nn as nn

    import torch_ringreduce  # noqa: F401

    torch.set_num_threads(1)
    dist.init_process_group("ringreduce", init_method=f"file://{tmp}/store", rank=rank,
                            world_size=world)
    if not control:
        os.environ["RINGREDUCE_TIMELINE"] = os.path.join(tmp, "timeline.{rank}.json")
    timed = dist.new_group(list(range(world)))
    os.environ.pop("RINGREDUCE_TIMELINE", None)

    def trainer(group):
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(256, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(),
                              nn.Linear(1024, 256))
        ddp = nn.parallel.DistributedDataParallel(model, bucket_cap_mb=1, process_group=group)
        optimizer = torch.optim.SGD(ddp.parameters(), lr=0.01)
        x, y = torch.randn(32, 256), torch.randn(32, 256)

        def step():
            optimizer.zero_grad()
            nn.functional.mse_loss(ddp(x), y).backward()
            optimizer.step()
        return step

    trainers = {"off": trainer(None), "on": trainer(timed)}
    for step in trainers.values():
        for _ in range(10):
            step()
    times = {"off": [], "on": []}
    cpu = {"off": 0.0, "on": 0.0}
    for block in range(blocks):
        order = ("off", "on") if block % 2 == 0 else ("on", "off")
        for name in order:
            dist.barrier()
            before = resource.getrusage(resource.RUSAGE_SELF)
            start = time.perf_counter()
            for _ in range(steps):
                trainers[name]()
            times[name].append(time.perf_counter() - start)
            after = resource.getrusage(resource.RUSAGE_SELF)
            cpu[name] += (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    dist.destroy_process_group()
    results.put((rank, times, cpu))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--blocks", type=int, default=40)
    parser.add_argument("--steps", type=int, default=10, help="steps per block")
    parser.add_argument("--control", action="store_true",
                        help="the timeline off in both groups: what the two groups differ by "
                             "without it (the ratio should be 1)")
    args = parser.parse_args()
    ctx = multiprocessing.get_context("spawn")
    results = ctx.Queue()
    with tempfile.TemporaryDirectory(prefix="ringreduce-bench-") as tmp:
        procs = [ctx.Process(target=rank_main,
                             args=(r, 2, tmp, args.blocks, args.steps, args.control, results))
                 for r in range(2)]
        for p in procs:
            p.start()
        ranks = [results.get(timeout=1800) for _ in procs]
        for p in procs:
            p.join(timeout=60)
            if p.exitcode != 0:
                raise RuntimeError(f"a rank exited with {p.exitcode}")
        path = os.path.join(tmp, "timeline.0.json")
        size = os.path.getsize(path) if os.path.exists(path) else 0
    # A block takes as long as its slower rank.
    block = {name: [max(r[1][name][i] for r in ranks) for i in range(args.blocks)]
             for name in ("off", "on")}
    total = args.blocks * args.steps
    rate = {name: total / sum(block[name]) for name in block}
    cpu = {name: sum(r[2][name] for r in ranks) / total * 1e3 for name in block}
    pairs = [off / on for off, on in zip(block["off"], block["on"])]  # on's steps/s over off's
    print(f"# DDP MLP 1.6M params, 1 MB buckets, world 2: {args.blocks} blocks of "
          f"{args.steps} steps each way, alternating")
    print(f"timeline off {rate['off']:.2f} steps/s, on {rate['on']:.2f} steps/s: "
          f"ratio on/off {rate['on'] / rate['off']:.3f}")
    print(f"per block pair on/off: median {statistics.median(pairs):.3f}, "
          f"quartiles {statistics.quantiles(pairs, n=4)[0]:.3f}-"
          f"{statistics.quantiles(pairs, n=4)[2]:.3f}")
    print(f"CPU per step, both ranks: off {cpu['off']:.2f} ms, on {cpu['on']:.2f} ms "
          f"({(cpu['on'] / cpu['off'] - 1) * 100:+.1f}%)")
    print(f"rank 0 timeline: {size / 1024:.0f} KiB for {args.blocks * args.steps + 10} steps")


if __name__ == "__main__":
    main()
