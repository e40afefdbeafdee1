"""The `null` torch.distributed backend (null_backend.cpp): every call returns
a completed Work and moves nothing, so its time through torch.distributed is
torch's own part of any C++ backend's call, at every size (torch's `fake`
backend copies the inputs into the outputs of its gathers, scatters,
reduce-scatters and all-to-alls).

    import null_backend
    null_backend.register()            # builds once (about 25 s on 2 cores), then cached
    group = dist.new_group(backend="null")

Built with torch.utils.cpp_extension (ninja and a C++ compiler) into torch's
extensions directory (TORCH_EXTENSIONS_DIR); ranks that build at once wait for
each other there. A benchmark helper, not part of the product.
"""
import os

NAME = "null"


def load():
    """The compiled module (built on first use)."""
    from torch.utils import cpp_extension

    here = os.path.dirname(os.path.abspath(__file__))
    return cpp_extension.load(name="ringreduce_bench_null_backend",
                              sources=[os.path.join(here, "null_backend.cpp")],
                              extra_cflags=["-O2"], verbose=False)


def register():
    """Registers `null` with torch.distributed (once per process)."""
    import torch.distributed as dist

    if NAME.upper() in dist.Backend._plugins:
        return
    module = load()

    def create(store, rank, size, timeout):
        return module.NullBackend(rank, size)

    dist.Backend.register_backend(NAME, create, devices=["cpu"])
