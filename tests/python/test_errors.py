"""Bad input raises a clear exception and leaves the group usable; a missing
rank produces a timeout error naming the op, its sequence number and ranks."""
import re
import time

import pytest

from error_cases import bad_inputs, timeout_then_fail_fast
from multiproc import run_world


@pytest.mark.parametrize("world_size", [1, 2])
def test_bad_input_raises_clearly_and_group_survives(world_size):
    for rank, result in enumerate(run_world(world_size, bad_inputs, timeout=120)):
        assert result["problems"] == {}, f"rank {rank}: {result['problems']}"
        assert result["usable"], f"rank {rank}: group unusable after bad input"


def test_missing_rank_times_out_with_op_seq_and_ranks():
    result = run_world(2, timeout_then_fail_fast, timeout=120)[0]
    kind, message = result["wait"]
    assert kind == "DistBackendError", result["wait"]
    # "allreduce #2": the second collective of the group.
    for needle in ("allreduce #2", "timed out after 2000 ms", "on rank 0", "rank 1"):
        assert needle in message, message
    # The words torch's own tests and users' tooling look for in a timeout.
    assert re.search(" (Timed out|closed|timeout) ", message), message
    # Bounded by the group timeout, not hung (generous upper bound for CI).
    assert 1.9 <= result["elapsed"] < 30, result["elapsed"]
    assert result["future"][0] == "DistBackendError" and "allreduce #2" in result["future"][1]
    assert result["future_after_the_end"][0] == "DistBackendError", result["future_after_the_end"]
    kind, message = result["later"]
    assert kind == "DistBackendError" and "unusable after an earlier failure" in message, message
    assert "allreduce #3" in message and "allreduce #2" in message, message
    assert result["later_elapsed"] < 10


def test_mismatched_collectives_raise_on_every_rank():
    from error_cases import mismatched_collectives

    results = run_world(3, mismatched_collectives, env={"RINGREDUCE_CHECK_COLLECTIVES": "1"},
                        timeout=120)
    expected_words = {"op": ["ALLREDUCE", "BROADCAST"], "shape": ["8 elements", "9 elements"],
                      "dtype": ["Float", "Double"], "reduce op": ["SUM", "MAX"],
                      "root": ["root 0", "root 1"]}
    for rank, r in enumerate(results):
        assert r["usable"], f"rank {rank}: group unusable after mismatches"
        for case, words in expected_words.items():
            kind, message = r["seen"][case]
            assert kind == "ValueError", (rank, case, r["seen"][case])
            assert "mismatched collectives" in message and "rank 2 calls" in message, message
            for word in words:
                assert word in message, (case, message)


def test_torch_distributed_debug_detail_wraps_ringreduce_and_catches_mismatches():
    """DETAIL makes torch wrap the group (it needs our sequence numbers); its
    wrapper reports op/shape/dtype mismatches through a gloo helper group, and
    ringreduce's own check (on under DETAIL) the reduce op and root ones."""
    from error_cases import mismatched_collectives

    results = run_world(3, mismatched_collectives, env={"TORCH_DISTRIBUTED_DEBUG": "DETAIL"},
                        timeout=120)
    for rank, r in enumerate(results):
        assert r["usable"], f"rank {rank}: group unusable after mismatches"
        for case, outcome in r["seen"].items():
            assert outcome != "no error", (rank, case)
            assert "mismatch" in outcome[1].lower(), (rank, case, outcome)


def test_overlapping_outputs_are_refused():
    from error_cases import overlapping_outputs

    for rank, result in enumerate(run_world(2, overlapping_outputs, timeout=120)):
        assert result["problems"] == {}, f"rank {rank}: {result['problems']}"
        assert result["usable"]


def test_lists_may_share_a_storage_where_nothing_is_overwritten():
    from error_cases import lists_that_share_storage

    for rank, wrong in enumerate(run_world(3, lists_that_share_storage, timeout=120)):
        assert wrong == {}, f"rank {rank}: {wrong}"


def test_strided_output_views_are_refused_exactly_when_they_share_an_element():
    from error_cases import strided_output_lists

    for rank, result in enumerate(run_world(2, strided_output_lists, 300, timeout=180)):
        assert result["disagreements"] == [], f"rank {rank}: {result['disagreements'][:5]}"
        assert result["refused"] > 30 and result["accepted"] > 30, result


