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
(what a user waits for); printed per size: p50, p90 and the mean, in us, and the ratios (ringreduce - fake) / best peer and ringreduce / best
peer. Libraries take turns in short blocks, round after round, so that each
meets the same machine (a shared VM's speed changes within milliseconds);
mean is over every counted call. Missing libraries are skipped with a message.
"""
import argparse
import glob
import os
import shutil
import subprocess
import sys
import time

from rank_processes import free_port, start_ranks, wait_for_ranks

LIBRARIES = ("mpi", "deepspeed", "ringreduce", "gloo", "fake")
DEFAULT_SIZES = "8,64,512,4096,32768,65536,262144,1048576,4194304,16777216,67108864"


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--world", type=int, default=2)
    parser.add_argument("--sizes", default=DEFAULT_SIZES,
                        help="bytes, comma separated; 'all' for every power of two 8 B-64 MiB")
    parser.add_argument("--patterns", default="back-to-back,after-compute")
    parser.add_argument("--compute-ms", type=float, default=2.0)
    parser.add_argument("--libraries", default=",".join(LIBRARIES))
    parser.add_argument("--blocks", type=int, default=10,
                        help="rounds per cell at least (each runs every library once)")
    parser.add_argument("--block-calls", type=int, default=16,
                        help="calls per library in a round, at most (fewer for large sizes)")
    parser.add_argument("--cell-seconds", type=float, default=1.0,
                        help="about this long per size and pattern, all libraries together")
    parser.add_argument("--max-calls", type=int, default=4000,
                        help="counted calls per library and cell at most")
    parser.add_argument("--no-mpi", action="store_true", help="launch without mpirun")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.sizes == "all":
        args.sizes = ",".join(str(8 << i) for i in range(24))
    return args


# ---------------------------------------------------------------- launching

def mpi_usable():
    if shutil.which("mpirun") is None:
        return False, "mpirun not found (apt-get install openmpi-bin libopenmpi-dev)"
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        return False, "mpi4py not installed (pip install mpi4py)"
    return True, ""


def launch(args):
    env = dict(os.environ)
    env.setdefault("OMP_NUM_THREADS", "1")  # as torchrun leaves it
    env.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()),
               LOCAL_SIZE=str(args.world), LOCAL_WORLD_SIZE=str(args.world),
               WORLD_SIZE=str(args.world), DS_ACCELERATOR="cpu")
    child = [sys.executable, os.path.abspath(__file__), "--child"] + [
        a for a in sys.argv[1:] if a != "--child"]
    use_mpi, why = (False, "--no-mpi") if args.no_mpi else mpi_usable()
    if not use_mpi:
        print(f"# Open MPI skipped: {why}", flush=True)
    limit = 1800
    if use_mpi:
        # --bind-to none: Open MPI would otherwise pin each rank (and so every
        # library's helper threads) to one core. ob1 + vader is Debian's
        # one-node path (its build has no UCX pml).
        command = ["mpirun", "--allow-run-as-root", "-np", str(args.world), "--bind-to", "none",
                   "--mca", "pml", "ob1", "--mca", "btl", "self,vader"]
        for name in ("PATH", "PYTHONPATH", "OMP_NUM_THREADS", "MASTER_ADDR", "MASTER_PORT",
                     "LOCAL_SIZE", "LOCAL_WORLD_SIZE", "WORLD_SIZE", "DS_ACCELERATOR",
                     "UCX_NET_DEVICES", "LD_LIBRARY_PATH"):
            if name in env:
                command += ["-x", name]
        return subprocess.run(command + child, env=env, timeout=limit).returncode
    return wait_for_ranks(start_ranks(child, env, args.world), limit)


# ---------------------------------------------------------------- one rank

def remove_deepspeed_segments():
    # DeepSpeed never removes its /dev/shm segments; stale ones break the next run.
    for path in glob.glob("/dev/shm/deepspeed_allreduce_buffer*"):
        try:
            os.unlink(path)
        except OSError:
            pass


class Rank:
    def __init__(self, args):
        import torch
        import torch.distributed as dist
        import torch_ringreduce  # noqa: F401  registers "ringreduce"
        from torch.testing._internal.distributed import fake_pg  # noqa: F401  registers "fake"

        self.torch, self.dist = torch, dist
        self.comm = None
        wanted = args.libraries.split(",")
        if "OMPI_COMM_WORLD_RANK" in os.environ and "mpi" in wanted:
            from mpi4py import MPI
            self.MPI, self.comm = MPI, MPI.COMM_WORLD
            rank, world = self.comm.Get_rank(), self.comm.Get_size()
        else:
            rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
        self.rank, self.world = rank, world
        if rank == 0:
            remove_deepspeed_segments()
        dist.init_process_group("ringreduce", init_method="env://", rank=rank, world_size=world)
        self.gloo = dist.new_group(backend="gloo")
        dist.barrier(group=self.gloo)  # the stale segments are gone
        self.calls = {}
        if self.comm is not None:
            self.calls["mpi"] = lambda t, a: self.comm.Allreduce(self.MPI.IN_PLACE, a,
                                                                 op=self.MPI.SUM)
        if "deepspeed" in wanted:
            self._add_deepspeed()
        if "ringreduce" in wanted:
            self.calls["ringreduce"] = lambda t, a: dist.all_reduce(t)
        if "gloo" in wanted:
            self.calls["gloo"] = lambda t, a: dist.all_reduce(t, group=self.gloo)
        if "fake" in wanted:
            fake = dist.new_group(backend="fake")
            self.calls["fake"] = lambda t, a: dist.all_reduce(t, group=fake)
        self.names = [n for n in LIBRARIES if n in self.calls]

    def _add_deepspeed(self):
        try:
            from deepspeed.accelerator import get_accelerator
            # Every rank loads the op; rank 0 builds it first so the others find it built.
            shm = None
            for turn in range(2):
                if (self.rank == 0) == (turn == 0):
                    shm = get_accelerator().create_op_builder("ShareMemCommBuilder").load()
                self.dist.barrier(group=self.gloo)
            shm.initialize(self.world, self.rank)
            op = self.torch.ops.deepspeed.inference_all_reduce_
            self.calls["deepspeed"] = lambda t, a: op(t)
        except Exception as e:  # noqa: BLE001  any reason it cannot run is a skip
            if self.rank == 0:
                print(f"# DeepSpeed skipped: {type(e).__name__}: {e}".splitlines()[0], flush=True)

    def busy(self, seconds):
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            pass

    def time_calls(self, name, tensor, array, source, calls, compute_s):
        """Per call, this rank's seconds from the call to its return."""
        call = self.calls[name]
        clock = time.perf_counter
        out = []
        for i in range(calls):
            tensor.copy_(source[i & 1])  # written before each collective, as backward does
            if compute_s:
                self.busy(compute_s)
            start = clock()
            call(tensor, array)
            out.append(clock() - start)
        return out

    def slowest(self, samples):
        """Per call, the slowest rank's time (what every rank waits for)."""
        t = self.torch.tensor(samples, dtype=self.torch.float64)
        self.dist.all_reduce(t, op=self.dist.ReduceOp.MAX, group=self.gloo)
        return t

    def agree(self, value):
        t = self.torch.tensor([float(value)], dtype=self.torch.float64)
        self.dist.all_reduce(t, op=self.dist.ReduceOp.MAX, group=self.gloo)
        return t.item()

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

    def cell(self, size, compute_s, args):
        torch = self.torch
        count = max(1, size // 4)
        tensor = torch.empty(count, dtype=torch.float32)
        array = tensor.numpy()
        # Small integers: sums exact in float32, so every library's result can be checked.
        # The same seed on every rank, so the expected sum is world x source.
        seeded = torch.Generator().manual_seed(size)
        source = [torch.randint(-8, 8, (count,), generator=seeded).float() for _ in range(2)]
        self.check(tensor, source)
        per_call = {}
        for name in self.names:  # warm-up, and the call count from its speed
            start = time.perf_counter()
            self.time_calls(name, tensor, array, source, 5, compute_s)
            per_call[name] = self.agree((time.perf_counter() - start) / 5)
        # Short blocks in rounds, every library in each round: a shared VM's
        # speed changes within tens of milliseconds, and every library must
        # meet the same machine. Each block's first calls are not counted: the
        # library before it (gloo's slow calls, the fake's unsynchronised
        # ones) left the ranks apart, and the first calls bring them together.
        slowest_call = max(per_call.values())
        block = int(max(2, min(args.block_calls, 0.002 / slowest_call)))
        rounds = int(max(args.blocks, min(args.max_calls // block,
                                          args.cell_seconds / (block * sum(per_call.values())))))
        local = {name: [] for name in self.names}
        for _ in range(rounds):
            for name in self.names:
                times = self.time_calls(name, tensor, array, source, block + 3, compute_s)[3:]
                local[name] += times
        out = {}
        for name in self.names:
            times = self.slowest(local[name])  # per call, the slowest rank's
            ordered = times.sort().values
            at = lambda q: ordered[min(len(ordered) - 1, int(q * len(ordered)))].item() * 1e6  # noqa: E731
            out[name] = (at(0.5), at(0.9), times.mean().item() * 1e6)
        return out

    def report(self, pattern, size, stats, args):
        if self.rank != 0:
            return
        peers = [n for n in ("mpi", "deepspeed") if n in stats]
        row = f"{pattern:>13} {size:>9} |"
        for name in self.names:
            p50, p90, mean = stats[name]
            row += f" {p50:8.1f} {p90:8.1f} {mean:8.1f} |"
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
            head = f"{'pattern':>13} {'bytes':>9} |"
            for name in self.names:
                head += f" {name + ' p50':>8} {'p90':>8} {'mean':>8} |"
            head += f" {'(ring-fake)/best p50':>9} {'ring/best p50':>8}"
            print(head, flush=True)
        for pattern in args.patterns.split(","):
            compute_s = args.compute_ms / 1e3 if pattern == "after-compute" else 0.0
            for size in (int(s) for s in args.sizes.split(",")):
                self.report(pattern, size, self.cell(size, compute_s, args), args)
        self.dist.barrier(group=self.gloo)
        if self.rank == 0:
            remove_deepspeed_segments()
        self.dist.destroy_process_group()


def main():
    args = parse_args()
    if not args.child:
        sys.exit(launch(args))
    Rank(args).run(args)


if __name__ == "__main__":
    main()
