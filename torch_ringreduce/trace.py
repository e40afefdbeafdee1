"""Reads the flight-recorder files of every rank and says what went wrong first.

    python -m torch_ringreduce.trace DIR [--group NAME] [--verbose]

Each rank of a ringreduce group keeps its last operations (RINGREDUCE_TRACE_BUFFER_SIZE,
default 2000). With RINGREDUCE_TRACE_DIR set, a rank whose group times out, loses a
peer or is aborted writes them to DIR/ringreduce_trace_<group>_rank<r>.json;
`torch_ringreduce.dump_trace()` writes them on demand. Collectives carry the same
sequence number on every rank, so comparing the files tells:
- which rank never reached a collective the others were waiting in (behind, stuck
  before it, or dead: no file at all);
- which ranks called different collectives under one sequence number;
- which collective some ranks finished and others did not.
"""
import argparse
import glob
import json
import os
import re
import sys

FILE_PATTERN = re.compile(r"ringreduce_trace_(.*)_rank(\d+)\.json$")


def load(directory):
    """{group: {rank: trace}} from the files in `directory`."""
    groups = {}
    for path in sorted(glob.glob(os.path.join(directory, "ringreduce_trace_*_rank*.json"))):
        with open(path) as f:
            trace = json.load(f)
        groups.setdefault(trace.get("group", FILE_PATTERN.search(path).group(1)), {})[
            trace["rank"]] = trace
    return groups


def _describe(entry):
    return f"{entry['op']} #{entry['seq']} ({entry['summary']})"


def _aside(entry):
    """What an unfinished entry adds to its state: its error, or that its rank's first turn was
    up on the host channel before it was queued (what is left is this rank's own wait(), or its
    worker; where that turn was its whole part, its peers needed nothing more of it)."""
    if entry["error"]:
        return f" ({entry['error'][:160]})"
    if entry.get("published_ahead"):
        return " (its part published ahead: the rest waits for this rank's wait() or its worker)"
    return ""


def _identity(entry):
    """What must agree across ranks: the op and its fingerprint (alike on every rank whether
    it ran queued or directly, on whichever device), or its summary in files without one."""
    return entry["op"], entry.get("fingerprint") or entry["summary"]


def analyze(traces):
    """One line naming what went wrong first in one group, from its ranks' traces."""
    if not traces:
        return "no trace files"
    world = max(t["world_size"] for t in traces.values())
    missing = sorted(set(range(world)) - set(traces))
    collectives = {rank: {e["seq"]: e for e in t["entries"] if not e["p2p"]}
                   for rank, t in traces.items()}
    # Only the sequence numbers every file still covers can be compared.
    lows = [min(c) for c in collectives.values() if c]
    first_common = max(lows) if lows else 1
    all_seqs = sorted({s for c in collectives.values() for s in c if s >= first_common})
    for seq in all_seqs:
        present = {r: c[seq] for r, c in collectives.items() if seq in c}
        absent = sorted(r for r in collectives if seq not in collectives[r])
        kinds = {_identity(e) for e in present.values()}
        if len(kinds) > 1:
            calls = "; ".join(f"rank {r}: {_describe(e)}" for r, e in sorted(present.items()))
            return f"ranks called different collectives as #{seq}: {calls}"
        example = next(iter(present.values()))
        if absent:
            lasts = ", ".join(
                f"rank {r} last issued #{max(collectives[r]) if collectives[r] else 0}"
                for r in absent)
            return (f"rank(s) {absent} never called {_describe(example)}, which rank(s) "
                    f"{sorted(present)} waited in ({lasts})"
                    + (f"; no trace at all from rank(s) {missing} (dead, or never dumped)"
                       if missing else ""))
        unfinished = {r: e for r, e in present.items() if e["state"] != "completed"}
        if unfinished:
            done = sorted(r for r in present if r not in unfinished)
            states = ", ".join(f"rank {r} {e['state']}" + _aside(e)
                               for r, e in sorted(unfinished.items()))
            head = f"{_describe(example)} did not complete everywhere: {states}"
            if done:
                head += f"; completed on rank(s) {done}"
            if missing:
                head += f"; no trace at all from rank(s) {missing} (dead, or never dumped)"
            return head
    if missing:
        return (f"no trace from rank(s) {missing} (dead, or never dumped); the others agree up "
                f"to #{all_seqs[-1] if all_seqs else 0}")
    return f"all {len(traces)} ranks agree and completed every collective up to " \
           f"#{all_seqs[-1] if all_seqs else 0}"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("directory")
    parser.add_argument("--group", help="only this group (default: every group found)")
    parser.add_argument("--verbose", action="store_true",
                        help="also print each rank's reason and last entries")
    args = parser.parse_args(argv)
    groups = load(args.directory)
    if args.group is not None:
        groups = {g: t for g, t in groups.items() if g == args.group}
    if not groups:
        print(f"no ringreduce trace files in {args.directory}")
        return 1
    for group, traces in sorted(groups.items()):
        print(f"group {group!r}: {analyze(traces)}")
        if args.verbose:
            for rank, trace in sorted(traces.items()):
                print(f"  rank {rank}: {trace['reason']}")
                for entry in trace["entries"][-3:]:
                    print(f"    {_describe(entry)}: {entry['state']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
