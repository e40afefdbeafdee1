"""Rank-side bodies of the dist.shrink_group tests (test_shrink.py)."""
import datetime
import os
import signal
import time
import weakref

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed import distributed_c10d as c10d
from torch.nn.parallel import DistributedDataParallel

from multiproc import event_store


def _ints(global_rank, n=1000):
    """Fresh integers that a rank of the original world contributes."""
    gen = torch.Generator().manual_seed(7000 + global_rank)
    return torch.randint(-1000, 1000, (n,), generator=gen, dtype=torch.int64)


def _collectives_on(group, staying):
    """An allreduce, a broadcast and an allgather on `group`, whose members
    are the original ranks `staying`, in order."""
    me = staying[group.rank()]
    total = _ints(me)
    dist.all_reduce(total, group=group)
    root = torch.zeros(1000, dtype=torch.int64) if group.rank() else _ints(me)
    dist.broadcast(root, group_src=0, group=group)
    gathered = [torch.empty(1000, dtype=torch.int64) for _ in staying]
    dist.all_gather(gathered, _ints(me), group=group)
    return {"sum": total, "broadcast": root, "gathered": gathered}


def healthy(rank, world, init_method, excluded, flags):
    """Every rank but `excluded` shrinks a healthy world; the excluded ranks
    stay alive (doing nothing) until the others are done. With SHRINK_ABORT,
    the ranks that stay first queue an allreduce the excluded ranks never
    join: the shrink aborts it, at once rather than at the timeout."""
    dist.init_process_group("ringreduce", init_method=init_method, rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=60))
    events = event_store(init_method, world)
    staying = [r for r in range(world) if r not in excluded]
    before = torch.ones(4)
    dist.all_reduce(before)  # the whole world, before the shrink
    if rank in excluded:
        events.wait(["done"])  # alive, in the group, not calling shrink_group
        return {"before": before}
    out = {"before": before}
    pending = None
    if flags == c10d.SHRINK_ABORT:
        pending = dist.all_reduce(torch.ones(4), async_op=True)
        # Every staying rank has queued it before any aborts the old group
        # (after an abort the group would refuse it).
        events.set(f"queued{rank}", "1")
        events.wait([f"queued{r}" for r in staying])
    start = time.monotonic()
    group = dist.shrink_group(list(excluded), shrink_flags=flags)
    out["shrink_s"] = time.monotonic() - start
    if pending is not None:
        try:
            pending.wait()
            out["pending"] = "completed"
        except Exception as error:
            out["pending"] = (type(error).__name__, str(error))
    out["default_is_new"] = group is dist.group.WORLD
    out["rank_size"] = (dist.get_rank(), dist.get_world_size(), group.rank(), group.size())
    out["backend"] = type(group._get_backend(torch.device("cpu"))).__name__
    out["results"] = _collectives_on(group, staying)
    out["results_default_group"] = _collectives_on(dist.group.WORLD, staying)
    dist.barrier()
    if group.rank() == 0:
        events.set("done", "1")
    return out


def bad_arguments(rank, world, init_method):
    """Wrong shrink arguments, through torch's shrink_group and straight to
    the backend (what torch does not check reaches it): each raises, and the
    group still works afterwards."""
    dist.init_process_group("ringreduce", init_method=init_method, rank=rank, world_size=world)
    backend = dist.group.WORLD._get_backend(torch.device("cpu"))
    other = 1 - rank
    errors = {}

    def attempt(name, call):
        try:
            call()
            errors[name] = "no error"
        except Exception as error:
            errors[name] = (type(error).__name__, str(error))

    attempt("torch_empty", lambda: dist.shrink_group([]))
    attempt("torch_out_of_range", lambda: dist.shrink_group([world]))
    attempt("torch_self", lambda: dist.shrink_group([rank]))
    attempt("torch_flags", lambda: dist.shrink_group([other], shrink_flags=7))
    attempt("torch_options", lambda: dist.shrink_group(
        [other], pg_options=datetime.timedelta(seconds=3)))
    attempt("empty", lambda: backend.shrink([]))
    attempt("out_of_range", lambda: backend.shrink([-1]))
    attempt("duplicate", lambda: backend.shrink([other, other]))
    attempt("self", lambda: backend.shrink([rank]))
    attempt("all", lambda: backend.shrink([0, 1]))
    attempt("flags", lambda: backend.shrink([other], 2))
    attempt("options", lambda: backend.shrink([other], 0, "30s"))
    t = torch.full((6,), float(rank + 1))
    dist.all_reduce(t)
    return {"errors": errors, "after": t, "supports": backend.supports_shrinking}


