"""Rank-side bodies of the torch_ringreduce.horovod tests. Inputs are small
integers (or halves), so every expected result is exact in its dtype."""
import importlib.util
import math
import os
import sys
import time
import warnings

import torch
import torch.distributed as dist
import torch.nn as nn

import torch_ringreduce.horovod as hvd
from collective_cases import Report
from error_cases import _expect

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def ranked(r, dtype=torch.float32, shape=(2, 3)):
    """Rank r's input: (r + 1) * [1, 2, ...]."""
    return (torch.arange(1, math.prod(shape) + 1).view(shape) * (r + 1)).to(dtype)


def expected_reduction(world, op, dtype=torch.float32, shape=(2, 3), ranks=None):
    stack = torch.stack([ranked(q, torch.float64, shape) for q in (ranks or range(world))])
    if op == hvd.Sum:
        out = stack.sum(0)
    elif op == hvd.Average:
        out = stack.sum(0) / world
        if not dtype.is_floating_point:
            out = out.trunc()
    elif op == hvd.Min:
        out = stack.min(0).values
    elif op == hvd.Max:
        out = stack.max(0).values
    else:
        out = stack.prod(0)
    return out.to(dtype)


def _until_polled(report, what, handle):
    deadline = time.monotonic() + 60
    while not hvd.poll(handle):
        if time.monotonic() > deadline:
            report.failures.append(f"{what}: poll() never became True")
            return
        time.sleep(0.001)


def check_topology(report, rank, world):
    # run_world starts every rank on this host, without torchrun's GROUP_RANK.
    for what, actual, expected in [("size", hvd.size(), world), ("rank", hvd.rank(), rank),
                                   ("local_rank", hvd.local_rank(), rank),
                                   ("local_size", hvd.local_size(), world),
                                   ("cross_rank", hvd.cross_rank(), 0),
                                   ("cross_size", hvd.cross_size(), 1),
                                   ("is_initialized", hvd.is_initialized(), True),
                                   ("is_homogeneous", hvd.is_homogeneous(), True),
                                   ("mpi_built", hvd.mpi_built(), False),
                                   ("gloo_enabled", hvd.gloo_enabled(), False),
                                   ("nccl_built", hvd.nccl_built(), hvd.cuda_built())]:
        report.check_equal(what, actual, expected)


