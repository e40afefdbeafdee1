"""Where the group's worker thread runs (RINGREDUCE_WORKER_FOLLOWS_CALLER):
on the core of the thread that hands it collectives when it follows, on any
core it was given when it does not. Seen from outside, as a user's `top -H`
or `taskset -p` would: the thread named "ringreduce-work" in /proc."""
import os

import pytest

from multiproc import run_world


def _worker_cores_after_async_allreduces(rank, world, init_method):
    import time

    import torch
    import torch.distributed as dist

    import torch_ringreduce

    dist.init_process_group("ringreduce", init_method=init_method, rank=rank, world_size=world)

    def workers():
        names = {}
        for tid in os.listdir("/proc/self/task"):
            with open(f"/proc/self/task/{tid}/comm") as comm:
                names[int(tid)] = comm.read().strip()
        return [tid for tid, name in names.items() if name == "ringreduce-work"]

    cpus = sorted(os.sched_getaffinity(0))
    seen, wrong = [], []
    for cpu in cpus[:2] * 2:
        os.sched_setaffinity(0, {cpu})  # this (the calling) thread only
        t = torch.full((1 << 20,), float(rank + 1))
        work = dist.all_reduce(t, async_op=True)
        # Never wait(): a caller that waits runs the collective itself, and
        # this test is about the thread that runs it otherwise.
        deadline = time.monotonic() + 60
        while not work.is_completed() and time.monotonic() < deadline:
            time.sleep(0.001)
        work.wait()
        if not torch.equal(t, torch.full_like(t, world * (world + 1) / 2)):
            wrong.append(cpu)
        seen.append((cpu, [sorted(os.sched_getaffinity(tid)) for tid in workers()]))
    os.sched_setaffinity(0, cpus)
    setting = torch_ringreduce.config()["RINGREDUCE_WORKER_FOLLOWS_CALLER"]
    dist.destroy_process_group()
    return {"cpus": cpus, "seen": seen, "wrong": wrong, "setting": setting}


@pytest.mark.parametrize("follow", ["1", "0"])
def test_the_worker_runs_beside_its_caller_when_it_follows(follow):
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs two CPUs to tell the caller's core from another")
    reports = run_world(2, _worker_cores_after_async_allreduces,
                        env={"RINGREDUCE_WORKER_FOLLOWS_CALLER": follow}, timeout=120)
    for rank, report in enumerate(reports):
        assert report["setting"] == follow
        assert report["wrong"] == [], f"rank {rank}: wrong sums after calls from {report['wrong']}"
        for cpu, worker_masks in report["seen"]:
            assert len(worker_masks) == 1, f"rank {rank}: one worker thread, named: {worker_masks}"
            want = [cpu] if follow == "1" else report["cpus"]
            assert worker_masks[0] == want, (rank, cpu, worker_masks, report["cpus"])


def _settings_without_local_world_size(rank, world, init_method, cores):
    import torch
    import torch.distributed as dist

    import torch_ringreduce

    # As Lightning's launcher, mp.spawn or srun start a job: no torchrun, so
    # no LOCAL_WORLD_SIZE. `cores` CPUs for the whole process.
    assert "LOCAL_WORLD_SIZE" not in os.environ
    os.sched_setaffinity(0, sorted(os.sched_getaffinity(0))[:cores])
    dist.init_process_group("ringreduce", init_method=init_method, rank=rank, world_size=world)
    t = torch.full((4096,), float(rank + 1))
    dist.all_reduce(t)
    right = torch.equal(t, torch.full_like(t, world * (world + 1) / 2))
    # A subgroup of two: its members alone do not fill the cores, the
    # processes sharing them do.
    pair = dist.new_group([0, 1])
    configs = [torch_ringreduce.config()] + ([torch_ringreduce.config(pair)] if rank < 2 else [])
    dist.destroy_process_group()
    return {"right": right,
            "settings": [(c["RINGREDUCE_WORKER_FOLLOWS_CALLER"], c["RINGREDUCE_SPIN_YIELD"],
                          c["RINGREDUCE_SPIN_US"]) for c in configs]}


@pytest.mark.parametrize("world, follow, yields", [(2, "1", "0"), (3, "0", "1")],
                         ids=["a core per rank", "more ranks than cores"])
def test_ranks_per_core_defaults_come_from_the_group_outside_torchrun(world, follow, yields):
    """Two cores: two ranks have one each (the worker follows its caller),
    three share them (waits yield, the worker does not spin), in the world
    and in a subgroup of two, as under torchrun, where LOCAL_WORLD_SIZE says
    it."""
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs two CPUs")
    reports = run_world(world, _settings_without_local_world_size, 2, timeout=120)
    want = (follow, yields, "0" if yields == "1" else "50")
    for rank, report in enumerate(reports):
        assert report["right"], f"rank {rank}: wrong sum"
        groups = 2 if rank < 2 else 1  # the world, and the pair where a member
        assert report["settings"] == [want] * groups, (rank, report)