def rank_missing(rank, world, init_method):
    """Rank 2 is excluded. Rank 0 shrinks first, with a 2 s timeout in its
    options, and fails naming rank 1, which has not come. Then rank 1 comes
    (3 s) while rank 0 does not try again yet: it must fail naming rank 0,
    not meet rank 0's arrival of the attempt that failed. Then both try
    again, with no options, and meet."""
    dist.init_process_group("ringreduce", init_method=init_method, rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=60))
    events = event_store(init_method, world)
    dist.all_reduce(torch.ones(2))
    if rank == 2:
        events.wait(["done"])
        return {}
    out = {}

    def attempt(seconds):
        options = torch._C._distributed_c10d.Backend.Options("ringreduce",
                                                             datetime.timedelta(seconds=seconds))
        try:
            dist.shrink_group([2], pg_options=options)
            return "no error"
        except Exception as error:
            return (type(error).__name__, str(error))

    if rank == 0:
        out["first"] = attempt(2)
        events.set("first_failed", "1")
        events.wait(["second_failed"])
    else:
        events.wait(["first_failed"])
        out["second"] = attempt(3)
        events.set("second_failed", "1")
    group = dist.shrink_group([2])
    t = _ints(rank)
    dist.all_reduce(t, group=group)
    out["retry"] = (group.rank(), group.size(), t)
    # No options: the parent's timeout.
    out["retry_timeout"] = group._get_backend(torch.device("cpu")).options._timeout.total_seconds()
    if rank == 0:
        events.set("done", "1")
    return out


def receive_in_flight(rank, world, init_method, wait_for_rank1_s):
    """Rank 0 has a receive from rank 2 in flight when it shrinks rank 2
    away with SHRINK_DEFAULT, which lets it complete first, as NCCL's does.
    Rank 2 sends once rank 1 has a shrunk group, or after
    `wait_for_rank1_s` (rank 1 cannot have one before rank 0 comes, and
    rank 0 comes once the message is in)."""
    dist.init_process_group("ringreduce", init_method=init_method, rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=60))
    events = event_store(init_method, world)
    dist.all_reduce(torch.ones(2))
    message = _ints(2, 5000)
    if rank == 2:
        events.wait(["posted"])
        try:
            events.wait(["rank1_shrunk"], datetime.timedelta(seconds=wait_for_rank1_s))
        except Exception:
            pass  # rank 1 is still shrinking: rank 0 waits for this message
        dist.isend(message, dst=0)  # not waited for: rank 0's old group may be gone
        events.wait(["done"])
        return {}
    out = {}
    if rank == 0:
        received = torch.zeros_like(message)
        pending = dist.irecv(received, src=2)
        events.set("posted", "1")
    group = dist.shrink_group([2])
    if rank == 1:
        events.set("rank1_shrunk", "1")
    else:
        try:
            pending.wait()
            out["received"] = torch.equal(received, message)
        except Exception as error:
            out["received"] = (type(error).__name__, str(error))
    t = _ints(rank)
    dist.all_reduce(t, group=group)
    out["sum"] = t
    dist.barrier()
    if rank == 0:
        events.set("done", "1")
    return out


# A group's own settings (pg_options' config), which a group shrunk from it
# keeps unless the caller's options say otherwise.
GIVEN = {"RINGREDUCE_SEGMENT_BYTES": "65536", "RINGREDUCE_EAGER_BYTES": "8192"}


def _settings_of(group):
    import torch_ringreduce

    options = group._get_backend(torch.device("cpu")).options
    effective = torch_ringreduce.config(group)
    return {"config": dict(options.config), "timeout": options._timeout.total_seconds(),
            "segment": effective["RINGREDUCE_SEGMENT_BYTES"],
            "eager": effective["RINGREDUCE_EAGER_BYTES"]}


