"""benchmarks/busy_verdicts.py: how it reads busy_cores.py's tables and judges
each loaded cell on the median over several runs."""
import os
import subprocess
import sys

import pytest

BENCHMARKS = os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks")
sys.path.insert(0, BENCHMARKS)
import busy_verdicts  # noqa: E402


def table(op, busy, rows, groups=("ringreduce", "ucx", "gloo")):
    """One op's table as busy_cores.py prints it: rows of (bytes, {group: (p50, p90)})."""
    rings = [g for g in groups if g != "gloo"]
    head = " | ".join(f"{g + ' p50':>15} {'p90':>7}" for g in groups)
    ratios = " ".join(f"{'gloo/' + g + ' p50':>19} {'p90':>5}" for g in rings)
    lines = [f"# {op}, {busy} busy processes (load average 3.0); per op the slowest rank, us; "
             "120 ops per cell after 200 us of compute",
             f"# {'bytes':>8} | {head} | {ratios}"]
    for size, values in rows:
        cells = " | ".join(f"{values[g][0]:15.1f} {values[g][1]:7.1f}" for g in groups)
        lines.append(f"  {size:>8} | {cells} | " + ("1.00x 1.00x " * len(rings)).strip())
    return ["", *lines]


def run(ucx_4k, ucx_1m, gloo_p90=900.0):
    """A run with one quiet and one loaded table; ringreduce's p50 is 100 everywhere."""
    header = ["# busy_cores: world 2, 2 CPUs, OMP_NUM_THREADS=1, backends ringreduce,ucx,gloo",
              "/site-packages/torch/distributed/c10d_logger.py:83: FutureWarning: deprecated"]
    quiet = table("all_reduce", 0, [(4096, {"ringreduce": (100, 200), "ucx": (50, 60),
                                            "gloo": (500, 900)})])
    loaded = table("all_reduce", 4, [
        (4096, {"ringreduce": (100, 200), "ucx": (ucx_4k, 300), "gloo": (500, gloo_p90)}),
        (1048576, {"ringreduce": (100, 200), "ucx": (ucx_1m, 300), "gloo": (500, 900)}),
    ])
    return header + quiet + loaded


def test_every_group_of_a_row_is_read_in_the_order_its_header_names_them():
    cells = busy_verdicts.parse(run(120, 90))
    assert cells[("all_reduce", 4, 4096)] == {
        "ringreduce": (100.0, 200.0), "ucx": (120.0, 300.0), "gloo": (500.0, 900.0)}
    assert set(cells) == {("all_reduce", 0, 4096), ("all_reduce", 4, 4096),
                          ("all_reduce", 4, 1048576)}


def test_a_run_without_gloo_is_read_too():
    lines = table("broadcast", 8, [(65536, {"ringreduce": (10, 20), "ucx": (30, 40)})],
                  groups=("ringreduce", "ucx"))
    assert busy_verdicts.parse(lines) == {("broadcast", 8, 65536): {
        "ringreduce": (10.0, 20.0), "ucx": (30.0, 40.0)}}


def test_a_cell_is_judged_on_the_median_of_its_runs_not_on_any_one():
    """4 KiB: slower than the UCX path in one run of three (a preempted
    minute), faster in the median: met. 1 MiB: slower in two of three:
    missed."""
    runs = [busy_verdicts.parse(run(*pair)) for pair in ((120, 90), (80, 95), (130, 110))]
    per_cell = busy_verdicts.ratios(runs)
    assert per_cell[("all_reduce", 4, 4096)]["ucx"] == pytest.approx([100 / 120, 100 / 80,
                                                                      100 / 130])
    assert busy_verdicts.verdict(per_cell[("all_reduce", 4, 4096)]) == ("met", "")
    assert busy_verdicts.verdict(per_cell[("all_reduce", 4, 1048576)]) == (
        "missed", "above the UCX path's p50")


def test_gloos_p90_below_ringreduces_misses_the_cell():
    runs = [busy_verdicts.parse(run(200, 200, gloo_p90=150)) for _ in range(3)]
    assert busy_verdicts.verdict(busy_verdicts.ratios(runs)[("all_reduce", 4, 4096)]) == (
        "missed", "above gloo's p90")


def test_the_command_counts_loaded_cells_and_lists_the_missed(tmp_path):
    paths = []
    for i, pair in enumerate(((120, 90), (80, 95), (130, 110))):
        path = tmp_path / f"run{i}.txt"
        path.write_text("\n".join(run(*pair)) + "\n")
        paths.append(str(path))
    out = subprocess.run([sys.executable, os.path.join(BENCHMARKS, "busy_verdicts.py"),
                          *paths, "--list"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    # Quiet cells are not judged: two loaded cells, one met; each run alone 1, 0 and 2.
    assert lines[0].startswith("# 3 runs, 2 loaded cells: met 1, missed 1")
    assert lines[0].endswith("in 1, 0, 2")
    assert len(lines) == 2 and lines[1].startswith("missed  all_reduce")
    assert "1048576 B" in lines[1] and "above 1 in 2 of 3" in lines[1]
