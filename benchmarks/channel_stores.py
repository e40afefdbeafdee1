"""How a rank writes into the host channel: memcpy against streaming stores
against the timed choice (RINGREDUCE_SHM_STORES), in the same processes.

    OMP_NUM_THREADS=1 UCX_NET_DEVICES=lo torchrun --standalone --nproc-per-node 2 \\
        benchmarks/channel_stores.py [--stores cached,auto,streaming] [--ops all_reduce,all_gather]

One ringreduce group per setting (each reads RINGREDUCE_SHM_STORES when it
is made), timed in blocks of 20 calls whose order changes every round (the
same on every rank), the tensor written before each call; p50 / p90 of rank
0's calls, us. Which way wins depends on where the ranks' cores sit
(docs/TUNING.md, "Writes into the host channel"), so compare only within one
run, and the placement probe printed before and after it.
"""
import argparse
import os
import random
import sys
import time
import warnings

import torch
import torch.distributed as dist

import torch_ringreduce  # noqa: F401  registers the backend

SIZES = (4096, 16384, 65536, 262144, 1048576)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stores", default="cached,auto,streaming")
    parser.add_argument("--ops", default="all_reduce,all_gather")
    parser.add_argument("--rounds", type=int, default=60)
    args = parser.parse_args()
    warnings.simplefilter("ignore", FutureWarning)  # all_gather_into_tensor's, every call
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    kinds = args.stores.split(",")
    groups = {}
    for kind in kinds:
        os.environ["RINGREDUCE_SHM_STORES"] = kind
        groups[kind] = dist.new_group(backend="ringreduce")
    if rank == 0:  # where the VM has put the cores (placement_probe.py)
        from placement_probe import run_probe
        print("# before: " + run_probe(sys.executable), flush=True)
    dist.barrier()
    for op in args.ops.split(","):
        for size in SIZES:
            x = torch.empty(size // 4)
            out = torch.empty(dist.get_world_size() * size // 4)
            sources = [torch.rand(size // 4) for _ in range(2)]
            if op == "all_reduce":
                call = lambda g: dist.all_reduce(x, group=g)  # noqa: E731
            else:
                call = lambda g: dist.all_gather_into_tensor(out, x, group=g)  # noqa: E731
            times = {kind: [] for kind in kinds}
            for turn in range(args.rounds):
                order = list(kinds)
                random.Random(turn).shuffle(order)
                for kind in order:
                    for i in range(23):  # the first 3 bring the ranks together
                        x.copy_(sources[i & 1])
                        start = time.perf_counter()
                        call(groups[kind])
                        if i >= 3:
                            times[kind].append(time.perf_counter() - start)
            if rank == 0:
                cells = []
                for kind in kinds:
                    t = sorted(times[kind])
                    cells.append(f"{kind} {t[len(t) // 2] * 1e6:7.1f} / {t[len(t) * 9 // 10] * 1e6:7.1f}")
                print(f"{op:>10} {size:>8} B: " + " | ".join(cells), flush=True)
    dist.barrier()
    if rank == 0:
        print("# after: " + run_probe(sys.executable), flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
