"""hvd.DistributedOptimizer: averages gradients across ranks during backward.

Gradients go into buckets fixed at construction (parameters in reverse
order, as they usually become ready; one dtype and device per bucket; at most
HOROVOD_FUSION_THRESHOLD bytes, 25 MiB by default as DDP's buckets). A
post-accumulate-grad hook on every parameter counts down
backward_passes_per_step; when every gradient of the next bucket is ready, the
bucket starts as one fused asynchronous allreduce, in bucket order on every
rank (ringreduce runs collectives in issue order), while backward goes on.
synchronize() starts what is left (a parameter without a gradient counts as
zeros, as in Horovod) and writes the results into the .grad tensors.
"""
import os
import warnings
from contextlib import contextmanager

import torch

from .basics import Adasum, Average, check_process_set, global_process_set, size
from .compression import Compression
from .handles import synchronize as synchronize_handle
from .mpi_ops import grouped_allreduce_async_

DEFAULT_FUSION_BYTES = 25 << 20


class _Bucket:
    def __init__(self):
        self.params, self.nbytes, self.ready, self.name = [], 0, 0, None


class _DistributedOptimizer:
    """Mixed in before the wrapped optimizer's class (see DistributedOptimizer)."""

    def _hvd_setup(self, named_parameters, compression, backward_passes_per_step, op,
                   gradient_predivide_factor):
        params = [p for group in self.param_groups for p in group["params"]]
        if named_parameters is not None:
            named_parameters = list(named_parameters)
        else:
            named_parameters = [(f"allreduce.noname.{i}", p) for i, p in enumerate(params)]
        if any(not isinstance(item, tuple) for item in named_parameters):
            raise ValueError("named_parameters should be a sequence of tuples (name, parameter), "
                             "usually produced by model.named_parameters().")
        names = [name for name, _ in named_parameters]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError("Parameter names in named_parameters must be unique. "
                             "Found duplicates: " + ", ".join(duplicates))
        named_ids = {id(p) for _, p in named_parameters}
        unnamed = [id(p) for p in params if id(p) not in named_ids]
        if unnamed:
            raise ValueError("named_parameters was specified, but one or more model parameters "
                             "were not named. Python object ids: "
                             + ", ".join(str(i) for i in unnamed))
        self._parameter_names = {p: name for name, p in named_parameters}
        self._compression = compression
        self.op = op
        self.gradient_predivide_factor = gradient_predivide_factor
        self.backward_passes_per_step = backward_passes_per_step
        self._requires_update = [p for p in params if p.requires_grad]
        self._allreduce_delay = {p: backward_passes_per_step for p in self._requires_update}
        self._pending = []          # (bucket, handle, compressed, contexts) started this step
        self._hooks_fired = False   # a gradient arrived since the last synchronize()
        self._next_bucket = 0
        self._synchronized = False
        self._should_synchronize = True
        self._buckets = self._make_buckets()
        self._bucket_of = {p: b for b in self._buckets for p in b.params}
        self._hook_handles = []
        if size() > 1:
            for p in self._requires_update:
                self._hook_handles.append(p.register_post_accumulate_grad_hook(self._on_grad))

    def _make_buckets(self):
        cap = int(os.environ.get("HOROVOD_FUSION_THRESHOLD", DEFAULT_FUSION_BYTES))
        buckets, open_buckets = [], {}
        for p in reversed(self._requires_update):
            wire = self._compression.compress(torch.empty(0, dtype=p.dtype))[0].dtype
            key = (wire, p.device)
            nbytes = p.numel() * torch.empty(0, dtype=wire).element_size()
            bucket = open_buckets.get(key)
            if bucket is None or (bucket.params and bucket.nbytes + nbytes > cap):
                bucket = open_buckets[key] = _Bucket()
                buckets.append(bucket)
            bucket.params.append(p)
            bucket.nbytes += nbytes
        for bucket in buckets:
            bucket.name = "allreduce." + ",".join(self._parameter_names[p] for p in bucket.params)
        return buckets

    def _on_grad(self, p):
        if self._allreduce_delay[p] <= 0:
            raise AssertionError("Gradients were computed more than backward_passes_per_step "
                                 "times before call to step(). Increase backward_passes_per_step "
                                 "to accumulate gradients locally.")
        self._allreduce_delay[p] -= 1
        self._hooks_fired = True
        if self._allreduce_delay[p] == 0:
            self._bucket_of[p].ready += 1
            while (self._next_bucket < len(self._buckets)
                   and self._buckets[self._next_bucket].ready
                   == len(self._buckets[self._next_bucket].params)):
                self._start_next_bucket()

    def _start_next_bucket(self):
        bucket = self._buckets[self._next_bucket]
        self._next_bucket += 1
        for p in bucket.params:
            if p.grad is None:
                p.grad = torch.zeros_like(p)
        compressed, contexts = zip(*[self._compression.compress(p.grad) for p in bucket.params])
        if self.op == Average:
            # Horovod's split of the average around the sum.
            prescale = 1.0 / self.gradient_predivide_factor
            postscale = self.gradient_predivide_factor
        else:
            prescale = postscale = 1.0
        handle = grouped_allreduce_async_(list(compressed), name=bucket.name, op=self.op,
                                          prescale_factor=prescale, postscale_factor=postscale)
        self._pending.append((bucket, handle, compressed, contexts))

    def synchronize(self):
        """Finishes every gradient's allreduce and writes the results into .grad."""
        if self._hook_handles:
            while self._next_bucket < len(self._buckets):
                self._start_next_bucket()
        pending, self._pending = self._pending, []
        for bucket, handle, compressed, contexts in pending:
            synchronize_handle(handle)
            for p, reduced, cctx in zip(bucket.params, compressed, contexts):
                result = self._compression.decompress(reduced, cctx)
                if result is not p.grad:
                    p.grad.copy_(result)
        self._reset_step()
        self._synchronized = True

    def _reset_step(self):
        for p in self._allreduce_delay:
            self._allreduce_delay[p] = self.backward_passes_per_step
        for bucket in self._buckets:
            bucket.ready = 0
        self._next_bucket = 0
        self._hooks_fired = False

    def set_backward_passes_per_step(self, passes):
        self.backward_passes_per_step = passes
        self._reset_step()

    @contextmanager
    def skip_synchronize(self):
        """optimizer.step() inside does not synchronize (after an explicit
        optimizer.synchronize(), e.g. to clip gradients)."""
        self._should_synchronize = False
        try:
            yield
        finally:
            self._should_synchronize = True

    def step(self, closure=None):
        if self._should_synchronize:
            if self._synchronized:
                warnings.warn("optimizer.step() called without optimizer.skip_synchronize() "
                              "context after optimizer.synchronize(). This can cause training "
                              "slowdown. You may want to consider using "
                              "optimizer.skip_synchronize() context if you use "
                              "optimizer.synchronize() in your code.")
            self.synchronize()
        self._synchronized = False
        return super().step(closure)

    def zero_grad(self, *args, **kwargs):
        if self._pending or self._hooks_fired:
            raise AssertionError("optimizer.zero_grad() was called after loss.backward() but "
                                 "before optimizer.step() or optimizer.synchronize(). This is "
                                 "prohibited as it can cause a race condition.")
        return super().zero_grad(*args, **kwargs)

    def load_state_dict(self, *args, **kwargs):
        for _, handle, _, _ in self._pending:
            synchronize_handle(handle)
        self._pending = []
        self._synchronized = False
        self._should_synchronize = True
        self._reset_step()
        return super().load_state_dict(*args, **kwargs)


