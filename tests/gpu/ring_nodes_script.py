"""One rank of the device ring across emulated nodes (tests/gpu/test_device_ring.py):
run by torchrun on each node, every rank on cuda:0 of the one GPU. Prints
one line, "RESULT ok" or "RESULT <what failed>"."""
import os
import sys

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
from oracle import make_input, mismatch, reference_allreduce  # noqa: E402

import torch_ringreduce  # noqa: E402,F401


def main():
    torch.cuda.set_device(0)
    dist.init_process_group("ringreduce")
    rank, world = dist.get_rank(), dist.get_world_size()
    failures = []
    if os.environ.get("RINGREDUCE_AUTOTUNE") == "1":
        # One size class, enough allreduces for the CUDA tuner's trials (the
        # device ring and NCCL, three each, timed on the device) and more
        # with its choice.
        n = 70001
        for i in range(8):
            inputs = [make_input(torch.float32, (n,), r, 900 + i) for r in range(world)]
            mine = inputs[rank].cuda()
            dist.all_reduce(mine)
            problem = mismatch(mine.cpu(), reference_allreduce(inputs, "SUM"), True)
            if problem:
                failures.append(f"autotuned all_reduce {i}: {problem}")
    for dtype in (torch.float32, torch.bfloat16, torch.int64):
        for n in (1, 70001, (3 << 20) + 5):
            inputs = [make_input(dtype, (n,), r, 300 + n) for r in range(world)]
            mine = inputs[rank].cuda()
            dist.all_reduce(mine)
            problem = mismatch(mine.cpu(), reference_allreduce(inputs, "SUM"), True)
            if problem:
                failures.append(f"all_reduce {dtype} {n}: {problem}")
            flat = torch.empty(world * n, dtype=dtype, device="cuda")
            dist.all_gather_into_tensor(flat, inputs[rank].cuda())
            problem = mismatch(flat.cpu(), torch.cat(inputs), True)
            if problem:
                failures.append(f"all_gather_into_tensor {dtype} {n}: {problem}")
    torch.cuda.synchronize()
    print("RESULT " + ("ok" if not failures else "; ".join(failures[:5])), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
