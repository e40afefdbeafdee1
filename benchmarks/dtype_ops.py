"""Every dtype x reduce op: ringreduce against gloo in the same processes.

    torchrun --standalone --nproc-per-node 2 benchmarks/dtype_ops.py \
        [--collectives all_reduce,reduce_scatter_tensor,reduce] [--sizes 65536,4194304,67108864] \
        [--dtypes ...] [--ops ...]

For each collective, dtype, reduce op and size (bytes of the reduced buffer:
the input of all_reduce and reduce, the whole input of reduce_scatter_tensor)
the two backends are timed in alternating rounds, each round visiting every
cell of the collective and size; a cell's time is the median
over its iterations of the slowest rank. gloo has no AVG: its SUM is timed in
its place (what a gloo user runs, then divides). A combination gloo refuses
shows "-" and has no ratio. The summary counts the cells from 4 MiB where
ringreduce is below 1.5x gloo, and compares float16/bfloat16 with float32
for the same bytes (the byte-rate target) and AVG with SUM.
"""
import argparse
import statistics
import time
import warnings

import torch
import torch.distributed as dist

import torch_ringreduce  # noqa: F401  registers "ringreduce"

# torch 2.13 renamed these (the old names warn); older torch has only the old.
_all_gather_single = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
_reduce_scatter_single = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor

DTYPES = {"float32": torch.float32, "float64": torch.float64, "float16": torch.float16,
          "bfloat16": torch.bfloat16, "int8": torch.int8, "uint8": torch.uint8,
          "int32": torch.int32, "int64": torch.int64, "bool": torch.bool,
          "complex64": torch.complex64}
OPS = {"SUM": dist.ReduceOp.SUM, "AVG": dist.ReduceOp.AVG, "MIN": dist.ReduceOp.MIN,
       "MAX": dist.ReduceOp.MAX, "PRODUCT": dist.ReduceOp.PRODUCT,
       "BAND": dist.ReduceOp.BAND, "BOR": dist.ReduceOp.BOR, "BXOR": dist.ReduceOp.BXOR}
FLOATS = {"float32", "float64", "float16", "bfloat16", "complex64"}


def defined(dtype, op):
    """Whether torch's own backends define `op` on `dtype`."""
    if op in ("BAND", "BOR", "BXOR"):
        return dtype not in FLOATS
    if dtype == "complex64":
        return op in ("SUM", "AVG")  # torch refuses the others on complex tensors
    if op == "AVG":
        return dtype != "bool"
    return True


