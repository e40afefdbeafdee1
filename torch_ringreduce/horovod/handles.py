"""Horovod's handles: what `*_async` returns (an int), `poll` and
`synchronize`; the pending operations behind them; the translation of failed
collectives into HorovodInternalError."""
import contextlib
import functools

from . import negotiation as neg
from .basics import CollectiveMismatchError, HorovodInternalError, context


@contextlib.contextmanager
def translated_errors():
    """A failed collective is a HorovodInternalError, as in Horovod (what
    hvd.elastic.run reacts to); argument errors and mismatches pass as they are."""
    try:
        yield
    except (HorovodInternalError, CollectiveMismatchError, NotImplementedError):
        raise
    except RuntimeError as error:
        raise HorovodInternalError(str(error)) from error


def translated(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with translated_errors():
            return fn(*args, **kwargs)
    return wrapper


class Pending:
    """An issued operation: its record exchange (or the records, when already
    waited for), its queued data operations and what makes the result."""

    def __init__(self, ctx, seq, exchange=None, records=None, works=(), finish=None, checks=()):
        self.ctx, self.seq, self.exchange, self.records = ctx, seq, exchange, records
        self.works, self.finish, self.checks = list(works), finish, checks

    def completed(self):
        works = self.works + ([self.exchange[0]] if self.records is None else [])
        return all(w.is_completed() for w in works)

    def wait(self):
        with translated_errors():
            if self.records is None:
                self.records = neg.finish_exchange(*self.exchange, self.ctx.size)
            neg.check(self.seq, self.ctx.rank, self.records)
            for extra_check in self.checks:
                extra_check(self.records)
            for work in self.works:
                work.wait()
            return self.finish() if self.finish else None


class Composite:
    """Several pending operations whose results make one list (a grouped
    allreduce over several dtypes): parts are (pending, indices in the list)."""

    def __init__(self, parts, count):
        self.parts, self.count = parts, count

    def completed(self):
        return all(p.completed() for p, _ in self.parts)

    def wait(self):
        results = [None] * self.count
        for pending, indices in self.parts:
            for i, result in zip(indices, pending.wait()):
                results[i] = result
        return results


def issue(ctx, desc):
    """Queues the record exchange of the next operation."""
    ctx.seq += 1
    return ctx.seq, neg.start_exchange(ctx, desc.record())


def records_now(ctx, desc):
    """Exchanges the records and checks them before any data moves."""
    seq, exchange = issue(ctx, desc)
    records = neg.finish_exchange(*exchange, ctx.size)
    neg.check(seq, ctx.rank, records)
    return seq, records


def register(pending):
    ctx = context()
    ctx.next_handle += 1
    ctx.handles[ctx.next_handle] = pending
    return ctx.next_handle


def poll(handle):
    """True once the operation behind the handle has finished (synchronize
    then returns without waiting)."""
    pending = context().handles.get(handle)
    if pending is None:
        raise ValueError(f"hvd.poll: unknown handle {handle!r} (already synchronized?)")
    return pending.completed()


def synchronize(handle):
    """Waits for the operation and returns its result (a tuple of output and
    received splits for alltoall); None for an unknown handle, as Horovod."""
    pending = context().handles.pop(handle, None)
    if pending is None:
        return None
    return pending.wait()


class Single:
    """A one-tensor operation whose result is the tensor, not a list."""

    def __init__(self, pending, result=None):
        self.pending, self.result = pending, result

    def completed(self):
        return self.pending.completed()

    def wait(self):
        out = self.pending.wait()[0]
        return self.result if self.result is not None else out
