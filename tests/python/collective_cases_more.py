"""The sweep of issue 3's collectives (reduce, reduce_scatter, gather,
scatter, all_to_all, object collectives) against local references and gloo."""
import torch
import torch.distributed as dist

from oracle import DTYPES, make_input, reduction_cases, reference_allreduce

SHAPES = [(0,), (7,), (3, 5), (20011,)]


def sweep_reduce(rank, world, gloo, report, _gloo):
    for case, dtype, op_name, op, shape in reduction_cases(SHAPES, 20000):
        root = case % world
        inputs = [make_input(dtype, shape, r, case) for r in range(world)]
        mine = inputs[rank].clone()
        dist.reduce(mine, dst=root, op=op)
        what = f"reduce {op_name} {dtype} {shape} root {root}"
        if rank == root:
            report.check(what, mine, reference_allreduce(inputs, op_name),
                         exact=(op_name != "AVG"))
        else:
            report.check(what + " non-root untouched", mine, inputs[rank])


def sweep_reduce_scatter(rank, world, gloo, report, _gloo):
    for case, dtype, op_name, op, shape in reduction_cases(SHAPES, 30000):
        # Every rank holds world blocks of `shape`; rank r gets block r reduced.
        full = [make_input(dtype, (world,) + shape, r, case) for r in range(world)]
        expected = reference_allreduce(full, op_name)[rank]
        exact = op_name != "AVG"
        out = torch.empty(shape, dtype=dtype)
        kept = full[rank].clone()
        dist.reduce_scatter_tensor(out, full[rank], op=op)
        report.check(f"reduce_scatter_tensor {op_name} {dtype} {shape}", out, expected, exact)
        report.check(f"reduce_scatter_tensor {op_name} {dtype} input untouched", full[rank], kept)
        out_list = torch.empty(shape, dtype=dtype)
        dist.reduce_scatter(out_list, list(full[rank].unbind(0)), op=op)
        report.check(f"reduce_scatter {op_name} {dtype} {shape}", out_list, expected, exact)
        if op_name != "AVG" and shape == (3, 5):
            theirs = torch.empty(shape, dtype=dtype)
            # gloo wants the input concatenated along dim 0.
            stacked = full[rank].reshape((world * shape[0],) + shape[1:]).clone()
            if _gloo(report, f"reduce_scatter_tensor {op_name} {dtype}",
                     lambda: dist.reduce_scatter_tensor(theirs, stacked, op=op,
                                                        group=gloo)):
                report.check(f"reduce_scatter_tensor {op_name} {dtype} vs gloo", out,
                             theirs, exact=False)


def sweep_gather_scatter(rank, world, gloo, report, _gloo):
    case = 40000
    for dtype in DTYPES:
        for shape in SHAPES:
            case += 1
            root = case % world
            inputs = [make_input(dtype, shape, r, case) for r in range(world)]
            outs = [torch.empty(shape, dtype=dtype) for _ in range(world)] if rank == root else None
            dist.gather(inputs[rank], outs, dst=root)
            if rank == root:
                for r in range(world):
                    report.check(f"gather {dtype} {shape} root {root} block {r}", outs[r], inputs[r])
            piece = torch.empty(shape, dtype=dtype)
            dist.scatter(piece, inputs if rank == root else None, src=root)
            report.check(f"scatter {dtype} {shape} root {root}", piece, inputs[rank])
            if shape == (7,) and dtype in (torch.float32, torch.int64):
                theirs = torch.empty(shape, dtype=dtype)
                if _gloo(report, f"scatter {dtype}",
                         lambda: dist.scatter(theirs, inputs if rank == root else None, src=root,
                                              group=gloo)):
                    report.check(f"scatter {dtype} vs gloo", piece, theirs)


def sweep_all_to_all(rank, world, gloo, report, _gloo):
    case = 50000
    for dtype in DTYPES:
        case += 1
        # Even splits, list form and single-tensor form.
        blocks = [[make_input(dtype, (2, 3), src, case * 100 + dst) for dst in range(world)]
                  for src in range(world)]
        outs = [torch.empty((2, 3), dtype=dtype) for _ in range(world)]
        dist.all_to_all(outs, blocks[rank])
        for src in range(world):
            report.check(f"all_to_all {dtype} from {src}", outs[src], blocks[src][rank])
        single_out = torch.empty((world * 2, 3), dtype=dtype)
        dist.all_to_all_single(single_out, torch.cat(blocks[rank]))
        report.check(f"all_to_all_single even {dtype}", single_out,
                     torch.cat([blocks[src][rank] for src in range(world)]))
        # Uneven splits: rank src sends (src + dst) % 3 rows to dst (zero rows too).
        rows = [[(src + dst) % 3 for dst in range(world)] for src in range(world)]
        send = [make_input(dtype, (rows[src][dst], 4), src, case * 100 + 50 + dst)
                for src in range(world) for dst in range(world)]
        mine = torch.cat(send[rank * world:(rank + 1) * world])
        recv_rows = [rows[src][rank] for src in range(world)]
        got = torch.empty((sum(recv_rows), 4), dtype=dtype)
        dist.all_to_all_single(got, mine, output_split_sizes=recv_rows,
                               input_split_sizes=rows[rank])
        expected = torch.cat([send[src * world + rank] for src in range(world)])
        report.check(f"all_to_all_single uneven {dtype}", got, expected)
        if dtype in (torch.float32, torch.int32):
            theirs = torch.empty_like(got)
            if _gloo(report, f"all_to_all_single {dtype}",
                     lambda: dist.all_to_all_single(theirs, mine, output_split_sizes=recv_rows,
                                                    input_split_sizes=rows[rank], group=gloo)):
                report.check(f"all_to_all_single uneven {dtype} vs gloo", got, theirs)


def sweep_objects(rank, world, gloo, report, _gloo):
    payload = {"rank": rank, "text": "x" * (rank * 100 + 1), "nested": [rank, (rank, "t")]}
    expected = [{"rank": r, "text": "x" * (r * 100 + 1), "nested": [r, (r, "t")]} for r in range(world)]
    gathered = [None] * world
    dist.all_gather_object(gathered, payload)
    report.check_equal("all_gather_object", gathered, expected)
    root = world - 1
    out = [None] * world if rank == root else None
    dist.gather_object(payload, out, dst=root)
    if rank == root:
        report.check_equal("gather_object", out, expected)
    objs = [expected[0], "second"] if rank == 0 else [None, None]
    dist.broadcast_object_list(objs, src=0)
    report.check_equal("broadcast_object_list", objs, [expected[0], "second"])
    got = [None]
    dist.scatter_object_list(got, expected if rank == root else None, src=root)
    report.check_equal("scatter_object_list", got[0], expected[rank])


SWEEPS = [sweep_reduce, sweep_reduce_scatter, sweep_gather_scatter, sweep_all_to_all, sweep_objects]
