"""What ranks tell each other before each collective.

Horovod matches collectives by name in a coordinator; ringreduce runs them in
issue order. So every hvd collective first allgathers a small fixed-size
record (kind, dtype, op or root, name and shape hashes, first dimension,
whether the rank has joined) and then runs its data operations; both are
queued at once, so asynchronous ops stay asynchronous. The records let every
rank

- raise a clear CollectiveMismatchError when ranks disagree (other names,
  kinds, dtypes, shapes of the same size, ops, roots) instead of reducing
  unrelated tensors; a difference in size the backend reports by itself;
- learn the first dimensions of an allgather or alltoall without a separate
  exchange;
- serve the collectives of the others after join(), with neutral tensors.
"""
import hashlib

import torch
import torch.distributed as dist

from .basics import OP_NAMES, CollectiveMismatchError

RECORD_LEN = 24
MAGIC = 0x68766431  # "hvd1"

ALLREDUCE, ALLGATHER, BROADCAST, ALLTOALL, BARRIER, JOIN = range(1, 7)
KIND_NAMES = {ALLREDUCE: "allreduce", ALLGATHER: "allgather", BROADCAST: "broadcast",
              ALLTOALL: "alltoall", BARRIER: "barrier", JOIN: "join"}

# Record slots.
S_MAGIC, S_KIND, S_DTYPE, S_ARG, S_NUMEL, S_NAME, S_SHAPES, S_COUNT = range(8)
S_DIM0, S_ROW, S_JOINED_AT, S_NDIM = range(8, 12)
S_DIMS, MAX_DIMS = 12, 8          # slots 12..19: the shape shown in messages
S_TEXT, TEXT_BYTES = 20, 32       # slots 20..23: the name's first bytes, for messages
AGREE = (S_KIND, S_DTYPE, S_ARG, S_NAME, S_SHAPES, S_COUNT)  # must match across active ranks

_all_gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor


def _hash(text):
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=7).digest(), "little")


_DTYPE_BY_CODE = {_hash(str(d)): d for d in vars(torch).values() if isinstance(d, torch.dtype)}


def dtype_code(dtype):
    return _hash(str(dtype))


def dtype_of(code):
    return _DTYPE_BY_CODE[code]


class Desc:
    """One rank's side of a collective. `shapes` are the shapes that must agree
    across ranks (without the first dimension for allgather and alltoall)."""

    def __init__(self, kind, dtype=None, arg=0, name=None, shapes=(), numel=0, dim0=0, row=0):
        self.kind, self.dtype, self.arg, self.name = kind, dtype, arg, name
        self.shapes, self.numel, self.dim0, self.row = [tuple(s) for s in shapes], numel, dim0, row

    def record(self, joined_at=-1):
        r = [0] * RECORD_LEN
        r[S_MAGIC], r[S_KIND], r[S_ARG] = MAGIC, self.kind, self.arg
        r[S_DTYPE] = dtype_code(self.dtype) if self.dtype is not None else 0
        r[S_NUMEL], r[S_DIM0], r[S_ROW], r[S_JOINED_AT] = self.numel, self.dim0, self.row, joined_at
        r[S_NAME] = _hash(self.name) if self.name is not None else 0
        r[S_SHAPES] = _hash(repr(self.shapes))
        r[S_COUNT] = len(self.shapes)
        if len(self.shapes) == 1:
            shape = self.shapes[0]
            r[S_NDIM] = len(shape)
            r[S_DIMS:S_DIMS + min(len(shape), MAX_DIMS)] = list(shape[:MAX_DIMS])
        if self.name is not None:
            text = self.name.encode()[:TEXT_BYTES].ljust(TEXT_BYTES, b"\0")
            for i in range(TEXT_BYTES // 8):
                r[S_TEXT + i] = int.from_bytes(text[8 * i:8 * i + 8], "little", signed=True)
        return torch.tensor(r, dtype=torch.int64)


def start_exchange(ctx, record):
    """Queues the allgather of every rank's record; returns (work, output)."""
    out = torch.empty(ctx.size * RECORD_LEN, dtype=torch.int64)
    work = _all_gather(out, record, group=ctx.group, async_op=True)
    return work, out


def finish_exchange(work, out, size):
    work.wait()
    return out.view(size, RECORD_LEN).tolist()


def describe(r):
    """A record in words, for error messages."""
    kind = KIND_NAMES.get(r[S_KIND], f"a non-hvd collective (kind {r[S_KIND]})")
    if r[S_MAGIC] != MAGIC:
        return "a torch.distributed collective that is not an hvd operation"
    if r[S_KIND] in (BARRIER, JOIN):
        return kind
    parts = [kind]
    if r[S_NAME]:
        text = b"".join(int(v).to_bytes(8, "little", signed=True)
                        for v in r[S_TEXT:S_TEXT + TEXT_BYTES // 8]).rstrip(b"\0")
        parts.append(repr(text.decode(errors="replace")) + ("..." if len(text) == TEXT_BYTES else ""))
    else:
        parts.append("(no name)")
    parts.append(str(_DTYPE_BY_CODE.get(r[S_DTYPE], "?")).replace("torch.", ""))
    if r[S_COUNT] == 1 and r[S_NDIM] <= MAX_DIMS:
        dims = r[S_DIMS:S_DIMS + r[S_NDIM]]
        if r[S_KIND] in (ALLGATHER, ALLTOALL):
            dims = ["*"] + dims
        parts.append("[" + ", ".join(str(d) for d in dims) + "]")
    elif r[S_COUNT] != 1:
        parts.append(f"group of {r[S_COUNT]} tensors ({r[S_NUMEL]} elements)")
    if r[S_KIND] == ALLREDUCE:
        parts.append("op " + OP_NAMES.get(r[S_ARG], str(r[S_ARG])))
    elif r[S_KIND] == BROADCAST:
        parts.append(f"root {r[S_ARG]}")
    return " ".join(parts)


def mismatch_error(seq, me, mine, r, theirs):
    return CollectiveMismatchError(
        f"Mismatched collectives at hvd operation #{seq}: rank {me} called {describe(mine)}, "
        f"but rank {r} called {describe(theirs)}. Every rank must issue the same hvd "
        f"collectives in the same order, with the same names, dtypes, shapes, ops and root ranks.")


def check(seq, me, records):
    """Raises CollectiveMismatchError unless every rank that has not joined
    issued what this rank issued (a joined rank: what the first active one did)."""
    active = [r for r in range(len(records)) if records[r][S_KIND] != JOIN
              or records[r][S_MAGIC] != MAGIC]
    reference = me if me in active else (active[0] if active else None)
    if reference is None:
        return
    mine = records[reference]
    for r in active:
        theirs = records[r]
        if theirs[S_MAGIC] != MAGIC or any(theirs[s] != mine[s] for s in AGREE):
            raise mismatch_error(seq, reference, mine, r, theirs)
