"""What a user feels: DDP training steps of a transformer encoder, ringreduce
against gloo in the same processes, with and without DDP's fp16 gradient
compression hook.

    torchrun --standalone --nproc-per-node 2 benchmarks/ddp_step.py \
        [--layers 6] [--d-model 512] [--steps 30] [--warmup 3] [--configs ...]

The model is a 6-layer nn.TransformerEncoder (d_model 512, 19M parameters,
76 MB of float32 gradients), one thread per rank, a batch of `--batch`
sequences of 64 tokens. The configurations:
  none   the same step without DDP (forward, backward, optimizer): the compute
  gloo / ringreduce, and each with fp16_compress_hook ("+fp16")
  ringreduce+wire  no hook; the group sends float32 gradients as float16
         itself (RINGREDUCE_WIRE_DTYPE=fp16), compared with gloo+fp16
  nocomm DDP with a comm hook that returns each bucket as it is: DDP's own
         cost (bucket copies, autograd hooks) with no communication, the part
         of "exposed" that no backend can remove
  nocomm+fp16  the same with fp16_compress_hook's own work (to float16,
         divide, back into the bucket) and no communication: the floor of "+fp16"
  memfloor DDP with a comm hook that does, on each bucket, the memory work
         any allreduce across the world does at the least (this rank's block
         summed with the other ranks' blocks, their reduced blocks copied in),
         from a second buffer standing in for the peers' memory, in the hook,
         with no communication and no rank waiting for another: what the
         bytes alone cost the step, the reference for any backend sending
         float32 (which also waits for the slowest rank; but its own thread
         may do the work where the step's thread stalls, so not a strict bound)
  "+view" after any of them: DDP made with gradient_as_bucket_view=True (the
         gradients are views into the buckets: no copies into and out of them);
         its floor is nocomm+view
Every configuration has its own copy of the model (the same weights) and
its own DDP wrapper, all built before the clock starts, and the
configurations take turns step by step: a slow phase of the machine (they
last seconds on shared cloud cores) lands on all of them alike instead of
on the one that happened to be running. A configuration's time is the
median step of the slowest rank. "exposed" is its time minus the
compute time: the communication the step waits for. "main CPU" is the CPU
time of the thread that runs the step (forward, backward, DDP's hooks and
copies), "other CPU" that of the process's other threads (the backend's
communication threads), medians per step, the larger of the ranks: with one
core per rank, both add to the step, and "main CPU" above "none"'s is what
DDP and the communication running beside the compute cost the compute.
"""
import argparse
import copy
import os
import statistics
import time
import warnings

import torch
import torch.distributed as dist
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.nn.parallel import DistributedDataParallel as DDP

import torch_ringreduce  # noqa: F401  registers "ringreduce"
from build_info import loaded_build


# The variants the summary compares ringreduce and gloo under ("+wire" against gloo+fp16).
HOOKS = ("", "+fp16", "+wire", "+view")


def build_model(layers, d_model):
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(d_model, nhead=8, dim_feedforward=4 * d_model,
                                             dropout=0.0, batch_first=True)
    return torch.nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)


class Runner:
    """One configuration: its own copy of the model, wrapped, and its optimizer."""

    def __init__(self, base, config, groups):
        self.model = wrap(copy.deepcopy(base), config, groups)
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=1e-4)

    def step(self, batch):
        """One training step: (wall, this thread's CPU, other threads' CPU) seconds."""
        start, thread, process = time.perf_counter(), time.thread_time(), time.process_time()
        self.optimizer.zero_grad(set_to_none=True)
        self.model(batch).square().mean().backward()
        self.optimizer.step()
        main = time.thread_time() - thread
        return time.perf_counter() - start, main, time.process_time() - process - main


def no_comm_hook(state, bucket):
    """Each bucket's gradients as they are: DDP without communication."""
    future = torch.futures.Future()
    future.set_result(bucket.buffer())
    return future


