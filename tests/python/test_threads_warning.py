"""The warning at group creation where this machine's ranks times torch's
intra-op threads exceed the cores: given once per process under mp.spawn
with torch's default threads, not where the threads were set to fit (by
OMP_NUM_THREADS or torch.set_num_threads) or told to sleep when idle
(OMP_WAIT_POLICY=PASSIVE), and not under torchrun, which sets
OMP_NUM_THREADS=1.

Every case runs on two cores (the ranks pin themselves), so the outcome
does not depend on the machine's core count. This module must not import
torch at its top: mp.spawn-style ranks import it, and settle their threads,
before they run the test's function."""
import json
import os
import sys

import pytest

from multiproc import run_session, run_world

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CORES = 2


def _two_cpus():
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < CORES:
        pytest.skip(f"needs {CORES} CPUs")
    return cpus[:CORES]


def _warnings_at_group_creation(rank, world, init_method, cores, set_threads):
    import warnings

    import torch
    import torch.distributed as dist

    import torch_ringreduce

    os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[:cores])
    if set_threads:
        torch.set_num_threads(set_threads)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")  # duplicates too: once is the backend's doing
        dist.init_process_group("ringreduce", init_method=init_method, rank=rank,
                                world_size=world)
        dist.new_group([0, 1])
        dist.new_group([1, 0])
        t = torch.ones(8)
        dist.all_reduce(t)
    return {"threads": torch.get_num_threads(), "cores": len(os.sched_getaffinity(0)),
            "sum": t[0].item(),
            "warnings": [str(w.message) for w in caught
                         if issubclass(w.category, torch_ringreduce.ThreadsOversubscribedWarning)]}


@pytest.mark.parametrize("env, set_threads, warns", [
    ({}, 0, True),
    ({"OMP_NUM_THREADS": "1"}, 0, False),
    ({}, 1, False),
    ({"OMP_WAIT_POLICY": "PASSIVE"}, 0, False),
], ids=["default threads", "OMP_NUM_THREADS=1", "torch.set_num_threads(1)",
        "OMP_WAIT_POLICY=PASSIVE"])
def test_mp_spawn_ranks_are_warned_when_their_threads_exceed_the_cores(env, set_threads, warns):
    _two_cpus()
    reports = run_world(2, _warnings_at_group_creation, CORES, set_threads, env=env,
                        torch_threads=None, timeout=120)
    for rank, report in enumerate(reports):
        assert report["sum"] == 2.0, (rank, report)
        assert report["cores"] == CORES, (rank, report)
        if warns:
            # torch's default: as many threads as CPUs (at least these two).
            assert report["threads"] >= CORES, (rank, report)
            assert len(report["warnings"]) == 1, (rank, report)  # three groups, one warning
            message = report["warnings"][0]
            threads = report["threads"]
            assert (f"2 ranks on this machine x {threads} torch intra-op threads each = "
                    f"{2 * threads} threads for the {CORES} cores") in message, message
            for remedy in ("OMP_NUM_THREADS=1", "torch.set_num_threads(1)",
                           "OMP_WAIT_POLICY=PASSIVE"):
                assert remedy in message, message
        else:
            assert report["warnings"] == [], (rank, report)
            if "OMP_WAIT_POLICY" in env:  # torch's default threads, which sleep when idle
                assert report["threads"] >= CORES, (rank, report)
            else:
                assert report["threads"] == 1, (rank, report)


def _torchrun(env_extra, cpus):
    env = {k: v for k, v in os.environ.items()
           if k not in ("OMP_NUM_THREADS", "LOCAL_WORLD_SIZE", "PYTHONWARNINGS")}
    env.update(UCX_NET_DEVICES="lo", **env_extra)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
           os.path.join(REPO, "tests", "python", "threads_warning_script.py")]
    code, out, err = run_session(cmd, env, 180, cwd=REPO,
                                 preexec_fn=lambda: os.sched_setaffinity(0, cpus))
    assert code == 0, f"torchrun exited {code}:\n{err[-3000:]}"
    reports = sorted((json.loads(line) for line in out.splitlines() if line.startswith("{")),
                     key=lambda r: r["rank"])
    assert [r["rank"] for r in reports] == [0, 1], out
    return reports


@pytest.mark.parametrize("omp, warns", [(None, False), ("2", True)],
                         ids=["torchrun's OMP_NUM_THREADS=1", "OMP_NUM_THREADS=2 given"])
def test_torchrun_ranks_are_warned_only_when_the_user_raises_the_threads(omp, warns):
    cpus = _two_cpus()
    reports = _torchrun({} if omp is None else {"OMP_NUM_THREADS": omp}, cpus)
    for report in reports:
        if warns:
            # torchrun's LOCAL_WORLD_SIZE counts the ranks: 2 x 2 on 2 cores.
            assert report["omp"] == "2" and report["threads"] == 2, report
            assert len(report["warnings"]) == 1, report
            assert "2 ranks on this machine x 2 torch intra-op threads" in report["warnings"][0]
        else:
            assert report["omp"] == "1" and report["threads"] == 1, report
            assert report["warnings"] == [], report
