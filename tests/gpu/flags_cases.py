"""What each rank runs in the device-flags tests (RINGREDUCE_CUDA_ALGO=flags):
every rank on cuda:0, expected values computed on the CPU from the same
seeds (oracle.py). The environment picks how ranks meet: without MPS, stream
memory operations; under MPS (scripts/gpu_check.sh starts it), flags in the
kernels."""
import os
import time

import torch
import torch.distributed as dist

from cuda_cases import Report, _init, check_allreduces
from oracle import make_input, reduction_cases, reference_allreduce

# Within 64 KiB buffers (the tests set RINGREDUCE_CUDA_BUFFER_BYTES), past
# the one-shot limit, and past the buffers (in place, or through the
# buffers a buffer at a time when a tensor cannot be shared).
SHAPES = [(1,), (7,), (3, 5), (1000,), (9000,), (70001,)]


def sweep(rank, world, init_method):
    """Every dtype x op x shape, then the other collectives, then views."""
    _init(rank, world, init_method)
    report = Report()
    check_allreduces(report, rank, world, reduction_cases(SHAPES, 0))
    for dtype in (torch.float32, torch.bfloat16, torch.int64, torch.uint8):
        for per in (1, 13, 4096, 20000):
            inputs = [make_input(dtype, (per,), r, 900 + per) for r in range(world)]
            flat = torch.empty(world * per, dtype=dtype, device="cuda")
            dist.all_gather_into_tensor(flat, inputs[rank].cuda())
            report.check(f"all_gather_into_tensor {dtype} {per}", flat, torch.cat(inputs))
            stacked = [make_input(dtype, (world * per,), r, 950 + per) for r in range(world)]
            out = torch.empty(per, dtype=dtype, device="cuda")
            dist.reduce_scatter_tensor(out, stacked[rank].cuda())
            report.check(f"reduce_scatter_tensor {dtype} {per}", out,
                         reference_allreduce(stacked, "SUM")[rank * per:(rank + 1) * per])
    # A misaligned view (odd offset into its allocation) and a
    # non-contiguous one: the result lands in the view, the rest stays.
    big = torch.zeros(100003, device="cuda")
    part = big[3:3 + 5001]
    part.copy_(make_input(torch.float32, (5001,), rank, 777).cuda())
    dist.all_reduce(part)
    report.check("all_reduce misaligned view", part,
                 reference_allreduce([make_input(torch.float32, (5001,), r, 777)
                                      for r in range(world)], "SUM"))
    report.check("all_reduce misaligned view, memory around it", big[:3], torch.zeros(3))
    base = make_input(torch.float32, (64, 10), rank, 778).cuda()
    untouched = base[:, 1::2].clone()
    view = base[:, ::2]
    dist.all_reduce(view)
    report.check("all_reduce non-contiguous",
                 view, reference_allreduce([make_input(torch.float32, (64, 10), r, 778)[:, ::2]
                                            for r in range(world)], "SUM"))
    report.check("all_reduce non-contiguous untouched", base[:, 1::2], untouched)
    torch.cuda.synchronize()
    return report.as_dict()


def direct_and_streams(rank, world, init_method):
    """After the first collective set the path up, an allreduce within the
    buffers runs on the caller's stream at once: its Work is complete when
    the call returns, the next work on that stream sees the result, and a
    later one on another stream is ordered after it too."""
    _init(rank, world, init_method)
    report = Report()
    x = torch.ones(1024, device="cuda")
    dist.all_reduce(x)  # sets the path up (queued)
    expected = torch.full((1024,), float(sum(range(1, world + 1))))
    completed_at_once = 0
    for i in range(20):
        x = torch.full((1024,), float(rank + 1), device="cuda")
        work = dist.all_reduce(x, async_op=True)
        completed_at_once += int(work.is_completed())
        work.wait()
        report.check(f"direct allreduce {i}", x * 1, expected)
    report.checked += 1
    if completed_at_once != 20:
        report.failures.append(f"only {completed_at_once} of 20 completed at once")
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        torch.cuda._sleep(50_000_000)
        y = torch.full((4096,), float(rank + 1), device="cuda")
        dist.all_reduce(y)
    # The default stream's next collective follows the side stream's.
    z = torch.full((4096,), float(rank + 1), device="cuda")
    dist.all_reduce(z)
    torch.cuda.synchronize()
    report.check("side stream result", y, torch.full((4096,), float(sum(range(1, world + 1)))))
    report.check("then the default stream", z, torch.full((4096,), float(sum(range(1, world + 1)))))
    future = dist.all_reduce(torch.full((8,), 1.0, device="cuda"), async_op=True).get_future()
    report.check("future value", future.wait()[0], torch.full((8,), float(world)))
    return report.as_dict()


