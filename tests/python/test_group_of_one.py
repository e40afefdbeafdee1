"""A process group of one rank: collectives complete on the caller's thread,
with the results, errors, sequence numbers, futures, hooks and trace entries
of a group of any size."""
import json

import pytest

from group_of_one_cases import (allreduce_alone, allreduce_alone_behind_queued_work,
                                calls_after_abort_alone, ddp_alone, every_collective_alone, hooks_and_trace_alone,
                                other_collectives_alone)
from multiproc import run_world


def test_allreduce_of_one_rank_is_its_input_for_every_op():
    [r] = run_world(1, allreduce_alone, timeout=120)
    assert r["values"] == {name: True for name in r["values"]}, r["values"]
    assert len(r["values"]) == 9
    assert r["completed_at_once"]
    assert r["seq_steps"] == [1] * 9
    assert r["futures"] == [True] * 9
    assert r["then"]


@pytest.mark.parametrize("case, words", [
    ("avg_bool", ["allreduce", "avg", "bool"]),
    ("band_float", ["allreduce", "band", "float"]),
    ("expanded", ["allreduce", "overlapping"]),
])
def test_bad_input_raises_at_world_one_as_at_any_size(case, words):
    [r] = run_world(1, allreduce_alone, timeout=120)
    message = r["errors"][case]
    assert message is not None, f"{case} did not raise"
    for word in words:
        assert word in message.lower(), message


def test_gather_scatter_and_broadcast_of_one_rank():
    [r] = run_world(1, other_collectives_alone, timeout=120)
    for key in ("gather", "scatter", "scatter_premul", "broadcast", "input_kept",
                "completed_at_once"):
        assert r[key] is True, (key, r)
    assert r["seq_steps"] == 4
    assert r["wrong_size"] is not None and "all_gather_into_tensor" in r["wrong_size"]


def test_every_other_collective_of_one_rank_completes_as_it_returns():
    [r] = run_world(1, every_collective_alone, timeout=120)
    assert r["values"] == {name: True for name in r["values"]}, r["values"]
    assert len(r["values"]) == 21
    assert r["at_once"] == {name: True for name in r["at_once"]}, r["at_once"]
    assert r["steps"] == {name: 1 for name in r["steps"]}, r["steps"]
    # Sizes that differ are the queued form's error, naming the op.
    for op in ("all_to_all_single", "all_to_all"):
        message = r["errors"][f"{op}_sizes"]
        assert message is not None and f"{op}:" in message and "24 bytes" in message, message


def test_group_of_one_refuses_every_form_after_an_abort():
    [errors] = run_world(1, calls_after_abort_alone, timeout=120)
    for op, message in errors.items():
        assert message is not None, f"{op} ran after the abort"
        assert op.replace("_", "") in message.replace("_", "") and "shut down" in message, message


def test_group_of_one_waits_for_queued_work_and_coalesces():
    [r] = run_world(1, allreduce_alone_behind_queued_work, timeout=120)
    assert r["ordered"]
    assert r["coalesced"]
    assert r["after_destroy"] is not None


def test_group_of_one_reports_to_hooks_and_trace():
    [r] = run_world(1, hooks_and_trace_alone, timeout=120)
    assert [seq for _, seq in r["seen"]] == [1, 2, 3]
    # What `python -m torch_ringreduce.info` reports of its CUDA paths.
    assert r["paths"].startswith("a group of one"), r["paths"]
    assert all("ALLREDUCE" in op for op, _ in r["seen"])
    entries = json.loads(r["json"])["entries"]
    allreduces = [e for e in entries if e["op"] == "allreduce"]
    assert [e["seq"] for e in allreduces] == [1, 2, 3]
    assert all(e["state"] == "completed" for e in allreduces)
    assert all("16" in e["summary"] and "float" in e["summary"].lower() and "SUM" in e["summary"]
               for e in allreduces), allreduces


def test_ddp_of_one_rank_matches_gloo_bit_for_bit():
    [ours] = run_world(1, ddp_alone, "ringreduce", timeout=120)
    [gloo] = run_world(1, ddp_alone, "gloo", timeout=120)
    assert len(ours) == len(gloo) == 4
    for a, b in zip(ours, gloo):
        assert a.equal(b)
