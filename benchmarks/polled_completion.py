"""How soon a caller that polls `work.is_completed()` instead of waiting sees its work end, when
the peer comes late: ringreduce against gloo, in the same processes.

    OMP_NUM_THREADS=1 UCX_NET_DEVICES=lo torchrun --standalone --nproc-per-node 2 \\
        benchmarks/polled_completion.py [--calls 60] [--late-ms 2]

Rank 0 issues the op at once and polls; rank 1 sleeps `--late-ms` first, then issues its side
and waits for it. "lag" is the time from rank 1's side having ended (an allreduce's wait()
returned, a send issued) to rank 0's first poll that says it is complete, on the host's
monotonic clock, which both processes share. Forms: an `async_op=True` allreduce of 16 floats
(rank 0's part goes up on the host channel before the call is queued; a poll runs the rest on
its thread once the peer is in it) and an `irecv` of 16 floats whose send comes late (a poll
moves the message on its thread where the worker does not hold the transport; gloo's irecv is
not included: its poll did not see the message here). Between calls the ranks meet at a barrier,
with rank 1 sleeping after its side ("peer idle") or going straight to that barrier, which
spins while it waits ("peer busy").
"""
import argparse
import os
import statistics
import time

import torch
import torch.distributed as dist

import torch_ringreduce  # noqa: F401  registers "ringreduce"


def lag_once(form, group, rank, late_s, peer_idle, tensor):
    """Rank 0's lag in us for one call (None on rank 1)."""
    dist.barrier(group=group)
    ended = torch.zeros(1, dtype=torch.float64)
    seen = 0.0
    if rank == 0:
        if form == "allreduce":
            work = dist.all_reduce(tensor, group=group, async_op=True)
        else:
            work = dist.irecv(tensor, src=1, group=group)
        while not work.is_completed():
            pass
        seen = time.monotonic()
        work.wait()
    else:
        time.sleep(late_s)
        if form == "allreduce":
            dist.all_reduce(tensor, group=group, async_op=True).wait()
            ended[0] = time.monotonic()
        else:
            ended[0] = time.monotonic()
            dist.send(tensor, dst=0, group=group)
        if peer_idle:
            time.sleep(0.01)
    dist.broadcast(ended, src=1, group=group)
    return (seen - ended.item()) * 1e6 if rank == 0 else None


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=60)
    parser.add_argument("--late-ms", type=float, default=2.0)
    args = parser.parse_args()
    rank = int(os.environ["RANK"])
    dist.init_process_group("ringreduce")
    torch.set_num_threads(1)
    groups = {"ringreduce": dist.group.WORLD, "gloo": dist.new_group(backend="gloo")}
    tensor = torch.ones(16)
    cells = [(form, name, idle) for form in ("allreduce", "irecv") for name in groups
             for idle in (True, False) if not (form == "irecv" and name == "gloo")]
    lags = {cell: [] for cell in cells}
    for _ in range(2):  # warm-up
        for form, name, idle in cells:
            lag_once(form, groups[name], rank, args.late_ms / 1e3, idle, tensor)
    for _ in range(args.calls):  # the cells take turns
        for cell in cells:
            form, name, idle = cell
            lag = lag_once(form, groups[name], rank, args.late_ms / 1e3, idle, tensor)
            if lag is not None:
                lags[cell].append(lag)
    if rank == 0:
        print(f"# polled completion, world 2, peer late by {args.late_ms} ms, {args.calls} calls "
              f"per cell, torch {torch.__version__}; lag in us")
        print(f"# {'form':>9} | {'backend':>10} | {'peer':>4} | {'p50':>7} | {'p90':>7}")
        for form, name, idle in cells:
            values = sorted(lags[(form, name, idle)])
            p90 = values[int(0.9 * (len(values) - 1))]
            print(f"  {form:>9} | {name:>10} | {'idle' if idle else 'busy':>4} | "
                  f"{statistics.median(values):7.0f} | {p90:7.0f}")
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