def check_allreduce(report, rank, world):
    ops = {"Average": hvd.Average, "Sum": hvd.Sum, "Min": hvd.Min, "Max": hvd.Max,
           "Product": hvd.Product}
    for dtype in (torch.float32, torch.float64, torch.int32, torch.int64):
        for op_name, op in ops.items():
            x = ranked(rank, dtype)
            out = hvd.allreduce(x, op=op, name=f"ar.{op_name}.{dtype}")
            report.check(f"allreduce {op_name} {dtype}", out, expected_reduction(world, op, dtype))
            report.check(f"allreduce {op_name} {dtype} leaves input", x, ranked(rank, dtype))
    x = ranked(rank)
    report.check("allreduce default op is Average", hvd.allreduce(x),
                 expected_reduction(world, hvd.Average))
    inplace = ranked(rank)
    report.check_equal("allreduce_ returns its tensor", hvd.allreduce_(inplace, op=hvd.Sum) is inplace,
                       True)
    report.check("allreduce_ in place", inplace, expected_reduction(world, hvd.Sum))
    handle = hvd.allreduce_async(x, op=hvd.Max, name="async.max")
    _until_polled(report, "allreduce_async", handle)
    report.check("allreduce_async", hvd.synchronize(handle), expected_reduction(world, hvd.Max))
    report.check_equal("synchronize of a finished handle", hvd.synchronize(handle), None)
    inplace = ranked(rank, torch.int64)
    handle = hvd.allreduce_async_(inplace, op=hvd.Min)
    report.check_equal("allreduce_async_ result is the tensor", hvd.synchronize(handle) is inplace,
                       True)
    report.check("allreduce_async_", inplace, expected_reduction(world, hvd.Min, torch.int64))
    # Scale factors: 3 * x summed, then halved.
    report.check("prescale/postscale", hvd.allreduce(x, op=hvd.Sum, prescale_factor=3.0,
                                                     postscale_factor=0.5),
                 expected_reduction(world, hvd.Sum) * 1.5)
    report.check("prescale with Average", hvd.allreduce(x, prescale_factor=2.0),
                 expected_reduction(world, hvd.Average) * 2)
    report.check("postscale on int32 truncates",
                 hvd.allreduce(ranked(rank, torch.int32), op=hvd.Sum, postscale_factor=0.5),
                 (expected_reduction(world, hvd.Sum, torch.float64) * 0.5).trunc().to(torch.int32))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        report.check("average=False is Sum", hvd.allreduce(x, average=False),
                     expected_reduction(world, hvd.Sum))
        report.check("average=True is Average", hvd.allreduce(x, average=True),
                     expected_reduction(world, hvd.Average))
    report.check_equal("average= warns", any(issubclass(w.category, DeprecationWarning)
                                             for w in caught), True)
    for name, compression in (("fp16", hvd.Compression.fp16), ("bf16", hvd.Compression.bf16),
                              ("none", hvd.Compression.none)):
        report.check(f"allreduce compression {name}",
                     hvd.allreduce(x, op=hvd.Sum, compression=compression),
                     expected_reduction(world, hvd.Sum))
    compressed, ctx = hvd.Compression.fp16.compress(x)
    report.check_equal("fp16 compresses to float16", compressed.dtype, torch.float16)
    report.check("fp16 decompresses to float32", hvd.Compression.fp16.decompress(compressed, ctx), x)
    # Gradients flow back through an allreduce of the same op.
    leaf = ranked(rank).requires_grad_()
    hvd.allreduce(leaf, op=hvd.Sum).sum().backward()
    report.check("allreduce backward (Sum)", leaf.grad, torch.full((2, 3), float(world)))
    leaf = ranked(rank).requires_grad_()
    hvd.allreduce(leaf).sum().backward()
    report.check("allreduce backward (Average)", leaf.grad, torch.ones(2, 3))


def check_grouped(report, rank, world):
    specs = [(torch.float32, (2, 3)), (torch.int64, (4,)), (torch.float64, (1,)),
             (torch.float32, (5,))]
    expect = [expected_reduction(world, hvd.Sum, d, s) for d, s in specs]
    tensors = [ranked(rank, d, s) for d, s in specs]
    for i, out in enumerate(hvd.grouped_allreduce(tensors, op=hvd.Sum, name="group")):
        report.check(f"grouped_allreduce [{i}]", out, expect[i])
    for i, out in enumerate(hvd.synchronize(hvd.grouped_allreduce_async(tensors, op=hvd.Sum))):
        report.check(f"grouped_allreduce_async [{i}]", out, expect[i])
    for i, t in enumerate(tensors):
        report.check(f"grouped_allreduce leaves input [{i}]", t, ranked(rank, *specs[i]))
    hvd.grouped_allreduce_(tensors, op=hvd.Sum)
    for i, t in enumerate(tensors):
        report.check(f"grouped_allreduce_ [{i}]", t, expect[i])
    tensors = [ranked(rank, d, s) for d, s in specs]
    handle = hvd.grouped_allreduce_async_(tensors, op=hvd.Max)
    _until_polled(report, "grouped_allreduce_async_", handle)
    hvd.synchronize(handle)
    for i, t in enumerate(tensors):
        report.check(f"grouped_allreduce_async_ Max [{i}]", t,
                     expected_reduction(world, hvd.Max, *specs[i]))
    leaves = [ranked(rank).requires_grad_(), ranked(rank, shape=(3,)).requires_grad_()]
    sum(o.sum() for o in hvd.grouped_allreduce(leaves, op=hvd.Sum)).backward()
    report.check("grouped_allreduce backward", leaves[1].grad, torch.full((3,), float(world)))


def _rows(r, rows, width=2, dtype=torch.float32):
    return (torch.arange(rows * width).view(rows, width) + 100 * r).to(dtype)


