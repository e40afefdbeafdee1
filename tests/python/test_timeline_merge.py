"""python -m torch_ringreduce.timeline merge: per-rank Chrome traces into one."""
import json

from torch_ringreduce import timeline


def _event(name, ts, pid=4242):
    return {"ph": "X", "name": name, "ts": ts, "dur": 5, "pid": pid, "tid": 1,
            "args": {"bytes": 64}}


def test_merge_gives_each_rank_its_row_and_keeps_every_event(tmp_path, capsys):
    # Rank 0: a complete object; rank 1: an array cut off by a crash (no "]");
    # rank 2: names itself in a process_name event, whatever its file name.
    (tmp_path / "trace.0.json").write_text(json.dumps(
        {"traceEvents": [_event("allreduce #1", 10), _event("allreduce #2", 30)]}))
    (tmp_path / "trace.1.json").write_text(
        "[" + json.dumps(_event("allreduce #1", 12)) + ",\n" + json.dumps(_event("allreduce #2", 31)) + ",\n")
    (tmp_path / "other.json").write_text(json.dumps(
        [{"ph": "M", "name": "process_name", "pid": 7, "args": {"name": "rank 2"}},
         _event("allreduce #1", 11, pid=7)]))
    out = tmp_path / "merged.json"
    code = timeline.main(["merge", str(tmp_path / "trace.0.json"), str(tmp_path / "trace.1.json"),
                          str(tmp_path / "other.json"), "-o", str(out)])
    assert code == 0
    assert "11 events from 3 ranks" in capsys.readouterr().out  # 5 spans + 2 metadata per rank
    events = json.loads(out.read_text())["traceEvents"]
    names = {e["pid"]: e["args"]["name"] for e in events if e["name"] == "process_name"}
    assert names == {0: "rank 0", 1: "rank 1", 2: "rank 2"}
    spans = sorted((e["pid"], e["name"]) for e in events if e["ph"] == "X")
    assert spans == [(0, "allreduce #1"), (0, "allreduce #2"), (1, "allreduce #1"),
                     (1, "allreduce #2"), (2, "allreduce #1")]
    timestamps = [e["ts"] for e in events if e["ph"] == "X"]
    assert timestamps == sorted(timestamps)


def test_merge_refuses_two_files_of_one_rank_and_non_traces(tmp_path, capsys):
    (tmp_path / "a.3.json").write_text(json.dumps([_event("x", 1)]))
    (tmp_path / "b.3.json").write_text(json.dumps([_event("x", 1)]))
    (tmp_path / "bad.json").write_text("hello")
    out = str(tmp_path / "m.json")
    assert timeline.main(["merge", str(tmp_path / "a.3.json"), str(tmp_path / "b.3.json"),
                          "-o", out]) == 1
    assert "both rank 3" in capsys.readouterr().err
    assert timeline.main(["merge", str(tmp_path / "bad.json"), "-o", out]) == 1
    assert "not a Chrome trace" in capsys.readouterr().err
