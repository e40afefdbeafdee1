"""Run by test_threads_warning.py under torchrun: creates the world group and a
subgroup, and prints as JSON this rank's torch threads, OMP_NUM_THREADS and
the ThreadsOversubscribedWarnings that group creation gave."""
import json
import os
import warnings

import torch
import torch.distributed as dist

import torch_ringreduce

with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    dist.init_process_group("ringreduce")
    dist.new_group([0, 1])
    t = torch.ones(8)
    dist.all_reduce(t)
    assert torch.equal(t, torch.full_like(t, dist.get_world_size()))
report = json.dumps({"rank": dist.get_rank(), "threads": torch.get_num_threads(),
                     "omp": os.environ.get("OMP_NUM_THREADS"),
                     "warnings": [str(w.message) for w in caught
                                  if issubclass(w.category,
                                                torch_ringreduce.ThreadsOversubscribedWarning)]})
# One write (under PIPE_BUF), so the ranks' lines never interleave on torchrun's stdout.
os.write(1, (report + "\n").encode())
dist.destroy_process_group()