def DistributedOptimizer(optimizer, named_parameters=None, compression=Compression.none,
                         backward_passes_per_step=1, op=Average, gradient_predivide_factor=1.0,
                         num_groups=0, groups=None, sparse_as_dense=False,
                         process_set=global_process_set):
    """Wraps `optimizer` so that step() applies gradients averaged (or summed,
    ...: `op`) over all ranks. Returns an object of a subclass of the
    optimizer's class that shares its param groups and state.

    gradient_predivide_factor (op Average only): gradients are scaled by
    1/factor before the sum and factor/size() after. num_groups/groups
    (Horovod's explicit fusion groups) are accepted and ignored: gradients are
    always fused in buckets; sparse gradients are not supported."""
    check_process_set(process_set)
    if op == Adasum:
        raise NotImplementedError("Adasum is not supported by torch_ringreduce.horovod; "
                                  "use op=hvd.Average")
    if gradient_predivide_factor != 1.0 and op != Average:
        raise ValueError("gradient_predivide_factor not supported with op != Average")
    if backward_passes_per_step < 1:
        raise ValueError("backward_passes_per_step must be at least 1")
    cls = type(optimizer.__class__.__name__, (_DistributedOptimizer, optimizer.__class__), {})
    wrapped = cls.__new__(cls)
    wrapped.__dict__.update(optimizer.__dict__)
    wrapped._hvd_setup(named_parameters, compression, backward_passes_per_step, op,
                       gradient_predivide_factor)
    return wrapped
