"""Every Work answers (issue 50, item 3): Work._get_duration() measures on
every path, get_future_result() gives torch's WorkResult, and
ProcessGroup._enable_collectives_timing() turns timing on. No test asserts
how long anything took: a measured duration is positive, an unmeasured one
raises saying how to get one."""
import json
import random

import pytest

from torch._C._distributed_c10d import WorkResult

import work_timing_cases
from multiproc import run_world

ON_CALLER_OPS = ["allreduce", "all_gather_into_tensor", "reduce_scatter_tensor", "broadcast"]


def test_the_group_of_one_times_its_caller_work_once_timing_is_on():
    (r,) = run_world(1, work_timing_cases.group_of_one, random.randrange(1 << 20), timeout=120)
    assert r["exact_untimed"] and r["exact_timed"]
    # All of them ran on the caller's thread, none queued.
    entries = json.loads(r["trace"])["entries"]
    assert len(entries) == 2 * len(ON_CALLER_OPS) and all(e["direct"] for e in entries), entries
    for op in ON_CALLER_OPS:
        # Untimed: the hot path read no second clock, and says how to time it.
        assert "_enable_collectives_timing" in r["untimed"][op], r["untimed"][op]
        assert "RINGREDUCE_ENABLE_TIMING" in r["untimed"][op]
        assert isinstance(r["timed"][op], float) and r["timed"][op] > 0.0, r["timed"]
        assert WorkResult(r["results"][op]) == WorkResult.SUCCESS
    # Completion hooks see real durations on this path too (they read the
    # clock anyway), in torch's microseconds: the ops that copy half a MiB
    # take some; allreduce and broadcast of one rank do nothing at all.
    # One report per Work, in issue order, each naming its op.
    assert [op for op, _ in r["hook_ops"]] == [
        "ALLREDUCE", "_ALLGATHER_BASE", "_REDUCE_SCATTER_BASE", "BROADCAST"], r["hook_ops"]
    seqs = [seq for _, seq in r["hook_ops"]]
    assert seqs == sorted(set(seqs)), r["hook_ops"]
    copies = [ON_CALLER_OPS.index("all_gather_into_tensor"),
              ON_CALLER_OPS.index("reduce_scatter_tensor")]
    assert all(r["hook_seconds"][i] > 0.0 for i in copies), r["hook_seconds"]


def test_timing_from_the_environment():
    for variable in ("RINGREDUCE_ENABLE_TIMING", "TORCH_NCCL_ENABLE_TIMING"):
        (r,) = run_world(1, work_timing_cases.timed_from_the_environment,
                         random.randrange(1 << 20), env={variable: "1"}, timeout=120)
        assert r["exact"]
        for op in ON_CALLER_OPS:
            assert isinstance(r["timed"][op], float) and r["timed"][op] > 0.0, (variable, r)


def test_queued_and_coalesced_work_answers():
    results = run_world(2, work_timing_cases.queued_and_coalesced, random.randrange(1 << 20),
                        timeout=120)
    for r in results:
        for op in ("all_gather", "reduce", "allreduce"):
            exact, duration, result = r[op]
            assert exact and duration > 0.0 and WorkResult(result) == WorkResult.SUCCESS, op
        assert r["coalesced_works"] == 1
        assert "_enable_collectives_timing" in r["untimed"], r["untimed"]
        exact, duration, result = r["coalesced"]
        assert exact and duration > 0.0 and WorkResult(result) == WorkResult.SUCCESS
        assert WorkResult(r["early_result"]) == WorkResult.SUCCESS
        assert r["early_sum"] == [2.0] * 10


def test_timeout_and_failed_group_results():
    rank0, _ = run_world(2, work_timing_cases.timeout_then_failed_group, timeout=120)
    assert rank0["error"] and "timed out" in rank0["error"], rank0
    assert WorkResult(rank0["timeout_result"]) == WorkResult.TIMEOUT
    assert rank0["timeout_duration"] > 0.0
    assert WorkResult(rank0["later_result"]) == WorkResult.COMM_ERROR
    assert "never ran" in rank0["later_duration"], rank0


@pytest.mark.parametrize("trace_buffer", ["0", "2000"], ids=["recorder_off", "recorder_on"])
def test_a_queued_duration_starts_when_the_collective_starts(trace_buffer):
    rank0, _ = run_world(2, work_timing_cases.starts_when_it_runs,
                         env={"RINGREDUCE_TRACE_BUFFER_SIZE": trace_buffer}, timeout=120)
    # The second started after the first completed, which was after the
    # release: its duration fits in the release-to-done span, whatever the
    # machine's speed; from its queueing (before the release) it would not.
    assert 0.0 < rank0["second_ms"] <= rank0["released_to_done_ms"], rank0
    assert rank0["first_ms"] > 0.0, rank0
    # The hooks see the same spans (an unset start made them 0).
    first_hook, second_hook = rank0["hooked_ms"][-2:]
    assert first_hook > 0.0 and 0.0 < second_hook <= rank0["released_to_done_ms"], rank0
