"""GPU latency: small allreduces of ranks sharing one GPU, against the
floors of the same machine measured in the same run.

    python benchmarks/cuda_latency.py [--worlds 2,4] [--max-bytes 256K] [--iters 200]

floors
  world 1      one process, a 4 KiB allreduce per call, back to back (the
               host cost of a call: on the device-flags path an in-place
               world-1 allreduce launches nothing)
  event ping-pong
               two processes on the GPU pass a turn back and forth with
               interprocess CUDA events and a pipe (what the old event
               barriers cost per step, and the least a cross-process step
               costs without MPS): microseconds per one-way hop
allreduce      p50 and p90 over iterations of the slowest rank, the tensor
               written (fill_) before each call as backward writes gradients,
               for each variant of RINGREDUCE_* settings (--variants), and
               NCCL where it accepts ranks sharing a GPU.
Timings are figures to record, never test assertions.
"""
import argparse
import multiprocessing as mp
import os
import statistics
import tempfile
import time

# The ranks' threads as torchrun leaves them (one each): the spawned ranks
# inherit this, and the oversubscription warning stays quiet.
os.environ.setdefault("OMP_NUM_THREADS", "1")

import torch  # noqa: E402

# "auto" is the default (on one node the device-flags path, as "flags");
# "oneshot" the IPC kernel with event barriers and host messages that was
# the default for small tensors before 2026-11-27.
VARIANTS = {
    "flags": {"RINGREDUCE_CUDA_ALGO": "flags"},
    "auto": {},
    "oneshot": {"RINGREDUCE_CUDA_ALGO": "oneshot"},
}


def _parse_bytes(text):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(text[:-1]) * units[text[-1]] if text[-1] in units else int(text)


def _percentiles(values):
    ordered = sorted(values)
    return ordered[len(ordered) // 2], ordered[min(len(ordered) - 1, len(ordered) * 9 // 10)]


def _world1(out, env, iters):
    os.environ.update(env)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(29000 + os.getpid() % 1000))
    import torch.distributed as dist
    import torch_ringreduce  # noqa: F401
    torch.cuda.set_device(0)
    dist.init_process_group("ringreduce", rank=0, world_size=1)
    x = torch.ones(1024, device="cuda")
    for _ in range(20):
        dist.all_reduce(x)
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(iters):
        dist.all_reduce(x)
    torch.cuda.synchronize()
    out.put((time.perf_counter() - start) / iters)
    dist.destroy_process_group()


def _pingpong(role, pipe, iters, out):
    torch.cuda.set_device(0)
    mine = torch.cuda.Event(interprocess=True)
    pipe.send(mine.ipc_handle())
    theirs = torch.cuda.Event.from_ipc_handle(0, pipe.recv())
    stream = torch.cuda.current_stream()
    times = []
    for i in range(iters + 10):
        t0 = time.perf_counter()
        if role == 0:
            mine.record(stream)
            pipe.send(i)
            pipe.recv()
            stream.wait_event(theirs)
            stream.synchronize()
        else:
            pipe.recv()
            stream.wait_event(theirs)
            mine.record(stream)
            pipe.send(i)
        if i >= 10:
            times.append(time.perf_counter() - t0)
    if role == 0:
        out.put(statistics.median(times) / 2)


