"""hvd.elastic on torchrun's restarts.

Horovod's elastic driver keeps the surviving workers alive and restores their
in-memory commit. Here the workers are torchrun's: when one fails, torchrun
(`--max-restarts N`) stops and restarts all of them, and memory is gone. So
`state.commit()` also writes the committed state to a file on rank 0, and
`hvd.elastic.run` starts by loading it there (when it exists) before the
usual `state.sync()` broadcasts rank 0's state to everyone.

The file: $RINGREDUCE_ELASTIC_STATE when set (shared storage for multi-node
jobs, where rank 0 may come back on another node; it is resumed from whenever
it exists and never deleted), otherwise
<tempdir>/ringreduce-elastic-<TORCHELASTIC_RUN_ID>/state.pt, which only the
restarts of the same torchrun job see and which rank 0 deletes when the
wrapped function returns. Without either (no torchrun, or torchrun's default
run id "none") commits stay in memory, as in Horovod.

A failed collective raises HorovodInternalError: the wrapper restores the
last in-memory commit and re-raises, so the process exits with an error and
torchrun restarts the job; hosts change only through such restarts, so
HostsUpdatedInterrupt is never raised.
"""
import copy
import functools
import os
import re
import tempfile

import torch

from . import basics
from .basics import HorovodInternalError, HostsUpdatedInterrupt
from .functions import broadcast_object, broadcast_optimizer_state, broadcast_parameters
from .mpi_ops import barrier

STATE_ENV = "RINGREDUCE_ELASTIC_STATE"


def state_file():
    """(path, owned): where commits persist, and whether it is ours to delete."""
    explicit = os.environ.get(STATE_ENV)
    if explicit:
        return explicit, False
    run_id = os.environ.get("TORCHELASTIC_RUN_ID", "none")
    if run_id == "none":
        return None, False
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", run_id)
    return os.path.join(tempfile.gettempdir(), f"ringreduce-elastic-{safe}", "state.pt"), True


class State:
    """Horovod's elastic state: commit/restore/sync plus reset callbacks."""

    def __init__(self, bcast_object, get_rank):
        self._bcast_object = bcast_object
        self._rank = get_rank
        self._reset_callbacks = []

    def register_reset_callbacks(self, callbacks):
        self._reset_callbacks.extend(callbacks)

    def on_reset(self):
        self.reset()
        for callback in self._reset_callbacks:
            callback()

    def on_hosts_updated(self, timestamp, update_res):
        pass

    def commit(self):
        """Saves the state in memory and, on rank 0, to the state file."""
        self.save()
        path, _ = state_file()
        if path is not None and self._rank() == 0:
            os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
            partial = f"{path}.{os.getpid()}.tmp"
            torch.save(self.snapshot(), partial)
            os.replace(partial, path)  # a crash mid-write leaves the last commit intact
        self.check_host_updates()

    def check_host_updates(self):
        pass

    def load_committed(self):
        """Rank 0: restores the state file's commit, when there is one."""
        path, _ = state_file()
        if path is None or self._rank() != 0 or not os.path.exists(path):
            return False
        self.load_snapshot(torch.load(path, weights_only=False))
        self.restore()
        return True

    def save(self):
        raise NotImplementedError

    def restore(self):
        raise NotImplementedError

    def sync(self):
        raise NotImplementedError

    def reset(self):
        pass

    def snapshot(self):
        raise NotImplementedError

    def load_snapshot(self, snapshot):
        raise NotImplementedError


class ObjectState(State):
    """Plain attributes (epoch=0, batch=0, ...) committed, restored and synced."""

    def __init__(self, bcast_object, get_rank, **kwargs):
        self._saved_state = kwargs
        self._set_attrs()
        super().__init__(bcast_object=bcast_object, get_rank=get_rank)

    def save(self):
        self._saved_state = {attr: getattr(self, attr) for attr in self._saved_state}

    def restore(self):
        self._set_attrs()

    def sync(self):
        if self._saved_state:
            self._saved_state = self._bcast_object(self._saved_state)
            self._set_attrs()

    def _set_attrs(self):
        for attr, value in self._saved_state.items():
            setattr(self, attr, value)

    def snapshot(self):
        return {"attrs": self._saved_state}

    def load_snapshot(self, snapshot):
        self._saved_state = snapshot["attrs"]