def no_comm_fp16_hook(world_size, bucket):
    """fp16_compress_hook's own work (to float16, divide, back into the
    bucket) with no communication: the part of "+fp16" no backend can remove."""
    buffer = bucket.buffer()
    future = torch.futures.Future()
    future.set_result(buffer.to(torch.float16).div_(world_size))

    def decompress(fut):
        buffer.copy_(fut.value())
        return buffer
    return future.then(decompress)


class PeersStandIn:
    """memory_floor_hook's state: the world's size and, per bucket, a zeroed
    buffer standing in for the other ranks' memory (the same bytes read
    from the same DRAM as a peer's)."""

    def __init__(self, world):
        self.world = world
        self.buffers = {}


def memory_floor_hook(peers, bucket):
    """The least memory work of an allreduce of the bucket across the world,
    on this rank: its 1/world block read with the other ranks' blocks and
    summed into place, then the other (world - 1) reduced blocks copied in
    (read there, written here). No rank waits for another, which a backend
    must. The gradients keep this rank's values in its block and read 0
    elsewhere: the step's cost, not its numbers, is what this measures."""
    buffer = bucket.buffer()
    peer = peers.buffers.get(bucket.index())
    if peer is None or peer.numel() != buffer.numel():
        peer = peers.buffers[bucket.index()] = torch.zeros_like(buffer)
    own = buffer.numel() // peers.world  # this rank's block: the first, as good as any
    for _ in range(peers.world - 1):
        buffer[:own].add_(peer[:own])
    buffer[own:].copy_(peer[own:])
    future = torch.futures.Future()
    future.set_result(buffer)
    return future


def wrap(base, config, groups):
    if config == "none":
        return base
    view = config.endswith("+view")
    config = config[:-len("+view")] if view else config
    options = {"gradient_as_bucket_view": True} if view else {}
    if config in ("nocomm", "nocomm+fp16", "memfloor"):
        model = DDP(base, process_group=groups["gloo"], **options)
        if config == "memfloor":
            model.register_comm_hook(PeersStandIn(dist.get_world_size()), memory_floor_hook)
        elif config == "nocomm":
            model.register_comm_hook(None, no_comm_hook)
        else:
            model.register_comm_hook(dist.get_world_size(), no_comm_fp16_hook)
        return model
    backend, _, hook = config.partition("+")
    model = DDP(base, process_group=groups[config if hook == "wire" else backend], **options)
    if hook == "fp16":
        model.register_comm_hook(groups[backend], default_hooks.fp16_compress_hook)
    return model