def check_allgather(report, rank, world):
    for dtype in (torch.float32, torch.int64, torch.uint8):
        # Rank r has r rows (rank 0 none), so first dimensions all differ.
        expected = torch.cat([_rows(q, q, dtype=dtype) for q in range(world)])
        report.check(f"allgather uneven {dtype}", hvd.allgather(_rows(rank, rank, dtype=dtype)),
                     expected)
    mine = torch.arange(8.).view(2, 2, 2) + rank
    report.check("allgather equal 3-d", hvd.allgather(mine, name="equal"),
                 torch.cat([torch.arange(8.).view(2, 2, 2) + q for q in range(world)]))
    handle = hvd.allgather_async(_rows(rank, rank + 1))
    report.check("allgather_async", hvd.synchronize(handle),
                 torch.cat([_rows(q, q + 1) for q in range(world)]))
    leaf = _rows(rank, rank + 1).requires_grad_()
    hvd.allgather(leaf).sum().backward()
    report.check("allgather backward", leaf.grad, torch.ones(rank + 1, 2))


def check_broadcast(report, rank, world):
    root = world - 1
    x = ranked(rank)
    report.check("broadcast", hvd.broadcast(x, root), ranked(root))
    report.check("broadcast leaves input", x, ranked(rank))
    report.check("broadcast_", hvd.broadcast_(x, 0, name="b0"), ranked(0))
    report.check("broadcast_ in place", x, ranked(0))
    report.check("broadcast_async", hvd.synchronize(hvd.broadcast_async(ranked(rank, torch.int32), 1)),
                 ranked(1, torch.int32))
    y = ranked(rank, torch.float64)
    hvd.synchronize(hvd.broadcast_async_(y, root))
    report.check("broadcast_async_", y, ranked(root, torch.float64))
    leaf = ranked(rank).requires_grad_()
    hvd.broadcast(leaf, root).sum().backward()
    report.check("broadcast backward", leaf.grad,
                 torch.ones(2, 3) if rank == root else torch.zeros(2, 3))
    obj = hvd.broadcast_object({"from": rank, "tag": ("x", rank)} if rank == root else None, root)
    report.check_equal("broadcast_object", obj, {"from": root, "tag": ("x", root)})
    # Horovod pickles with cloudpickle (its dependency), so lambdas travel;
    # the shim does where cloudpickle is installed (scripts/test.sh installs
    # it), and plain pickle would refuse one on the root alone.
    if importlib.util.find_spec("cloudpickle") is not None:
        obj = hvd.broadcast_object({"fn": lambda: 7 + root} if rank == root else None, root)
        report.check_equal("broadcast_object of a lambda", obj["fn"](), 7 + root)
    report.check_equal("allgather_object", hvd.allgather_object((rank, "x" * rank)),
                       [(q, "x" * q) for q in range(world)])


def check_alltoall(report, rank, world):
    x = _rows(rank, 2 * world, 3)
    out = hvd.alltoall(x)
    report.check("alltoall equal splits", out,
                 torch.cat([_rows(q, 2 * world, 3)[2 * rank:2 * rank + 2] for q in range(world)]))
    # Rank q sends splits_q[j] = j + q + 1 rows to rank j.
    splits = [j + rank + 1 for j in range(world)]
    x = _rows(rank, sum(splits), 3)
    out, received = hvd.alltoall(x, splits=splits, name="a2a")
    expected = []
    for q in range(world):
        start = sum(j + q + 1 for j in range(rank))
        expected.append(_rows(q, sum(j + q + 1 for j in range(world)), 3)[start:start + rank + q + 1])
    report.check("alltoall with splits", out, torch.cat(expected))
    report.check("alltoall received splits (list: int32)", received,
                 torch.tensor([rank + q + 1 for q in range(world)], dtype=torch.int32))
    out2, received = hvd.synchronize(hvd.alltoall_async(x, torch.tensor(splits)))
    report.check("alltoall_async", out2, torch.cat(expected))
    report.check("alltoall received splits (tensor: its dtype)", received,
                 torch.tensor([rank + q + 1 for q in range(world)]))
    leaf = x.clone().requires_grad_()
    out, _ = hvd.alltoall(leaf, splits=splits)
    (out * 2).sum().backward()
    report.check("alltoall backward", leaf.grad, torch.full_like(x, 2.0))


