"""The simulate CLI (python -m torch_ringreduce.simulate): --cores puts every
message's CPU on cores the ranks share, so fewer cores never make an
allreduce faster, and 8 ranks on 2 cores with CPU per message are slower
than with a core each. Runs the program built beside the package or in the
build folders (simulate.program()); skipped where none is built."""
import importlib.util
import os
import re
import subprocess

import pytest

_HERE = os.path.dirname(os.path.abspath(__file__))
_SIMULATE = os.path.join(os.path.dirname(os.path.dirname(_HERE)), "torch_ringreduce",
                         "simulate.py")


def _program():
    # simulate.py without importing the package (which needs the built extension).
    spec = importlib.util.spec_from_file_location("_simulate_cli", _SIMULATE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    try:
        return module.program()
    except SystemExit as why:
        pytest.skip(str(why))


def _times(*extra):
    """{algorithm: simulated us} at 4 KiB on 4 nodes x 2 ranks."""
    out = subprocess.run(
        [_program(), "--nodes", "4", "--ranks-per-node", "2", "--sizes", "4K",
         "--inter", "1Gbit/s,500us", "--intra", "1GB/s,20us", *extra],
        capture_output=True, text=True, timeout=60, check=True).stdout
    header = next(line for line in out.splitlines() if line.strip().startswith("size"))
    names = header.split()[1:-3]
    row = next(line for line in out.splitlines() if line.strip().startswith("4 KiB"))
    values = row.split()[2:]
    return {name: float(values[3 * i]) for i, name in enumerate(names)}, out


def test_cores_slow_a_cpu_bound_cluster_down_and_are_reported():
    cpu = ["--cpu-intra", "5,4,0.25", "--cpu-inter", "5,1,0.3,30", "--spin", "20"]
    each, _ = _times(*cpu)
    two, out = _times("--cores", "2", *cpu)
    one, _ = _times("--cores", "1", *cpu)
    assert re.search(r"# CPU: 2 cores shared by all ranks, spin 20.0 us", out)
    for algorithm in each:
        assert two[algorithm] > each[algorithm], algorithm
        assert one[algorithm] >= two[algorithm], algorithm


def test_without_cores_the_simulation_is_unchanged():
    plain, out = _times()
    assert "# CPU" not in out
    many, _ = _times("--cores", "64")
    for algorithm in plain:
        assert many[algorithm] == pytest.approx(plain[algorithm], rel=0.05), algorithm


def test_bad_cpu_figures_are_refused():
    proc = subprocess.run([_program(), "--cpu-inter", "5"], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 2
    assert "bad --cpu-inter '5'" in proc.stderr


@pytest.mark.parametrize("collective", ["reduce_scatter", "allgather"])
def test_reduce_scatter_and_allgather_run_every_form_on_uneven_nodes(collective):
    # A schedule that deadlocks or leaves a message unreceived exits non-zero.
    out = subprocess.run(
        [_program(), "--node-sizes", "3,1,2", "--collective", collective, "--sizes", "4K,1M",
         "--inter", "100Gbit/s,5us", "--intra", "100GB/s,1us"],
        capture_output=True, text=True, timeout=60, check=True).stdout
    assert f"# {collective}\n" in out
    assert "3 nodes of 3+1+2 ranks = 6 ranks" in out
    header = next(line for line in out.splitlines() if line.strip().startswith("size"))
    assert header.split()[1:4] == ["ring", "halving_doubling", "two_level"]
    for size in ("4 KiB", "1 MiB"):
        row = next(line for line in out.splitlines() if line.strip().startswith(size))
        values = row.split()[2:11]
        assert all(float(v) > 0 for v in values), row
