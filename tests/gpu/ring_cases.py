"""What each rank runs in the device ring tests (RINGREDUCE_CUDA_ALGO=ring):
UCX moves device segments and our kernel reduces them, every rank on
cuda:0. Expected values from oracle.py."""
import torch
import torch.distributed as dist

from cuda_cases import Report, _init, check_allreduces
from oracle import make_input, reduction_cases, reference_allreduce

# Across one segment (1 MiB slots), several, and several times the slots.
SHAPES = [(1,), (7,), (3, 5), (70001,), ((3 << 20) + 5,)]


def sweep(rank, world, init_method):
    _init(rank, world, init_method)
    report = Report()
    cases = [c for c in reduction_cases(SHAPES, 0)
             if c[4][0] < (1 << 20) or c[1] in (torch.float32, torch.bfloat16, torch.int64)]
    check_allreduces(report, rank, world, cases)
    for dtype in (torch.float32, torch.bfloat16, torch.int64, torch.bool):
        for per in (1, 4097, (1 << 20) + 3):
            inputs = [make_input(dtype, (per,), r, 600 + per) for r in range(world)]
            flat = torch.empty(world * per, dtype=dtype, device="cuda")
            dist.all_gather_into_tensor(flat, inputs[rank].cuda())
            report.check(f"all_gather_into_tensor {dtype} {per}", flat, torch.cat(inputs))
            if dtype == torch.bool:
                continue
            stacked = [make_input(dtype, (world * per,), r, 650 + per) for r in range(world)]
            mine = stacked[rank].cuda()
            keep = mine.clone()
            out = torch.empty(per, dtype=dtype, device="cuda")
            dist.reduce_scatter_tensor(out, mine)
            report.check(f"reduce_scatter_tensor {dtype} {per}", out,
                         reference_allreduce(stacked, "SUM")[rank * per:(rank + 1) * per])
            report.check(f"reduce_scatter_tensor input untouched {dtype} {per}", mine, keep)
    torch.cuda.synchronize()
    return report.as_dict()


def wire(rank, world, init_method):
    """float32 SUM and AVG on a 16-bit wire (RINGREDUCE_WIRE_DTYPE set by
    the test): the device ring gives the host ring's bits on the same wire,
    the same tensor reduced as a CPU tensor in the same group."""
    import os

    from oracle import tolerance

    _init(rank, world, init_method)
    report = Report()
    wire_type = {"fp16": torch.float16, "bf16": torch.bfloat16}[os.environ["RINGREDUCE_WIRE_DTYPE"]]
    for op, name in ((dist.ReduceOp.SUM, "SUM"), (dist.ReduceOp.AVG, "AVG")):
        for count in (7, 70001, (3 << 20) + 5):
            inputs = [make_input(torch.float32, (count,), r, 700 + count) for r in range(world)]
            x = inputs[rank]
            on_host = x.clone()
            on_device = x.cuda()
            dist.all_reduce(on_host, op=op)
            dist.all_reduce(on_device, op=op)
            report.check(f"all_reduce {op} {count} on the wire", on_device.cpu(), on_host)
            # And a reference of neither ring: small integers sum exactly in
            # both 16-bit types; the average within the wire type's rounding.
            expected = reference_allreduce(inputs, name)
            if name == "SUM":
                report.check(f"all_reduce SUM {count} on the wire, reference", on_device.cpu(),
                             expected)
            else:
                report.checked += 1
                if not torch.allclose(on_device.cpu(), expected, **tolerance(wire_type)):
                    report.failures.append(f"all_reduce AVG {count} on the wire, reference: "
                                           f"max |diff| {(on_device.cpu() - expected).abs().max()}")
    torch.cuda.synchronize()
    return report.as_dict()

