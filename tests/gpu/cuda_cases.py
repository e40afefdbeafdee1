"""What each rank runs in the GPU tests: every rank of the world uses
cuda:0 (one GPU, several ranks: the case NCCL refuses and ours must handle).
Expected values are computed on the CPU from the same seeds (oracle.py)."""
import datetime
import os
import time

import torch
import torch.distributed as dist

from oracle import make_input, mismatch, reduction_cases, reference_allreduce

SHAPES = [(0,), (1,), (7,), (3, 5), (70001,)]
# Past the default one-shot limit and the default 32 MiB scratch (so the
# staged form takes several rounds); few dtypes, to bound the run time.
LARGE = [((3 << 20) + 5,), ((9 << 20) + 3,)]
LARGE_DTYPES = [torch.float32, torch.bfloat16, torch.int64, torch.complex64]


class Report:
    def __init__(self):
        self.failures = []
        self.checked = 0

    def check(self, what, actual, expected, exact=True):
        self.checked += 1
        problem = mismatch(actual.cpu(), expected.cpu(), exact)
        if problem:
            self.failures.append(f"{what}: {problem}")

    def as_dict(self):
        return {"failures": self.failures, "checked": self.checked}


# The groups' collective timeout: short, so that a collective that never
# completes fails with ringreduce's own report (which ranks were not seen,
# the device's verdict) within a GPU-check phase, instead of torch's default
# 30 minutes.
COLLECTIVE_TIMEOUT = datetime.timedelta(seconds=float(
    os.environ.get("RINGREDUCE_TEST_COLLECTIVE_TIMEOUT_S", "40")))


def _init(rank, world, init_method):
    torch.cuda.set_device(0)
    dist.init_process_group("ringreduce", init_method=init_method, rank=rank, world_size=world,
                            timeout=COLLECTIVE_TIMEOUT)


def check_allreduces(report, rank, world, cases):
    """all_reduce of every case of oracle.reduction_cases on CUDA tensors."""
    for case, dtype, op_name, op, shape in cases:
        inputs = [make_input(dtype, shape, r, case) for r in range(world)]
        expected = reference_allreduce(inputs, op_name)
        mine = inputs[rank].cuda()
        dist.all_reduce(mine, op=op)
        report.check(f"all_reduce {op_name} {dtype} {shape}", mine, expected,
                     exact=(op_name != "AVG"))


def sweep_allreduce(rank, world, init_method):
    """Every dtype x op x shape, on the path RINGREDUCE_CUDA_ALGO selects."""
    _init(rank, world, init_method)
    report = Report()
    cases = list(reduction_cases(SHAPES, 0))
    cases += [c for c in reduction_cases(LARGE, 50000)
              if c[1] in LARGE_DTYPES and c[2] in ("SUM", "AVG", "MAX")]
    check_allreduces(report, rank, world, cases)
    # A non-contiguous view: the result lands in the view, the rest stays.
    base = make_input(torch.float32, (64, 10), rank, 777).cuda()
    untouched = base[:, 1::2].clone()
    view = base[:, ::2]
    dist.all_reduce(view)
    expected = reference_allreduce([make_input(torch.float32, (64, 10), r, 777)[:, ::2]
                                    for r in range(world)], "SUM")
    report.check("all_reduce non-contiguous", view, expected)
    report.check("all_reduce non-contiguous untouched", base[:, 1::2], untouched)
    # An offset view into a larger allocation (IPC maps the allocation and
    # must add the offset).
    big = torch.zeros(1 << 20, device="cuda")
    part = big[12345:12345 + 70001]
    part.copy_(make_input(torch.float32, (70001,), rank, 778).cuda())
    dist.all_reduce(part)
    report.check("all_reduce offset view", part,
                 reference_allreduce([make_input(torch.float32, (70001,), r, 778)
                                      for r in range(world)], "SUM"))
    report.check("all_reduce offset view, memory around it", big[:12345].cpu(),
                 torch.zeros(12345))
    torch.cuda.synchronize()
    return report.as_dict()


