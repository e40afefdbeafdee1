"""ringreduce: Horovod's ring-allreduce as a torch.distributed backend.

    import torch_ringreduce
    import torch.distributed as dist
    dist.init_process_group("ringreduce")
"""
import atexit
import os
import sys
import warnings
import weakref

import torch
import torch.distributed as dist

# UCX reads its log level when its library loads (with _C, below). Its
# warnings after a peer dies (abandoned requests, unmatched messages) are
# noise next to ringreduce's own error; RINGREDUCE_DEBUG=WARN shows ours,
# and an explicit UCX_LOG_LEVEL still wins.
os.environ.setdefault("UCX_LOG_LEVEL", "error")

from . import _build_check  # noqa: E402

_build_check.check()  # an extension built for another torch: a clear ImportError
try:
    from . import _C  # noqa: E402
except ImportError as error:
    raise ImportError(f"torch_ringreduce._C does not load under torch {torch.__version__} "
                      f"({error}); {_build_check.REBUILD}") from error

__version__ = _C.version()
BACKEND_NAME = "ringreduce"
# pg_options for init_process_group and new_group: the timeout and
# RINGREDUCE_* settings (config) of a group; a group's own are its
# backend's `options`, which torch copies for the groups it splits from it.
Options = _C.ProcessGroupRing.Options


# Groups a script did not destroy are shut down at exit, while Python still
# runs: their worker threads release tensors, which takes the GIL, and a
# thread that tries during interpreter finalisation is ended by Python in a
# way that terminates the process ("terminate called without an active
# exception").
_live_backends = weakref.WeakSet()


def _groups_torch_knows():
    """ringreduce backends of every group torch has registered, including
    children of ProcessGroup.split_group, which torch creates in C++ without
    our creator."""
    try:
        groups = list(dist.distributed_c10d._world.pg_map)
    except Exception:
        return []
    found = []
    for group in groups:
        try:
            backend = group._get_backend(torch.device("cpu"))
        except Exception:
            continue
        if isinstance(backend, _C.ProcessGroupRing):
            found.append(backend)
    return found


def _shutdown_at_exit():
    for backend in list(_live_backends) + _groups_torch_knows():
        try:
            backend._shutdown_at_exit()
        except Exception:  # already shut down or failed: nothing left to do
            pass


atexit.register(_shutdown_at_exit)


def _settings_of(backend_options):
    """The RINGREDUCE_* settings pg_options give a new group. torch passes
    its own timeout apart (and it wins, as for NCCL); a plain c10d
    Backend.Options carries no settings."""
    if backend_options is None:
        return {}
    if isinstance(backend_options, Options):
        return dict(backend_options.config)
    if isinstance(backend_options, torch._C._distributed_c10d.Backend.Options):
        return {}
    raise TypeError(f"ringreduce: pg_options must be torch_ringreduce.Options, got "
                    f"{type(backend_options).__name__}")


def _create_backend(dist_backend_opts, backend_options):
    """Creator torch calls for each new group (extended API)."""
    # The default group's creator gets no list of global ranks: its ranks are.
    ranks = list(dist_backend_opts.global_ranks_in_group or [])
    group_rank = dist_backend_opts.group_rank
    # A subgroup's own members are not all the processes sharing this
    # machine's cores; the live groups (the world among them) know more.
    known = [b._ranks_on_this_host() for b in list(_live_backends) + _groups_torch_knows()]
    settings = _settings_of(backend_options)
    backend = _C.ProcessGroupRing(
        dist_backend_opts.store,
        group_rank,
        dist_backend_opts.group_size,
        dist_backend_opts.timeout,
        dist_backend_opts.group_id,
        ranks[group_rank] if group_rank < len(ranks) else group_rank,
        max(known, default=0),
        config=settings,
    )
    _live_backends.add(backend)
    _warn_if_threads_oversubscribe(backend._ranks_on_this_host())
    return backend


class ThreadsOversubscribedWarning(RuntimeWarning):
    """This machine's ranks times torch's intra-op threads exceed the cores
    (emitted once per process, at the first group's creation where it holds)."""


_warned_about_threads = False