class _Handler:
    """Commits, restores and syncs one stateful object through its state_dict."""

    def __init__(self, value):
        self.value = value
        self.saved = copy.deepcopy(value.state_dict())

    def save(self):
        self.saved = copy.deepcopy(self.value.state_dict())

    def restore(self):
        self.value.load_state_dict(self.saved)

    def set_value(self, value):
        self.value = value
        self.save()


class _ModelHandler(_Handler):
    def sync(self):
        broadcast_parameters(self.value.state_dict(), root_rank=0)


class _OptimizerHandler(_Handler):
    def sync(self):
        broadcast_optimizer_state(self.value, root_rank=0)


class _SchedulerHandler(_Handler):
    def sync(self):
        self.value.load_state_dict(broadcast_object(self.value.state_dict()))


_HANDLERS = [(torch.nn.Module, _ModelHandler), (torch.optim.Optimizer, _OptimizerHandler),
             (torch.optim.lr_scheduler.LRScheduler, _SchedulerHandler)]


def _handler_for(value):
    for kind, handler in _HANDLERS:
        if isinstance(value, kind):
            return handler(value)
    return None


class TorchState(ObjectState):
    """A model, an optimizer (both optional), and any other keyword arguments:
    modules, optimizers and LR schedulers by their state_dict, anything else
    as a plain attribute."""

    def __init__(self, model=None, optimizer=None, **kwargs):
        kwargs.update(model=model, optimizer=optimizer)
        handlers, plain = {}, {}
        for name, value in kwargs.items():
            handler = _handler_for(value)
            if handler is not None:
                handlers[name] = handler
            else:
                plain[name] = value
        self._handlers = handlers
        for name, handler in handlers.items():
            setattr(self, name, handler.value)
        super().__init__(bcast_object=broadcast_object, get_rank=basics.rank, **plain)

    def __setattr__(self, name, value):
        if name != "_handlers" and name in getattr(self, "_handlers", {}) and hasattr(self, name):
            self._handlers[name].set_value(value)
        super().__setattr__(name, value)

    def save(self):
        for handler in self._handlers.values():
            handler.save()
        super().save()

    def restore(self):
        for handler in self._handlers.values():
            handler.restore()
        super().restore()

    def sync(self):
        for handler in self._handlers.values():
            handler.sync()
        super().sync()

    def snapshot(self):
        snapshot = super().snapshot()
        snapshot["handlers"] = {name: h.saved for name, h in self._handlers.items()}
        return snapshot

    def load_snapshot(self, snapshot):
        super().load_snapshot(snapshot)
        for name, saved in snapshot["handlers"].items():
            self._handlers[name].saved = saved


def run(func):
    """Decorator for the training function `func(state, ...)`: loads the last
    commit after a torchrun restart, syncs the state from rank 0, runs func.
    A HorovodInternalError restores the in-memory commit and ends the process
    with that error, for torchrun to restart the job."""

    @functools.wraps(func)
    def wrapper(state, *args, **kwargs):
        basics.context()  # hvd.init() first, as in Horovod
        state.load_committed()
        if int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")) > 0:
            state.on_reset()
        state.sync()
        try:
            result = func(state, *args, **kwargs)
        except HorovodInternalError:
            state.restore()
            raise
        path, owned = state_file()
        if owned:
            barrier()  # every rank is done: no restart will need the file
            if basics.rank() == 0 and os.path.exists(path):
                os.remove(path)
                try:
                    os.rmdir(os.path.dirname(path))
                except OSError:
                    pass
        return result

    return wrapper


__all__ = ["run", "State", "ObjectState", "TorchState", "HorovodInternalError",
           "HostsUpdatedInterrupt"]
