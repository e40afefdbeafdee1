"""PREMUL_SUM (NCCL's; FSDP2 asks for it when a gradient divide factor is
set): every rank's input times a factor, then SUM, on CPU tensors, through
every reduction that takes an op. Gloo refuses this op, so the references
are local: float64 sums of the scaled inputs."""
import pytest

from multiproc import run_world

# Small integers times 0.25 or 2 are exact in every float dtype, bfloat16
# included; 1/3 is not, and is compared within the dtype's precision.
EXACT_FACTORS = [0.25, "tensor 2.0"]


def _premul_everywhere(rank, world, init_method, count):
    import torch
    import torch.distributed as dist

    dist.init_process_group("ringreduce", init_method=init_method, rank=rank, world_size=world)
    failures = []

    def op_for(factor):
        value = torch.tensor(2.0) if factor == "tensor 2.0" else factor
        return dist._make_nccl_premul_sum(value), 2.0 if factor == "tensor 2.0" else factor

    def values(r, n, dtype):
        return ((torch.arange(n, dtype=torch.float64) % 29) + r).to(dtype)

    def check(what, got, want, exact):
        want = want.to(got.dtype)
        if exact:
            ok = torch.equal(got, want)
        else:
            tol = 1e-2 if got.element_size() == 2 or got.dtype == torch.complex32 else 1e-6
            ok = torch.allclose(got, want, rtol=tol, atol=tol)
        if not ok:
            failures.append(f"rank {rank}: {what}: got {got.flatten()[:4].tolist()}, "
                            f"want {want.flatten()[:4].tolist()}")

    dtypes = [torch.float32, torch.float64, torch.bfloat16, torch.float16, torch.complex64]
    for dtype in dtypes:
        for factor in EXACT_FACTORS + [1 / 3]:
            op, f = op_for(factor)
            exact = factor != 1 / 3
            label = f"{dtype} x {factor}"
            total = sum(values(r, count * world, torch.float64) * f for r in range(world))
            # all_reduce, in place, contiguous and a transposed view.
            t = values(rank, count * world, dtype)
            dist.all_reduce(t, op=op)
            check(f"all_reduce {label}", t, total, exact)
            t = values(rank, count * world, dtype).view(world, count).t()
            dist.all_reduce(t, op=op)
            check(f"all_reduce of a view {label}", t, total.view(world, count).t(), exact)
            # reduce: the root gets the result, the others keep their input.
            root = world - 1
            t = values(rank, count * world, dtype)
            kept = t.clone()
            dist.reduce(t, dst=root, op=op)
            if rank == root:
                check(f"reduce {label}", t, total, exact)
            else:
                check(f"reduce leaves a non-root input {label}", t, kept, True)
            # The same on a transposed view (dense, not contiguous).
            t = values(rank, count * world, dtype).view(world, count).t()
            kept = t.clone()
            dist.reduce(t, dst=root, op=op)
            if rank == root:
                check(f"reduce of a view {label}", t, total.view(world, count).t(), exact)
            else:
                check(f"reduce leaves a non-root view {label}", t, kept, True)
            # reduce_scatter_tensor and the list form: inputs stay as they were.
            want = total.view(world, count)[rank]
            x = values(rank, count * world, dtype)
            kept = x.clone()
            out = torch.empty(count, dtype=dtype)
            dist.reduce_scatter_tensor(out, x, op=op)
            check(f"reduce_scatter_tensor {label}", out, want, exact)
            check(f"reduce_scatter_tensor input untouched {label}", x, kept, True)
            blocks = list(values(rank, count * world, dtype).view(world, count).clone())
            kept = [b.clone() for b in blocks]
            dist.reduce_scatter(out, blocks, op=op)
            check(f"reduce_scatter {label}", out, want, exact)
            check(f"reduce_scatter inputs untouched {label}", torch.stack(blocks),
                  torch.stack(kept), True)
            # The coalesced forms.
            a, b = values(rank, count, dtype), values(rank, count * world, dtype)
            with dist._coalescing_manager(async_ops=True) as cm:
                dist.all_reduce(a, op=op)
                dist.all_reduce(b, op=op)
            cm.wait()
            check(f"coalesced all_reduce {label}", a,
                  sum(values(r, count, torch.float64) * f for r in range(world)), exact)
            check(f"coalesced all_reduce, second {label}", b, total, exact)
            out2 = torch.empty(count, dtype=dtype)
            with dist._coalescing_manager(async_ops=True) as cm:
                dist.reduce_scatter_tensor(out2, values(rank, count * world, dtype), op=op)
            cm.wait()
            check(f"coalesced reduce_scatter_tensor {label}", out2, want, exact)

    # Integers have no PREMUL_SUM, nor does a complex factor.
    errors = {}
    for name, call in {
        "int32": lambda: dist.all_reduce(torch.ones(4, dtype=torch.int32),
                                         op=dist._make_nccl_premul_sum(2.0)),
        "bool": lambda: dist.all_reduce(torch.ones(4, dtype=torch.bool),
                                        op=dist._make_nccl_premul_sum(2.0)),
        "complex factor": lambda: dist.all_reduce(
            torch.ones(4), op=dist._make_nccl_premul_sum(torch.tensor(1 + 1j))),
    }.items():
        try:
            call()
            errors[name] = "no error"
        except Exception as error:  # noqa: BLE001  (the type is the check)
            errors[name] = (type(error).__name__, str(error))
    t = torch.ones(2)
    dist.all_reduce(t)
    return {"failures": failures, "errors": errors, "usable": t.tolist() == [float(world)] * 2}


# The large count: the 16-bit dtypes fit one host-channel buffer; float32
# (just over one), float64 and complex64 (2 MiB) take it in turns.
@pytest.mark.parametrize("count", [7, (1 << 18) + 3])
def test_premul_sum_scales_every_input_then_sums(count):
    reports = run_world(3, _premul_everywhere, count, timeout=600)
    for rank, report in enumerate(reports):
        assert report["failures"] == [], "\n".join(report["failures"][:20])
        assert report["usable"], f"rank {rank}: group unusable after the refusals"
        errors = report["errors"]
        assert errors["int32"][0] == "TypeError" and "PREMUL_SUM" in errors["int32"][1] \
            and "int32" in errors["int32"][1], errors["int32"]
        assert errors["bool"][0] == "TypeError" and "bool" in errors["bool"][1], errors["bool"]
        assert errors["complex factor"][0] == "TypeError" \
            and "complex" in errors["complex factor"][1], errors["complex factor"]


def _sum_against_premul_sum(rank, world, init_method):
    import datetime

    import torch
    import torch.distributed as dist

    dist.init_process_group("ringreduce", init_method=init_method, rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=20))
    op = dist._make_nccl_premul_sum(0.5) if rank == world - 1 else dist.ReduceOp.SUM
    try:
        dist.all_reduce(torch.ones(8), op=op)
        return "no error"
    except Exception as error:  # noqa: BLE001
        return str(error)


def test_sum_against_premul_sum_is_a_mismatch_under_the_full_check():
    # Factors may differ between ranks (as with NCCL); the op itself may not.
    messages = run_world(2, _sum_against_premul_sum,
                         env={"RINGREDUCE_CHECK_COLLECTIVES": "1"}, timeout=120)
    for rank, message in enumerate(messages):
        assert "mismatch" in message.lower() and "PREMUL_SUM" in message, (rank, message)
