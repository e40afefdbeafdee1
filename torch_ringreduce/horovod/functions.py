"""broadcast_parameters, broadcast_optimizer_state, broadcast_object and
allgather_object."""
import collections
import io

import torch

from .basics import context
from .handles import register, synchronize
from .mpi_ops import per_dtype, start_allgather, start_broadcast

try:  # what Horovod pickles with: lambdas and local classes travel too
    import cloudpickle as _pickle
except ImportError:  # pragma: no cover - plain pickle covers the usual objects
    import pickle as _pickle


def broadcast_tensors_(tensors, root_rank, name=None):
    """Broadcasts tensors in place, one fused broadcast per dtype and device."""
    context()  # Horovod's error before init(), even with nothing to send
    if tensors:
        synchronize(register(per_dtype(list(tensors), name,
                                        lambda part, part_name: start_broadcast(
                                            part, root_rank, part_name, True))))


def broadcast_parameters(params, root_rank):
    """Broadcasts parameters in place from root_rank: a state_dict (sorted by
    name, as Horovod), model.named_parameters() or model.parameters()."""
    if isinstance(params, dict):
        named = sorted(params.items())
    elif isinstance(params, (str, bytes)) or not isinstance(params, collections.abc.Iterable):
        raise ValueError(f"invalid params of type: {type(params)}")
    else:
        named = [p if isinstance(p, tuple) else (None, p) for p in params]
    names = [str(n) for n, _ in named if n is not None]
    name = "broadcast_parameters:" + ",".join(names) if names else None
    broadcast_tensors_([p for _, p in named], root_rank, name)


def _pickled(obj):
    buffer = io.BytesIO()
    _pickle.dump(obj, buffer)
    return torch.frombuffer(bytearray(buffer.getvalue()), dtype=torch.uint8)


def _unpickled(tensor):
    return _pickle.loads(tensor.numpy().tobytes())


def broadcast_object(obj, root_rank=0, name=None):
    """root_rank's `obj` (pickled), on every rank."""
    ctx = context()
    payload = _pickled(obj) if ctx.rank == root_rank else None
    length = torch.tensor([payload.numel() if payload is not None else 0], dtype=torch.int64)
    broadcast_tensors_([length], root_rank, f"{name}.sz" if name else None)
    if payload is None:
        payload = torch.empty(int(length.item()), dtype=torch.uint8)
    broadcast_tensors_([payload], root_rank, f"{name}.t" if name else None)
    return obj if ctx.rank == root_rank else _unpickled(payload)


def allgather_object(obj, name=None):
    """Every rank's `obj` (pickled), as a list in rank order."""
    pending = start_allgather(_pickled(obj), name)
    gathered = synchronize(register(pending))
    offsets = [0]
    for n in pending.dim0s:
        offsets.append(offsets[-1] + n)
    return [_unpickled(gathered[offsets[r]:offsets[r + 1]]) for r in range(len(pending.dim0s))]


class _TensorSlot:
    """Where a tensor of the root's optimizer state goes, in the pickled skeleton."""

    def __init__(self, tensor):
        self.shape, self.dtype = tuple(tensor.shape), tensor.dtype


def _map_leaves(value, fn):
    """`value` with fn applied to its tensors and tensor slots, containers rebuilt."""
    if isinstance(value, (torch.Tensor, _TensorSlot)):
        return fn(value)
    if isinstance(value, dict):
        return type(value)((k, _map_leaves(v, fn)) for k, v in value.items())
    if isinstance(value, (list, tuple)) and not hasattr(value, "_fields"):
        return type(value)(_map_leaves(v, fn) for v in value)
    return value


def broadcast_optimizer_state(optimizer, root_rank):
    """Makes every rank's optimizer state root_rank's: the param groups'
    options (lr, momentum, betas, ...) and the per-parameter state, tensors
    and scalars alike. The structure travels pickled, the tensors in fused
    broadcasts through host memory, in the order the structure lists them;
    the other ranks then load_state_dict it (so, unlike Horovod, a fresh
    optimizer needs no initialising step)."""
    tensors = []  # in the order the structure lists them, on every rank

    def strip(tensor):
        tensors.append(tensor.detach().cpu())
        return _TensorSlot(tensor)

    def allocate(slot):
        tensors.append(torch.empty(slot.shape, dtype=slot.dtype))
        return tensors[-1]

    is_root = context().rank == root_rank
    skeleton = _map_leaves(optimizer.state_dict(), strip) if is_root else None
    skeleton = broadcast_object(skeleton, root_rank, name="broadcast_optimizer_state")
    if not is_root:
        state = _map_leaves(skeleton, allocate)
    broadcast_tensors_(tensors, root_rank, "broadcast_optimizer_state.tensors")
    if not is_root:
        optimizer.load_state_dict(state)
