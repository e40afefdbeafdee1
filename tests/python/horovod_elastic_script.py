"""hvd.elastic.run over torchrun restarts, for test_horovod.py.

    python -m torch_ringreduce.run -np 2 --max-restarts 1 python horovod_elastic_script.py

Each batch rank r contributes the gradient [batch + 1, r + 1] to a bias-free
Linear(2, 1) trained by SGD (lr 0.5) from zeros, and commits. On the first
attempt rank 1 dies at --kill-at; torchrun restarts both ranks, which resume
from the committed batch. The final weight is exact: -0.5 * the sum of the
averaged gradients of every batch, each applied once.
"""
import argparse
import os

import torch

import torch_ringreduce.horovod as hvd

parser = argparse.ArgumentParser()
parser.add_argument("--batches", type=int, default=12)
parser.add_argument("--kill-at", type=int, default=5)
args = parser.parse_args()

hvd.init()
attempt = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
model = torch.nn.Linear(2, 1, bias=False)
with torch.no_grad():
    model.weight.zero_()
optimizer = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.5),
                                     named_parameters=model.named_parameters())


@hvd.elastic.run
def train(state):
    print(f"rank {hvd.rank()} attempt {attempt}: starting at batch {state.batch}", flush=True)
    while state.batch < args.batches:
        if attempt == 0 and hvd.rank() == 1 and state.batch == args.kill_at:
            print(f"rank 1 attempt 0: dying at batch {state.batch}", flush=True)
            os._exit(1)
        x = torch.tensor([[float(state.batch + 1), float(hvd.rank() + 1)]])
        optimizer.zero_grad()
        model(x).sum().backward()
        optimizer.step()
        state.batch += 1
        state.commit()
        # Only for the test's determinism: rank 1 may die at the next batch
        # only once rank 0 has written this commit to its file.
        hvd.barrier()


state = hvd.elastic.TorchState(model=model, optimizer=optimizer, batch=0)
state.register_reset_callbacks([lambda: print(f"rank {hvd.rank()}: reset", flush=True)])
train(state)
print(f"rank {hvd.rank()} final weight {model.weight.view(-1).tolist()}", flush=True)
