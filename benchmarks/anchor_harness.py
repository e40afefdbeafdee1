"""What the same-run anchor benchmarks share (anchors.py: allreduce against
Open MPI and DeepSpeed; collective_anchors.py: every collective and call form
against Open MPI's equivalents).

- their options, and `launch`: the script starts itself again as its ranks,
  under Open MPI's `mpirun` when openmpi-bin and mpi4py are installed (so
  that Open MPI can be timed in the same processes), else as plain processes
  (like torchrun: RANK, WORLD_SIZE, MASTER_ADDR/PORT);
- `RankBase`: one rank's groups (ringreduce as the world group, gloo, the
  floor: torch's `fake` or the null backend), Open MPI's communicator,
  DeepSpeed's shared-memory op, and `measure`: libraries timed in
  interleaved short blocks, the inputs written before each call (not
  timed), optionally after busy CPU work, per call the slowest rank's time,
  summarised as p50, p90 and mean in us.
"""
import argparse
import functools
import glob
import os
import random
import shutil
import subprocess
import sys
import time
import warnings

from rank_processes import free_port, start_ranks, wait_for_ranks

QUICK = dict(sizes="64,65536", blocks=2, block_calls=4, cell_seconds=0.02, max_calls=32)


def add_arguments(parser, default_sizes, libraries):
    parser.add_argument("--world", type=int, default=2)
    parser.add_argument("--sizes", default=default_sizes,
                        help="bytes, comma separated; 'all' for every power of two 8 B-64 MiB")
    parser.add_argument("--patterns", default="back-to-back,after-compute",
                        help="comma separated, of: back-to-back, after-compute, late-peer, "
                             "early-rank, after-sleep")
    parser.add_argument("--compute-ms", type=float, default=2.0,
                        help="busy CPU work before each call in the after-compute pattern")
    parser.add_argument("--sleep-ms", type=float, default=2.0,
                        help="the after-sleep pattern: every rank sleeps this long before each "
                             "call (a data loader's wait, I/O: the core goes idle, not busy)")
    parser.add_argument("--late-us", type=float, default=10.0,
                        help="the late-peer pattern: the last rank computes this long (busy) "
                             "before each call, the others go straight on; each call is timed "
                             "on that rank (its peers are in the call already); the early-rank "
                             "pattern: every rank computes --compute-ms before each call, the "
                             "last rank this much longer, and each call is timed on rank 0 (what "
                             "the call costs a rank whose peer comes later: a broadcast's root "
                             "need not wait for it)")
    parser.add_argument("--libraries", default=",".join(libraries))
    parser.add_argument("--blocks", type=int, default=10,
                        help="rounds per cell at least (each runs every library once)")
    parser.add_argument("--block-calls", type=int, default=16,
                        help="calls per library in a round, at most (fewer for large sizes)")
    parser.add_argument("--cell-seconds", type=float, default=1.0,
                        help="about this long per size and pattern, all libraries together")
    parser.add_argument("--max-calls", type=int, default=4000,
                        help="counted calls per library and cell at most")
    parser.add_argument("--quick", action="store_true",
                        help="a smoke run: two sizes, a few calls per cell (figures mean nothing)")
    parser.add_argument("--sleeps", action="store_true",
                        help="also print, per cell, how often each library's calls slept: "
                             "voluntary context switches of the calling thread per call "
                             "(the more of the two ranks)")
    parser.add_argument("--no-mpi", action="store_true", help="launch without mpirun")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)


def finish_arguments(args, parser):
    """--quick's settings (where not given explicitly) and --sizes all."""
    if args.quick:
        for name, value in QUICK.items():
            if getattr(args, name) == parser.get_default(name):
                setattr(args, name, value)
    if args.sizes == "all":
        args.sizes = ",".join(str(8 << i) for i in range(24))
    unknown = set(args.patterns.split(",")) - {"back-to-back", "after-compute", "late-peer",
                                                "early-rank", "after-sleep"}
    if unknown:
        parser.error(f"unknown patterns {sorted(unknown)}")
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


