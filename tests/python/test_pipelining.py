"""Pipeline parallelism (torch.distributed.pipelining) over ringreduce: its
stage boundaries are isend/irecv pairs (a host send or receive starts on the
issuing thread when nothing is queued ahead of it). Same bits as gloo."""
import pytest
import torch

from multiproc import TRANSPORTS, run_world
from pipelining_cases import pipelined_both

pytest.importorskip("torch.distributed.pipelining")


@pytest.mark.parametrize("world,schedule", [(2, "ScheduleGPipe"), (2, "Schedule1F1B"),
                                            (3, "Schedule1F1B")])
def test_pipeline_training_gives_gloos_bits(world, schedule):
    results = run_world(world, pipelined_both, schedule, 3, env=TRANSPORTS["shm"], timeout=240)
    last = results[world - 1]
    assert len(last["ring"]["losses"]) == 3 and all(len(l) == 4 for l in last["ring"]["losses"])
    for rank, r in enumerate(results):
        assert r["ring"]["losses"] == r["gloo"]["losses"], rank
        assert len(r["ring"]["params"]) == len(r["gloo"]["params"]) > 0
        for mine, theirs in zip(r["ring"]["params"], r["gloo"]["params"]):
            assert torch.equal(mine, theirs), f"rank {rank}"
    # The stages learned something: the last stage's loss fell.
    first, final = last["ring"]["losses"][0], last["ring"]["losses"][-1]
    assert sum(final) < sum(first), last["ring"]["losses"]
