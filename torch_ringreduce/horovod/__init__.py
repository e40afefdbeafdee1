"""Horovod's PyTorch API on a ringreduce process group.

    import torch_ringreduce.horovod as hvd     # instead of: import horovod.torch as hvd
    hvd.init()

Run under torchrun or `python -m torch_ringreduce.run -np 4 python train.py`
(horovodrun's flags). Names, arguments, defaults and results follow Horovod's
documentation; what differs is listed in the README ("Coming from Horovod").
"""
from . import elastic
from .basics import (Adasum, Average, CollectiveMismatchError, HorovodInternalError,
                     HostsUpdatedInterrupt, Max, Min, ProcessSet, Product, Sum, ccl_built,
                     cross_rank, cross_size, cuda_built, ddl_built, global_process_set,
                     gloo_built, gloo_enabled, init, is_homogeneous, is_initialized, local_rank,
                     local_size, mpi_built, mpi_enabled, mpi_threads_supported, nccl_built, rank,
                     rocm_built, shutdown, size)
from .compression import Compression
from .functions import (allgather_object, broadcast_object, broadcast_optimizer_state,
                        broadcast_parameters)
from .handles import poll, synchronize
from .join import join
from .mpi_ops import (allgather, allgather_async, allreduce, allreduce_, allreduce_async,
                      allreduce_async_, alltoall, alltoall_async, barrier, broadcast, broadcast_,
                      broadcast_async, broadcast_async_, grouped_allreduce, grouped_allreduce_,
                      grouped_allreduce_async, grouped_allreduce_async_)
from .optimizer import DistributedOptimizer

__all__ = [
    "init", "shutdown", "is_initialized", "size", "rank", "local_size", "local_rank",
    "cross_size", "cross_rank", "is_homogeneous",
    "Average", "Sum", "Adasum", "Min", "Max", "Product",
    "allreduce", "allreduce_", "allreduce_async", "allreduce_async_",
    "grouped_allreduce", "grouped_allreduce_", "grouped_allreduce_async",
    "grouped_allreduce_async_", "allgather", "allgather_async", "broadcast", "broadcast_",
    "broadcast_async", "broadcast_async_", "alltoall", "alltoall_async", "barrier", "join",
    "poll", "synchronize",
    "broadcast_parameters", "broadcast_optimizer_state", "broadcast_object", "allgather_object",
    "DistributedOptimizer", "Compression", "elastic",
    "HorovodInternalError", "HostsUpdatedInterrupt", "CollectiveMismatchError",
    "ProcessSet", "global_process_set",
    "mpi_threads_supported", "mpi_enabled", "mpi_built", "gloo_enabled", "gloo_built",
    "nccl_built", "ddl_built", "ccl_built", "cuda_built", "rocm_built",
]