def launch(script, args, limit_s=1800):
    """Runs `script` (this benchmark's file) as `args.world` ranks with the
    same command line plus --child; their exit status."""
    env = dict(os.environ)
    env.setdefault("OMP_NUM_THREADS", "1")  # as torchrun leaves it
    env.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()),
               LOCAL_SIZE=str(args.world), LOCAL_WORLD_SIZE=str(args.world),
               WORLD_SIZE=str(args.world), DS_ACCELERATOR="cpu")
    child = [sys.executable, os.path.abspath(script), "--child"] + [
        a for a in sys.argv[1:] if a != "--child"]
    if args.no_mpi or "mpi" not in args.libraries.split(","):
        use_mpi, why = False, "not asked for"
    else:
        use_mpi, why = mpi_usable()
    if not use_mpi:
        print(f"# Open MPI skipped: {why}", flush=True)
        return wait_for_ranks(start_ranks(child, env, args.world), limit_s)
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
    return subprocess.run(command + child, env=env, timeout=limit_s).returncode


# ---------------------------------------------------------------- one rank

def remove_deepspeed_segments():
    # DeepSpeed never removes its /dev/shm segments; stale ones break the next run.
    for path in glob.glob("/dev/shm/deepspeed_allreduce_buffer*"):
        try:
            os.unlink(path)
        except OSError:
            pass


