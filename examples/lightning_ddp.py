"""PyTorch Lightning's own DDP strategy over ringreduce: the backend's name is
the only change to a Lightning script.

    python examples/lightning_ddp.py                 # Lightning starts the 2 processes itself
    torchrun --standalone --nproc-per-node 2 examples/lightning_ddp.py   # or torchrun does

The model is the same small regression MLP as train_ddp.py, each rank
training on its own shard (Lightning's DistributedSampler). Every rank
prints the loss and a digest of its final weights: the digests are equal on
every rank, and equal to a run with `--backend gloo` (at world 2 both
backends add the same two gradients, so the bits match). `--save PATH`
writes rank 0's final weights.
"""
import argparse
import hashlib

import lightning as L
import torch
import torch.distributed as dist
import torch.nn as nn
from lightning.pytorch.strategies import DDPStrategy

import torch_ringreduce  # noqa: F401  (registers "ringreduce"; `import torch` also does)


class Regression(L.LightningModule):
    def __init__(self, hidden, lr):
        super().__init__()
        torch.manual_seed(0)  # the same initial weights everywhere
        self.net = nn.Sequential(nn.Linear(32, hidden), nn.ReLU(), nn.Linear(hidden, 1))
        self.lr = lr
        self.losses = []

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = nn.functional.mse_loss(self.net(x), y)
        self.losses.append(loss.item())
        return loss

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=self.lr, momentum=0.9)


def digest(module):
    """sha256 of the weights' bytes: equal digests mean bit-identical weights."""
    h = hashlib.sha256()
    for p in module.parameters():
        h.update(p.detach().contiguous().numpy().tobytes())
    return h.hexdigest()[:16]


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--backend", default="ringreduce")
    p.add_argument("--devices", type=int, default=2, help="processes (CPU)")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--save", help="where rank 0 writes its final weights")
    args = p.parse_args()

    torch.manual_seed(1)  # the same data on every rank; the sampler shards it
    teacher = nn.Sequential(nn.Linear(32, 16), nn.Tanh(), nn.Linear(16, 1))
    x = torch.randn(512, 32)
    with torch.no_grad():
        y = teacher(x)
    data = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=32)

    model = Regression(args.hidden, args.lr)
    trainer = L.Trainer(accelerator="cpu", devices=args.devices, max_epochs=args.epochs,
                        strategy=DDPStrategy(process_group_backend=args.backend),
                        logger=False, enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False)
    trainer.fit(model, data)

    rank, world = dist.get_rank(), dist.get_world_size()
    print(f"rank {rank} of {world}: backend {dist.get_backend()}, loss {model.losses[0]:.5f} -> "
          f"{model.losses[-1]:.5f}, weights {digest(model)}", flush=True)
    if args.save and rank == 0:
        torch.save(model.net.state_dict(), args.save)


if __name__ == "__main__":
    main()
