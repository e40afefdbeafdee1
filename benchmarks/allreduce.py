"""nccl-tests style allreduce benchmark: ringreduce against gloo in the same run.

    torchrun --standalone --nproc-per-node 2 benchmarks/allreduce.py

Same options as collectives.py (sizes 4 B to 64 MiB by default); see there
for how time, algbw, busbw and ratio are computed.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from collectives import main  # noqa: E402

if __name__ == "__main__":
    main(default_op="all_reduce")
