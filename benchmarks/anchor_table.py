"""The table RESULTS.md shows of several collective_anchors.py runs: one row per
op and size, each column the runs' p50s side by side ("run 1 , run 2").

    python3 benchmarks/anchor_table.py RUN_1 [RUN_2 ...] [--pattern back-to-back]

Columns: Open MPI's whole call, ringreduce's, torch's floor (the fake
backend), floor+sync, floor+mpi, gloo (where the runs had them), (ring - floor)
/ MPI's call, ring / MPI's call, and each run's verdict against issue 53's
targets (anchor_verdicts.py: met, floor+sync-bound, floor+mpi-bound,
dispatch-bound or missed). Then,
per run, the count of each verdict over every pattern in it.
"""
import argparse
import collections
import sys

from anchor_verdicts import POINT_TO_POINT, VERDICTS, parse, verdict

SHORT = dict(zip(VERDICTS, ("met", "f+s", "f+m", "disp", "MISS")))


def number(x):
    if x is None:
        return "-"
    return f"{x:.2f}" if abs(x) < 10 else f"{x:.1f}" if abs(x) < 1000 else f"{x:.0f}"


def joined(values):
    return " , ".join(number(v) for v in values)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", help="what collective_anchors.py printed, per run")
    parser.add_argument("--pattern", default="back-to-back")
    args = parser.parse_args()
    runs = []
    for path in args.runs:
        with open(path, errors="replace") as f:
            runs.append(parse(f))
    keys = sorted({k for cells in runs for k in cells if k[1] == args.pattern},
                  key=lambda k: list(runs[0]).index(k) if k in runs[0] else 10**9)
    print("| op | bytes | MPI | ringreduce | floor | floor+sync | floor+mpi | gloo "
          "| (ring - floor) / MPI | ring / MPI | verdicts |")
    print("|" + "---|" * 11)
    for key in keys:
        op, _, size = key
        cells = [r.get(key, {}) for r in runs]
        column = {name: [c.get(name) for c in cells]
                  for name in ("mpi", "ringreduce", "floor", "floor+sync", "floor+mpi", "gloo")}
        above = [(c["ringreduce"] - c["floor"]) / c["mpi"] if {"ringreduce", "floor", "mpi"} <= c.keys()
                 else None for c in cells]
        whole = [c["ringreduce"] / c["mpi"] if {"ringreduce", "mpi"} <= c.keys() else None
                 for c in cells]
        verdicts = [SHORT[verdict(r, key)[0]] if op not in POINT_TO_POINT and key in r
                    and {"mpi", "ringreduce"} <= r[key].keys() else "-" for r in runs]
        print(f"| {op} | {'-' if size is None else size_name(size)} | " +
              " | ".join(joined(column[n]) for n in column) +
              f" | {joined(above)} | {joined(whole)} | {' , '.join(verdicts)} |")
    for n, cells in enumerate(runs, 1):
        counted = collections.Counter(
            verdict(cells, key)[0] for key in cells
            if key[0] not in POINT_TO_POINT and {"mpi", "ringreduce"} <= cells[key].keys())
        print(f"\nrun {n}: {sum(counted.values())} cells, " + ", ".join(
            f"{name} {counted[name]}" for name in SHORT))
    return 0


def size_name(size):
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= scale and size % scale == 0:
            return f"{size // scale} {unit}"
    return f"{size} B"


if __name__ == "__main__":
    sys.exit(main())