class RankBase:
    """One rank: the groups and libraries every anchor benchmark times."""

    def __init__(self, args):
        import torch
        import torch.distributed as dist
        import torch_ringreduce  # noqa: F401  registers "ringreduce"
        from torch.testing._internal.distributed import fake_pg  # noqa: F401  registers "fake"

        # torch 2.13 deprecates all_gather_into_tensor, reduce_scatter_tensor and their
        # functional forms (for *_single), warning at each call: the call is still timed
        # with its warning's cost (the floor pays it too), but not printed.
        warnings.simplefilter("ignore", FutureWarning)
        self.torch, self.dist = torch, dist
        self.comm = self.MPI = None
        self.wanted = args.libraries.split(",")
        if "OMPI_COMM_WORLD_RANK" in os.environ and "mpi" in self.wanted:
            from mpi4py import MPI
            self.MPI, self.comm = MPI, MPI.COMM_WORLD
            rank, world = self.comm.Get_rank(), self.comm.Get_size()
        else:
            rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
        self.rank, self.world = rank, world
        if rank == 0:
            remove_deepspeed_segments()
        dist.init_process_group("ringreduce", init_method="env://", rank=rank, world_size=world)
        self.ring = dist.group.WORLD
        self.gloo = dist.new_group(backend="gloo")
        # The floor's group, under the library name "fake" whichever backend
        # runs it: torch's `fake`, or with --floor null the null backend
        # (null_backend/), which moves nothing at any size.
        self.floor_backend = None
        if "fake" in self.wanted:
            self.floor_backend = self._floor_backend(getattr(args, "floor", "fake"))
            self.fake = dist.new_group(backend=self.floor_backend)
        else:
            self.fake = None
        dist.barrier(group=self.gloo)  # the stale segments are gone
        self.deepspeed_all_reduce = self._load_deepspeed() if "deepspeed" in self.wanted else None

    def torch_groups(self):
        """The torch.distributed groups wanted, by library name."""
        groups = {"ringreduce": self.ring, "gloo": self.gloo, "fake": self.fake}
        return {name: g for name, g in groups.items() if name in self.wanted and g is not None}

    def _floor_backend(self, wanted):
        """`wanted` ("null" or "fake") where every rank can run it, else "fake"
        (said why): the null backend is compiled on first use."""
        ok = True
        if wanted == "null":
            try:
                import null_backend
                null_backend.register()
            except Exception as e:  # noqa: BLE001  any reason it cannot build is a fallback
                ok = False
                print(f"# rank {self.rank}: the null backend is not available "
                      f"({type(e).__name__}: {e}".splitlines()[0] + "); the floor is torch's fake",
                      flush=True)
        failed_somewhere = self.agree(0 if ok else 1) > 0
        return wanted if wanted == "null" and not failed_somewhere else "fake"

    def _load_deepspeed(self):
        """DeepSpeed's in-place shm allreduce op, or None (said why) when it cannot run."""
        try:
            from deepspeed.accelerator import get_accelerator
            # Every rank loads the op; rank 0 builds it first so the others find it built.
            shm = None
            for turn in range(2):
                if (self.rank == 0) == (turn == 0):
                    shm = get_accelerator().create_op_builder("ShareMemCommBuilder").load()
                self.dist.barrier(group=self.gloo)
            shm.initialize(self.world, self.rank)
            return self.torch.ops.deepspeed.inference_all_reduce_
        except Exception as e:  # noqa: BLE001  any reason it cannot run is a skip
            if self.rank == 0:
                print(f"# DeepSpeed skipped: {type(e).__name__}: {e}".splitlines()[0], flush=True)
            return None

    def busy(self, seconds):
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            pass

    def time_calls(self, call, prepare, calls, before):
        """Per call, this rank's seconds from the call to its return; the
        inputs are written before each (as backward writes gradients), then
        `before` runs (a Before: compute or a sleep), untimed."""
        clock = time.perf_counter
        out = []
        for i in range(calls):
            prepare(i)
            if before:
                before()
            start = clock()
            call()
            out.append(clock() - start)
        return out

    def slowest(self, samples):
        """Per call, the slowest rank's time (what every rank waits for)."""
        t = self.torch.tensor(samples, dtype=self.torch.float64)
        self.dist.all_reduce(t, op=self.dist.ReduceOp.MAX, group=self.gloo)
        return t

    def ranks_own(self, samples, rank):
        """Per call, `rank`'s time: the last rank's, with its peers in the call
        before it comes, is what the call adds to the step (the peers' time
        is waiting); the first rank's, what the call costs a rank that comes
        before its peers."""
        t = self.torch.tensor(samples, dtype=self.torch.float64)
        if self.rank != rank:
            t.zero_()
        self.dist.all_reduce(t, group=self.gloo)
        return t

    def agree(self, value):
        t = self.torch.tensor([float(value)], dtype=self.torch.float64)
        self.dist.all_reduce(t, op=self.dist.ReduceOp.MAX, group=self.gloo)
        return t.item()

    def measure(self, calls, prepare, before, args, late=False, timed_rank=None):
        """{library: (p50, p90, mean) us} for `calls` ({library: no-argument
        call}, timed in this order within each round), `prepare(i)` writing
        the inputs before the i-th call of a block. Per call the slowest
        rank's time, or with `late` the last rank's (the late-peer pattern),
        or `timed_rank`'s (the early-rank pattern: rank 0)."""
        per_call = {}
        for name, call in calls.items():  # warm-up, and the call count from its speed
            start = time.perf_counter()
            self.time_calls(call, prepare, 5, before)
            per_call[name] = self.agree((time.perf_counter() - start) / 5)
        # Short blocks in rounds, every library in each round: a shared VM's
        # speed changes within tens of milliseconds, and every library must
        # meet the same machine. Each block's first calls are not counted: the
        # library before it (gloo's slow calls, the fake's unsynchronised
        # ones) left the ranks apart, and the first calls bring them together.
        # The order changes each round: after a library whose calls sleep
        # (gloo's), even the fake's calls run about 2x slower for the next
        # 20-odd calls (the cores come back from idle slowly on these VMs), so
        # a fixed (or merely rotated) order would charge that to whichever
        # library follows gloo.
        slowest_call = max(per_call.values())
        block = int(max(2, min(args.block_calls, 0.002 / slowest_call)))
        rounds = int(max(args.blocks, min(args.max_calls // block,
                                          args.cell_seconds / (block * sum(per_call.values())))))
        local = {name: [] for name in calls}
        switches = {name: 0 for name in calls}
        for turn in range(rounds):
            order = list(calls)
            random.Random(turn).shuffle(order)  # the same order on every rank
            for name in order:
                call = calls[name]
                switched = voluntary_switches() if args.sleeps else 0
                local[name] += self.time_calls(call, prepare, block + 3, before)[3:]
                if args.sleeps:
                    switches[name] += voluntary_switches() - switched
        if args.sleeps:
            self.sleeps = {name: self.agree(switches[name] / (rounds * (block + 3)))
                           for name in calls}
        out = {}
        for name in calls:
            # per call, the slowest rank's, or the late one's
            if timed_rank is not None:
                times = self.ranks_own(local[name], timed_rank)
            elif late:
                times = self.ranks_own(local[name], self.world - 1)
            else:
                times = self.slowest(local[name])
            ordered = times.sort().values
            at = lambda q: ordered[min(len(ordered) - 1, int(q * len(ordered)))].item() * 1e6  # noqa: E731
            out[name] = (at(0.5), at(0.9), times.mean().item() * 1e6)
        return out

    def print_sleeps(self, args, labels=None):
        """--sleeps: under a cell's row (rank 0), each library's sleeps per call
        as the last measure() counted them."""
        if args.sleeps and self.rank == 0:
            print("#   sleeps per call: " + ", ".join(
                f"{(labels or {}).get(name, name)} {value:.2f}"
                for name, value in self.sleeps.items()), flush=True)

    def patterns(self, args):
        """(pattern, what this rank does before each call: a Before) in the
        order asked: back-to-back, after-compute (every rank --compute-ms) or
        late-peer (the last rank --late-us; measure(late=True) times it) or
        early-rank (every rank --compute-ms, the last --late-us more;
        measure(timed_rank=0) times rank 0) or after-sleep (every rank
        sleeps --sleep-ms)."""
        late_s = args.late_us / 1e6 if self.rank == self.world - 1 else 0.0

        def before(pattern):
            if pattern == "after-compute":
                return Before(self, args.compute_ms / 1e3)
            if pattern == "late-peer":
                return Before(self, late_s)
            if pattern == "early-rank":
                return Before(self, args.compute_ms / 1e3 + late_s)
            if pattern == "after-sleep":
                return Before(self, args.sleep_ms / 1e3, sleeps=True)
            return Before(self, 0.0)
        return [(p, before(p)) for p in args.patterns.split(",")]

    def finish(self):
        self.dist.barrier(group=self.gloo)
        if self.rank == 0:
            remove_deepspeed_segments()
        self.dist.destroy_process_group()


