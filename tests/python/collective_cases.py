"""The collective sweep run inside each rank: every op x dtype x shape of the
foundation issue, against the local reference and against gloo on the same
inputs (where gloo supports the combination)."""
import torch
import torch.distributed as dist

from oracle import DTYPES, make_input, mismatch, reduction_cases, reference_allreduce

SHAPES = [(0,), (1,), (7,), (3, 5), (70001,)]  # the last one spans many pipeline segments


class Report:
    def __init__(self):
        self.failures = []
        self.checked = 0
        self.gloo_checked = 0
        self.gloo_skipped = set()

    def check(self, what, actual, expected, exact=True):
        self.checked += 1
        problem = mismatch(actual, expected, exact)
        if problem:
            self.failures.append(f"{what}: {problem}")

    def check_equal(self, what, actual, expected):
        self.checked += 1
        if actual != expected:
            self.failures.append(f"{what}: {actual!r} != {expected!r}")

    def as_dict(self):
        return {"failures": self.failures, "checked": self.checked,
                "gloo_checked": self.gloo_checked, "gloo_skipped": sorted(self.gloo_skipped)}


def _gloo(report, what, fn):
    """Runs fn on the gloo group. False (and noted) when gloo does not support it."""
    try:
        fn()
    except (RuntimeError, ValueError, TypeError) as error:
        report.gloo_skipped.add(f"{what}: {str(error).splitlines()[0][:80]}")
        return False
    report.gloo_checked += 1
    return True


def sweep_allreduce(rank, world, gloo, report):
    for case, dtype, op_name, op, shape in reduction_cases(SHAPES, 0):
        inputs = [make_input(dtype, shape, r, case) for r in range(world)]
        expected = reference_allreduce(inputs, op_name)
        what = f"all_reduce {op_name} {dtype} {shape}"
        mine = inputs[rank].clone()
        dist.all_reduce(mine, op=op)
        report.check(what, mine, expected, exact=(op_name != "AVG"))
        if op_name == "AVG":
            continue  # gloo has no AVG
        theirs = inputs[rank].clone()
        if _gloo(report, f"all_reduce {op_name} {dtype}",
                 lambda: dist.all_reduce(theirs, op=op, group=gloo)):
            report.check(what + " vs gloo", mine, theirs, exact=False)
    # Non-contiguous input: the result must land in the caller's view and
    # leave the elements between untouched.
    for dtype in (torch.float32, torch.int64, torch.complex64):
        base = make_input(dtype, (6, 10), rank, 777)
        view = base[:, ::2]
        untouched = base[:, 1::2].clone()
        inputs = [make_input(dtype, (6, 10), r, 777)[:, ::2] for r in range(world)]
        dist.all_reduce(view)
        report.check(f"all_reduce non-contiguous {dtype}", view, reference_allreduce(inputs, "SUM"))
        report.check(f"all_reduce non-contiguous {dtype} untouched", base[:, 1::2], untouched)


def sweep_broadcast(rank, world, gloo, report):
    case = 5000
    for dtype in DTYPES:
        for shape in SHAPES:
            for root in range(world):
                case += 1
                source = make_input(dtype, shape, root, case)
                mine = make_input(dtype, shape, rank, case)
                dist.broadcast(mine, src=root)
                report.check(f"broadcast {dtype} {shape} root {root}", mine, source)
    # Past the host channel's four buffers (4 MiB): the chain over the
    # transport (between two ranks one message, else segments forwarded).
    for root in range(world):
        case += 1
        source = make_input(torch.float32, ((5 << 18) + 3,), root, case)
        mine = make_input(torch.float32, ((5 << 18) + 3,), rank, case)
        dist.broadcast(mine, src=root)
        report.check(f"broadcast 5 MiB root {root}", mine, source)
    # Non-contiguous broadcast target.
    base = torch.zeros(4, 8)
    view = base[:, 1::2]
    payload = torch.arange(16, dtype=torch.float32).reshape(4, 4) + 100
    if rank == 0:
        view.copy_(payload)
    dist.broadcast(view, src=0)
    report.check("broadcast non-contiguous", view, payload)
    report.check("broadcast non-contiguous untouched", base[:, 0::2], torch.zeros(4, 4))


def sweep_allgather(rank, world, gloo, report):
    case = 9000
    for dtype in DTYPES:
        for shape in SHAPES:
            case += 1
            inputs = [make_input(dtype, shape, r, case) for r in range(world)]
            outs = [torch.empty(shape, dtype=dtype) for _ in range(world)]
            dist.all_gather(outs, inputs[rank])
            for r in range(world):
                report.check(f"all_gather {dtype} {shape} block {r}", outs[r], inputs[r])
            flat = torch.empty((world * inputs[0].numel(),), dtype=dtype)
            dist.all_gather_into_tensor(flat, inputs[rank])
            expected = torch.cat([x.reshape(-1) for x in inputs])
            report.check(f"all_gather_into_tensor {dtype} {shape}", flat, expected)
            if shape == (70001,) and dtype in (torch.float32, torch.int64, torch.bool):
                theirs = [torch.empty(shape, dtype=dtype) for _ in range(world)]
                if _gloo(report, f"all_gather {dtype}",
                         lambda: dist.all_gather(theirs, inputs[rank], group=gloo)):
                    for r in range(world):
                        report.check(f"all_gather {dtype} vs gloo block {r}", outs[r], theirs[r])
    # Stacked output tensor (world, *shape) works as well.
    mine = make_input(torch.float32, (3, 4), rank, 42)
    stacked = torch.empty((world, 3, 4))
    dist.all_gather_into_tensor(stacked, mine)
    report.check("all_gather_into_tensor stacked", stacked,
                 torch.stack([make_input(torch.float32, (3, 4), r, 42) for r in range(world)]))


def run_sweep(rank, world, init_method):
    dist.init_process_group("ringreduce", init_method=init_method, rank=rank,
                            world_size=world)
    gloo = dist.new_group(backend="gloo")
    report = Report()
    sweep_allreduce(rank, world, gloo, report)
    sweep_broadcast(rank, world, gloo, report)
    sweep_allgather(rank, world, gloo, report)
    dist.barrier()
    return report.as_dict()


def run_sweep_more(rank, world, init_method):
    """Issue 3's collectives (collective_cases_more.py)."""
    from collective_cases_more import SWEEPS

    dist.init_process_group("ringreduce", init_method=init_method, rank=rank,
                            world_size=world)
    gloo = dist.new_group(backend="gloo")
    report = Report()
    for sweep in SWEEPS:
        sweep(rank, world, gloo, report, _gloo)
    dist.barrier()
    return report.as_dict()