def make(collective, nbytes, dtype, world):
    esize = torch.empty((), dtype=dtype).element_size()
    count = max(world, nbytes // esize // world * world)
    data = torch.ones(count, dtype=dtype)
    if collective == "all_reduce":
        return lambda g, op: dist.all_reduce(data, op=op, group=g)
    if collective == "reduce":
        return lambda g, op: dist.reduce(data, dst=0, op=op, group=g)
    out = torch.empty(count // world, dtype=dtype)
    return lambda g, op: _reduce_scatter_single(out, data, op=op, group=g)


def time_cell(fn, group, op, iters):
    samples = []
    for _ in range(iters):
        start = time.perf_counter()
        fn(group, op)
        samples.append(time.perf_counter() - start)
    return samples


def slowest_median(samples, group):
    local = torch.tensor([statistics.median(samples)], dtype=torch.float64)
    dist.all_reduce(local, op=dist.ReduceOp.MAX, group=group)
    return local.item()


def make_cells(collective, size, args, groups, world):
    """The dtype x op cells of one collective and size, warmed up; the ops of
    one dtype share its tensors, so 64 MiB cells fit in memory."""
    cells = []
    for dname in args.dtypes.split(","):
        fn = make(collective, size, DTYPES[dname], world)
        for oname in args.ops.split(","):
            if not defined(dname, oname):
                continue
            ops = {"ring": OPS[oname], "gloo": OPS["SUM"] if oname == "AVG" else OPS[oname]}
            gloo_ok = torch.tensor([1])
            try:
                fn(groups["gloo"], ops["gloo"])
            except Exception:  # gloo refuses this dtype/op
                gloo_ok[0] = 0
            dist.all_reduce(gloo_ok, op=dist.ReduceOp.MIN, group=groups["gloo"])
            fn(groups["ring"], ops["ring"])  # warm-up
            cells.append({"dtype": dname, "op": oname, "fn": fn, "ops": ops,
                          "gloo_ok": bool(gloo_ok.item()),
                          "samples": {"ring": [], "gloo": []}})
    return cells


def main():
    warnings.filterwarnings("ignore")
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--collectives", default="all_reduce,reduce_scatter_tensor,reduce")
    p.add_argument("--sizes", default="65536,4194304,67108864")
    p.add_argument("--dtypes", default=",".join(DTYPES))
    p.add_argument("--ops", default=",".join(OPS))
    p.add_argument("--rounds", type=int, default=3, help="alternating rounds per cell")
    p.add_argument("--iters", type=int, default=4, help="iterations per round (at 4 MiB)")
    args = p.parse_args()

    dist.init_process_group("ringreduce")
    world, rank = dist.get_world_size(), dist.get_rank()
    groups = {"ring": dist.group.WORLD, "gloo": dist.new_group(backend="gloo")}
    control = groups["gloo"]
    results = {}
    if rank == 0:
        print(f"# dtype x op, world {world}; median of the slowest rank over {args.rounds} "
              f"alternating rounds; times in ms; ratio = gloo / ringreduce")
        print(f"# {'collective':>21} {'dtype':>9} {'op':>7} {'bytes':>9} | {'ring ms':>8} "
              f"{'gloo ms':>8} | {'ratio':>6}")
    for collective in args.collectives.split(","):
        for size in (int(s) for s in args.sizes.split(",")):
            iters = max(2, min(50, int(args.iters * (4 << 20) / size)))
            cells = make_cells(collective, size, args, groups, world)
            # Every round times every cell of this collective and size, both
            # backends one after the other, so a drift of the machine (these
            # 2-core runs have slow phases of seconds) lands on all cells
            # alike and the dtype and AVG/SUM comparisons stay fair.
            for _ in range(args.rounds):
                for cell in cells:
                    for backend in ("ring", "gloo"):
                        if backend == "ring" or cell["gloo_ok"]:
                            cell["samples"][backend] += time_cell(
                                cell["fn"], groups[backend], cell["ops"][backend], iters)
            for cell in cells:
                ring_t = slowest_median(cell["samples"]["ring"], control)
                gloo_t = (slowest_median(cell["samples"]["gloo"], control)
                          if cell["gloo_ok"] else None)
                dname, oname = cell["dtype"], cell["op"]
                results[(collective, dname, oname, size)] = (ring_t, gloo_t)
                if rank == 0:
                    gloo_s = f"{gloo_t * 1e3:8.3f}" if gloo_t else f"{'-':>8}"
                    ratio = f"{gloo_t / ring_t:6.2f}" if gloo_t else f"{'-':>6}"
                    print(f"  {collective:>21} {dname:>9} {oname:>7} {size:>9} | "
                          f"{ring_t * 1e3:8.3f} {gloo_s} | {ratio}", flush=True)
    if rank == 0:
        summarize(results)
    dist.destroy_process_group()


def summarize(results):
    big = {k: v for k, v in results.items() if k[3] >= 4 << 20 and v[1]}
    below = sorted((v[1] / v[0], k) for k, v in big.items() if v[1] / v[0] < 1.5)
    ratios = [v[1] / v[0] for v in big.values()]
    if ratios:
        print(f"# summary from 4 MiB: {len(ratios)} cells gloo answers, min ratio "
              f"{min(ratios):.2f}, median {statistics.median(ratios):.2f}; "
              f"{len(below)} below 1.5x" + (": " + ", ".join(
                  f"{k[0]} {k[1]} {k[2]} {k[3]} ({r:.2f}x)" for r, k in below) if below else ""))
    # 16-bit floats at the same byte rate as float32: the same bytes in about
    # the same time (then the same element count takes about half).
    for (collective, dname, oname, size), (ring_t, _) in results.items():
        if dname in ("float16", "bfloat16"):
            ref = results.get((collective, "float32", oname, size))
            if ref:
                print(f"# {collective} {dname} {oname} {size} B: {ring_t / ref[0]:.2f}x the "
                      f"float32 time for the same bytes")
        if oname == "AVG":
            ref = results.get((collective, dname, "SUM", size))
            if ref:
                print(f"# {collective} {dname} AVG {size} B: {ring_t / ref[0]:.2f}x SUM")


if __name__ == "__main__":
    main()