def _warn_if_threads_oversubscribe(group_ranks_on_host):
    """Once per process: where this machine's ranks (torchrun's
    LOCAL_WORLD_SIZE, else what the group counted, as the spin defaults go)
    times torch's intra-op threads exceed the cores this process may run on,
    say so and how to fix it. Changes no setting: the threads are the
    user's. Not where a rank has one thread (more ranks than cores is the
    ranks' own oversubscription, which the spin defaults handle and fewer
    threads cannot fix), nor under OMP_WAIT_POLICY=PASSIVE, a remedy the
    warning names: idle OpenMP threads then sleep at once, and allreduces
    after a parallel op took what they take with one thread
    (benchmarks/RESULTS.md, "Ranks and torch's threads on the same cores")."""
    global _warned_about_threads
    if _warned_about_threads:
        return
    try:
        ranks = int(os.environ.get("LOCAL_WORLD_SIZE") or 0)
    except ValueError:
        ranks = 0
    if ranks <= 0:
        ranks = group_ranks_on_host
    threads = torch.get_num_threads()
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 0
    if threads <= 1 or ranks <= 0 or cores <= 0 or ranks * threads <= cores:
        return
    if os.environ.get("OMP_WAIT_POLICY", "").strip().lower() == "passive":
        return
    _warned_about_threads = True
    fit = max(1, cores // ranks)
    warnings.warn(
        f"ringreduce: {ranks} ranks on this machine x {threads} torch intra-op threads each "
        f"= {ranks * threads} threads for the {cores} cores this process may run on. After "
        "each parallel torch op, OpenMP's idle threads spin on the cores that the "
        "collectives need: a 256 KiB allreduce right after one took 4-6 ms instead of "
        "0.05-0.08 ms (2 ranks on 2 cores; gloo's 4 ms instead of 1). torchrun sets "
        "OMP_NUM_THREADS=1; with other launchers (mp.spawn, plain python) set "
        f"OMP_NUM_THREADS={fit} before starting Python, call torch.set_num_threads({fit}) "
        "before creating the group, or set OMP_WAIT_POLICY=PASSIVE before starting Python. "
        "(ringreduce changes none of these; this warning is given once per process.)",
        ThreadsOversubscribedWarning,
        stacklevel=_caller_stacklevel(),
    )


def _caller_stacklevel():
    """warnings.warn's stacklevel of the first frame outside torch and this
    package (the user's init_process_group or new_group), so that the warning
    names the user's line."""
    inside = tuple(os.path.dirname(m.__file__) + os.sep for m in (torch, _C) if m.__file__)
    frame, level = sys._getframe(2), 2  # 1: _warn_if_threads_oversubscribe
    while frame is not None and frame.f_code.co_filename.startswith(inside):
        frame, level = frame.f_back, level + 1
    return level if frame is not None else 1


def _register():
    if BACKEND_NAME.upper() in dist.Backend._plugins:
        return  # imported twice (autoload, then explicitly)
    dist.Backend.register_backend(
        BACKEND_NAME, _create_backend, extended_api=True, devices=["cpu", "cuda"]
    )


_register()

from . import _shrink  # noqa: E402

_shrink.install(_C.ProcessGroupRing)  # dist.shrink_group's group, registered as ours are


def _ring_backend(group):
    group = group if group is not None else dist.group.WORLD
    backend = group._get_backend(torch.device("cpu"))
    if not isinstance(backend, _C.ProcessGroupRing):
        raise ValueError(f"group {group} does not run on ringreduce (its backend is "
                         f"{type(backend).__name__})")
    return backend


def trace_json(group=None):
    """The group's flight recorder as JSON: its last operations (up to
    RINGREDUCE_TRACE_BUFFER_SIZE), what each was, its state and times."""
    return _ring_backend(group)._trace_json()


def dump_trace(group=None):
    """Writes this rank's flight recorder to $RINGREDUCE_TRACE_DIR (read all ranks'
    files with `python -m torch_ringreduce.trace DIR`); returns the path, or ""
    when RINGREDUCE_TRACE_DIR is unset."""
    return _ring_backend(group)._dump_trace()


def config(group=None):
    """The group's effective settings, {RINGREDUCE_* name: value as text}: the
    environment over the RINGREDUCE_CONFIG file, as read when the group was made."""
    return dict(_ring_backend(group)._config())


def autotune_choices(group=None):
    """RINGREDUCE_AUTOTUNE=1: the settings chosen so far, one dict per allreduce
    size class (class_bytes, settings, seconds, baseline_seconds); [] without it."""
    return list(_ring_backend(group)._autotune_choices())


__all__ = ["BACKEND_NAME", "Options", "__version__", "trace_json", "dump_trace", "config",
           "autotune_choices", "ThreadsOversubscribedWarning"]
