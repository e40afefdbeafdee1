"""What ProcessGroupNCCL users rely on: Work durations, on-completion hooks,
the flight recorder (and the trace reader) and abort."""
import json

import pytest

from multiproc import LOOPBACK_ENV, run_world
import trace_cases


def test_completion_hooks_see_every_collective_and_survive_a_raising_hook():
    for result in run_world(2, trace_cases.hooks_and_durations, env=LOOPBACK_ENV, timeout=120):
        assert [s[:2] for s in result["seen"]] == [
            ("OpType.ALLREDUCE", 1), ("OpType.ALLREDUCE", 2), ("OpType.BROADCAST", 3),
            ("OpType.ALLREDUCE", 4)]
        assert all(ordered and active_within
                   for _, _, ordered, active_within, *_ in result["seen"]), result["seen"]
        assert result["duration"] > 0


def test_trace_names_each_send_and_receive_its_peer_tag_and_dtype():
    # Recorded as plain fields (no string per message), rendered when read;
    # a dtype the reductions do not know keeps torch's name.
    sent, received = run_world(2, trace_cases.sends_and_receives, env=LOOPBACK_ENV, timeout=120)
    assert sent == ["4 x float32 to rank 1, tag 3", "6 x Float8_e4m3fn to rank 1, tag 5"]
    assert received == ["4 x float32 from rank 0, tag 3", "6 x Float8_e4m3fn from any rank, tag 5"]


@pytest.mark.parametrize("path", ["ucx", "host channel"])
def test_trace_names_the_ranks_that_called_different_collectives(tmp_path, path):
    from torch_ringreduce import trace

    env = dict(LOOPBACK_ENV, RINGREDUCE_TRACE_DIR=str(tmp_path))
    if path == "ucx":
        env["RINGREDUCE_SHM_BYTES"] = "0"
    results = run_world(2, trace_cases.skip_one_collective, env=env, timeout=120)
    # Over UCX rank 0 learns it one of two ways, whichever comes first: the
    # tag check sees the barrier's messages arrive in its allreduce, or the
    # neighbour check's fingerprints differ. Through the host channel (the
    # barrier takes it too) whichever rank first sees the other's position
    # names it, and the other learns it from that rank giving up. Each
    # names both ranks' collectives.
    error = results[0]["error"]
    assert error is not None and "allreduce #2 on rank 0" in error, error
    assert ("is in a different collective" in error or
            "rank 1 calls BARRIER" in error), error
    error = results[1]["error"]
    assert error is not None and "barrier #2 on rank 1" in error, error
    if path == "ucx":
        # Rank 1 learns it the same two ways, whichever comes first: its
        # barrier gets the allreduce's bytes (it names the sender and the
        # likely cause), or the neighbour check's fingerprints differ (it
        # names both ranks' collectives).
        assert (("from rank 0" in error and "same collective" in error) or
                "rank 0 calls ALLREDUCE" in error), error
    else:
        for error in (results[0]["error"], results[1]["error"]):
            assert ("rank 1 is in a different collective: it is in BARRIER" in error or
                    "rank 0 is in a different collective: it is in ALLREDUCE" in error), error
    files = sorted(p.name for p in tmp_path.iterdir())
    assert len(files) == 2 and all(f.endswith(("_rank0.json", "_rank1.json")) for f in files)
    line = trace.analyze(next(iter(trace.load(str(tmp_path)).values())))
    # Rank 1 called a barrier where rank 0 called the allreduce.
    assert "different collectives as #2" in line, line
    assert "allreduce" in line and "barrier" in line, line
    # The in-memory form says the same as the files.
    entries = json.loads(results[0]["json"])["entries"]
    assert [(e["seq"], e["op"]) for e in entries[:2]] == [(1, "allreduce"), (2, "allreduce")]
    assert entries[1]["state"] == "failed" and entries[0]["state"] == "completed"


def test_trace_reader_names_a_missing_rank():
    from torch_ringreduce import trace

    def entry(seq, state="completed"):
        return {"seq": seq, "p2p": False, "op": "allreduce", "summary": "4 x Float SUM",
                "state": state, "error": ""}

    traces = {0: {"rank": 0, "world_size": 3, "entries": [entry(1), entry(2, "started")]},
              1: {"rank": 1, "world_size": 3, "entries": [entry(1), entry(2, "started")]},
              2: {"rank": 2, "world_size": 3, "entries": [entry(1)]}}
    line = trace.analyze(traces)
    assert line.startswith("rank(s) [2] never called allreduce #2"), line
    del traces[2]
    line = trace.analyze(traces)
    assert "did not complete everywhere" in line and "no trace at all from rank(s) [2]" in line