def graph_capture(rank, world, init_method, replays):
    """allreduce, all_gather_into_tensor and reduce_scatter_tensor captured
    in one CUDA graph; every replay on new inputs gives exact results."""
    _init(rank, world, init_method)
    report = Report()
    static = torch.zeros(4096, device="cuda")
    gathered = torch.zeros(world * 512, device="cuda")
    scattered = torch.zeros(512, device="cuda")
    piece = torch.zeros(512, device="cuda")
    whole = torch.zeros(world * 512, device="cuda")
    dist.all_reduce(static)  # set-up happens outside the graph
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        dist.all_reduce(static)
        dist.all_gather_into_tensor(gathered, piece)
        dist.reduce_scatter_tensor(scattered, whole)
    wrong = 0
    for replay in range(replays):
        static.fill_(float(rank + replay))
        piece.fill_(float(rank * 3 + replay))
        whole.copy_(torch.arange(world * 512, device="cuda", dtype=torch.float32) + replay)
        graph.replay()
        torch.cuda.synchronize()
        want = float(sum(r + replay for r in range(world)))
        wrong += int(not bool((static == want).all()))
        for r in range(world):
            wrong += int(not bool((gathered[r * 512:(r + 1) * 512] == r * 3 + replay).all()))
        blocks = (torch.arange(world * 512, dtype=torch.float32) + replay) * world
        wrong += int(not torch.equal(scattered.cpu(), blocks[rank * 512:(rank + 1) * 512]))
    report.checked += 1
    if wrong:
        report.failures.append(f"{wrong} wrong results in {replays} replays")
    return report.as_dict()


def capture_refused(rank, world, init_method):
    """What cannot be captured says why, and the group still works."""
    _init(rank, world, init_method)
    messages = {}
    x = torch.ones(16, device="cuda")
    dist.all_reduce(x)
    torch.cuda.synchronize()
    for name, call in (("broadcast", lambda: dist.broadcast(x, src=0)),
                       ("all_reduce", lambda: dist.all_reduce(x))):
        graph = torch.cuda.CUDAGraph()
        try:
            with torch.cuda.graph(graph):
                call()
            messages[name] = "captured"
        except Exception as error:  # noqa: BLE001 (the message is the result)
            messages[name] = str(error)
    torch.cuda.synchronize()
    y = torch.ones(16, device="cuda")
    dist.all_reduce(y)
    return {"messages": messages, "after": y.cpu().tolist()}


def killed_peer(rank, world, init_method):
    """Rank 1 dies before a device collective; the others raise, naming a
    failure, within the group's timeout (10 s here), instead of hanging."""
    from datetime import timedelta
    torch.cuda.set_device(0)
    dist.init_process_group("ringreduce", init_method=init_method, rank=rank, world_size=world,
                            timeout=timedelta(seconds=10))
    x = torch.ones(1024, device="cuda")
    dist.all_reduce(x)
    torch.cuda.synchronize()
    if rank == 1:
        os._exit(0)
    start = time.monotonic()
    message = "no error"
    while time.monotonic() - start < 60:
        try:
            dist.all_reduce(x)
            torch.cuda.synchronize()
        except Exception as error:  # noqa: BLE001
            message = str(error)
            break
        time.sleep(0.05)
    return {"seconds": time.monotonic() - start, "message": message}


def peer_access_off(rank, world, init_method):
    """RINGREDUCE_CUDA_P2P=off: the sweep's results through NCCL or host
    staging, and the group says why it took them."""
    result = sweep(rank, world, init_method)
    result["paths"] = dist.group.WORLD._get_backend(torch.device("cuda"))._cuda_paths()
    return result
