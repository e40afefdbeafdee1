"""DDP training run inside each rank, once over ringreduce and once over gloo,
from the same seed and data; returns both final parameter sets."""
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel


class WithUnusedBranch(nn.Module):
    """BatchNorm gives it buffers; `unused` gets no gradient on odd steps."""

    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(16, 32), nn.BatchNorm1d(32), nn.ReLU(),
                                  nn.Linear(32, 32), nn.ReLU())
        self.head = nn.Linear(32, 1)
        self.unused = nn.Linear(32, 1)

    def forward(self, x, step):
        h = self.body(x)
        out = self.head(h)
        if step % 2 == 0:
            out = out + 0.1 * self.unused(h)
        return out


def _train(group, rank, find_unused, steps, bucket_cap_mb):
    torch.manual_seed(1234)
    model = WithUnusedBranch().double()  # float64: the averaging is far below tolerance
    ddp = DistributedDataParallel(model, process_group=group,
                                  find_unused_parameters=find_unused,
                                  bucket_cap_mb=bucket_cap_mb)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
    gen = torch.Generator().manual_seed(99 + rank)
    for step in range(steps):
        x = torch.randn(8, 16, generator=gen, dtype=torch.float64)
        y = x[:, :1] * 0.5 - x[:, 1:2]
        loss = nn.functional.mse_loss(ddp(x, step if find_unused else 0), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    return state


def run_ddp_pair(rank, world, init_method, find_unused):
    dist.init_process_group("ringreduce", init_method=init_method, rank=rank, world_size=world)
    gloo = dist.new_group(backend="gloo")
    # A tiny bucket cap puts the parameters into several buckets.
    ring_state = _train(dist.group.WORLD, rank, find_unused, steps=12, bucket_cap_mb=0.001)
    gloo_state = _train(gloo, rank, find_unused, steps=12, bucket_cap_mb=0.001)
    return {"ring": ring_state, "gloo": gloo_state}
