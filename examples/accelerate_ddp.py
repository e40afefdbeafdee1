"""Hugging Face Accelerate over ringreduce.

    torchrun --standalone --nproc-per-node 2 examples/accelerate_ddp.py

Start the process group before the Accelerator: Accelerate then uses it as
it is. Asking Accelerate for the backend instead
(`InitProcessGroupKwargs(backend="ringreduce")`) fails on the CPU:
Accelerate 1.x allows gloo or mpi there and raises "Your assigned backend
ringreduce is not available" for any other (it passes the name on only
where CUDA is available). And on a machine without a GPU,
`Accelerator()` under torchrun runs each process on its own, with no DDP at
all, for every backend: pass `cpu=True` there.

The model and data are those of lightning_ddp.py. Every rank prints the loss
and a digest of its final weights: equal on every rank, and equal to a run
with `--backend gloo`.
"""
import argparse
import hashlib

import torch
import torch.distributed as dist
import torch.nn as nn
from accelerate import Accelerator

import torch_ringreduce  # noqa: F401  (registers "ringreduce"; `import torch` also does)


def digest(module):
    """sha256 of the weights' bytes: equal digests mean bit-identical weights."""
    h = hashlib.sha256()
    for p in module.parameters():
        h.update(p.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()[:16]


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--backend", default="ringreduce")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--lr", type=float, default=0.05)
    args = p.parse_args()

    dist.init_process_group(args.backend)  # first: Accelerate keeps a group it finds
    accelerator = Accelerator(cpu=not torch.cuda.is_available())

    torch.manual_seed(1)  # the same data on every rank; Accelerate's sampler shards it
    teacher = nn.Sequential(nn.Linear(32, 16), nn.Tanh(), nn.Linear(16, 1))
    x = torch.randn(512, 32)
    with torch.no_grad():
        y = teacher(x)
    data = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=32)
    torch.manual_seed(0)  # the same initial weights everywhere
    model = nn.Sequential(nn.Linear(32, args.hidden), nn.ReLU(), nn.Linear(args.hidden, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    model, optimizer, data = accelerator.prepare(model, optimizer, data)

    losses = []
    for _ in range(args.epochs):
        for xb, yb in data:
            optimizer.zero_grad()
            loss = nn.functional.mse_loss(model(xb), yb)
            accelerator.backward(loss)
            optimizer.step()
            losses.append(loss.item())

    wrapped = type(model).__name__
    print(f"rank {dist.get_rank()} of {dist.get_world_size()}: backend {dist.get_backend()}, "
          f"{wrapped}, loss {losses[0]:.5f} -> {losses[-1]:.5f}, "
          f"weights {digest(accelerator.unwrap_model(model))}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
