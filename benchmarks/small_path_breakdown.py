"""Where the time of one small allreduce goes, phase by phase, beside UCX's own floor.

    python3 benchmarks/small_path_breakdown.py [--sizes 8,4096] [--calls 3000] [--sleep-ms 2 | --compute-ms 2]

Launches a world of 2 (plain processes, as torchrun would: OMP_NUM_THREADS=1)
with RINGREDUCE_PROBE=1, so that our C++ marks the boundaries of each
collective's phases (csrc/core/observe/latency_probe.h) on CLOCK_MONOTONIC,
the clock of Python's time.perf_counter_ns. Each rank times back-to-back
float32 SUM allreduces, the tensor written before each (with --sleep-ms,
each after a sleep: the core idle, as in a data loader's wait; with
--compute-ms, after busy work, as a backward pass computes), on:

- torch's `fake` backend: torch's Python and dispatcher alone (the floor);
- ringreduce through UCX (RINGREDUCE_SHM_BYTES=0: the queued path, the
  ring over UCX's shared-memory transport);
- ringreduce as it runs by default (the host channel, from the caller's thread).

For each it prints, from rank 0's calls, the median time between
consecutive marks ("checked -> queued": the engine numbering the op and
making its Work; "posted -> arrived": the transport and the wait for the
peer; ...), summed per call where a pair repeats (a ring's steps), and the
median call (and its p90). A pair of marks that only some calls pass (the
worker took the task, a wake-up) is shown with its share of the calls.
Medians of parts do not add up to the median whole exactly.
Before the ranks start, `ucx_perftest` (ucx-utils) measures UCX's one-way
tag latency on this machine at the same sizes: the transport's floor.
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import time
import warnings

from rank_processes import free_port, start_ranks, wait_for_ranks

# What each pair of consecutive marks spans, in words.
SPANS = {
    ("call", "backend entered"): "torch: Python, c10d and the dispatcher, in",
    ("backend entered", "checked"): "argument checks",
    ("checked", "queued"): "engine: number, fingerprint, Work, Future, callbacks, queue",
    ("queued", "wait entered"): "back out to Python and into Work.wait()",
    ("wait entered", "claimed"): "executor: the waiting caller claims the task",
    ("claimed", "body started"): "op set-up: trace, neighbour check posted",
    ("body started", "posted"): "algorithm set-up, first post",
    ("posted", "posted"): "posting sends and receives",
    ("posted", "arrived"): "transport progress and the wait for the peer",
    ("arrived", "reduced"): "reduce",
    ("arrived", "posted"): "next step's post",
    ("arrived", "arrived"): "next message",
    ("reduced", "posted"): "next step's post",
    ("reduced", "arrived"): "next message",
    ("arrived", "body finished"): "algorithm end",
    ("reduced", "body finished"): "algorithm end",
    ("body finished", "completed"): "neighbour check verified, Work and Future completed",
    ("completed", "wait returned"): "wait() returns",
    ("wait returned", "return"): "torch: back to Python",
    ("checked", "direct started"): "engine: lock, number, fingerprint, announce",
    ("direct started", "published"): "input copied into the channel, flag set",
    ("published", "peers here"): "the wait for the peer's flag",
    ("peers here", "reduced"): "reduce (one pass, rank order)",
    ("reduced", "direct finished"): "trace entry",
    ("direct finished", "wait entered"): "Work made, back to Python, into Work.wait()",
    ("call", "return"): "the whole call (fake: nothing but torch)",
}


# How the allreduce is called (--form): what each kind of client issues.
FORMS = {
    "sync": "all_reduce",
    "async": "all_reduce(async_op=True).wait() (DDP's buckets)",
    "then": "all_reduce(async_op=True).get_future().then(hook).wait() (DDP's Python comm hooks)",
    "functional": "_c10d_functional.all_reduce + wait_tensor (a compiled graph)",
    "funcol": "funcol.all_reduce + wait_tensor (DTensor, eager)",
    "coalesced": "four all_reduce of quarter views in _coalescing_manager (one allreduce_coalesced)",
    "all_gather": "all_gather_into_tensor (FSDP's and ZeRO-3's parameters; not an allreduce)",
}


def form_call(form):
    import torch
    import torch.distributed as dist
    import torch.distributed._functional_collectives as funcol
    ops = torch.ops._c10d_functional
    if form == "sync":
        return lambda t, group: dist.all_reduce(t, group=group)
    if form == "async":
        return lambda t, group: dist.all_reduce(t, group=group, async_op=True).wait()
    if form == "then":
        return lambda t, group: dist.all_reduce(t, group=group, async_op=True).get_future().then(
            lambda done: done.value()).wait()
    if form == "functional":
        return lambda t, group: ops.wait_tensor(ops.all_reduce(t, "sum", group.group_name))
    if form == "coalesced":
        from torch.distributed.distributed_c10d import _coalescing_manager

        def coalesced(t, group):
            with _coalescing_manager(group):
                for view in t.view(4, -1).unbind(0) if t.numel() % 4 == 0 else (t,):
                    dist.all_reduce(view, group=group)
        return coalesced
    if form == "all_gather":
        outputs = {}  # one per size, made once: the call alone is timed

        def gather(t, group):
            out = outputs.get(t.numel())
            if out is None:
                out = outputs[t.numel()] = t.new_empty(2 * t.numel())
            dist.all_gather_into_tensor(out, t, group=group)
        return gather
    return lambda t, group: funcol.wait_tensor(funcol.all_reduce(t, "sum", group))


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="8,4096")
    parser.add_argument("--calls", type=int, default=3000)
    parser.add_argument("--form", choices=sorted(FORMS), default="sync",
                        help="how the allreduce is called (default: sync)")
    parser.add_argument("--sleep-ms", type=float, default=0.0,
                        help="every rank sleeps this long before each call (default: none, "
                             "back to back)")
    parser.add_argument("--compute-ms", type=float, default=0.0,
                        help="every rank computes (busy) this long before each call")
    parser.add_argument("--view-rank", type=int, default=0, choices=(0, 1),
                        help="whose calls are broken down (default: rank 0's)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    return parser.parse_args()


def ucx_floor(size):
    """UCX's one-way tag latency (typical, average) in us, or None."""
    port = str(free_port())
    try:
        server = subprocess.Popen(["ucx_perftest", "-p", port], stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL)
    except FileNotFoundError:
        return None
    # 100000 round trips for small messages; fewer for large ones, which
    # would otherwise keep both cores busy for minutes (2 MiB: 1000, 0.5 s).
    iterations = str(max(1000, min(100000, (64 << 20) // max(size, 1))))
    try:
        for _ in range(50):
            try:
                out = subprocess.run(["ucx_perftest", "127.0.0.1", "-p", port, "-t", "tag_lat",
                                      "-s", str(size), "-n", iterations], capture_output=True,
                                     text=True, timeout=60).stdout
            except subprocess.TimeoutExpired:
                return None
            final = re.search(r"Final:\s+\d+\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)", out)
            if final:
                return float(final.group(1)), float(final.group(3))
            time.sleep(0.1)  # the server is not listening yet
        return None
    finally:
        server.kill()
        server.wait()


def launch(args):
    print("# UCX's floor on this machine (ucx_perftest tag_lat, one-way, us: typical / average)")
    for size in (int(s) for s in args.sizes.split(",")):
        floor = ucx_floor(size)
        print(f"#   {size:>7} B: " + ("ucx_perftest not found (apt-get install ucx-utils)"
                                       if floor is None else f"{floor[0]:.2f} / {floor[1]:.2f}"),
              flush=True)
    env = dict(os.environ, OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "1"),
               MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()), WORLD_SIZE="2",
               LOCAL_WORLD_SIZE="2", RINGREDUCE_PROBE="1")
    command = [sys.executable, os.path.abspath(__file__), "--child"] + sys.argv[1:]
    return wait_for_ranks(start_ranks(command, env, 2), 600)


def spans_of(windows, events):
    """Per call: {(mark, next mark): summed ns}, from its window and the marks inside it."""
    events = sorted(events, key=lambda e: e[2])
    per_call, at = [], 0
    for start, end in windows:
        while at < len(events) and events[at][2] < start:
            at += 1
        marks = [("call", start)]
        while at < len(events) and events[at][2] <= end:
            marks.append((events[at][1], events[at][2]))
            at += 1
        marks.append(("return", end))
        spans = {}
        for (a, ta), (b, tb) in zip(marks, marks[1:]):
            spans[(a, b)] = spans.get((a, b), 0) + (tb - ta)
        per_call.append(spans)
    return per_call


def child(args):
    import torch
    import torch.distributed as dist
    import torch_ringreduce  # noqa: F401
    from torch.testing._internal.distributed import fake_pg  # noqa: F401  registers "fake"
    from torch_ringreduce import _C

    rank = int(os.environ["RANK"])
    # all_gather_into_tensor's FutureWarning (torch >= 2.13) on every call
    warnings.simplefilter("ignore", FutureWarning)
    dist.init_process_group("gloo", init_method="env://")
    torch.set_num_threads(1)
    paths = {"fake": dist.new_group(backend="fake")}
    os.environ["RINGREDUCE_SHM_BYTES"] = "0"
    paths["ringreduce, UCX (queued)"] = dist.new_group(backend="ringreduce")
    del os.environ["RINGREDUCE_SHM_BYTES"]
    paths["ringreduce, host channel (direct)"] = dist.new_group(backend="ringreduce")
    if not _C._probe_enabled():
        raise SystemExit("the probe is off: RINGREDUCE_PROBE=1 must be set before the first group")
    clock = time.perf_counter_ns
    call = form_call(args.form)
    for size in (int(s) for s in args.sizes.split(",")):
        tensor = torch.empty(max(1, size // 4))
        sources = [torch.rand_like(tensor) for _ in range(2)]
        if rank == args.view_rank:
            after = (f", each after a {args.sleep_ms:g} ms sleep" if args.sleep_ms else
                     f", each after {args.compute_ms:g} ms of compute" if args.compute_ms else "")
            print(f"\n# {FORMS[args.form]} {size} B float32 SUM, world 2, rank {rank}'s view{after}; "
                  f"median of {args.calls} calls, us", flush=True)
        for name, group in paths.items():
            for i in range(200):  # warm-up
                tensor.copy_(sources[i & 1])
                call(tensor, group)
            dist.barrier()
            _C._probe_take()
            windows = []
            for i in range(args.calls):
                tensor.copy_(sources[i & 1])  # written before each, as backward does
                if args.sleep_ms:
                    time.sleep(args.sleep_ms / 1e3)
                if args.compute_ms:
                    busy_until = clock() + int(args.compute_ms * 1e6)
                    while clock() < busy_until:
                        pass
                start = clock()
                call(tensor, group)
                windows.append((start, clock()))
            per_call = spans_of(windows, _C._probe_take())
            if rank != args.view_rank:
                continue
            wholes = sorted(e - s for s, e in windows)
            print(f"  {name}: {statistics.median(wholes) / 1e3:.2f} per call "
                  f"(p90 {wholes[int(0.9 * (len(wholes) - 1))] / 1e3:.2f})", flush=True)
            order = []
            for spans in per_call:
                for key in spans:
                    if key not in order:
                        order.append(key)
            for key in order:
                values = [spans[key] for spans in per_call if key in spans]
                if len(values) < len(per_call) / 100:
                    continue  # a path almost no call took
                label = SPANS.get(key, "")
                if len(values) < len(per_call) / 2:  # a path some calls took: the worker ran it...
                    label = f"({100 * len(values) / len(per_call):.0f}% of calls) {label}"
                print(f"    {key[0] + ' -> ' + key[1]:<36} {statistics.median(values) / 1e3:7.2f}"
                      f"  {label}", flush=True)
    dist.barrier()
    dist.destroy_process_group()


def main():
    args = parse_args()
    if args.child:
        child(args)
    else:
        sys.exit(launch(args))


if __name__ == "__main__":
    main()
