"""Subgroups of a group bound to its GPU by init_process_group(device_id=...)
on CUDA tensors (issue 50, item 1): new_group with ranks outside it,
dist.split_group and a 2-D init_device_mesh, world 4 on the machine's GPUs
(ranks share them where there are fewer). The CPU twin is
tests/python/test_device_bound_groups.py, whose checks these are.

They run where a CUDA device exists and are skipped, visibly, elsewhere."""
import random
import sys

import pytest
import torch

sys.path.insert(0, __file__.rsplit("/tests/", 1)[0] + "/tests/python")
from multiproc import run_world  # noqa: E402

import device_bound_cases  # noqa: E402
import test_device_bound_groups as checks  # noqa: E402

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(),
                                reason="no CUDA device on this machine")


def test_subgroups_of_a_bound_group_on_cuda_tensors():
    results = run_world(4, device_bound_cases.subgroups_of_a_bound_group,
                        random.randrange(1 << 20), timeout=600)
    count = torch.cuda.device_count()
    for check in checks.CHECKS:
        check(results, lambda rank: f"cuda:{rank % count}")