def main():
    warnings.filterwarnings("ignore")
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--layers", type=int, default=6)
    p.add_argument("--d-model", type=int, default=512)
    p.add_argument("--batch", type=int, default=2,
                   help="sequences of 64 tokens per rank and step (2: ~120-170 ms of compute "
                        "here, the issue's step)")
    p.add_argument("--steps", type=int, default=30, help="timed steps per configuration")
    p.add_argument("--warmup", type=int, default=3,
                   help="untimed steps per configuration first (DDP builds its buckets)")
    p.add_argument("--configs",
                   default="none,nocomm,nocomm+fp16,gloo,ringreduce,gloo+fp16,ringreduce+fp16,"
                           "ringreduce+wire")
    args = p.parse_args()
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))

    dist.init_process_group("ringreduce")
    rank = dist.get_rank()
    groups = {"ringreduce": dist.group.WORLD, "gloo": dist.new_group(backend="gloo")}
    # "+wire": float32 gradients cross as float16 inside the backend
    # (RINGREDUCE_WIRE_DTYPE, read when a group is made), with no hook.
    os.environ["RINGREDUCE_WIRE_DTYPE"] = "fp16"
    groups["ringreduce+wire"] = dist.new_group(backend="ringreduce")
    del os.environ["RINGREDUCE_WIRE_DTYPE"]
    base = build_model(args.layers, args.d_model)
    params = sum(p.numel() for p in base.parameters())
    batch = torch.randn(args.batch, 64, args.d_model, generator=torch.Generator().manual_seed(rank))
    configs = args.configs.split(",")
    runners = {config: Runner(base, config, groups) for config in configs}
    samples = {c: [] for c in configs}
    for i in range(args.warmup + args.steps):
        for config in configs:
            dist.barrier(group=groups["gloo"])
            times = runners[config].step(batch)
            if i >= args.warmup:
                samples[config].append(times)
    medians, cpu = {}, {}
    for config in configs:
        local = torch.tensor([statistics.median(sample[i] for sample in samples[config])
                              for i in range(3)], dtype=torch.float64)
        dist.all_reduce(local, op=dist.ReduceOp.MAX, group=groups["gloo"])
        medians[config], cpu[config] = local[0].item(), (local[1].item(), local[2].item())
    if rank == 0:
        world = dist.get_world_size()
        print(f"# {loaded_build()}")
        print(f"# DDP step, {args.layers}-layer encoder d_model {args.d_model}, "
              f"{params / 1e6:.1f}M parameters, batch {args.batch}x64 tokens, world {world}; "
              f"median of the slowest rank over {args.steps} steps per configuration, "
              f"the configurations taking turns")
        print(f"# {'config':>16} | {'step ms':>8} | {'exposed ms':>10} | {'gloo/this':>9} | "
              f"{'main CPU ms':>11} | {'other CPU ms':>12}")
        compute = medians.get("none")
        for config in configs:
            exposed = f"{(medians[config] - compute) * 1e3:10.1f}" if compute else f"{'-':>10}"
            twin = ("gloo" + config[len("ringreduce"):].replace("+wire", "+fp16")
                    if config.startswith("ringreduce") else None)
            ratio = (f"{medians[twin] / medians[config]:9.2f}" if twin in medians else f"{'':>9}")
            print(f"  {config:>16} | {medians[config] * 1e3:8.1f} | {exposed} | {ratio} | "
                  f"{cpu[config][0] * 1e3:11.1f} | {cpu[config][1] * 1e3:12.1f}")
        if compute:
            for hook in HOOKS:
                ring = medians.get("ringreduce" + hook)
                gloo = medians.get("gloo" + hook.replace("+wire", "+fp16"))
                if ring and gloo and gloo > compute:
                    print(f"# exposed communication{hook or ' (no hook)'}: ringreduce "
                          f"{(ring - compute) / (gloo - compute):.2f}x gloo's")
            memfloor, gloo = medians.get("memfloor"), medians.get("gloo")
            if memfloor and gloo and gloo > compute:
                print(f"# the bytes' memory work alone, no rank waiting (memfloor): "
                      f"{(memfloor - compute) * 1e3:.1f} ms exposed, "
                      f"{(memfloor - compute) / (gloo - compute):.2f}x gloo's: the reference for "
                      f"any backend moving these float32 bytes")
            for floor_config, what in (("nocomm", "DDP's own cost"),
                                       ("nocomm+fp16", "DDP's and the fp16 hook's own cost"),
                                       ("nocomm+view", "DDP's own cost with bucket views")):
                if floor_config in medians:
                    print(f"# {what} without communication ({floor_config}): "
                          f"{(medians[floor_config] - compute) * 1e3:.1f} ms per step")
            for hook in HOOKS:
                # "+wire" has no hook: DDP's own cost is its floor too.
                floor = medians.get({"+fp16": "nocomm+fp16", "+view": "nocomm+view"}.get(
                    hook, "nocomm"))
                if floor:
                    ring = medians.get("ringreduce" + hook)
                    gloo = medians.get("gloo" + hook.replace("+wire", "+fp16"))
                    if ring and gloo and gloo > floor:
                        print(f"# above its own cost{hook or ' (no hook)'}: ringreduce "
                              f"{(ring - floor) * 1e3:.1f} ms, gloo {(gloo - floor) * 1e3:.1f} ms: "
                              f"{(ring - floor) / (gloo - floor):.2f}x gloo's")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