def non_default_group_and_settings(rank, world, init_method, bind):
    """World 4, each group made with GIVEN. A subgroup of global ranks
    1, 2, 3 drops its rank 1 (global rank 2): the new group is global ranks
    1 and 3, which torch must record (its own filter takes the excluded
    group ranks for global ranks), and keeps the subgroup's settings,
    timeout and timing. Then the default group drops rank 2, with options
    that change one setting: that one changes, the rest are the parent's.
    `bind`: the default group is bound to a (fake, on CPU) CUDA device, as
    init_process_group(device_id=...) binds it."""
    import torch_ringreduce
    from device_bound_cases import bind_device

    device_id = bind_device(rank, world)[0] if bind else None
    dist.init_process_group("ringreduce", init_method=init_method, rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=45), device_id=device_id,
                            pg_options=torch_ringreduce.Options(config=GIVEN))
    events = event_store(init_method, world)
    sub = dist.new_group([1, 2, 3], timeout=datetime.timedelta(seconds=50),
                         pg_options=torch_ringreduce.Options(config=GIVEN))
    out = {"parent": _settings_of(dist.group.WORLD)}
    if rank in (1, 3):
        sub._enable_collectives_timing()
        shrunk = dist.shrink_group([1], group=sub)
        out["ranks"] = dist.get_process_group_ranks(shrunk)
        out["global_of_1"] = dist.get_global_rank(shrunk, 1)
        out["group_of_3"] = dist.get_group_rank(shrunk, 3)
        out["place"] = (shrunk.rank(), shrunk.size())
        out["bound"] = str(getattr(shrunk, "bound_device_id", None))
        out["settings"] = _settings_of(shrunk)
        t = _ints(rank)
        work = dist.all_reduce(t, group=shrunk, async_op=True)
        work.wait()
        out["sum"] = t
        out["timed"] = work._get_duration() > 0.0  # raises if timing was lost
        gathered = [torch.empty(1000, dtype=torch.int64) for _ in range(2)]
        dist.all_gather(gathered, _ints(rank), group=shrunk)
        out["gathered"] = gathered
    # Everyone's subgroup work is done before the default group is shrunk
    # (which destroys the other groups). No barrier: on the fake device it
    # would make a CUDA tensor.
    dist.all_reduce(torch.ones(1))
    if rank == 2:
        events.wait(["done"])
        return out
    changed = torch_ringreduce.Options(config={"RINGREDUCE_SEGMENT_BYTES": "131072"})
    world_shrunk = dist.shrink_group([2], pg_options=changed)
    out["world_settings"] = _settings_of(world_shrunk)
    out["world_ranks"] = dist.get_process_group_ranks(world_shrunk)
    out["world_bound"] = str(getattr(world_shrunk, "bound_device_id", None))
    t = _ints(rank)
    dist.all_reduce(t)
    out["world_sum"] = t
    if world_shrunk.rank() == 0:
        events.set("done", "1")
    return out


# --- DDP: a rank killed mid-training, the others shrink and carry on --------

STEPS_BEFORE = 4  # the victim dies in the backward of this step (counted from 0)
STEPS_AFTER = 5
LR = 0.05


def _model():
    torch.manual_seed(4321)
    return nn.Sequential(nn.Linear(12, 24), nn.Tanh(), nn.Linear(24, 3))


def _batch(global_rank, step):
    gen = torch.Generator().manual_seed(100 * global_rank + step)
    x = torch.randn(16, 12, generator=gen)
    return x, torch.randn(16, 3, generator=gen)


def _loss(model, global_rank, step):
    x, y = _batch(global_rank, step)
    return nn.functional.mse_loss(model(x), y)


def reference_steps(params, ranks, first_step, steps):
    """What DDP over `ranks` computes, locally: each rank's gradient divided
    by the world size (DDP divides as it copies into its bucket), summed, then
    an SGD step. For two ranks the sum is one addition, the same whatever the
    allreduce's order, so the result is exact; for three it depends on the
    order the allreduce adds in."""
    model = _model()
    with torch.no_grad():
        for p, v in zip(model.parameters(), params):
            p.copy_(v)
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    for step in range(first_step, first_step + steps):
        grads = []
        for r in ranks:
            model.zero_grad(set_to_none=True)
            _loss(model, r, step).backward()
            grads.append([p.grad.detach().div(len(ranks)) for p in model.parameters()])
        for i, p in enumerate(model.parameters()):
            total = grads[0][i].clone()
            for g in grads[1:]:
                total = total + g[i]
            p.grad = total
        opt.step()
    return [p.detach().clone() for p in model.parameters()]