def test_mismatched_collectives_never_exchange_data_even_without_the_check():
    from error_cases import mismatches_without_the_check

    results = run_world(3, mismatches_without_the_check, timeout=180)
    names = ("is in a different collective", "called different collectives")
    for case in (c for c in results[0] if not c.endswith(" then")):
        outcomes = [seen[case] for seen in results]
        then = [seen[case + " then"] for seen in results]
        # Every rank raises, at the latest on its next collective, none
        # returns the other collective's data, and each names the mismatch:
        # directly, or through the abort of the rank that saw it ("rank r gave
        # up on the group: ...").
        for rank, (o, t) in enumerate(zip(outcomes, then)):
            first = o if o != "no error" else t
            assert first != "no error" and first[0] == "DistBackendError", (case, rank, o, t)
            assert any(n in first[1] for n in names), (case, rank, first)
            assert t != "no error", (case, rank, t)  # the group stays unusable
        if case != "root":
            assert all(o != "no error" for o in outcomes), (case, outcomes)


@pytest.mark.parametrize("transport,call", [("shm", "all_reduce"), ("tcp", "all_reduce"),
                                            ("shm", "recv")])
def test_a_call_that_needs_a_rank_that_left_fails_at_once_naming_it(transport, call):
    from error_cases import rank_left_before_a_call
    from multiproc import TRANSPORTS

    results = run_world(3, rank_left_before_a_call, call, env=TRANSPORTS[transport], timeout=120)
    callers = (0, 1) if call == "all_reduce" else (0,)
    for rank in callers:
        r = results[rank]
        kind, message = r["outcome"]
        assert kind == "DistBackendError", r
        assert f"on rank {rank}" in message and "rank 2 has left the group" in message, message
        # Not the group's 60 s timeout: told by the goodbye.
        assert r["elapsed"] < 30, r


def test_a_peer_that_left_the_group_is_named_not_the_transport_error():
    from error_cases import peer_that_left

    seen = run_world(2, peer_that_left, timeout=120)[0]
    for name in ("send", "all_reduce"):
        assert seen[name] != "no error", (name, seen)
        kind, message = seen[name]
        assert kind == "DistBackendError", (name, seen[name])
        # Said at once: a wait until the group's timeout would say "timed out".
        assert "rank 1 has left the group" in message and "on rank 0" in message, message
    assert "send p2p#1" in seen["send"][1] and "allreduce #1" in seen["all_reduce"][1], seen


def test_ranks_with_different_path_settings_are_refused_at_once_naming_them():
    from error_cases import settings_differ_between_ranks

    start = time.monotonic()
    results = run_world(2, settings_differ_between_ranks, timeout=120)
    for result in results:
        error = result["error"]
        assert error is not None, result
        assert "RINGREDUCE_ALGORITHM differs between ranks: rank 0 has auto, rank 1 has ring" in \
            error, error
        assert result["type"] == "ValueError", result
    # The group's timeout is 60 s: the refusal did not wait for it.
    assert time.monotonic() - start < 60


def test_ranks_on_different_nodes_with_different_settings_are_refused_when_the_group_is_made():
    from error_cases import settings_differ_across_nodes

    start = time.monotonic()
    results = run_world(2, settings_differ_across_nodes, timeout=120)
    for rank, result in enumerate(results):
        assert result["at"] == "init_process_group", result
        assert result["type"] == "ValueError", result
        assert (f"rank {rank}: RINGREDUCE_SEGMENT_BYTES differs between ranks: rank 0 has "
                "262144, rank 1 has 65536; every rank of a group must use the same") in \
            result["error"], result
    assert time.monotonic() - start < 60  # refused at once, not after the group's timeout


def test_a_shared_memory_segment_ucx_cannot_carry_is_refused_naming_the_variable():
    from error_cases import ucx_segment_too_large

    start = time.monotonic()
    results = run_world(2, ucx_segment_too_large, env={"UCX_MM_SEG_SIZE": "64k"}, timeout=120)
    for result in results:
        assert result["type"] == "ValueError", result
        assert "UCX_MM_SEG_SIZE=64k" in result["error"] and "at most 65535" in result["error"], \
            result
    assert time.monotonic() - start < 60  # refused at once, not after the group's timeout


def test_such_a_segment_set_in_a_ucx_conf_file_is_refused_too(tmp_path):
    """UCX reads its settings from ucx.conf files as well as the environment;
    the refusal asks UCX what it will use, so a file's setting is caught."""
    from error_cases import ucx_segment_too_large

    (tmp_path / "ucx.conf").write_text("[global]\nUCX_MM_SEG_SIZE = 64k\n")
    start = time.monotonic()
    results = run_world(2, ucx_segment_too_large, env={"UCX_CONFIG_DIR": str(tmp_path)},
                        timeout=120)
    for result in results:
        assert result["type"] == "ValueError", result
        assert "segments of 64K" in result["error"] and "ucx.conf" in result["error"], result
    assert time.monotonic() - start < 60