def _rank(rank, world, init_file, backend, sizes, env, iters, out):
    os.environ.update(env)
    import torch.distributed as dist
    import torch_ringreduce  # noqa: F401
    torch.cuda.set_device(0)
    try:
        dist.init_process_group(backend, init_method=f"file://{init_file}", rank=rank,
                                world_size=world)
        results = {}
        for nbytes in sizes:
            x = torch.ones(max(1, nbytes // 4), device="cuda")
            for _ in range(5):
                dist.all_reduce(x)
            torch.cuda.synchronize()
            times = []
            for _ in range(iters):
                dist.barrier()
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                x.fill_(1.0)  # written before each call, as backward writes gradients
                dist.all_reduce(x)
                torch.cuda.synchronize()
                times.append(time.perf_counter() - t0)
            results[nbytes] = times
        out.put((rank, results))
        dist.destroy_process_group()
    except Exception as error:  # reported in the table (e.g. NCCL refusing)
        out.put((rank, f"{type(error).__name__}: {str(error).splitlines()[0][:100]}"))


def _spawn(target, args_of, count, timeout):
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    procs = [ctx.Process(target=target, args=args_of(i, out), daemon=True) for i in range(count)]
    for p in procs:
        p.start()
    got = []
    deadline = time.time() + timeout
    try:
        while len(got) < count and time.time() < deadline:
            try:
                got.append(out.get(timeout=5))
            except Exception:
                if not any(p.is_alive() for p in procs) and out.empty():
                    break
    finally:
        for p in procs:
            p.join(timeout=10)
            if p.is_alive():
                p.kill()
    return got


def allreduce_latency(backend, world, sizes, env, iters, timeout=600):
    with tempfile.TemporaryDirectory() as tmp:
        got = dict(_spawn(_rank, lambda r, out: (r, world, os.path.join(tmp, "store"), backend,
                                                 sizes, env, iters, out), world, timeout))
    errors = [v for v in got.values() if isinstance(v, str)]
    if errors or len(got) < world:
        return errors[0] if errors else "did not finish"
    slowest = {n: [max(got[r][n][i] for r in range(world)) for i in range(iters)] for n in sizes}
    return {n: _percentiles(t) for n, t in slowest.items()}


def event_pingpong(iters):
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    a, b = ctx.Pipe()
    procs = [ctx.Process(target=_pingpong, args=(role, pipe, iters, out), daemon=True)
             for role, pipe in ((0, a), (1, b))]
    for p in procs:
        p.start()
    try:
        return out.get(timeout=120)
    finally:
        for p in procs:
            p.join(timeout=10)
            if p.is_alive():
                p.kill()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--worlds", default="2,4")
    parser.add_argument("--min-bytes", default="4")
    parser.add_argument("--max-bytes", default="256K")
    parser.add_argument("--iters", type=int, default=200)
    parser.add_argument("--variants", default="auto,oneshot")
    parser.add_argument("--no-nccl", action="store_true")
    args = parser.parse_args()
    sizes, n = [], _parse_bytes(args.min_bytes)
    while n <= _parse_bytes(args.max_bytes):
        sizes.append(n)
        n *= 16 if n < 4096 else 4
    worlds = [int(w) for w in args.worlds.split(",")]
    mps = os.environ.get("CUDA_MPS_PIPE_DIRECTORY", "")
    print(f"# {torch.cuda.get_device_name(0)}, torch {torch.__version__}, "
          f"MPS {'on (' + mps + ')' if os.environ.get('RINGREDUCE_TEST_MPS') == '1' else 'off'}",
          flush=True)
    floors = {}
    for name in args.variants.split(","):
        got = _spawn(_world1, lambda i, out: (out, VARIANTS[name], args.iters * 5), 1, 120)
        floors[f"world 1, 4 KiB, {name}"] = got[0] * 1e6 if got else float("nan")
    floors["event ping-pong, one hop"] = event_pingpong(args.iters) * 1e6
    print("\n## floors (us)")
    for name, value in floors.items():
        print(f"{name:<32}{value:>10.1f}")
    for world in worlds:
        rows = {name: allreduce_latency("ringreduce", world, sizes, VARIANTS[name], args.iters)
                for name in args.variants.split(",")}
        if not args.no_nccl:
            rows["nccl"] = allreduce_latency("nccl", world, sizes,
                                             {"NCCL_MULTI_RANK_GPU_ENABLE": "1"}, args.iters)
        print(f"\n## allreduce float32, {world} ranks on one GPU: p50 / p90 us "
              f"(written before each call)")
        print(f"{'size':>9}" + "".join(f"{name:>20}" for name in rows))
        for s in sizes:
            cells = []
            for value in rows.values():
                cells.append(f"{value[s][0] * 1e6:.1f} / {value[s][1] * 1e6:.1f}"
                             if isinstance(value, dict) else "-")
            print(f"{s:>9}" + "".join(f"{c:>20}" for c in cells))
        for name, value in rows.items():
            if isinstance(value, str):
                print(f"{name}: {value}")


if __name__ == "__main__":
    main()
