"""Every collective with a one-host form goes through the host channel from
the caller's thread when the caller waits (ops/host_channel_collectives.cpp:
all_gather(_into_tensor), reduce_scatter(_tensor), broadcast, barrier,
all_to_all_single, reduce, gather, scatter):
results against local references at world 2, 3 and 4 over several dtypes,
strided tensors and messages of several pieces, with memcpy or streaming
stores into the buffers; the trace says "direct"; all-gathers, gathers and
equal all-to-alls of large blocks read from the peers' memory in place;
broadcasts beyond the buffers through them or read in place;
all_to_all_single with split sizes and all_to_all (lists, sizes per rank)
through the channel (queued) where its
blocks fit, else with messages, and a size mismatch found there;
a rank that queued one meets ranks that ran it directly; two different
collectives under one number fail on both ranks, saying so."""
import errno
import os

import pytest

from host_channel_cases import (ON_CALLER_OPS, every_op_on_caller, gathers_read_in_place,
                                large_broadcasts, mismatched_ops, mismatched_splits,
                                recurring_inputs_read_in_place)
from multiproc import run_world

# A small buffer, so that a few thousand elements take several pieces.
SMALL_CHANNEL = {"RINGREDUCE_SHM_BYTES": "8192"}


@pytest.mark.parametrize("world_size", [2, 3, 4])
def test_every_collective_runs_past_the_queue_with_exact_results(world_size):
    reports = run_world(world_size, every_op_on_caller, env=SMALL_CHANNEL, timeout=300)
    for rank, report in enumerate(reports):
        assert report["failures"] == [], f"rank {rank}:\n" + "\n".join(report["failures"][:20])
        assert report["checked"] > 100
        direct = {op for op, is_direct in report["paths"] if is_direct}
        assert set(ON_CALLER_OPS) <= direct, report["paths"]


@pytest.mark.parametrize("world_size,env", [
    (2, {}), (3, {}),
    # The channel's buffers (8 KiB) hold none of these blocks: read in place, or ...
    (3, SMALL_CHANNEL),
    # ... where no rank may read another's memory, through the buffers or with UCX's messages.
    (3, {"RINGREDUCE_CROSS_MEMORY": "0"})])
def test_gathers_of_large_blocks_read_in_place_give_exact_results(world_size, env):
    reports = run_world(world_size, gathers_read_in_place, env=env, timeout=300)
    for rank, report in enumerate(reports):
        assert report["failures"] == [], f"rank {rank}:\n" + "\n".join(report["failures"][:20])
        assert report["checked"] == 44 + (4 if rank == 1 else 0), report


@pytest.mark.parametrize("world_size,env", [
    (2, {}), (3, {}), (4, {}),
    # No rank may read another's memory: through the buffers whatever the load.
    (2, {"RINGREDUCE_CROSS_MEMORY": "0"}),
    # No channel: the chain over the transport.
    (2, {"RINGREDUCE_SHM_BYTES": "0"}), (3, {"RINGREDUCE_SHM_BYTES": "0"})])
def test_broadcasts_beyond_the_buffers_give_the_roots_bytes(world_size, env):
    reports = run_world(world_size, large_broadcasts, env=env, timeout=300)
    for rank, report in enumerate(reports):
        assert report["failures"] == [], f"rank {rank}:\n" + "\n".join(report["failures"][:20])
        assert report["checked"] == 3 * world_size * 4, report
        # On the channel: run on the caller's thread where it waits, and
        # queued (async_op=True), both forms meeting; the chain is queued.
        direct = {("broadcast", False)} if "RINGREDUCE_SHM_BYTES" in env else \
            {("broadcast", True), ("broadcast", False)}
        assert set(report["paths"]) == direct, report["paths"]


