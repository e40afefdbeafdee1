"""The sweep of issue 3's collectives (reduce, reduce_scatter, gather,
scatter, all_to_all, object collectives) against local references and gloo,
and of the coalescing managers' forms on views and strided tensors."""
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


def _odd_layouts(dtype, n):
    """Empty tensors of n elements as callers pass them besides plain ones:
    (name, tensor, the untouched rest of its storage or None)."""
    base = torch.zeros(2 * n + 3, dtype=dtype)
    yield "offset view", base[3:3 + n], None
    holder = torch.zeros(2 * n, dtype=dtype)
    yield "strided", holder[::2], holder[1::2]
    if n % 2 == 0:
        yield "transposed", torch.zeros(2, n // 2, dtype=dtype).t(), None
    yield "zero-size", torch.zeros(0, dtype=dtype), None


def sweep_odd_layouts(rank, world, gloo, report, _gloo):
    """reduce, scatter and the coalescing managers' forms (FSDP's, ZeRO's)
    into views, strided and empty tensors, beside a plain tensor: each result
    lands element for element where the caller's view has it, and nothing
    else of its storage changes. (torch 2.13's gloo takes a strided tensor's
    memory as contiguous in broadcast, reduce and scatter, so the reference is
    local.)"""
    from torch.distributed.distributed_c10d import _coalescing_manager

    case = 60000
    for dtype in (torch.float32, torch.bfloat16, torch.int64):
        for n in (6, 20011):
            for name, _, _ in _odd_layouts(dtype, n):
                case += 1
                what = f"{dtype} n={n} {name}"

                def odd():
                    """A fresh tensor of this layout and its untouched rest."""
                    for layout, tensor, rest in _odd_layouts(dtype, n):
                        if layout == name:
                            return tensor, rest

                def values(r, k, shape):
                    return make_input(dtype, shape, r, case * 10 + k)

                shape = odd()[0].shape
                plain = (5,)
                # reduce to the last rank, in place.
                mine, rest = odd()
                mine.copy_(values(rank, 0, shape))
                dist.reduce(mine, dst=world - 1)
                expected = reference_allreduce([values(r, 0, shape) for r in range(world)], "SUM")
                report.check(f"reduce {what}", mine,
                             expected if rank == world - 1 else values(rank, 0, shape))
                # scatter from rank 0 into the view.
                piece, rest = odd()
                dist.scatter(piece, [values(r, 1, shape) for r in range(world)]
                             if rank == 0 else None, src=0)
                report.check(f"scatter {what}", piece, values(rank, 1, shape))
                if rest is not None:
                    report.check(f"scatter {what}: the rest untouched", rest, torch.zeros_like(rest))
                # all_gather_into_tensor and reduce_scatter_tensor in the
                # manager: one *_coalesced call with a plain pair beside.
                ins = [values(rank, 2, shape).reshape(-1), values(rank, 3, plain)]
                outs = [torch.empty(world * ins[0].numel(), dtype=dtype),
                        torch.empty(world * plain[0], dtype=dtype)]
                with _coalescing_manager(async_ops=False):
                    for out, inp in zip(outs, ins):
                        dist.all_gather_into_tensor(out, inp)
                report.check(f"all_gather_into_tensor_coalesced {what}", outs[0],
                             torch.cat([values(r, 2, shape).reshape(-1) for r in range(world)]))
                report.check(f"all_gather_into_tensor_coalesced {what}, the plain pair", outs[1],
                             torch.cat([values(r, 3, plain) for r in range(world)]))
                target, rest = odd()
                outs = [target, torch.empty(plain, dtype=dtype)]
                full = [lambda r: values(r, 4, (world * target.numel(),)),
                        lambda r: values(r, 5, (world * plain[0],))]
                with _coalescing_manager(async_ops=False):
                    for out, make in zip(outs, full):
                        dist.reduce_scatter_tensor(out, make(rank))
                for k, out in enumerate(outs):
                    total = reference_allreduce([full[k](r) for r in range(world)], "SUM")
                    report.check(f"reduce_scatter_tensor_coalesced {what} output {k}",
                                 out.reshape(-1), total.chunk(world)[rank] if total.numel()
                                 else total)
                if rest is not None:
                    report.check(f"reduce_scatter_tensor_coalesced {what}: the rest untouched",
                                 rest, torch.zeros_like(rest))
                # all_reduce in the manager: allreduce_coalesced.
                tensor, rest = odd()
                tensor.copy_(values(rank, 6, shape))
                beside = values(rank, 7, plain)
                with _coalescing_manager(async_ops=False):
                    dist.all_reduce(tensor)
                    dist.all_reduce(beside)
                report.check(f"allreduce_coalesced {what}", tensor, reference_allreduce(
                    [values(r, 6, shape) for r in range(world)], "SUM"))
                report.check(f"allreduce_coalesced {what}, the plain one", beside,
                             reference_allreduce([values(r, 7, plain) for r in range(world)],
                                                 "SUM"))


SWEEPS = [sweep_reduce, sweep_reduce_scatter, sweep_gather_scatter, sweep_all_to_all, sweep_objects,
          sweep_odd_layouts]
