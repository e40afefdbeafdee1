"""Each cell of a collective_anchors.py run against issue 53's targets, and,
where a cell misses, whether torch itself puts the target out of reach.

    python3 benchmarks/anchor_verdicts.py RUN_OUTPUT [--list]

reads the run's printed tables (p50s, the slowest rank per call) and prints a
count per verdict, then (--list) every cell that is not met:

- met: at 64 B-4 KiB per rank (ring - floor) at most the peer's whole call,
  from 64 KiB ringreduce's whole call at most the peer's; the barrier's
  (ring - floor) at most twice Open MPI's. The peer is Open MPI, for
  all_reduce after compute the faster of Open MPI and DeepSpeed.
- floor+sync-bound: torch's fake backend followed by Open MPI's barrier (what
  a backend that only brought the ranks together would cost through torch)
  misses the same target on its own.
- floor+mpi-bound: at 64 B-4 KiB, where Open MPI is the peer (for all_reduce
  after compute: where it is the faster of the two), ringreduce's
  whole call is at most floor+mpi's, torch's fake backend followed by Open
  MPI's own call, timed as one (what Open MPI would cost as a backend
  reached through torch, the skew between the ranks' Python included): so
  Open MPI itself, through torch.distributed in the same run, misses the
  target ringreduce misses. (From 64 KiB the target is the whole call, and
  the fake's part of floor+mpi grows with the bytes, which a backend need
  not pay: not used there, unless the floor is the null backend, below.)
- dispatch-bound: from 64 KiB only, where the floor of the same op grows with
  the bytes (the fake backend copies an all-gather's input into every block)
  and so no longer stands for torch's own part: ringreduce's whole call less
  the same op's floor at the run's smallest size in the same pattern (torch's
  Python and dispatcher for that call, with next to no bytes) is at most the
  peer's whole call. Any backend reached through torch pays that dispatch on
  top of moving the bytes, which Open MPI moves in its whole call.
- missed: none of these.

Where the run's floor is the null backend (its header says "floor = the null
backend": collective_anchors.py --floor null, the default since 2026-12-06),
the floor moves nothing at any size and is torch's part of the same call
with the caches the caller left, which grows with the bytes the caller has
just written (torch's Python and dispatcher then miss the caches: 2.5 us
before the backend is entered at 256 KiB, 12 at 1 MiB, 25 after 2 ms of
compute, measured on the Xeon of 2026-12-06). From 64 KiB, then:
floor+mpi-bound judges those cells too (the floor's part of floor+mpi is no
longer copies a backend need not make), and dispatch-bound subtracts the
cell's own floor instead of the smallest size's.

Point-to-point (send_recv, batch_isend_irecv) is not among the issue's ops
and is left out, as are cells without an Open MPI figure.
"""
import argparse
import collections
import re
import sys

POINT_TO_POINT = {"send_recv", "batch_isend_irecv"}
# Every verdict, in the order counts print them.
VERDICTS = ("met", "floor+sync-bound", "floor+mpi-bound", "dispatch-bound", "missed")
SMALL_UP_TO = 4096
LARGE_FROM = 65536


class Cells(dict):
    """{(op, pattern, bytes or None): {library: p50}}, and whether the run's
    floor moves nothing (the null backend) at every size."""
    floor_moves_nothing = False


NULL_FLOOR_HEADER = "floor = the null backend"


def parse(lines):
    """Cells from the printed tables."""
    cells, op, columns = Cells(), None, []
    for line in lines:
        line = line.replace("\0", "")
        if line.startswith("# ") and NULL_FLOOR_HEADER in line:
            cells.floor_moves_nothing = True
        if line.startswith("## "):
            op = line[3:].split()[0]
            continue
        if op is None or line.startswith("#") or "|" not in line:
            continue
        parts = [p.strip() for p in line.split("|")]
        if parts[0].split() == ["pattern", "bytes"]:
            columns = [p.split()[0] for p in parts[1:] if p.endswith("mean")]
            continue
        first = parts[0].split()
        if len(first) != 2 or not columns:
            continue
        pattern, size = first
        values = {}
        for name, part in zip(columns, parts[1:1 + len(columns)]):
            numbers = part.split()
            if numbers and re.fullmatch(r"-?[0-9.]+", numbers[0]):
                values[name] = float(numbers[0])
        cells[(op, pattern, None if size == "-" else int(size))] = values
    return cells


