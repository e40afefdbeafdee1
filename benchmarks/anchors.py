"""Allreduce against the CPU libraries users could pick instead, in the same processes.

    python3 benchmarks/anchors.py [--world 2] [--sizes 8,4096,65536] [--patterns back-to-back]

launches itself: under Open MPI's `mpirun` when Debian's openmpi-bin and
mpi4py are installed (then Open MPI's own allreduce is timed too), else as
plain processes (like torchrun: RANK, WORLD_SIZE, MASTER_ADDR/PORT). Every
rank then times, on the same float32 tensor, one after the other in
interleaved blocks:

- mpi:        Open MPI's `Allreduce(IN_PLACE)` on the tensor's memory (mpi4py; btl vader);
- deepspeed:  DeepSpeed's CPU shared-memory allreduce, `torch.ops.deepspeed.inference_all_reduce_`
              (when `deepspeed` is installed; it builds its op with ninja on first use);
- ringreduce: `dist.all_reduce` on a ringreduce group;
- gloo:       `dist.all_reduce` on a gloo group (PyTorch's baseline);
- fake:       torch's `fake` backend, which communicates nothing: torch's Python and
              dispatcher, the floor every backend pays through `dist.all_reduce`.

As users run: the tensor is written before each collective (as backward writes
gradients; the write is not timed), torch's intra-op threads as torchrun leaves
them (OMP_NUM_THREADS=1 unless set), two patterns: back-to-back, and after
2 ms of busy CPU work before each call (how DDP's first bucket of a step
arrives, the group idle meanwhile). Per call the slowest rank's time counts
(what a user waits for); with `--patterns late-peer` the last rank computes
10 us (`--late-us`) before each call, the others not, and its time counts.
Printed per size: p50, p90 and the mean, in us, and the ratios (ringreduce - fake) / best peer and ringreduce / best
peer. Libraries take turns in short blocks, round after round, so that each
meets the same machine (a shared VM's speed changes within milliseconds);
mean is over every counted call. Missing libraries are skipped with a message.
"""
import argparse
import os

import anchor_harness as harness
from build_info import loaded_build
from anchor_harness import RankBase, bind, stats_cells, stats_header

LIBRARIES = ("mpi", "deepspeed", "ringreduce", "gloo", "fake")
DEFAULT_SIZES = "8,64,512,4096,32768,65536,262144,1048576,4194304,16777216,67108864"


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    harness.add_arguments(parser, DEFAULT_SIZES, LIBRARIES)
    return harness.finish_arguments(parser.parse_args(), parser)


class Rank(RankBase):
    def __init__(self, args):
        super().__init__(args)
        dist = self.dist
        self.calls = {}  # library: call(tensor, its numpy view)
        if self.comm is not None:
            self.calls["mpi"] = lambda t, a: self.comm.Allreduce(self.MPI.IN_PLACE, a,
                                                                 op=self.MPI.SUM)
        if self.deepspeed_all_reduce is not None:
            self.calls["deepspeed"] = lambda t, a: self.deepspeed_all_reduce(t)
        for name, group in self.torch_groups().items():
            self.calls[name] = lambda t, a, group=group: dist.all_reduce(t, group=group)
        self.names = [n for n in LIBRARIES if n in self.calls]

    def check(self, tensor, source):
        """Every library must produce the sum: a wrong one is no anchor."""
        for name in self.names:
            if name == "fake":
                continue
            tensor.copy_(source[0])
            self.calls[name](tensor, tensor.numpy())
            expected = source[0] * self.world  # every rank writes the same values
            if not self.torch.equal(tensor, expected):
                raise SystemExit(f"{name} gave a wrong sum at {tensor.numel() * 4} B")

    def cell(self, size, before, args, late=False):
        torch = self.torch
        count = max(1, size // 4)
        tensor = torch.empty(count, dtype=torch.float32)
        array = tensor.numpy()
        # Small integers: sums exact in float32, so every library's result can be checked.
        # The same seed on every rank, so the expected sum is world x source.
        seeded = torch.Generator().manual_seed(size)
        source = [torch.randint(-8, 8, (count,), generator=seeded).float() for _ in range(2)]
        self.check(tensor, source)
        calls = {name: bind(self.calls[name], tensor, array) for name in self.names}
        return self.measure(calls, lambda i: tensor.copy_(source[i & 1]), before, args, late)

    def report(self, pattern, size, stats, args):
        if self.rank != 0:
            return
        peers = [n for n in ("mpi", "deepspeed") if n in stats]
        row = f"{pattern:>13} {size:>9} |" + stats_cells(self.names, stats)
        if "ringreduce" in stats and peers:
            best = min(stats[p][0] for p in peers)
            ring = stats["ringreduce"][0]
            floor = stats["fake"][0] if "fake" in stats else 0.0
            row += f" {(ring - floor) / best:9.2f} {ring / best:8.2f}"
        print(row, flush=True)

    def run(self, args):
        if self.rank == 0:
            import torch
            print(f"# allreduce float32 SUM, world {self.world}, torch {torch.__version__}, "
                  f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS')}, "
                  f"{os.cpu_count()} cores; per call the slowest rank; us", flush=True)
            print(f"# {loaded_build()}", flush=True)
            head = f"{'pattern':>13} {'bytes':>9} |" + stats_header(self.names)
            head += f" {'(ring-fake)/best p50':>9} {'ring/best p50':>8}"
            print(head, flush=True)
        for pattern, before in self.patterns(args):
            for size in (int(s) for s in args.sizes.split(",")):
                stats = self.cell(size, before, args, late=pattern == "late-peer")
                self.report(pattern, size, stats, args)
                self.print_sleeps(args)
        self.finish()


if __name__ == "__main__":
    harness.main(__file__, parse_args, Rank)