def ddp_killed_then_shrunk(rank, world, init_method, victim, kill_file):
    """World 3 trains with DDP; `victim` SIGKILLs itself inside the backward
    of step STEPS_BEFORE. The others see that step fail naming it, shrink
    the default group, wrap the same model in a new DDP and train
    STEPS_AFTER more steps. Returns the parameters at each stage and when
    things happened (wall clock, to compare with the victim's kill_file)."""
    dist.init_process_group("ringreduce", init_method=init_method, rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=60))
    model = _model()
    start_params = [p.detach().clone() for p in model.parameters()]
    ddp = DistributedDataParallel(model)
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    failure = None
    for step in range(STEPS_BEFORE + 1):
        opt.zero_grad(set_to_none=True)
        loss = _loss(ddp, rank, step)
        if rank == victim and step == STEPS_BEFORE:
            # Dies inside the backward, once its first gradient (the last
            # layer's) exists: the others' allreduce of this step then waits
            # for it.
            list(model.parameters())[-1].register_post_accumulate_grad_hook(
                lambda _: _die(kill_file))
        try:
            loss.backward()
        except Exception as error:
            failed_at = time.time()
            failure = (type(error).__name__, str(error))
            break
        opt.step()
    assert failure is not None, "the victim's death went unnoticed"
    # The failed step took no optimizer step: the parameters are those after
    # STEPS_BEFORE steps of the world of three.
    before_params = [p.detach().clone() for p in model.parameters()]
    # The old DDP's hooks go with it (its reducer would run on the old
    # group): once nothing refers to it, it is freed at once (no gc pass,
    # which costs a few hundred ms in a process with torch loaded).
    old_ddp = weakref.ref(ddp)
    del ddp, loss
    group = dist.shrink_group([victim])
    shrunk_at = time.time()
    check = torch.ones(1)
    dist.all_reduce(check)  # the first collective of the shrunk group
    first_collective_at = time.time()
    ddp = DistributedDataParallel(model)
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    staying = [r for r in range(world) if r != victim]
    for step in range(STEPS_BEFORE, STEPS_BEFORE + STEPS_AFTER):
        opt.zero_grad(set_to_none=True)
        _loss(ddp, staying[group.rank()], step).backward()
        opt.step()
    out = {
        "failure": failure,
        "old_ddp_freed": old_ddp() is None,
        "rank_size": (dist.get_rank(), dist.get_world_size()),
        "check": check,
        "start": start_params,
        "before": before_params,
        "after": [p.detach().clone() for p in model.parameters()],
        "failed_at": failed_at,
        "shrunk_at": shrunk_at,
        "first_collective_at": first_collective_at,
    }
    if rank == 0:
        # The references, from this process (same threads, same kernels).
        out["reference_before"] = reference_steps(start_params, range(world), 0, STEPS_BEFORE)
        out["reference_after"] = reference_steps(before_params, staying, STEPS_BEFORE,
                                                 STEPS_AFTER)
    return out


def _die(kill_file):
    with open(kill_file, "w") as f:
        f.write(repr(time.time()))
    os.kill(os.getpid(), signal.SIGKILL)


def store_host_killed(rank, world, init_method, kill_file):
    """The group's store is a TCPStore that rank 0 hosts, as under torchrun;
    rank 0 dies. The others' allreduce fails naming it, and shrink_group
    says why no new group can be made, rather than hanging."""
    events = event_store(init_method, world)
    if rank == 0:
        store = dist.TCPStore("127.0.0.1", 0, world, True, wait_for_workers=False,
                              timeout=datetime.timedelta(seconds=60))
        events.set("port", str(store.port))
    else:
        port = int(events.get("port"))
        store = dist.TCPStore("127.0.0.1", port, world, False,
                              timeout=datetime.timedelta(seconds=60))
    dist.init_process_group("ringreduce", store=store, rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=60))
    dist.all_reduce(torch.ones(2))
    if rank == 0:
        events.wait(["ready1", "ready2"])
        _die(kill_file)
    events.set(f"ready{rank}", "1")
    try:
        while True:
            dist.all_reduce(torch.ones(2))
    except Exception as error:
        failure = (type(error).__name__, str(error))
    start = time.monotonic()
    try:
        dist.shrink_group([0])
        outcome = "no error"
    except Exception as error:
        outcome = (type(error).__name__, str(error))
    return {"failure": failure, "outcome": outcome, "elapsed": time.monotonic() - start}


def shrink_twice(rank, world, init_method):
    """World 4 drops rank 0, then the group of three drops its rank 1 (rank 2
    of the world), leaving ranks 1 and 3: the second shrink meets under the
    first's keys, nested."""
    dist.init_process_group("ringreduce", init_method=init_method, rank=rank, world_size=world)
    events = event_store(init_method, world)
    if rank == 0:
        events.wait(["done"])
        return {}
    first = dist.shrink_group([0])
    first_place = (first.rank(), first.size())
    first_ranks = dist.get_process_group_ranks(first)
    if rank == 2:
        events.wait(["done"])
        return {}
    second = dist.shrink_group([1])
    t = _ints(rank)
    dist.all_reduce(t)
    out = {"first": first_place, "second": (second.rank(), second.size()), "sum": t,
           "first_ranks": first_ranks, "second_ranks": dist.get_process_group_ranks(second)}
    if second.rank() == 0:
        events.set("done", "1")
    return out