def check_join(report, rank, world):
    """Rank 0 joins at once; the others keep going (rank world-1 longest);
    joined ranks leave results unchanged (Average still divides by size())."""
    report.check_equal("barrier", hvd.barrier(), None)
    if rank == 0:
        last = hvd.join()
    else:
        others = list(range(1, world))
        for op in (hvd.Sum, hvd.Min, hvd.Max, hvd.Product):
            report.check(f"allreduce {op} while rank 0 has joined", hvd.allreduce(ranked(rank), op=op),
                         expected_reduction(world, op, ranks=others))
        report.check("allreduce Min int32 while rank 0 has joined",
                     hvd.allreduce(ranked(rank, torch.int32), op=hvd.Min),
                     expected_reduction(world, hvd.Min, torch.int32, ranks=others))
        # Average divides by size(), joined ranks included (3x: exact for 2 and 3 ranks).
        report.check("allreduce Average while rank 0 has joined", hvd.allreduce(3 * ranked(rank)),
                     3 * expected_reduction(world, hvd.Sum, ranks=others) / world)
        group = hvd.grouped_allreduce([ranked(rank), ranked(rank, torch.int32, (3,))], op=hvd.Sum)
        report.check("grouped while joined", group[1],
                     expected_reduction(world, hvd.Sum, torch.int32, (3,), ranks=others))
        report.check("allgather while joined", hvd.allgather(_rows(rank, rank)),
                     torch.cat([_rows(q, q) for q in others]))
        report.check("broadcast while joined", hvd.broadcast(ranked(rank), 1), ranked(1))
        out, received = hvd.alltoall(_rows(rank, world), splits=[1] * world)
        report.check("alltoall while joined", out, torch.cat([_rows(q, world)[rank:rank + 1]
                                                              for q in others]))
        hvd.barrier()
        problem = _expect(hvd.CollectiveMismatchError, ["root rank 0", "join"],
                          lambda: hvd.broadcast(ranked(rank), 0))
        if problem:
            report.failures.append(f"broadcast from a joined root: {problem}")
        if rank == world - 1 and world > 2:
            # Everyone else has joined: a Sum of this rank alone.
            report.check("allreduce with all others joined", hvd.allreduce(ranked(rank), op=hvd.Sum),
                         ranked(rank))
        last = hvd.join()
    report.check_equal("join returns the last rank to join", last, world - 1)
    report.check("allreduce after join", hvd.allreduce(ranked(rank), op=hvd.Sum),
                 expected_reduction(world, hvd.Sum))


class Quadratic(nn.Module):
    """loss = sum(w * xw) + sum(b * xb) [+ sum(u * xu)]: the gradients are the inputs."""

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.arange(6.).view(3, 2))
        self.b = nn.Parameter(torch.arange(4, dtype=torch.float64))
        self.u = nn.Parameter(torch.zeros(2))
        self.frozen = nn.Parameter(torch.ones(1), requires_grad=False)

    def forward(self, xw, xb, xu=None):
        loss = (self.w * xw).sum() + (self.b * xb).sum().float() + self.frozen.sum()
        return loss + (self.u * xu).sum() if xu is not None else loss


def _grads(rank, world):
    xw = 2.0 * (rank + 1) * torch.arange(1., 7.).view(3, 2)
    xb = 2.0 * (rank + 1) * torch.ones(4, dtype=torch.float64)
    xu = torch.full((2,), float(world)) if rank == 0 else None  # u: a gradient on rank 0 only
    return xw, xb, xu


def _train_once(rank, world, passes=1, **kwargs):
    model = Quadratic()
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=1.0),
                                   named_parameters=model.named_parameters(),
                                   backward_passes_per_step=passes, **kwargs)
    for _ in range(passes):
        model(*_grads(rank, world)).backward()
    opt.step()
    return model, opt