def test_trace_reader_compares_fingerprints_not_summaries():
    """A collective one rank ran directly ("... on cuda:0") and another queued, or two ranks
    ran on different devices: the summaries differ, the fingerprints agree."""
    from torch_ringreduce import trace

    def entry(seq, summary, fingerprint, state="completed"):
        return {"seq": seq, "p2p": False, "op": "allreduce", "summary": summary,
                "fingerprint": fingerprint, "state": state, "error": ""}

    traces = {0: {"rank": 0, "world_size": 2,
                  "entries": [entry(1, "4 x float32 SUM on cuda:0", 77)]},
              1: {"rank": 1, "world_size": 2,
                  "entries": [entry(1, "4 x Float SUM", 77)]}}
    line = trace.analyze(traces)
    assert line.startswith("all 2 ranks agree"), line
    traces[1]["entries"] = [entry(1, "4 x float32 SUM on cuda:1", 78)]
    line = trace.analyze(traces)
    assert "different collectives as #1" in line, line


def test_trace_reader_says_a_queued_collective_was_published_ahead():
    """A rank whose part went up on the host channel before it queued the call, and that then
    never waited for it: the reader says the rest waits for that rank's wait() or its worker."""
    from torch_ringreduce import trace

    def entry(state, published_ahead):
        return {"seq": 1, "p2p": False, "op": "allreduce", "summary": "4 x Float SUM",
                "fingerprint": 5, "state": state, "error": "", "published_ahead": published_ahead}

    traces = {0: {"rank": 0, "world_size": 2, "entries": [entry("queued", True)]},
              1: {"rank": 1, "world_size": 2, "entries": [entry("completed", False)]}}
    line = trace.analyze(traces)
    assert "rank 0 queued (its part published ahead" in line and "completed on rank(s) [1]" in line
    traces[0]["entries"] = [entry("queued", False)]
    assert "published ahead" not in trace.analyze(traces)


@pytest.mark.parametrize("call", ["async", "coalesced", "sync (caller's thread)",
                                  "sync over ucx", "gather_coalesced", "alltoall_uneven"])
def test_abort_fails_the_pending_collective_and_a_new_group_works(call):
    env = dict(LOOPBACK_ENV)
    if call == "sync over ucx":
        env["RINGREDUCE_SHM_BYTES"] = "0"
    form = "sync" if call.startswith("sync") else call
    results = run_world(2, trace_cases.abort_and_start_again, form, env=env,
                        timeout=120, exit_path=True)
    error = results[0]["error"]
    op = {"coalesced": "allreduce_coalesced",
          "gather_coalesced": "all_gather_into_tensor_coalesced",
          "alltoall_uneven": "all_to_all_single"}.get(call, "allreduce")
    assert error is not None and f"{op} #2 on rank 0" in error, error
    assert "was aborted on rank 0 (ProcessGroup.abort())" in error, error
    # The group's timeout is 60 s and rank 1 joins only after abort()
    # returned: the abort ended the wait, and abort() itself did not wait
    # for the collective to end.
    assert results[0]["seconds"] < 30, results[0]
    assert results[0]["abort_seconds"] is not None and results[0]["abort_seconds"] < 30
    assert results[0]["aborter_done"]
    # Rank 1 joined only after the abort: told that rank 0 gave up, and why.
    error = results[1]["error"]
    assert error is not None and "allreduce #2 on rank 1" in error, error
    assert "rank 0 gave up on the group" in error and "aborted" in error, error
    for result in results:
        assert result["after"] == [3.0] * 4


@pytest.mark.parametrize("path", ["host channel", "ucx"])
def test_a_timeout_on_either_path_writes_the_trace_that_names_the_missing_rank(tmp_path, path):
    """Every failure does what a queued one does: the flight recorder of each
    failed rank lands in RINGREDUCE_TRACE_DIR, and the reader names the rank
    that never called the collective (a blocking small allreduce runs on the
    caller's thread through the host channel; with it off, it is queued)."""
    from torch_ringreduce import trace

    env = dict(LOOPBACK_ENV, RINGREDUCE_TRACE_DIR=str(tmp_path))
    if path == "ucx":
        env["RINGREDUCE_SHM_BYTES"] = "0"
    results = run_world(3, trace_cases.one_rank_skips_an_allreduce, env=env, timeout=120)
    for rank in (0, 1):
        error = results[rank]["error"]
        assert error is not None and "allreduce #2" in error and f"on rank {rank}" in error, error
    files = sorted(p.name for p in tmp_path.iterdir())
    assert any(f.endswith("_rank0.json") for f in files), files
    assert any(f.endswith("_rank1.json") for f in files), files
    traces = next(iter(trace.load(str(tmp_path)).values()))
    line = trace.analyze(traces)
    # Rank 2 wrote none (it never failed): it is the one named.
    assert "rank(s) [2]" in line and "#2" in line, line
