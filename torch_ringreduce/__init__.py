"""ringreduce: Horovod's ring-allreduce as a torch.distributed backend.

    import torch_ringreduce
    import torch.distributed as dist
    dist.init_process_group("ringreduce")
"""
import torch
import torch.distributed as dist

from . import _C

__version__ = _C.version()
BACKEND_NAME = "ringreduce"


def _create_backend(dist_backend_opts, backend_options):
    """Creator torch calls for each new group (extended API)."""
    return _C.ProcessGroupRing(
        dist_backend_opts.store,
        dist_backend_opts.group_rank,
        dist_backend_opts.group_size,
        dist_backend_opts.timeout,
        dist_backend_opts.group_id,
    )


def _register():
    if BACKEND_NAME.upper() in dist.Backend._plugins:
        return  # imported twice (autoload, then explicitly)
    dist.Backend.register_backend(
        BACKEND_NAME, _create_backend, extended_api=True, devices=["cpu", "cuda"]
    )


_register()

__all__ = ["BACKEND_NAME", "__version__"]