def check_optimizer(report, rank, world):
    mean_w = (world + 1) * torch.arange(1., 7.).view(3, 2)     # mean of the ranks' xw
    mean_b = float(world + 1)
    start = Quadratic()

    def check_model(what, model, w_step, b_step, u_step):
        report.check(f"{what}: w", model.w.detach(), start.w.detach() - w_step)
        report.check(f"{what}: b", model.b.detach(), start.b.detach() - b_step)
        report.check(f"{what}: u", model.u.detach(), start.u.detach() - u_step)
        report.check(f"{what}: frozen", model.frozen, start.frozen)

    os.environ["HOROVOD_FUSION_THRESHOLD"] = "16"  # one bucket per parameter
    check_model("Average, small buckets", _train_once(rank, world)[0], mean_w, mean_b, 1.0)
    del os.environ["HOROVOD_FUSION_THRESHOLD"]
    check_model("Average, one bucket per dtype", _train_once(rank, world)[0], mean_w, mean_b, 1.0)
    check_model("Sum, fp16", _train_once(rank, world, op=hvd.Sum,
                                         compression=hvd.Compression.fp16)[0],
                mean_w * world, mean_b * world, float(world))
    check_model("bf16", _train_once(rank, world, compression=hvd.Compression.bf16)[0],
                mean_w, mean_b, 1.0)
    check_model("gradient_predivide_factor", _train_once(rank, world,
                                                         gradient_predivide_factor=2.0)[0],
                mean_w, mean_b, 1.0)
    check_model("backward_passes_per_step=2", _train_once(rank, world, passes=2)[0],
                2 * mean_w, 2 * mean_b, 2.0)

    model = Quadratic()
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=1.0),
                                   named_parameters=model.named_parameters())
    model(*_grads(rank, world)).backward()
    problem = _expect(AssertionError, ["zero_grad() was called after loss.backward()"],
                      opt.zero_grad)
    if problem:
        report.failures.append(f"zero_grad before step: {problem}")
    opt.synchronize()
    report.check("synchronize() averages .grad", model.w.grad, mean_w)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with opt.skip_synchronize():
            opt.step()
    report.check_equal("skip_synchronize: no warning", [str(w.message) for w in caught], [])
    check_model("synchronize + skip_synchronize", model, mean_w, mean_b, 1.0)
    opt.zero_grad()
    model(*_grads(rank, world)).backward()
    opt.synchronize()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        opt.step()
    report.check_equal("step() after synchronize() warns",
                       any("skip_synchronize" in str(w.message) for w in caught), True)
    opt.zero_grad()
    model(*_grads(rank, world)).backward()
    problem = _expect(AssertionError, ["more than backward_passes_per_step"],
                      lambda: model(*_grads(rank, world)).backward())
    if problem:
        report.failures.append(f"too many backward passes: {problem}")
    opt.synchronize()

    params = list(model.named_parameters())
    for what, call, needle in [
            ("named_parameters not tuples", lambda: [p for _, p in params], "sequence of tuples"),
            ("duplicate names", lambda: [("same", p) for _, p in params], "must be unique"),
            ("unnamed parameters", lambda: params[:1], "were not named")]:
        problem = _expect(ValueError, [needle], lambda: hvd.DistributedOptimizer(
            torch.optim.SGD(model.parameters(), lr=1.0), named_parameters=call()))
        if problem:
            report.failures.append(f"{what}: {problem}")
    for what, kwargs, kind in [("Adasum", {"op": hvd.Adasum}, NotImplementedError),
                               ("predivide with Sum", {"op": hvd.Sum,
                                                       "gradient_predivide_factor": 2.0},
                                ValueError)]:
        problem = _expect(kind, [], lambda: hvd.DistributedOptimizer(
            torch.optim.SGD(model.parameters(), lr=1.0), **kwargs))
        if problem:
            report.failures.append(f"{what}: {problem}")


def _seeded_net(seed):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(4, 3), nn.BatchNorm1d(3), nn.Linear(3, 2))


def _fresh_optimizer(kind, model, lr):
    if kind == "sgd":
        return torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9 if lr == 0.5 else 0.5)
    if kind == "adam":
        return torch.optim.Adam(model.parameters(), lr=lr,
                                betas=(0.8, 0.95) if lr == 0.5 else (0.9, 0.999))
    return torch.optim.LBFGS(model.parameters(), lr=lr, max_iter=3, history_size=2)


