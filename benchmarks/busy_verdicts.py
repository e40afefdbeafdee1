"""Several busy_cores.py runs judged together against issue 53's busy-cores
target: at K = 2, 4 and 8 busy processes, every op and size at least gloo's
figure and at least the UCX path's own (the "ucx" group: ringreduce without
the host channel).

    python3 benchmarks/busy_verdicts.py RUN [RUN ...] [--list | --all]

Why several runs: a cell of one run is the p50 of a hundred-odd ops on two
cores that K other processes also want, and one time slice more or less for
either group moves it 2-10x. On the EPYC Zen 3 of 2026-12-07 eight runs of
the same command put 40-45 of 45 loaded cells at most the UCX path's p50,
and no cell missed in more than four of the eight. A single run's count
says how the scheduler fell that minute; the median over runs says which
group is the faster.

So each cell (op, busy processes, bytes) is judged on the median over the
runs of its per-run ratios:
- ringreduce's p50 over the UCX path's p50 at most 1;
- gloo's p50 and p90 over ringreduce's at least 1, where gloo ran.
A loaded cell (K > 0) that passes both is met, else missed; quiet cells
(K = 0) are printed with --all, not judged (the target names loaded ones).
Cells missing from some runs are judged on the runs that have them.
"""
import argparse
import collections
import re
import statistics
import sys

RING, UCX, GLOO = "ringreduce", "ucx", "gloo"
HEADER = re.compile(r"^# (\S+), (\d+) busy processes")
COLUMNS = re.compile(r"^#\s+bytes \|")


def parse(lines):
    """{(op, busy, bytes): {group: (p50, p90)}} from one run's printed tables."""
    cells, op, busy, names = {}, None, None, []
    for line in lines:
        match = HEADER.match(line)
        if match:
            op, busy, names = match.group(1), int(match.group(2)), []
            continue
        if COLUMNS.match(line):
            # "# bytes | ringreduce p50 p90 | ucx p50 p90 | ratios": the groups in order.
            names = [part.split()[0] for part in line.split("|")[1:] if part.strip().endswith("p90")
                     and len(part.split()) == 3]
            continue
        if op is None or not names:
            continue
        parts = [p.strip() for p in line.split("|")]
        if not parts[0].isdigit():
            continue
        values = {}
        for name, part in zip(names, parts[1:1 + len(names)]):
            numbers = part.split()
            if len(numbers) == 2:
                values[name] = (float(numbers[0]), float(numbers[1]))
        if values:
            cells[(op, busy, int(parts[0]))] = values
    return cells


def ratios(runs):
    """{cell: {"ucx": [ring p50 / ucx p50 per run], "gloo50": [...], "gloo90": [...]}}."""
    out = collections.defaultdict(lambda: collections.defaultdict(list))
    for cells in runs:
        for key, values in cells.items():
            ring = values.get(RING)
            if ring is None:
                continue
            if UCX in values:
                out[key]["ucx"].append(ring[0] / values[UCX][0])
            if GLOO in values:
                out[key]["gloo50"].append(values[GLOO][0] / ring[0])
                out[key]["gloo90"].append(values[GLOO][1] / ring[1])
    return out


def verdict(per_run):
    """("met" or "missed", what missed) for one cell's per-run ratios."""
    missed = []
    if per_run.get("ucx") and statistics.median(per_run["ucx"]) > 1:
        missed.append("above the UCX path's p50")
    for key, what in (("gloo50", "gloo's p50"), ("gloo90", "gloo's p90")):
        if per_run.get(key) and statistics.median(per_run[key]) < 1:
            missed.append(f"above {what}")
    return ("missed" if missed else "met"), ", ".join(missed)


def describe(key, per_run):
    op, busy, size = key
    parts = [f"{op:34s} {busy:2d} busy {size:>9d} B"]
    if per_run.get("ucx"):
        values = per_run["ucx"]
        above = sum(v > 1 for v in values)
        parts.append(f"ring/ucx p50 median {statistics.median(values):.2f} "
                     f"({min(values):.2f}-{max(values):.2f}, above 1 in {above} of {len(values)})")
    if per_run.get("gloo50"):
        parts.append(f"gloo/ring p50 {statistics.median(per_run['gloo50']):.2f}x "
                     f"p90 {statistics.median(per_run['gloo90']):.2f}x")
    return "  ".join(parts)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", help="busy_cores.py outputs, one run each")
    shown = parser.add_mutually_exclusive_group()
    shown.add_argument("--list", action="store_true", help="every loaded cell missed")
    shown.add_argument("--all", action="store_true", help="every cell, quiet ones too")
    args = parser.parse_args(argv)
    runs = []
    for path in args.runs:
        with open(path, errors="replace") as f:
            runs.append(parse(f))
    per_cell = ratios(runs)
    loaded = sorted(k for k in per_cell if k[1] > 0)
    verdicts = {k: verdict(per_cell[k]) for k in loaded}
    met = sum(v[0] == "met" for v in verdicts.values())
    # What each run alone would have said: its loaded cells at most the UCX path's p50.
    single = [sum(v[RING][0] <= v[UCX][0] for k, v in cells.items() if k[1] > 0 and UCX in v
                  and RING in v) for cells in runs]
    print(f"# {len(runs)} runs, {len(loaded)} loaded cells: met {met}, missed {len(loaded) - met} "
          f"(medians over the runs); each run alone at most the UCX path's p50 in "
          f"{', '.join(map(str, single))}")
    for key in sorted(per_cell):
        if key in verdicts and verdicts[key][0] == "missed" and (args.list or args.all):
            print(f"missed  {describe(key, per_cell[key])}  [{verdicts[key][1]}]")
        elif args.all:
            state = verdicts[key][0] if key in verdicts else "quiet"
            print(f"{state:7s} {describe(key, per_cell[key])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
