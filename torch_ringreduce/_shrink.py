"""dist.shrink_group's new group, registered as torch registers any ringreduce group,
with the ranks it really has.

torch 2.13's shrink_group wraps the backend that ProcessGroupRing.shrink
returns in a ProcessGroup registered as BackendType.GLOO (or NCCL for a
CUDA-bound group), for one device type. Code that trusts the type then takes
our backend for ProcessGroupGloo: DDP's logger casts it and reads gloo's
thread count, which crashes the process. So the new group of a ringreduce
backend is registered again as init_process_group registers ours:
BackendType.CUSTOM, for CPU and CUDA tensors alike.

torch 2.13's _finalize_shrunk_group also takes the excluded ranks, which are
ranks of the shrunk group, for global ranks: it drops them from the group's
global ranks by value. Right for the default group the first time (its
group ranks are its global ranks), wrong for any other group and for a
default group already shrunk (whose global ranks have gaps): the new group
then records the wrong members, and get_process_group_ranks, get_global_rank
and get_group_rank lie. So it is handed the excluded ranks as global ranks.
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
    _install_rank_translation(ring_backend_type)


def _install_rank_translation(ring_backend_type):
    original = getattr(c10d, "_finalize_shrunk_group", None)
    if original is None or getattr(original, "_ringreduce", False):
        return

    @functools.wraps(original)
    def finalize_shrunk_group(group_info, excluded_ranks_set, new_backend, *args, **kwargs):
        if isinstance(new_backend, ring_backend_type):
            global_ranks = c10d.get_process_group_ranks(group_info["process_group"])
            excluded_ranks_set = {global_ranks[r] for r in excluded_ranks_set}
        return original(group_info, excluded_ranks_set, new_backend, *args, **kwargs)

    finalize_shrunk_group._ringreduce = True
    c10d._finalize_shrunk_group = finalize_shrunk_group
