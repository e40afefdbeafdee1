"""Rank-side bodies of the error tests."""
import datetime
import time

import warnings

import torch
import torch.distributed as dist

from multiproc import event_store


def _expect(exc_types, needles, fn):
    """Runs fn, which must raise one of exc_types with every needle in its message."""
    try:
        fn()
    except exc_types as error:
        message = str(error)
        missing = [n for n in needles if n not in message]
        return None if not missing else f"message lacks {missing}: {message}"
    except Exception as error:  # wrong type
        return f"raised {type(error).__name__} instead of {exc_types}: {error}"
    return f"did not raise (expected {exc_types})"


def bad_inputs(rank, world, init_method):
    dist.init_process_group("ringreduce", init_method=init_method, rank=rank, world_size=world)
    problems = {}
    checks = {
        "unsupported dtype": (TypeError, ["allreduce", f"rank {rank}", "Float8_e4m3fn"],
                              lambda: dist.all_reduce(torch.zeros(4, dtype=torch.float8_e4m3fn))),
        "bitwise op on float": (TypeError, ["allreduce", f"rank {rank}", "BAND", "float32"],
                                lambda: dist.all_reduce(torch.ones(4), op=dist.ReduceOp.BAND)),
        # torch rejects these two itself (ValueError) before reaching the backend.
        "min on complex": ((TypeError, ValueError), ["MIN", "complex"],
                           lambda: dist.all_reduce(torch.ones(4, dtype=torch.complex64),
                                                   op=dist.ReduceOp.MIN)),
        "avg on bool": (TypeError, ["AVG", "bool"],
                        lambda: dist.all_reduce(torch.ones(4, dtype=torch.bool),
                                                op=dist.ReduceOp.AVG)),
        "all_gather list too short": (ValueError, ["all_gather", f"rank {rank}", "expected one per rank"],
                                      lambda: dist.all_gather([torch.empty(3)] * (world + 1),
                                                              torch.ones(3))),
        "all_gather wrong output size": (ValueError, ["all_gather", "elements", "expected 3"],
                                         lambda: dist.all_gather([torch.empty(4) for _ in range(world)],
                                                                 torch.ones(3))),
        "all_gather mixed dtypes": ((TypeError, ValueError), ["dtype"],
                                    lambda: dist.all_gather([torch.empty(3, dtype=torch.int32)
                                                             for _ in range(world)], torch.ones(3))),
        "all_gather_into_tensor wrong size": (ValueError, ["all_gather_into_tensor", "elements"],
                                              lambda: dist.all_gather_into_tensor(
                                                  torch.empty(3 * world + 1), torch.ones(3))),
        "sparse tensor with MAX": (ValueError, ["allreduce (sparse)", "SUM only"],
                                   lambda: dist.all_reduce(torch.eye(3).to_sparse(),
                                                           op=dist.ReduceOp.MAX)),

    }
    for name, (types, needles, fn) in checks.items():
        problem = _expect(types, needles, fn)
        if problem:
            problems[name] = problem
    # The group is still usable, and still gives the right answer.
    t = torch.full((5,), float(rank + 1))
    dist.all_reduce(t)
    usable = torch.equal(t, torch.full((5,), float(world * (world + 1) // 2)))
    return {"problems": problems, "usable": usable}


def timeout_then_fail_fast(rank, world, init_method):
    """Rank 1 skips a collective: rank 0 must time out with a clear error.
    Rank 1 stays in the group until rank 0 has seen everything (an event, not
    a sleep): had it left first, rank 0 would rightly report its departure
    instead of the timeout under test."""
    timeout_s = 2.0
    dist.init_process_group("ringreduce", init_method=init_method, rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=timeout_s))
    events = event_store(init_method, world)
    dist.all_reduce(torch.ones(2))  # both ranks connected and in step
    result = {}
    if rank == 0:
        start = time.monotonic()
        work = dist.all_reduce(torch.ones(1000), async_op=True)
        future = work.get_future()
        try:
            work.wait()
            result["wait"] = "no error"
        except Exception as error:
            result["wait"] = (type(error).__name__, str(error))
        result["elapsed"] = time.monotonic() - start
        try:
            future.wait()
            result["future"] = "no error"
        except Exception as error:
            result["future"] = (type(error).__name__, str(error))
        # Later calls fail at once with the reason.
        start = time.monotonic()
        try:
            dist.all_reduce(torch.ones(2))
            result["later"] = "no error"
        except Exception as error:
            result["later"] = (type(error).__name__, str(error))
        result["later_elapsed"] = time.monotonic() - start
        # A work that failed before anyone asked for its future: the future,
        # made then, raises the same error.
        ended = dist.all_reduce(torch.ones(1000), async_op=True)
        try:
            ended.wait()
        except Exception:
            pass
        try:
            ended.get_future().wait()
            result["future_after_the_end"] = "no error"
        except Exception as error:
            result["future_after_the_end"] = (type(error).__name__, str(error))
        events.set("rank 0 is done", b"1")
    else:
        events.wait(["rank 0 is done"])  # never joins the collective
    return result


def mismatched_collectives(rank, world, init_method):
    """With the collective check on, every rank raises on each mismatch and
    the group stays usable."""
    dist.init_process_group("ringreduce", init_method=init_method, rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=30))
    odd = rank == world - 1  # the last rank disagrees
    cases = {
        "op": lambda: (dist.broadcast(torch.ones(8), src=0) if odd
                       else dist.all_reduce(torch.ones(8))),
        "shape": lambda: dist.all_reduce(torch.ones(9 if odd else 8)),
        "dtype": lambda: dist.all_reduce(torch.ones(8, dtype=torch.float64 if odd else torch.float32)),
        "reduce op": lambda: dist.all_reduce(torch.ones(8), op=dist.ReduceOp.MAX if odd
                                             else dist.ReduceOp.SUM),
        "root": lambda: dist.broadcast(torch.ones(8), src=1 if odd else 0),
    }
    seen = {}
    for name, call in cases.items():
        try:
            call()
            seen[name] = "no error"
        except Exception as error:
            seen[name] = (type(error).__name__, str(error))
    t = torch.ones(8)
    dist.all_reduce(t)
    return {"seen": seen, "usable": t.tolist() == [float(world)] * 8}


def _all_gather_coalesced(output_lists, inputs):
    with warnings.catch_warnings():  # deprecated in torch
        warnings.simplefilter("ignore", FutureWarning)
        dist.all_gather_coalesced(output_lists, inputs)


def _coalesced(calls):
    """Runs calls (each a function of no arguments) in torch's coalescing
    manager: one *_coalesced call of the backend."""
    from torch.distributed.distributed_c10d import _coalescing_manager
    with _coalescing_manager(async_ops=False):
        for call in calls:
            call()


def _all_reduce_coalesced(tensors):
    with warnings.catch_warnings():  # deprecated in torch
        warnings.simplefilter("ignore", FutureWarning)
        dist.all_reduce_coalesced(tensors)


def _expanded(n):
    """n elements that are all one element: no tensor can be written there."""
    return torch.zeros(1).expand(n)


def overlapping_outputs(rank, world, init_method):
    dist.init_process_group("ringreduce", init_method=init_method, rank=rank, world_size=world)
    problems = {}
    shared = torch.empty(3)
    base = torch.empty(world + 2)
    base16 = torch.empty(16)
    base_2d = torch.empty(4, 2 * world + 1)
    checks = {
        "all_gather into one tensor twice": (ValueError, ["all_gather", "share memory"],
                                             lambda: dist.all_gather([shared] * world, torch.ones(3))),
        "all_gather into overlapping views": (ValueError, ["share memory"],
                                              lambda: dist.all_gather(
                                                  [base[i:i + 3] for i in range(world)],
                                                  torch.ones(3))),
        # Strided views of one storage (torch's own test gives up on them):
        # these two share elements 4 and 6, found element by element.
        "all_gather into strided views that share elements": (
            ValueError, ["all_gather", "tensors 0 and 1 share memory"],
            lambda: dist.all_gather([base16[2 * i * (world - 1):][::2][:4] for i in range(world)],
                                    torch.ones(4))),
        # Not evenly stepped either (rows of columns): marked element by element.
        "all_gather into blocks of columns that share one": (
            ValueError, ["all_gather", "tensors 0 and 1 share memory"],
            lambda: dist.all_gather([base_2d[:, 2 * i:2 * i + 3] for i in range(world)],
                                    torch.ones(4, 3))),
        # all_gather_coalesced's outputs, list by list: input 0's and input
        # 1's blocks of one rank in one tensor (plain memory: checked by a sort).
        "all_gather_coalesced into one tensor for two inputs": (
            ValueError, ["all_gather_coalesced", "output tensors 0 and 1 share memory"],
            lambda: _all_gather_coalesced([[shared, shared]] + [[torch.empty(3), torch.empty(3)]
                                                                for _ in range(world - 1)],
                                          [torch.ones(3), torch.ones(3)])),
        "all_gather_coalesced into overlapping views": (
            ValueError, ["all_gather_coalesced", "share memory"],
            lambda: _all_gather_coalesced([[base[i:i + 3]] for i in range(world)],
                                          [torch.ones(3)])),
        # Strided views (not plain memory): each input's blocks checked as all_gather's.
        "all_gather_coalesced into strided views that share elements": (
            ValueError, ["all_gather_coalesced", "tensors 0 and 1 share memory"],
            lambda: _all_gather_coalesced(
                [[base16[2 * i * (world - 1):][::2][:4]] for i in range(world)],
                [torch.ones(4)])),
        "all_to_all into one tensor twice": (
            ValueError, ["all_to_all", "share memory"],
            lambda: dist.all_to_all([shared] * world, [torch.ones(3)] * world)),
        "all_reduce into an expanded view": (ValueError, ["allreduce", "overlapping memory"],
                                             lambda: dist.all_reduce(torch.ones(1).expand(4))),
        "all_gather_into_tensor expanded output": (ValueError, ["overlapping memory"],
                                                   lambda: dist.all_gather_into_tensor(
                                                       torch.ones(1).expand(3 * world), torch.ones(3))),
        # The coalesced forms (FSDP's and ZeRO's managers) refuse before they
        # communicate, as the single ones do: these used to fail only when the
        # results were copied in, leaving the group unusable.
        "all_gather_into_tensor_coalesced into overlapping views": (
            ValueError, ["all_gather_into_tensor_coalesced", "output tensors 0 and 1 share memory"],
            lambda: _coalesced([lambda: dist.all_gather_into_tensor(base16[:2 * world], torch.ones(2)),
                                lambda: dist.all_gather_into_tensor(base16[1:2 * world + 1],
                                                                    torch.ones(2))])),
        "all_gather_into_tensor_coalesced into an expanded view": (
            ValueError, ["all_gather_into_tensor_coalesced", "output tensor 1 has overlapping memory"],
            lambda: _coalesced([lambda: dist.all_gather_into_tensor(torch.empty(2 * world),
                                                                    torch.ones(2)),
                                lambda: dist.all_gather_into_tensor(_expanded(2 * world),
                                                                    torch.ones(2))])),
        "reduce_scatter_tensor_coalesced into overlapping views": (
            ValueError, ["reduce_scatter_tensor_coalesced", "output tensors 0 and 1 share memory"],
            lambda: _coalesced([lambda: dist.reduce_scatter_tensor(base16[:4], torch.ones(4 * world)),
                                lambda: dist.reduce_scatter_tensor(base16[2:6],
                                                                   torch.ones(4 * world))])),
        "reduce_scatter_tensor_coalesced into an expanded view": (
            ValueError, ["reduce_scatter_tensor_coalesced", "output tensor 1 has overlapping memory"],
            lambda: _coalesced([lambda: dist.reduce_scatter_tensor(torch.empty(4),
                                                                   torch.ones(4 * world)),
                                lambda: dist.reduce_scatter_tensor(_expanded(4),
                                                                   torch.ones(4 * world))])),
        "allreduce_coalesced of an expanded view": (
            ValueError, ["allreduce_coalesced", "input tensor 1 has overlapping memory"],
            lambda: _all_reduce_coalesced([torch.ones(4), _expanded(4)])),
        # Every collective that writes a tensor in place or into an output.
        "broadcast of an expanded view": (ValueError, ["broadcast", "overlapping memory"],
                                          lambda: dist.broadcast(_expanded(4), src=0)),
        "broadcast of an expanded view past the channel's buffers": (
            ValueError, ["broadcast", "overlapping memory"],
            lambda: dist.broadcast(_expanded(1 << 21), src=0)),
        "reduce of an expanded view": (ValueError, ["reduce", "overlapping memory"],
                                       lambda: dist.reduce(_expanded(4), dst=0)),
        "scatter into an expanded view": (
            ValueError, ["scatter", "overlapping memory"],
            lambda: dist.scatter(_expanded(4), [torch.ones(4)] * world if rank == 0 else None,
                                 src=0)),
        "all_to_all_single into an expanded view": (
            ValueError, ["all_to_all_single", "overlapping memory"],
            lambda: dist.all_to_all_single(_expanded(4 * world), torch.ones(4 * world))),
        "all_to_all into an expanded view": (
            ValueError, ["all_to_all", "output tensor 0 has overlapping memory"],
            lambda: dist.all_to_all([_expanded(4)] + [torch.empty(4) for _ in range(world - 1)],
                                    [torch.ones(4)] * world)),
        "asynchronous all_reduce of an expanded view": (
            ValueError, ["allreduce", "overlapping memory"],
            lambda: dist.all_reduce(_expanded(4), async_op=True).wait()),
        # Every rank receives into one (nothing is sent): each refuses its own.
        "recv into an expanded view": (ValueError, ["recv", "overlapping memory"],
                                       lambda: dist.recv(_expanded(4), (rank + 1) % world)),
    }
    for name, (types, needles, fn) in checks.items():
        problem = _expect(types, needles, fn)
        if problem:
            problems[name] = problem
    t = torch.ones(2)
    dist.all_reduce(t)
    return {"problems": problems, "usable": t.tolist() == [float(world)] * 2}


def lists_that_share_storage(rank, world, init_method):
    """Valid list calls whose tensors share a storage, as gloo takes them:
    input lists only read (one tensor sent to every rank), and outputs that
    are disjoint strided views of one tensor (its columns)."""
    dist.init_process_group("ringreduce", init_method=init_method, rank=rank, world_size=world)
    wrong = {}

    def check(name, got, want):
        if not torch.equal(got, want):
            wrong[name] = f"{got.tolist()} != {want.tolist()}"

    def x(r):
        return torch.arange(4.0) + 10 * r

    total = sum(x(r) for r in range(world))
    out = torch.empty(4)
    dist.scatter(out, [x(rank)] * world if rank == 0 else None, src=0)
    check("scatter of one tensor to every rank", out, x(0))
    dist.reduce_scatter(out, [x(rank)] * world)
    check("reduce_scatter of one tensor as every block", out, total)
    mine = x(rank)
    dist.reduce_scatter(mine, [mine] * world)
    check("the same, into that tensor", mine, total)
    columns = torch.stack([x(rank) + 100 * j for j in range(world)], dim=1).contiguous()
    dist.reduce_scatter(out, list(columns.t()))
    check("reduce_scatter of a matrix's columns", out, total + 100 * world * rank)
    outs = [torch.empty(4) for _ in range(world)]
    dist.all_to_all(outs, [x(rank)] * world)
    check("all_to_all of one tensor to every rank", torch.stack(outs),
          torch.stack([x(r) for r in range(world)]))
    gathered = torch.zeros(4, world)
    dist.all_gather(list(gathered.t()), x(rank))
    check("all_gather into a matrix's columns", gathered,
          torch.stack([x(r) for r in range(world)], dim=1))
    interleaved = torch.zeros(4 * world)
    dist.all_gather([interleaved[r::world] for r in range(world)], x(rank))
    check("all_gather interleaved", interleaved.view(4, world).t(),
          torch.stack([x(r) for r in range(world)]))
    # Blocks that are not evenly stepped (a slice of columns of each plane).
    blocks = torch.zeros(4, 5, world)[:, :3, :]
    y = torch.arange(12.0).view(4, 3) + 10 * rank
    dist.all_gather(list(blocks.permute(2, 0, 1)), y)
    check("all_gather into planes of a slice", blocks.permute(2, 0, 1),
          torch.stack([torch.arange(12.0).view(4, 3) + 10 * r for r in range(world)]))
    # all_gather_coalesced into a matrix's columns (two inputs: columns 2r
    # and 2r + 1 get rank r's), and from one tensor given as both inputs.
    wide = torch.zeros(4, 2 * world)
    _all_gather_coalesced([[wide[:, 2 * r], wide[:, 2 * r + 1]] for r in range(world)],
                          [x(rank), x(rank) + 1])
    check("all_gather_coalesced into a matrix's columns", wide.t(),
          torch.stack([v for r in range(world) for v in (x(r), x(r) + 1)]))
    # allreduce_coalesced of two views that share elements: as gloo takes it
    # (each tensor's values reduced as they were before the call, so the
    # shared elements get the same result from both).
    shared = torch.arange(6.0) + rank
    _all_reduce_coalesced([shared[:4], shared[2:]])
    check("allreduce_coalesced of views that share elements", shared,
          sum(torch.arange(6.0) + r for r in range(world)))
    mine = x(rank)
    pairs = [[torch.empty(4), torch.empty(4)] for _ in range(world)]
    _all_gather_coalesced(pairs, [mine, mine])
    check("all_gather_coalesced of one tensor as both inputs", torch.stack(sum(pairs, [])),
          torch.stack([x(r) for r in range(world) for _ in range(2)]))
    return wrong


def mismatches_without_the_check(rank, world, init_method):
    """Default mode (no full check): a collective whose peers run something
    else must raise, not hand back the other collective's data."""
    dist.init_process_group("ringreduce", init_method=init_method, rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=20))
    short = datetime.timedelta(seconds=3)
    odd = rank == world - 1
    cases = {
        "op": lambda g: (dist.broadcast(torch.ones(8), src=0, group=g) if odd
                         else dist.all_reduce(torch.ones(8), group=g)),
        "dtype of the same size": lambda g: dist.all_reduce(
            torch.ones(8, dtype=torch.int32 if odd else torch.float32), group=g),
        "reduce op": lambda g: dist.all_reduce(torch.ones(8), op=dist.ReduceOp.MAX if odd
                                               else dist.ReduceOp.SUM, group=g),
        # Two ranks that both think they are a broadcast's root only send and
        # see no foreign message: the neighbour check (the whole fingerprint
        # to the next rank) catches it.
        "root": lambda g: dist.broadcast(torch.ones(8), src=world - 1 if odd else 0, group=g),
    }
    seen = {}
    for name, call in cases.items():
        group = dist.new_group(list(range(world)), timeout=short)  # a fresh group per case
        try:
            call(group)
            seen[name] = "no error"
        except Exception as error:
            seen[name] = (type(error).__name__, str(error))
        # A rank whose own call went through learns of the mismatch from the
        # ranks that saw it: its next collective on the group raises.
        try:
            dist.all_reduce(torch.ones(1), group=group)
            seen[name + " then"] = "no error"
        except Exception as error:
            seen[name + " then"] = (type(error).__name__, str(error))
    return seen


