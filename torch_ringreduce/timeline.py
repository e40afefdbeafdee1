"""python -m torch_ringreduce.timeline merge FILES -o OUT: one Chrome trace of
all ranks, for chrome://tracing or https://ui.perfetto.dev.

Each input is one rank's Chrome trace JSON: an object with "traceEvents", or
a bare array of events, possibly unterminated (a process that died before
flushing the closing bracket leaves a valid prefix, which the format allows).
Every event of a file gets that rank as its process id, and each rank gets a
"rank N" process name, so the ranks appear as rows in rank order. The rank
of a file is the N of a "rank N" process name inside it, else the last number
in its file name (the {rank} of RINGREDUCE_TIMELINE), else its position in
the argument list. Timestamps are kept: ranks on one host share its clock;
across hosts the traces are as far apart as the hosts' clocks.
"""
import argparse
import json
import os
import re
import sys


def load_events(path):
    with open(path) as f:
        text = f.read()
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        body = text.strip().rstrip(",")
        if not body.startswith("["):
            raise ValueError(f"{path}: not a Chrome trace (neither JSON nor an event array)")
        data = json.loads(body + ("" if body.endswith("]") else "]"))
    events = data.get("traceEvents", []) if isinstance(data, dict) else data
    if not isinstance(events, list):
        raise ValueError(f"{path}: traceEvents is not a list")
    return [e for e in events if isinstance(e, dict)]


def rank_of(path, events, position):
    for e in events:
        if e.get("ph") == "M" and e.get("name") == "process_name":
            match = re.fullmatch(r"rank (\d+)", str(e.get("args", {}).get("name", "")))
            if match:
                return int(match.group(1))
    numbers = re.findall(r"\d+", os.path.basename(path))
    return int(numbers[-1]) if numbers else position


def merge(paths):
    """The merged trace (a dict) of the per-rank files."""
    merged, seen = [], {}
    for position, path in enumerate(paths):
        events = load_events(path)
        rank = rank_of(path, events, position)
        if rank in seen:
            raise ValueError(f"{path} and {seen[rank]} are both rank {rank}")
        seen[rank] = path
        merged.append({"ph": "M", "name": "process_name", "pid": rank, "tid": 0,
                       "args": {"name": f"rank {rank}"}})
        merged.append({"ph": "M", "name": "process_sort_index", "pid": rank, "tid": 0,
                       "args": {"sort_index": rank}})
        for e in events:
            if e.get("ph") == "M" and e.get("name") in ("process_name", "process_sort_index"):
                continue
            merged.append(dict(e, pid=rank))
    merged.sort(key=lambda e: (e.get("ph") != "M", e.get("ts", 0)))
    return {"traceEvents": merged, "displayTimeUnit": "ms"}


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m torch_ringreduce.timeline",
                                     description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    merge_cmd = sub.add_parser("merge", help="merge per-rank traces into one")
    merge_cmd.add_argument("files", nargs="+")
    merge_cmd.add_argument("-o", "--output", required=True)
    args = parser.parse_args(argv)
    try:
        trace = merge(args.files)
    except (OSError, ValueError) as error:
        print(f"timeline merge: {error}", file=sys.stderr)
        return 1
    with open(args.output, "w") as f:
        json.dump(trace, f)
    ranks = sum(1 for e in trace["traceEvents"] if e.get("name") == "process_name")
    print(f"{args.output}: {len(trace['traceEvents'])} events from {ranks} ranks")
    return 0


if __name__ == "__main__":
    sys.exit(main())