@pytest.mark.parametrize("stores", ["cached", "streaming"])
def test_every_collective_gives_the_same_bytes_with_either_stores(stores):
    # RINGREDUCE_SHM_STORES: memcpy or streaming stores into the buffers for
    # every copy (auto, the default above, times both and mixes them).
    env = dict(SMALL_CHANNEL, RINGREDUCE_SHM_STORES=stores)
    reports = run_world(3, every_op_on_caller, env=env, timeout=300)
    for rank, report in enumerate(reports):
        assert report["failures"] == [], f"rank {rank}:\n" + "\n".join(report["failures"][:20])
        assert report["checked"] > 100


def test_two_collectives_under_one_number_fail_on_both_ranks():
    reports = run_world(2, mismatched_ops, timeout=120)
    # Each rank names its own collective and what differs; the rank that saw
    # it second may learn it from the first one giving up.
    assert "all_gather_into_tensor #2 on rank 0" in reports[0]["error"], reports[0]["error"]
    assert "broadcast #2 on rank 1" in reports[1]["error"], reports[1]["error"]
    for report in reports:
        assert "is in a different collective" in report["error"], report["error"]
        assert "BROADCAST(Float, 8 elements, root 0) #2" in report["error"] or \
            "_ALLGATHER_BASE" in report["error"], report["error"]
    for report in reports:
        assert report["error"].startswith("DistBackendError"), report["error"]


def test_uneven_all_to_all_sizes_that_disagree_are_named():
    reports = run_world(2, mismatched_splits, timeout=120)
    # Rank 0 learns it from the channel's first turn; rank 1 from rank 0
    # giving up on the group (or its own result, had it finished first).
    assert "rank 1 sends 48 bytes to this rank, whose output split sizes expect 32" in \
        reports[0]["error"], reports[0]["error"]


def _why_the_kernel_cannot_collapse():
    """Why this kernel cannot move memory onto huge pages at all (MADV_COLLAPSE
    came with Linux 6.1; no sysfs folder: no transparent huge pages), or None."""
    major, minor = (int(x) for x in os.uname().release.split(".")[:2])
    if (major, minor) < (6, 1):
        return f"Linux {os.uname().release} has no MADV_COLLAPSE (6.1 and later)"
    if not os.path.isdir("/sys/kernel/mm/transparent_hugepage"):
        return "this kernel has no transparent huge pages"
    return None


def _huge_pages_for_all():
    """THP "always": every anonymous mapping may get huge pages at first touch."""
    with open("/sys/kernel/mm/transparent_hugepage/enabled") as f:
        return "[always]" in f.read()


@pytest.mark.parametrize("huge_pages", [True, False])
def test_recurring_inputs_that_peers_read_in_place_move_onto_huge_pages(huge_pages):
    """The peers pin every page of a block they read from a rank's memory: an
    all-gather's or all-to-all's input (or an uneven all-to-all's block to a
    peer) of 4 MiB or more that comes back goes
    onto 2 MiB pages, as the UCX path's buffers do (16 MiB all-gathers were
    1.05-1.16x the UCX path's time on small pages); RINGREDUCE_HUGE_PAGES=0
    leaves it as it is. Either way the results are exact."""
    why = _why_the_kernel_cannot_collapse()
    if why:
        pytest.skip(why)
    if not huge_pages and _huge_pages_for_all():
        pytest.skip("THP is 'always' here: memory may be huge at first touch without the backend")
    env = {} if huge_pages else {"RINGREDUCE_HUGE_PAGES": "0"}
    reports = run_world(2, recurring_inputs_read_in_place, env=env, timeout=120)
    for rank, report in enumerate(reports):
        assert report["exact"], f"rank {rank}: {report}"
        if not huge_pages:
            assert set(report["huge_kb"].values()) == {0}, f"rank {rank}: {report}"
            continue
        if 0 in report["huge_kb"].values() and report["refusal"] in (errno.EAGAIN, errno.ENOMEM):
            pytest.skip(f"rank {rank}: the kernel has no free huge page now ({report})")
        assert min(report["huge_kb"].values()) >= 2048, f"rank {rank}: {report}"
