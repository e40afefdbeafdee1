"""dist.shrink_group's new group, registered as torch registers any ringreduce group.

torch 2.13's shrink_group wraps the backend that ProcessGroupRing.shrink
returns in a ProcessGroup registered as BackendType.GLOO (or NCCL for a
CUDA-bound group), for one device type. Code that trusts the type then takes
our backend for ProcessGroupGloo: DDP's logger casts it and reads gloo's
thread count, which crashes the process. So the new group of a ringreduce
backend is registered again as init_process_group registers ours:
BackendType.CUSTOM, for CPU and CUDA tensors alike.
"""
import functools

import torch
import torch.distributed.distributed_c10d as c10d


def install(ring_backend_type):
    original = getattr(c10d, "_create_shrunk_process_group", None)
    if original is None or getattr(original, "_ringreduce", False):
        return  # a torch without shrink_group's helper, or installed already

    @functools.wraps(original)
    def create_shrunk_process_group(new_backend, *args, **kwargs):
        group = original(new_backend, *args, **kwargs)
        if isinstance(new_backend, ring_backend_type):
            custom = c10d.ProcessGroup.BackendType.CUSTOM
            for device in ("cpu", "cuda"):
                group._register_backend(torch.device(device), custom, new_backend)
            group._set_default_backend(custom)
        return group

    create_shrunk_process_group._ringreduce = True
    c10d._create_shrunk_process_group = create_shrunk_process_group