def sweep_other_collectives(rank, world, init_method):
    """The ops that run through host staging, on CUDA tensors."""
    _init(rank, world, init_method)
    report = Report()
    case = 70000
    for dtype in (torch.float32, torch.bfloat16, torch.int64, torch.bool, torch.complex64):
        for shape in ((1,), (3, 5), (70001,)):
            case += 1
            inputs = [make_input(dtype, shape, r, case) for r in range(world)]
            what = f"{dtype} {shape}"
            for root in range(world):
                mine = make_input(dtype, shape, rank, case).cuda()
                dist.broadcast(mine, src=root)
                report.check(f"broadcast root {root} {what}", mine, inputs[root])
            outs = [torch.empty(shape, dtype=dtype, device="cuda") for _ in range(world)]
            dist.all_gather(outs, inputs[rank].cuda())
            for r in range(world):
                report.check(f"all_gather block {r} {what}", outs[r], inputs[r])
            flat = torch.empty((world * inputs[0].numel(),), dtype=dtype, device="cuda")
            dist.all_gather_into_tensor(flat, inputs[rank].cuda())
            report.check(f"all_gather_into_tensor {what}", flat,
                         torch.cat([x.reshape(-1) for x in inputs]))
            if dtype != torch.bool:
                stacked = [make_input(dtype, (world * 5,), r, case) for r in range(world)]
                out = torch.empty((5,), dtype=dtype, device="cuda")
                dist.reduce_scatter_tensor(out, stacked[rank].cuda())
                report.check(f"reduce_scatter_tensor {what}", out,
                             reference_allreduce(stacked, "SUM")[rank * 5:(rank + 1) * 5])
                for root in range(world):
                    mine = inputs[rank].cuda()
                    dist.reduce(mine, dst=root)
                    if rank == root:
                        report.check(f"reduce to {root} {what}", mine,
                                     reference_allreduce(inputs, "SUM"))
            gathered = [torch.empty(shape, dtype=dtype, device="cuda") for _ in range(world)]
            dist.gather(inputs[rank].cuda(), gathered if rank == 0 else None, dst=0)
            if rank == 0:
                for r in range(world):
                    report.check(f"gather block {r} {what}", gathered[r], inputs[r])
            received = torch.empty(shape, dtype=dtype, device="cuda")
            dist.scatter(received, [x.cuda() for x in inputs] if rank == 0 else None, src=0)
            report.check(f"scatter {what}", received, inputs[rank])
    # all_to_all_single, even and uneven.
    send = torch.arange(world * 3, dtype=torch.float32, device="cuda") + 100 * rank
    recv = torch.empty_like(send)
    dist.all_to_all_single(recv, send)
    expected = torch.cat([torch.arange(rank * 3, rank * 3 + 3, dtype=torch.float32) + 100 * r
                          for r in range(world)])
    report.check("all_to_all_single", recv, expected)
    # send/recv around the ring.
    if world > 1:
        payload = torch.full((1000,), float(rank), device="cuda")
        got = torch.empty(1000, device="cuda")
        right, left = (rank + 1) % world, (rank - 1) % world
        ops = [dist.P2POp(dist.isend, payload, right), dist.P2POp(dist.irecv, got, left)]
        for work in dist.batch_isend_irecv(ops):
            work.wait()
        report.check("send/recv ring", got, torch.full((1000,), float(left)))
    dist.barrier()
    torch.cuda.synchronize()
    return report.as_dict()


def stream_semantics(rank, world, init_method):
    """The internal stream waits on the caller's; the caller's stream (not
    the host) waits on the result; the future carries the device."""
    _init(rank, world, init_method)
    report = Report()
    expected = torch.full((1 << 20,), float(sum(range(1, world + 1))))
    # Ordered by wait(), or by is_completed() as torch documents it for
    # CUDA: once True, the output is usable on the caller's stream with no
    # further synchronization, wait() not called. A work that ran on the
    # caller's stream is complete at once; one on the internal stream once
    # the device has run it (here behind the caller's long kernel).
    for ordered_by in ("wait", "is_completed"):
        for use_side_stream in (False, True):
            label = f"{ordered_by} (side stream {use_side_stream})"
            stream = torch.cuda.Stream() if use_side_stream else torch.cuda.current_stream()
            with torch.cuda.stream(stream):
                x = torch.zeros(1 << 20, device="cuda")
                # A long kernel, then the value: an allreduce that did not
                # wait for the caller's stream would read zeros.
                torch.cuda._sleep(50_000_000)
                x.fill_(float(rank + 1))
                work = dist.all_reduce(x, async_op=True)
                if ordered_by == "wait":
                    work.wait()
                else:
                    deadline = time.monotonic() + 60
                    while not work.is_completed() and time.monotonic() < deadline:
                        time.sleep(0.001)
                    if not work.is_completed():
                        report.failures.append(f"{label}: is_completed() False after 60 s")
                # Ordered after the allreduce by the stream, with no host sync.
                y = x * 1
                work.wait()
            torch.cuda.synchronize()
            report.check(f"value after {label}", y, expected)
    x = torch.full((1000,), float(rank + 1), device="cuda")
    future = dist.all_reduce(x, async_op=True).get_future()
    doubled = future.then(lambda f: f.value()[0] * 2).wait()
    report.check("future value", future.value()[0], expected[:1000])
    report.check("future.then", doubled, expected[:1000] * 2)
    report.failures += [] if future.value()[0].device == x.device else ["future on wrong device"]
    # A tensor freed right after issue: the allocator must not hand its
    # memory out while the allreduce may still use it.
    for _ in range(5):
        z = torch.full((1 << 22,), 1.0, device="cuda")
        work = dist.all_reduce(z, async_op=True)
        del z
        scribble = torch.full((1 << 22,), -7.0, device="cuda")
        work.wait()
        torch.cuda.synchronize()
        report.check("memory of a freed operand not reused early", scribble,
                     torch.full((1 << 22,), -7.0))
    return report.as_dict()