def smallest_floor(cells, op, pattern):
    sized = [(size, v["floor"]) for (o, p, size), v in cells.items()
             if o == op and p == pattern and size is not None and "floor" in v]
    return min(sized)[1] if sized else None


def peer_of(op, pattern, values):
    if op == "all_reduce" and pattern == "after-compute" and "deepspeed" in values:
        return min(values["mpi"], values["deepspeed"]), "faster of mpi and deepspeed"
    return values["mpi"], "mpi"


def verdict(cells, key):
    """(verdict, ratio the target bounds, what the ratio is) for one cell."""
    op, pattern, size = key
    v = cells[key]
    ring, floor = v["ringreduce"], v.get("floor")
    synced = v.get("floor+sync")
    peer, peer_name = peer_of(op, pattern, v)
    # floor+mpi stands for the peer where the peer is Open MPI's call, also
    # where DeepSpeed was timed and is slower; not where DeepSpeed is faster.
    mpi_is_peer = peer == v["mpi"]
    if size is None:  # the barrier: its own part at most twice MPI's call
        ratio = (ring - floor) / (2 * peer)
        if ratio <= 1:
            return "met", ratio, "(ring-floor)/(2 mpi)"
        if synced is not None and (synced - floor) > 2 * peer:
            return "floor+sync-bound", ratio, "(ring-floor)/(2 mpi)"
        return "missed", ratio, "(ring-floor)/(2 mpi)"
    if size <= SMALL_UP_TO:
        ratio = (ring - floor) / peer
        if ratio <= 1:
            return "met", ratio, f"(ring-floor)/{peer_name}"
        if synced is not None and synced - floor > peer:
            return "floor+sync-bound", ratio, f"(ring-floor)/{peer_name}"
        through = v.get("floor+mpi")
        if through is not None and mpi_is_peer and ring <= through:
            return "floor+mpi-bound", ratio, f"(ring-floor)/{peer_name}"
        return "missed", ratio, f"(ring-floor)/{peer_name}"
    ratio = ring / peer
    if ratio <= 1:
        return "met", ratio, f"ring/{peer_name}"
    if synced is not None and synced > peer:
        return "floor+sync-bound", ratio, f"ring/{peer_name}"
    null_floor = getattr(cells, "floor_moves_nothing", False)
    through = v.get("floor+mpi")
    if null_floor and through is not None and mpi_is_peer and ring <= through:
        return "floor+mpi-bound", ratio, f"ring/{peer_name}"
    dispatch = floor if null_floor else smallest_floor(cells, op, pattern)
    if dispatch is not None and ring - dispatch <= peer:
        return "dispatch-bound", ratio, f"ring/{peer_name}"
    return "missed", ratio, f"ring/{peer_name}"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("output", help="what collective_anchors.py printed")
    parser.add_argument("--list", action="store_true", help="every cell not met")
    args = parser.parse_args()
    with open(args.output, errors="replace") as f:
        cells = parse(f)
    counted = collections.Counter()
    rows = []
    for key in sorted(cells, key=lambda k: (k[0], k[1], k[2] or 0)):
        op, pattern, size = key
        v = cells[key]
        if op in POINT_TO_POINT or "mpi" not in v or "ringreduce" not in v:
            continue
        name, ratio, what = verdict(cells, key)
        counted[name] += 1
        if name != "met":
            dispatch = smallest_floor(cells, op, pattern)
            rows.append((name, op, pattern, "-" if size is None else size, v.get("mpi"),
                         v.get("deepspeed"), v["ringreduce"], v.get("floor"),
                         v.get("floor+sync"), v.get("floor+mpi"), dispatch, ratio, what))
    total = sum(counted.values())
    print(f"# {total} cells: " + ", ".join(
        f"{name} {counted[name]}" for name in VERDICTS))
    if args.list and rows:
        print("| verdict | op | pattern | bytes | mpi | deepspeed | ringreduce | floor | "
              "floor+sync | floor+mpi | op's smallest floor | ratio | of |")
        print("|" + "---|" * 13)
        for row in rows:
            print("| " + " | ".join("" if x is None else f"{x:.2f}" if isinstance(x, float)
                                    and x < 10 else f"{x:.1f}" if isinstance(x, float)
                                    else str(x) for x in row) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