def peer_that_left(rank, world, init_method):
    """Rank 1 destroys a group before rank 0 ever talked to it there: rank 0's
    send and collective on that group must say that rank 1 left, not report
    the transport's failure to reach its vanished shared memory."""
    dist.init_process_group("ringreduce", init_method=init_method, rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=20))
    group = dist.new_group([0, 1], timeout=datetime.timedelta(seconds=5))
    seen = {}
    if rank == 1:
        # Returns once its goodbye has left (the peer monitor flushes it
        # before closing), so the barrier after it is the event rank 0
        # waits for: the goodbye is at rank 0 before rank 0 leaves the
        # barrier, and rank 0's failed call hears it within the transport's
        # window for news (Transport::explainFailure).
        dist.destroy_process_group(group)
        dist.barrier()  # rank 0 starts only once rank 1 is gone from `group`
    else:
        dist.barrier()
        for name, call in (("send", lambda: dist.send(torch.ones(4), 1, group=group)),
                           ("all_reduce", lambda: dist.all_reduce(torch.ones(4), group=group))):
            try:
                call()
                seen[name] = "no error"
            except Exception as error:
                seen[name] = (type(error).__name__, str(error))
    dist.barrier()
    return seen


def rank_left_before_a_call(rank, world, init_method, call):
    """Rank 2 destroys the group after one allreduce; the others then call
    `call` ("all_reduce", or "recv": rank 0 receives from rank 2), which
    needs rank 2. They must hear at once that it left, not wait out the
    group's 60 s timeout (on shared memory nothing fails to post: only the
    goodbye says that the message will never come)."""
    dist.init_process_group("ringreduce", init_method=init_method, rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=60))
    dist.all_reduce(torch.ones(4))  # everyone connected
    if rank == 2:
        dist.destroy_process_group()
        return None
    if call == "recv" and rank != 0:
        return None
    start = time.monotonic()
    try:
        if call == "all_reduce":
            dist.all_reduce(torch.ones(1 << 18))
        else:
            dist.recv(torch.empty(4), src=2)
        outcome = "no error"
    except Exception as error:
        outcome = (type(error).__name__, str(error))
    return {"outcome": outcome, "elapsed": time.monotonic() - start}