class Before:
    """What a rank does before each timed call, untimed: `seconds` of busy
    work (compute) or, with `sleeps`, a sleep that long (its core idle, as in
    a data loader's wait). False where it does nothing."""

    def __init__(self, rank, seconds, sleeps=False):
        self.rank, self.seconds, self.sleeps = rank, seconds, sleeps

    def __bool__(self):
        return self.seconds > 0

    def __call__(self):
        if self.sleeps:
            time.sleep(self.seconds)
        else:
            self.rank.busy(self.seconds)


def main(script, parse_args, rank_class):
    """A benchmark's entry: launch its ranks, or, in a rank, run it."""
    args = parse_args()
    if not args.child:
        # Where the VM has put its cores, before and after: shared-memory
        # figures (ours, Open MPI's, DeepSpeed's) move with it.
        from placement_probe import run_probe
        print("# before: " + run_probe(sys.executable), flush=True)
        status = launch(script, args)
        print("# after: " + run_probe(sys.executable), flush=True)
        sys.exit(status)
    rank_class(args).run(args)


def voluntary_switches():
    """How often the calling thread has given up its core (slept) so far: a
    spin that ends in a sleep and a wake-up counts one (--sleeps)."""
    with open("/proc/thread-self/status") as status:
        for line in status:
            if line.startswith("voluntary_ctxt_switches"):
                return int(line.split()[1])
    return 0


def bind(function, *args):
    """`function(*args)` as a no-argument call, with no Python frame of its own."""
    return functools.partial(function, *args)


def stats_header(names):
    return "".join(f" {name + ' p50':>10} {'p90':>8} {'mean':>8} |" for name in names)


def stats_cells(names, stats):
    return "".join(" {:10.1f} {:8.1f} {:8.1f} |".format(*stats[name]) for name in names)