def _stepped_optimizer(kind, model, lr):
    """An optimizer with state (tensors; for LBFGS also ints, floats and lists
    of tensors): steps on a small quadratic loss."""
    opt = _fresh_optimizer(kind, model, lr)
    model.eval()  # BatchNorm from its running statistics: a loss of the parameters alone
    x = torch.arange(8.).view(2, 4) / 8

    def closure():
        opt.zero_grad()
        loss = (model(x) ** 2).sum()
        loss.backward()
        return loss

    opt.step(closure)
    return opt


def _compare_nested(report, what, actual, expected):
    if isinstance(expected, torch.Tensor):
        report.check(what, actual, expected)
    elif isinstance(expected, dict):
        report.check_equal(f"{what} keys", sorted(actual), sorted(expected))
        for key in expected:
            _compare_nested(report, f"{what}.{key}", actual.get(key), expected[key])
    elif isinstance(expected, (list, tuple)):
        report.check_equal(f"{what} length", len(actual), len(expected))
        for i, (a, e) in enumerate(zip(actual, expected)):
            _compare_nested(report, f"{what}[{i}]", a, e)
    else:
        report.check_equal(what, actual, expected)


def check_broadcast_state(report, rank, world):
    root = world - 1
    expected = _seeded_net(root).state_dict()
    for form in ("state_dict", "named_parameters", "parameters"):
        model = _seeded_net(rank)
        if form == "state_dict":
            hvd.broadcast_parameters(model.state_dict(), root_rank=root)
            actual = model.state_dict()
        else:
            params = model.named_parameters() if form == "named_parameters" else model.parameters()
            hvd.broadcast_parameters(params, root_rank=root)
            actual = dict(model.named_parameters())
        for name, value in actual.items():
            report.check(f"broadcast_parameters({form}) {name}", value.detach(), expected[name])
    for kind in ("sgd", "adam", "lbfgs"):
        # The root's optimizer has stepped with lr 0.5; the others are fresh with lr 0.1.
        reference = _stepped_optimizer(kind, _seeded_net(0), 0.5).state_dict()
        model = _seeded_net(0)
        opt = (_stepped_optimizer(kind, model, 0.5) if rank == root
               else _fresh_optimizer(kind, model, 0.1))
        hvd.broadcast_optimizer_state(opt, root_rank=root)
        _compare_nested(report, f"{kind} state_dict", opt.state_dict(), reference)


def api_sweep(rank, world, init_method):
    dist.init_process_group("ringreduce", init_method=init_method, rank=rank, world_size=world)
    hvd.init()
    report = Report()
    for check in (check_topology, check_allreduce, check_grouped, check_allgather,
                  check_broadcast, check_alltoall, check_join, check_optimizer,
                  check_broadcast_state):
        check(report, rank, world)
    hvd.shutdown()
    return report.as_dict()


# ---------------------------------------------------------------- errors

def _outcome(call):
    try:
        call()
        return "no error"
    except Exception as error:
        return (type(error).__name__, str(error))


