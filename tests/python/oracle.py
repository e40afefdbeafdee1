"""Inputs from seeds and local references: every rank can rebuild every other
rank's input, so the expected result of a collective is computed locally.

Floating point inputs are small integers, so sums, minima and maxima are exact
in every dtype and results can be compared exactly; AVG (a division), the
comparison with gloo, and float16/bfloat16 (which round once per ring step, as
gloo's do, so a product of several ranks' values may round) use a tolerance
derived from the dtype.
"""
import torch
import torch.distributed as dist

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8, torch.uint8,
          torch.int16, torch.int32, torch.int64, torch.bool, torch.complex64, torch.complex128]
OPS = {"SUM": dist.ReduceOp.SUM, "AVG": dist.ReduceOp.AVG, "PRODUCT": dist.ReduceOp.PRODUCT,
       "MIN": dist.ReduceOp.MIN, "MAX": dist.ReduceOp.MAX, "BAND": dist.ReduceOp.BAND,
       "BOR": dist.ReduceOp.BOR, "BXOR": dist.ReduceOp.BXOR}


def supported(dtype, op):
    """The (dtype, op) pairs ringreduce reduces, the same rules as
    unsupportedReason() in csrc/core/base/reduce_op.cpp: bitwise ops on
    integers and bool only, complex numbers with SUM and AVG only, bool with
    everything but AVG (a logical OR cannot be divided)."""
    if op in ("BAND", "BOR", "BXOR"):
        return not dtype.is_floating_point and not dtype.is_complex
    if dtype.is_complex:
        return op in ("SUM", "AVG")
    if dtype == torch.bool:
        return op != "AVG"
    return True


def make_input(dtype, shape, rank, case_seed):
    gen = torch.Generator().manual_seed(case_seed * 1009 + rank)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=gen).bool()
    if dtype == torch.uint8:
        return torch.randint(0, 6, shape, generator=gen, dtype=torch.int64).to(dtype)
    if dtype.is_complex:
        real = torch.randint(-8, 9, shape, generator=gen).double()
        imag = torch.randint(-8, 9, shape, generator=gen).double()
        return torch.complex(real, imag).to(dtype)
    values = torch.randint(-8, 9, shape, generator=gen)
    # Keep zeros rare so PRODUCT stays informative.
    values[values == 0] = 1
    return values.to(dtype)


def _combine(a, b, op):
    if op in ("SUM", "AVG"):
        return torch.logical_or(a, b) if a.dtype == torch.bool else a + b
    if op == "PRODUCT":
        return torch.logical_and(a, b) if a.dtype == torch.bool else a * b
    if op == "MIN":
        return torch.minimum(a, b)
    if op == "MAX":
        return torch.maximum(a, b)
    if op == "BAND":
        return torch.bitwise_and(a, b)
    if op == "BOR":
        return torch.bitwise_or(a, b)
    if op == "BXOR":
        return torch.bitwise_xor(a, b)
    raise ValueError(op)


def reference_allreduce(inputs, op):
    """Reduces in the tensor's own dtype (integers wrap like torch), except
    half precision, computed in float32 and rounded once: ringreduce rounds
    once per ring step, within the dtype's tolerance of this."""
    dtype = inputs[0].dtype
    wide = dtype in (torch.float16, torch.bfloat16)
    acc = inputs[0].float() if wide else inputs[0].clone()
    for x in inputs[1:]:
        acc = _combine(acc, x.float() if wide else x, op)
    n = len(inputs)
    if op == "AVG":
        if dtype.is_floating_point or dtype.is_complex:
            acc = acc / n
        else:
            acc = torch.div(acc, n, rounding_mode="trunc")
    return acc.to(dtype)


# float16/bfloat16 round once per ring step: over n ranks the error is at
# most (n-1) * u * sum|x| (core/math/host_loops.h; u = 2^-11 and 2^-8). The
# tolerances below are about 4u, which covers the worlds the tests run (n <= 5).
HALF_TYPES = (torch.float16, torch.bfloat16)


def tolerance(dtype):
    if dtype in (torch.float16,):
        return dict(rtol=2e-3, atol=1e-3)
    if dtype == torch.bfloat16:
        return dict(rtol=1.6e-2, atol=1e-2)
    if dtype in (torch.float32, torch.complex64):
        return dict(rtol=1.3e-6, atol=1e-6)
    if dtype in (torch.float64, torch.complex128):
        return dict(rtol=1e-12, atol=1e-12)
    return dict(rtol=0, atol=0)


def mismatch(actual, expected, exact):
    """None when equal (exactly, or within the dtype's tolerance); else a description."""
    if actual.shape != expected.shape or actual.dtype != expected.dtype:
        return f"shape/dtype {tuple(actual.shape)} {actual.dtype} != {tuple(expected.shape)} {expected.dtype}"
    if expected.dtype in HALF_TYPES:
        exact = False  # rounded per ring step: compared within the bound
    if exact or not (expected.dtype.is_floating_point or expected.dtype.is_complex):
        if torch.equal(actual, expected):
            return None
    elif torch.allclose(actual, expected, **tolerance(expected.dtype)):
        return None
    diff = (actual.to(torch.complex128) - expected.to(torch.complex128)).abs()
    where = int(diff.flatten().argmax())
    return (f"max |diff| {diff.max().item():.3g} at flat index {where}: "
            f"got {actual.flatten()[where].item()}, expected {expected.flatten()[where].item()}")


def reduction_cases(shapes, first_case):
    """(case seed, dtype, op name, op, shape) for every supported pair and shape."""
    case = first_case
    for dtype in DTYPES:
        for op_name, op in OPS.items():
            if not supported(dtype, op_name):
                continue
            for shape in shapes:
                case += 1
                yield case, dtype, op_name, op, shape
