"""The fixed cost of one CUDA allreduce with no peer: world 1, one process.

What the collective costs on the host and the device before any other
process takes part (compare with benchmarks/cuda_allreduce.py at world 2
and 4 to see what the cross-process part adds). Two loops per size: 200
calls then one synchronize ("pipelined"), and a synchronize after every call.

    python3 benchmarks/cuda_world1.py
"""
import os
import time

import torch
import torch.distributed as dist

import torch_ringreduce  # noqa: F401  (registers the backend)


def main():
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29611")
    dist.init_process_group("ringreduce", rank=0, world_size=1)
    calls = 200
    for numel in (1024, 1 << 20, 16 << 20):
        x = torch.ones(numel, device="cuda")
        for _ in range(20):
            dist.all_reduce(x)
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(calls):
            dist.all_reduce(x)
        torch.cuda.synchronize()
        pipelined = (time.perf_counter() - start) / calls * 1e6
        start = time.perf_counter()
        for _ in range(calls):
            dist.all_reduce(x)
            torch.cuda.synchronize()
        synchronized = (time.perf_counter() - start) / calls * 1e6
        print(f"world 1 {numel * 4:>10} B: pipelined {pipelined:7.1f} us/op, "
              f"synchronized {synchronized:7.1f} us/op")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
