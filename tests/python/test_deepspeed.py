"""DeepSpeed ZeRO stages 1, 2 and 3 on CPU (DS_ACCELERATOR=cpu) over
ringreduce train to gloo's losses and parameters, bit for bit, at world 2.

scripts/test.sh installs DeepSpeed 0.19.8; where it cannot be installed (no
package index) these tests are skipped and say so."""
import importlib.util
import os
import sys

import pytest
import torch

from deepspeed_cases import zero_training
from multiproc import run_world

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks"))
from anchor_harness import remove_deepspeed_segments  # noqa: E402  the benchmarks' cleanup

pytestmark = pytest.mark.skipif(importlib.util.find_spec("deepspeed") is None,
                                reason="deepspeed is not installed (pip install deepspeed)")

STEPS = 6
ENV = {"DS_ACCELERATOR": "cpu", "LOCAL_WORLD_SIZE": "2"}


def _train(backend, stage):
    try:
        return run_world(2, zero_training, backend, stage, STEPS, env=ENV, timeout=240)
    finally:
        remove_deepspeed_segments()


@pytest.mark.parametrize("stage", [1, 2, 3])
def test_zero_stage_trains_to_gloos_bits(stage):
    ring, gloo = _train("ringreduce", stage), _train("gloo", stage)
    for rank in range(2):
        assert ring[rank]["collectives"] >= STEPS, ring[rank]["collectives"]  # through ours
        losses = ring[rank]["losses"]
        assert len(losses) == STEPS and losses[-1] < losses[0], losses  # it trained
        assert losses == gloo[rank]["losses"], (rank, losses, gloo[rank]["losses"])
        assert len(ring[rank]["params"]) == len(gloo[rank]["params"]) == 6
        for i, (mine, theirs) in enumerate(zip(ring[rank]["params"], gloo[rank]["params"])):
            assert mine.numel() > 0, (rank, i)  # whole, not a ZeRO-3 partition
            assert torch.equal(mine, theirs), (stage, rank, i)  # sums of two: one order
            assert torch.equal(mine, ring[0]["params"][i]), (stage, rank, i)  # replicas agree
