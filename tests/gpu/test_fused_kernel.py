"""The fused reduce-copy kernel alone (torch_ringreduce._C._reduce_copy):
every dtype and op, 1 to 8 sources, 0 to 8 destinations, aligned and
misaligned pointers, vector tails, AVG and the 16-bit wire casts.
Skipped, visibly, without a CUDA device."""
import sys

import pytest
import torch
import torch.distributed as dist

sys.path.insert(0, __file__.rsplit("/tests/", 1)[0] + "/tests/python")
from oracle import OPS, make_input, mismatch, reduction_cases, reference_allreduce  # noqa: E402

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(),
                                reason="no CUDA device on this machine")


def _on_device(t, misalign):
    """A CUDA copy of t, starting `misalign` elements into its allocation."""
    holder = torch.empty(t.numel() + misalign, dtype=t.dtype, device="cuda")
    view = holder[misalign:misalign + t.numel()].view(t.shape)
    view.copy_(t)
    return view


@pytest.mark.parametrize("misalign", [0, 1])
def test_every_dtype_and_op_matches_the_reference(misalign):
    from torch_ringreduce import _C
    failures = []
    for case, dtype, op_name, op, shape in reduction_cases([(1,), (15,), (4097,), (1 << 20,)], 0):
        for nsrc in (1, 2, 3, 8):
            inputs = [make_input(dtype, shape, r, case) for r in range(nsrc)]
            srcs = [_on_device(x, misalign) for x in inputs]
            dsts = [_on_device(torch.zeros(shape, dtype=dtype), misalign) for _ in range(2)]
            avg = nsrc if op_name == "AVG" else 0
            _C._reduce_copy(srcs, dsts, op, avg)
            expected = reference_allreduce(inputs, op_name)
            for d in dsts:
                problem = mismatch(d.cpu(), expected, exact=(op_name != "AVG"))
                if problem:
                    failures.append(f"{op_name} {dtype} {shape} nsrc={nsrc}: {problem}")
    assert not failures, "\n".join(failures[:20])


@pytest.mark.parametrize("wire", [torch.float16, torch.bfloat16])
def test_wire_casts_round_like_torch_and_sum_in_float32(wire):
    from torch_ringreduce import _C
    x = torch.randn(100003, device="cuda") * 1000
    narrow = torch.empty(100003, dtype=wire, device="cuda")
    _C._reduce_copy([x], [narrow], dist.ReduceOp.SUM)
    assert torch.equal(narrow, x.to(wire))
    parts = [torch.randn(100003, device="cuda").to(wire) for _ in range(4)]
    out = torch.empty(100003, device="cuda")
    _C._reduce_copy(parts, [out], dist.ReduceOp.AVG, 4)
    expected = sum(p.float() for p in parts) / 4
    assert torch.allclose(out, expected, rtol=1e-6, atol=1e-6)


def test_bad_arguments_raise_value_error():
    from torch_ringreduce import _C
    with pytest.raises(ValueError, match="1 to 8 sources"):
        _C._reduce_copy([torch.ones(4, device="cuda")] * 9, [], dist.ReduceOp.SUM)
    with pytest.raises(ValueError, match="MIN"):
        _C._reduce_copy([torch.ones(4, dtype=torch.complex64, device="cuda")],
                        [torch.ones(4, dtype=torch.complex64, device="cuda")], OPS["MIN"])


def test_every_argument_is_checked_before_the_launch():
    from torch_ringreduce import _C
    f32 = torch.ones(8, device="cuda")
    bad = {
        # a float32 source into a float16 second destination would write
        # past its end on the device
        "destinations differ in dtype": ([f32], [torch.empty(8, device="cuda"),
                                                 torch.empty(8, dtype=torch.float16,
                                                             device="cuda")],
                                         OPS["SUM"], 0),
        "for AVG only": ([f32], [torch.empty(8, device="cuda")], OPS["MAX"], 4),
        "AVG needs avg_divisor >= 1": ([f32], [torch.empty(8, device="cuda")], OPS["AVG"], 0),
        "does not fit int8": ([torch.ones(8, dtype=torch.int8, device="cuda")],
                              [torch.empty(8, dtype=torch.int8, device="cuda")], OPS["AVG"],
                              256),
        "conjugate and negative views": ([torch.ones(8, dtype=torch.complex64,
                                                     device="cuda").conj()],
                                         [torch.empty(8, dtype=torch.complex64, device="cuda")],
                                         OPS["SUM"], 0),
    }
    base = torch.ones(16, device="cuda")
    bad["partly overlaps a source"] = ([base[:8]], [base[4:12]], OPS["SUM"], 0)
    device_before = torch.cuda.current_device()
    for message, (srcs, dsts, op, divisor) in bad.items():
        with pytest.raises(ValueError, match=message):
            _C._reduce_copy(srcs, dsts, op, divisor)
    # In place is fine, and the caller's device is where it was.
    _C._reduce_copy([base[:8], base[8:]], [base[:8]], OPS["SUM"], 0)
    torch.cuda.synchronize()
    assert torch.equal(base[:8].cpu(), torch.full((8,), 2.0))
    assert torch.cuda.current_device() == device_before
