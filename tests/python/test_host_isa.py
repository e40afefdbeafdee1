"""The host reduction loops exist once per instruction set (core/math/host_loops.h):
every set this CPU runs, forced with RINGREDUCE_HOST_ISA, gives the same bits
through real collectives, and `torch_ringreduce.info` names the choice."""
import platform
import subprocess
import sys

import pytest
import torch

import torch_ringreduce
from multiproc import LOOPBACK_ENV, run_world


def _sets_this_cpu_runs():
    """What the CPU runs, asked of the kernel (/proc/cpuinfo's flags), not of
    ringreduce: each set needs what core/math/host_loops.cpp compiles it
    with (AVX2 with F16C; AVX-512 F, BW, VL, DQ with F16C)."""
    if platform.machine() not in ("x86_64", "AMD64"):
        return ["baseline"]
    with open("/proc/cpuinfo") as cpuinfo:
        flags = next((set(line.split(":", 1)[1].split()) for line in cpuinfo
                      if line.startswith("flags")), set())
    sets = ["baseline"]
    if {"avx2", "f16c"} <= flags:
        sets.append("avx2")
    if {"avx512f", "avx512bw", "avx512vl", "avx512dq", "f16c"} <= flags:
        sets.append("avx512")
    return sets


CPU_RUNS = _sets_this_cpu_runs()


def test_the_library_finds_the_instruction_sets_the_cpu_runs():
    assert torch_ringreduce._C.build_info()["host_loops_available"] == CPU_RUNS


def _reduce_every_dtype(rank, world_size, init_method):
    import torch
    import torch.distributed as dist

    import torch_ringreduce

    dist.init_process_group("ringreduce", init_method=init_method, rank=rank,
                            world_size=world_size)
    gen = torch.Generator().manual_seed(7 + rank)
    out = {"isa": torch_ringreduce._C.build_info()["host_loops"]}
    for dtype in (torch.float16, torch.bfloat16, torch.float32, torch.int8, torch.int32):
        if dtype.is_floating_point:
            x = (torch.randn(10_007, generator=gen) * 8).to(dtype)
            x[::97] = float("nan")  # NaN propagation in MIN/MAX, at many lane positions
        else:
            x = torch.randint(-128, 128, (10_007,), generator=gen, dtype=dtype)
        for op in ("SUM", "AVG", "MAX", "MIN", "PRODUCT"):
            y = x.clone()
            dist.all_reduce(y, op=getattr(dist.ReduceOp, op))
            out[f"{dtype} {op}"] = y
    dist.destroy_process_group()
    return out


def test_every_instruction_set_gives_the_same_collective_results():
    runs = {}
    for isa in CPU_RUNS:
        results = run_world(2, _reduce_every_dtype,
                            env=dict(LOOPBACK_ENV, RINGREDUCE_HOST_ISA=isa), timeout=180)
        assert [r["isa"] for r in results] == [isa, isa]
        runs[isa] = results
    reference = runs["baseline"]
    for isa, results in runs.items():
        for rank, (got, want) in enumerate(zip(results, reference)):
            for key in want:
                if key == "isa":
                    continue
                torch.testing.assert_close(got[key], want[key], rtol=0, atol=0, equal_nan=True,
                                           msg=lambda m: f"{isa} rank {rank} {key}: {m}")
        # Every rank ends with the same values.
        for key in results[0]:
            if key != "isa":
                torch.testing.assert_close(results[1][key], results[0][key], rtol=0, atol=0,
                                           equal_nan=True)


def _info(env):
    return subprocess.run([sys.executable, "-m", "torch_ringreduce.info"], env=env,
                          capture_output=True, text=True, timeout=120)


def test_info_names_the_instruction_set_and_refuses_an_unknown_one():
    import os

    env = dict(os.environ)
    env.pop("RINGREDUCE_HOST_ISA", None)
    result = _info(env)
    assert result.returncode == 0, result.stdout + result.stderr
    line = next(l for l in result.stdout.splitlines() if l.strip().startswith("CPU reduction loops"))
    assert line.split(":", 1)[1].split()[0].rstrip(",") == CPU_RUNS[-1]  # the best it runs
    # Small calls take the 256-bit loops where AVX-512 was chosen by default,
    # not where it was named (core/math/host_loops.h).
    assert ("avx2 below 256 KiB" in line) == (CPU_RUNS[-1] == "avx512"), line
    if CPU_RUNS[-1] == "avx512":
        named = _info(dict(env, RINGREDUCE_HOST_ISA="avx512")).stdout
        assert "CPU reduction loops: avx512 (this CPU runs" in " ".join(named.split()), named
    result = _info(dict(env, RINGREDUCE_HOST_ISA="baseline"))
    assert "CPU reduction loops: baseline" in " ".join(result.stdout.split())
    result = _info(dict(env, RINGREDUCE_HOST_ISA="sse9"))
    assert result.returncode == 1
    assert "RINGREDUCE_HOST_ISA=sse9 is not one of baseline, avx2, avx512" in result.stdout


@pytest.mark.skipif("avx512" in CPU_RUNS, reason="this CPU runs every instruction set "
                    "(/proc/cpuinfo): none to lack")
def test_an_instruction_set_the_cpu_lacks_falls_back_with_a_warning():
    import os

    result = _info(dict(os.environ, RINGREDUCE_HOST_ISA="avx512"))
    assert (f"RINGREDUCE_HOST_ISA=avx512: this CPU lacks that instruction set; "
            f"using {CPU_RUNS[-1]}") in result.stderr, result.stderr


def _create_group(rank, world_size, init_method):
    import torch.distributed as dist

    try:
        dist.init_process_group("ringreduce", init_method=init_method, rank=rank,
                                world_size=world_size)
    except Exception as error:  # the creation itself must refuse
        return (type(error).__name__, str(error))
    dist.destroy_process_group()
    return "created"


def test_an_unknown_instruction_set_fails_group_creation_clearly():
    [outcome] = run_world(1, _create_group, env=dict(LOOPBACK_ENV, RINGREDUCE_HOST_ISA="sse9"),
                          timeout=120)
    assert outcome != "created"
    assert "RINGREDUCE_HOST_ISA=sse9 is not one of baseline, avx2, avx512" in outcome[1], outcome
