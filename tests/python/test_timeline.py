"""RINGREDUCE_TIMELINE: each rank's Chrome trace of its collectives and their
phases, and the merge of the ranks' files."""
import json

from multiproc import LOOPBACK_ENV, run_world
from torch_ringreduce import timeline
import timeline_cases

# Times are microseconds written with three decimals; allow for the rounding.
EPS = 0.01


def _load(path):
    with open(path) as f:
        events = json.load(f)  # complete JSON after destroy_process_group
    assert isinstance(events, list)
    return events


def _check_rank(events, rank, ran):
    names = [e["args"]["name"] for e in events
             if e["ph"] == "M" and e["name"] == "process_name"]
    assert names == [f"rank {rank}"]
    ops = [e for e in events if e["ph"] == "X" and e["cat"] == "collective"]
    phases = [e for e in events if e["ph"] == "X" and e["cat"] == "phase"]
    assert all(e["pid"] == rank for e in ops + phases)

    # One event per collective, in the order each group ran them, numbered from 1.
    assert [(e["args"]["group"], e["name"], e["args"]["bytes"], e["args"]["dtype"])
            for e in ops] == [tuple(r) for r in ran]
    seqs = {}
    for e in ops:
        assert e["args"]["name"] == e["name"]
        seqs.setdefault(e["args"]["group"], []).append(e["args"]["seq"])
    world, pair = ran[0][0], ran[-2][0]
    assert seqs[pair] == [1]
    assert seqs[world] == list(range(1, 8)) + [1]  # 7 ops, then the second default group

    # Every phase lies inside exactly one collective on its row, and each
    # collective ran its algorithm ("transfer").
    inside = {id(op): [] for op in ops}
    for ph in phases:
        owners = [op for op in ops if op["tid"] == ph["tid"] and op["ts"] - EPS <= ph["ts"]
                  and ph["ts"] + ph["dur"] <= op["ts"] + op["dur"] + EPS]
        assert len(owners) == 1, ph
        inside[id(owners[0])].append(ph["name"])
    for op in ops:
        assert "transfer" in inside[id(op)], op
        assert set(inside[id(op)]) <= {"queued", "transfer", "waiting for peers", "reduce",
                                       "copy in", "copy out"}
        assert op["args"]["phase_us"]["transfer"] > 0
    assert "reduce" in inside[id(ops[0])]  # the 4 MiB allreduce
    assert ops[0]["args"]["phase_us"]["reduce"] > 0

    # The phases of one collective do not overlap, except those nested in
    # "transfer", which do not overlap each other.
    for op in ops:
        mine = sorted((ph for ph in phases if ph["tid"] == op["tid"]
                       and op["ts"] - EPS <= ph["ts"] <= op["ts"] + op["dur"]),
                      key=lambda ph: ph["ts"])
        top = [ph for ph in mine if ph["name"] != "transfer"
               and not any(t["name"] == "transfer" and t["ts"] - EPS <= ph["ts"]
                           and ph["ts"] + ph["dur"] <= t["ts"] + t["dur"] + EPS for t in mine)]
        nested = [ph for ph in mine if ph not in top and ph["name"] != "transfer"]
        for spans in (top, nested):
            for a, b in zip(spans, spans[1:]):
                assert a["ts"] + a["dur"] <= b["ts"] + EPS, (a, b)

    # Slices of one row never overlap: the queued collectives took rows of their own.
    rows = {}
    for op in ops:
        rows.setdefault(op["tid"], []).append(op)
    for row in rows.values():
        row.sort(key=lambda e: e["ts"])
        for a, b in zip(row, row[1:]):
            assert a["ts"] + a["dur"] <= b["ts"] + EPS, (a, b)
    if rank == 0:  # its three async allreduces were queued while the first waited
        assert len({ops[i]["tid"] for i in (4, 5, 6)}) == 3
    thread_names = {e["tid"]: e["args"]["name"] for e in events
                    if e["ph"] == "M" and e["name"] == "thread_name"}
    assert set(rows) <= set(thread_names)
    assert thread_names[ops[0]["tid"]] == f"group {world}"


def test_every_rank_writes_its_collectives_and_phases_and_the_files_merge(tmp_path, capsys):
    env = dict(LOOPBACK_ENV, RINGREDUCE_TIMELINE=str(tmp_path / "timeline.{rank}.json"))
    results = run_world(2, timeline_cases.several_collectives, env=env, timeout=120)
    paths = [str(tmp_path / f"timeline.{rank}.json") for rank in range(2)]
    counts = []
    for rank, path in enumerate(paths):
        events = _load(path)
        _check_rank(events, rank, results[rank])
        counts.append(len(events))

    out = tmp_path / "merged.json"
    assert timeline.main(["merge", *paths, "-o", str(out)]) == 0
    assert "from 2 ranks" in capsys.readouterr().out
    merged = json.loads(out.read_text())["traceEvents"]
    ops = [(e["pid"], e["args"]["seq"]) for e in merged if e.get("cat") == "collective"]
    assert sorted(ops) == sorted((r, s) for r in range(2) for s in [1, 2, 3, 4, 5, 6, 7, 1, 1])