def strided_output_lists(rank, world, init_method, trials):
    """Random strided views of one storage as all_gather's outputs: the call
    must refuse them exactly when two share an element (or one overlaps
    itself), as a brute-force comparison of their element offsets says."""
    import random

    dist.init_process_group("ringreduce", init_method=init_method, rank=rank, world_size=world)
    rng = random.Random(1234)  # the same views on every rank
    disagreements = []
    refused = accepted = 0
    for trial in range(trials):
        storage = torch.zeros(64)
        numel = rng.choice([1, 2, 3, 4, 6])
        # Evenly stepped views with one step (tested in constant time), or
        # any mix of 1-D and 2-D views (marked element by element).
        even_step = rng.randint(2, 5) if rng.random() < 0.5 else None
        views = []
        for _ in range(world):
            if even_step is not None:
                rows = 2 if numel % 2 == 0 and rng.random() < 0.5 else 1
                sizes = (rows, numel // rows)
                strides = (even_step * (numel // rows), even_step)
            elif numel > 1 and rng.random() < 0.5:  # 2-D: rows of a strided matrix
                rows = 2 if numel % 2 == 0 else 1
                sizes = (rows, numel // rows)
                strides = (rng.randint(1, 9), rng.randint(1, 4))
            else:
                sizes, strides = (numel,), (rng.randint(1, 5),)
            reach = sum((s - 1) * st for s, st in zip(sizes, strides))
            offset = rng.randint(0, 64 - 1 - reach)
            views.append(storage.as_strided(sizes, strides, offset))
        offsets = [{v.storage_offset() + sum(i * st for i, st in zip(idx, v.stride()))
                    for idx in torch.cartesian_prod(*[torch.arange(s) for s in v.shape])
                    .view(-1, v.dim()).tolist()} for v in views]
        self_overlap = any(len(o) < v.numel() for o, v in zip(offsets, views))
        shared = any(offsets[i] & offsets[j] for i in range(world) for j in range(i + 1, world))
        expect_refusal = self_overlap or shared
        try:
            dist.all_gather(views, torch.full((numel,), float(rank)).view(views[0].shape))
            got_refusal = False
            accepted += 1
            for r, v in enumerate(views):  # accepted: every view holds its rank's values
                if not torch.equal(v, torch.full(v.shape, float(r))):
                    disagreements.append(f"trial {trial}: view {r} holds {v.tolist()}")
        except ValueError as error:
            got_refusal = True
            refused += 1
            if "memory" not in str(error):
                disagreements.append(f"trial {trial}: {error}")
        # A view that overlaps only itself is caught only beside a view of
        # the same storage torch cannot place; alone, it is taken as gloo takes it.
        if got_refusal != expect_refusal and not (self_overlap and not shared):
            layout = [(tuple(v.shape), v.stride(), v.storage_offset()) for v in views]
            disagreements.append(f"trial {trial}: refused {got_refusal}, expected "
                                 f"{expect_refusal}: {layout}")
    return {"disagreements": disagreements, "refused": refused, "accepted": accepted}


def _init_with_settings(rank, world_size, init_method, settings):
    """The default group with these group settings and a 60 s timeout."""
    from datetime import timedelta

    import torch.distributed as dist
    import torch_ringreduce

    dist.init_process_group("ringreduce", init_method=init_method, rank=rank,
                            world_size=world_size, timeout=timedelta(seconds=60),
                            pg_options=torch_ringreduce.Options(config=settings))


def settings_differ_between_ranks(rank, world_size, init_method):
    """Rank 1 asks for another allreduce algorithm than rank 0: the group
    refuses it on both ranks at once, naming the setting and the ranks,
    instead of the two taking two paths and waiting for the timeout."""
    import torch.distributed as dist

    algorithm = "auto" if rank == 0 else "ring"
    try:
        _init_with_settings(rank, world_size, init_method, {"RINGREDUCE_ALGORITHM": algorithm})
        import torch
        dist.all_reduce(torch.ones(4))
        return {"error": None}
    except Exception as e:
        return {"error": str(e), "type": type(e).__name__}


def settings_differ_across_nodes(rank, world_size, init_method):
    """Each rank counts as a node of its own (no host channel to compare
    settings), and rank 1 pipelines the ring in smaller segments: the
    group's creation itself is refused on both ranks naming the setting,
    instead of the first large allreduce failing on "received 65536 bytes,
    expected 262144" or hanging until the timeout."""
    import os

    import torch.distributed as dist

    os.environ["RINGREDUCE_HOST_ID"] = f"node{rank}"
    segment = "262144" if rank == 0 else "65536"
    try:
        _init_with_settings(rank, world_size, init_method, {"RINGREDUCE_SEGMENT_BYTES": segment})
    except Exception as e:
        return {"error": str(e), "type": type(e).__name__, "at": "init_process_group"}
    try:
        import torch
        dist.all_reduce(torch.ones(1 << 20))
        return {"error": None}
    except Exception as e:
        return {"error": str(e), "type": type(e).__name__, "at": "all_reduce"}


def ucx_segment_too_large(rank, world_size, init_method):
    """UCX_MM_SEG_SIZE (the test's environment) is one UCX cannot carry: the
    group is refused with a ValueError naming it, not a crash in UCX or a
    wrong length later."""
    from datetime import timedelta

    import torch
    import torch.distributed as dist
    import torch_ringreduce  # noqa: F401

    try:
        dist.init_process_group("ringreduce", init_method=init_method, rank=rank,
                                world_size=world_size, timeout=timedelta(seconds=60))
        dist.all_reduce(torch.ones(4))
        return {"error": None}
    except Exception as e:
        return {"error": str(e), "type": type(e).__name__}