def nccl_refused_on_shared_gpu(rank, world, init_method):
    _init(rank, world, init_method)
    x = torch.ones(16, device="cuda")
    try:
        dist.all_reduce(x)
        message = "no error"
    except (RuntimeError, ValueError) as error:
        message = str(error)
    cpu = torch.ones(4)
    dist.all_reduce(cpu)  # the group still works
    return {"message": message, "cpu": cpu.tolist()}


def _coalesced(calls):
    """Runs calls in torch's coalescing manager: one *_coalesced call."""
    from torch.distributed.distributed_c10d import _coalescing_manager
    with _coalescing_manager(device=torch.device("cuda", 0), async_ops=False):
        for call in calls:
            call()


def bad_device_outputs(rank, world, init_method):
    """CUDA outputs the host shadows hide: an expanded one and two that share
    memory, in the coalesced forms FSDP and ZeRO call and in all_gather's
    list. Each must raise ValueError at the call on every rank, and the group
    stay usable. Returns each call's error message (or "no error")."""
    _init(rank, world, init_method)
    n = 4
    ones = torch.ones(n, device="cuda")
    whole = torch.zeros(2 * world * n, device="cuda")
    expanded = torch.zeros(1, device="cuda").expand(world * n)
    calls = {
        "all_gather_into_tensor_coalesced, expanded output": lambda: _coalesced([
            lambda: dist.all_gather_into_tensor(torch.zeros(world * n, device="cuda"), ones),
            lambda: dist.all_gather_into_tensor(expanded, ones)]),
        "all_gather_into_tensor_coalesced, overlapping outputs": lambda: _coalesced([
            lambda: dist.all_gather_into_tensor(whole[:world * n], ones),
            lambda: dist.all_gather_into_tensor(whole[1:world * n + 1], ones)]),
        "reduce_scatter_tensor_coalesced, overlapping outputs": lambda: _coalesced([
            lambda: dist.reduce_scatter_tensor(whole[:n], torch.ones(world * n, device="cuda")),
            lambda: dist.reduce_scatter_tensor(whole[2:n + 2],
                                               torch.ones(world * n, device="cuda"))]),
        "all_gather, overlapping output list": lambda: dist.all_gather(
            [whole[:n]] * world, ones),
    }
    messages = {}
    for name, call in calls.items():
        try:
            call()
            messages[name] = "no error"
        except ValueError as error:
            messages[name] = str(error)
    after = torch.full((n,), float(rank + 1), device="cuda")
    dist.all_reduce(after)  # the group still works
    torch.cuda.synchronize()
    return {"messages": messages, "after": after.cpu().tolist(),
            "expected": [float(world * (world + 1) // 2)] * n}


def _train_ddp(group, device, steps):
    from torch.nn.parallel import DistributedDataParallel
    torch.manual_seed(1234)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.BatchNorm1d(64),
                                torch.nn.ReLU(), torch.nn.Linear(64, 1)).double().to(device)
    ddp = DistributedDataParallel(model, device_ids=[device.index], process_group=group,
                                  bucket_cap_mb=0.001)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
    gen = torch.Generator().manual_seed(99 + dist.get_rank())
    for _ in range(steps):
        x = torch.randn(16, 32, generator=gen, dtype=torch.float64).to(device)
        y = x[:, :1] * 0.5 - x[:, 1:2]
        loss = torch.nn.functional.mse_loss(ddp(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}


def ddp_against_gloo(rank, world, init_method):
    _init(rank, world, init_method)
    gloo = dist.new_group(backend="gloo")
    device = torch.device("cuda", 0)
    return {"ring": _train_ddp(dist.group.WORLD, device, 10),
            "gloo": _train_ddp(gloo, device, 10)}

