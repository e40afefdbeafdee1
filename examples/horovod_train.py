"""A typical Horovod PyTorch training script; the only change for ringreduce is
the import line.

    python -m torch_ringreduce.run -np 2 python examples/horovod_train.py
    torchrun --standalone --nproc-per-node 2 examples/horovod_train.py   # the same

It trains a small classifier on a synthetic data set (labels from a fixed
random teacher), so that it needs no download.
"""
import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
import torch.utils.data.distributed

import torch_ringreduce.horovod as hvd  # was: import horovod.torch as hvd

parser = argparse.ArgumentParser(description="Horovod-style training on synthetic data")
parser.add_argument("--batch-size", type=int, default=32, help="input batch size per rank")
parser.add_argument("--epochs", type=int, default=3)
parser.add_argument("--lr", type=float, default=0.05, help="learning rate for one rank")
parser.add_argument("--momentum", type=float, default=0.5)
parser.add_argument("--seed", type=int, default=42)
parser.add_argument("--samples", type=int, default=2048, help="training samples")
parser.add_argument("--log-interval", type=int, default=10)
parser.add_argument("--fp16-allreduce", action="store_true", default=False,
                    help="use fp16 compression during allreduce")
parser.add_argument("--use-adasum", action="store_true", default=False)
parser.add_argument("--gradient-predivide-factor", type=float, default=1.0)
parser.add_argument("--save", default=None, help="rank 0 saves the final state_dict here")

FEATURES, CLASSES = 20, 10


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(FEATURES, 64)
        self.fc2 = nn.Linear(64, 64)
        self.fc3 = nn.Linear(64, CLASSES)

    def forward(self, x):
        x = F.relu(self.fc1(x))
        x = F.dropout(F.relu(self.fc2(x)), p=0.1, training=self.training)
        return F.log_softmax(self.fc3(x), dim=1)


def synthetic_datasets(train_samples, test_samples, seed):
    """Train and test sets labelled by one random linear teacher."""
    gen = torch.Generator().manual_seed(seed)
    teacher = torch.randn(FEATURES, CLASSES, generator=gen)
    x = torch.randn(train_samples + test_samples, FEATURES, generator=gen)
    y = (x @ teacher).argmax(dim=1)
    return (torch.utils.data.TensorDataset(x[:train_samples], y[:train_samples]),
            torch.utils.data.TensorDataset(x[train_samples:], y[train_samples:]))


def metric_average(val, name):
    tensor = torch.tensor(val)
    avg_tensor = hvd.allreduce(tensor, name=name)
    return avg_tensor.item()


def train(epoch, model, optimizer, train_loader, train_sampler, args):
    model.train()
    # Horovod: set epoch to sampler for shuffling.
    train_sampler.set_epoch(epoch)
    for batch_idx, (data, target) in enumerate(train_loader):
        optimizer.zero_grad()
        output = model(data)
        loss = F.nll_loss(output, target)
        loss.backward()
        optimizer.step()
        if batch_idx % args.log_interval == 0 and hvd.rank() == 0:
            print(f"Train Epoch: {epoch} [{batch_idx * len(data)}/{len(train_sampler)}]"
                  f"\tLoss: {loss.item():.6f}", flush=True)


def test(model, test_set):
    model.eval()
    # Horovod: each rank evaluates its share of the test set.
    x, y = test_set.tensors
    x, y = x[hvd.rank()::hvd.size()], y[hvd.rank()::hvd.size()]
    with torch.no_grad():
        output = model(x)
        test_loss = F.nll_loss(output, y).item()
        test_accuracy = (output.argmax(dim=1) == y).float().mean().item()
    # Horovod: average metric values across workers.
    test_loss = metric_average(test_loss, "avg_loss")
    test_accuracy = metric_average(test_accuracy, "avg_accuracy")
    if hvd.rank() == 0:
        print(f"Test set: Average loss: {test_loss:.4f}, Accuracy: {100. * test_accuracy:.2f}%",
              flush=True)
    return test_loss, test_accuracy


def main():
    args = parser.parse_args()

    # Horovod: initialize library.
    hvd.init()
    torch.manual_seed(args.seed)

    # Horovod: limit # of CPU threads to be used per worker.
    torch.set_num_threads(1)

    train_dataset, test_dataset = synthetic_datasets(args.samples, 512, args.seed)
    # Horovod: use DistributedSampler to partition the training data.
    train_sampler = torch.utils.data.distributed.DistributedSampler(
        train_dataset, num_replicas=hvd.size(), rank=hvd.rank())
    train_loader = torch.utils.data.DataLoader(train_dataset, batch_size=args.batch_size,
                                               sampler=train_sampler)

    model = Net()

    # By default, Adasum doesn't need scaling up learning rate.
    lr_scaler = hvd.size() if not args.use_adasum else 1

    # Horovod: scale learning rate by lr_scaler.
    optimizer = optim.SGD(model.parameters(), lr=args.lr * lr_scaler, momentum=args.momentum)

    # Horovod: broadcast parameters & optimizer state.
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    hvd.broadcast_optimizer_state(optimizer, root_rank=0)

    # Horovod: (optional) compression algorithm.
    compression = hvd.Compression.fp16 if args.fp16_allreduce else hvd.Compression.none

    # Horovod: wrap optimizer with DistributedOptimizer.
    optimizer = hvd.DistributedOptimizer(optimizer,
                                         named_parameters=model.named_parameters(),
                                         compression=compression,
                                         op=hvd.Adasum if args.use_adasum else hvd.Average,
                                         gradient_predivide_factor=args.gradient_predivide_factor)

    for epoch in range(1, args.epochs + 1):
        train(epoch, model, optimizer, train_loader, train_sampler, args)
        test(model, test_dataset)

    if args.save and hvd.rank() == 0:
        torch.save(model.state_dict(), args.save)


if __name__ == "__main__":
    main()