def horovod_errors(rank, world, init_method):
    import datetime

    problems = {}
    for what, call in [("size", hvd.size), ("rank", hvd.rank), ("local_rank", hvd.local_rank),
                       ("allreduce", lambda: hvd.allreduce(torch.ones(2))),
                       ("broadcast_parameters", lambda: hvd.broadcast_parameters({}, 0))]:
        problem = _expect(ValueError, ["Horovod has not been initialized; use hvd.init()."], call)
        if problem:
            problems[f"{what} before init"] = problem
    dist.init_process_group("ringreduce", init_method=init_method, rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=60))
    odd = rank == world - 1  # the last rank disagrees
    mismatches = {
        "name": lambda: hvd.allreduce(torch.ones(4), name="grad.b" if odd else "grad.a"),
        "shape": lambda: hvd.allreduce(torch.ones((3, 2) if odd else (2, 3)), name="x"),
        "size": lambda: hvd.allreduce(torch.ones(5 if odd else 4)),
        "dtype": lambda: hvd.allreduce(torch.ones(4, dtype=torch.int32 if odd else torch.float32)),
        "op": lambda: hvd.allreduce(torch.ones(4), op=hvd.Max if odd else hvd.Sum),
        "kind": lambda: hvd.broadcast(torch.ones(4), 0) if odd else hvd.allreduce(torch.ones(4)),
        "root": lambda: hvd.broadcast(torch.ones(4), 1 if odd else 0),
        "allgather": lambda: hvd.allgather(torch.ones(2, 4 if odd else 3)),
        "async": lambda: hvd.synchronize(hvd.allreduce_async(torch.ones(4),
                                                             name="b" if odd else "a")),
        "optimizer": lambda: _mismatched_models_step(odd),
    }
    groups = {case: dist.new_group(list(range(world))) for case in mismatches}
    hvd.init()
    for what, kind, needles, call in [
            ("Adasum", NotImplementedError, ["Adasum"],
             lambda: hvd.allreduce(torch.ones(2), op=hvd.Adasum)),
            ("average and op", ValueError, ["op"],
             lambda: hvd.allreduce(torch.ones(2), average=True, op=hvd.Sum)),
            ("unknown op", ValueError, ["unknown reduction op"],
             lambda: hvd.allreduce(torch.ones(2), op=17)),
            ("root out of range", ValueError, ["root_rank"],
             lambda: hvd.broadcast(torch.ones(2), world)),
            ("alltoall splits", ValueError, ["splits"],
             lambda: hvd.alltoall(torch.ones(3, 1), splits=[1] * (world + 1))),
            ("alltoall uneven", ValueError, ["multiple"],
             lambda: hvd.alltoall(torch.ones(world + 1, 1))),
            ("allgather scalar", ValueError, ["dimension"],
             lambda: hvd.allgather(torch.tensor(1.0))),
            ("process set", NotImplementedError, ["process set"],
             lambda: hvd.allreduce(torch.ones(2), process_set=hvd.ProcessSet([0]))),
            ("poll unknown handle", ValueError, ["unknown handle"], lambda: hvd.poll(12345)),
            ("init(comm=...)", NotImplementedError, ["MPI"], lambda: hvd.init(comm=[0]))]:
        problem = _expect(kind, needles, call)
        if problem:
            problems[what] = problem
    usable = hvd.allreduce(torch.ones(2), op=hvd.Sum).tolist() == [float(world)] * 2
    seen = {}
    for case, call in mismatches.items():
        hvd.shutdown()
        hvd.init(process_group=groups[case])
        seen[case] = _outcome(call)
        if case == "size":
            # The tensors of different sizes met in the backend, which failed
            # that allreduce and refuses the group's later operations.
            seen["after size"] = _outcome(lambda: hvd.allreduce(torch.ones(4)))
    hvd.shutdown()
    return {"problems": problems, "usable": usable, "seen": seen}


def _mismatched_models_step(odd):
    model = nn.Linear(2, 2)
    names = [("other." + n if odd else n, p) for n, p in model.named_parameters()]
    opt = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                                   named_parameters=names)
    model(torch.ones(1, 2)).sum().backward()
    opt.step()


# ---------------------------------------------------------------- DDP reference

def ddp_reference(rank, world, init_method, args):
    """examples/horovod_train.py's training, written with plain DDP."""
    import torch.nn.functional as F
    from torch.nn.parallel import DistributedDataParallel

    sys.path.insert(0, os.path.join(REPO, "examples"))
    import horovod_train as example

    dist.init_process_group("ringreduce", init_method=init_method, rank=rank, world_size=world)
    torch.manual_seed(args["seed"])
    torch.set_num_threads(1)
    train_set, _ = example.synthetic_datasets(args["samples"], 512, args["seed"])
    sampler = torch.utils.data.distributed.DistributedSampler(train_set, num_replicas=world,
                                                              rank=rank)
    loader = torch.utils.data.DataLoader(train_set, batch_size=args["batch_size"], sampler=sampler)
    model = example.Net()
    ddp = DistributedDataParallel(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=args["lr"] * world, momentum=args["momentum"])
    for epoch in range(1, args["epochs"] + 1):
        model.train()
        sampler.set_epoch(epoch)
        for data, target in loader:
            opt.zero_grad()
            F.nll_loss(ddp(data), target).backward()
            opt.step()
    return {k: v.detach().clone() for k, v in model.state_dict().items()}
