"""Refuse, before _C is loaded, an extension built for another torch.

torch's C++ ABI (the c10d::Backend vtable among it) changes between
releases, so an extension built against one torch may fail to load with an
unreadable undefined symbol, or load and crash, under another. The build
writes what it was built against into _build_info.py; this compares it with
the running torch and raises an ImportError that names both and the fix.
"""
import torch

REBUILD = ("rebuild it against this torch: `python -m pip install --no-build-isolation "
           "--no-deps -e .` in the torch_ringreduce checkout (or `bash scripts/install.sh`)")


def release(version):
    """'2.13.0+cpu' -> '2.13.0': CUDA and CPU builds of one release share the C++ ABI."""
    return version.split("+")[0]


def mismatch(built_version, built_abi, running_version, running_abi):
    """Why an extension built for (built_version, built_abi) cannot load under the
    running torch, or None when it can."""
    if release(built_version) != release(running_version):
        return (f"torch_ringreduce._C was built against torch {built_version}, but this "
                f"process runs torch {running_version}")
    if int(built_abi) != int(running_abi):
        return (f"torch_ringreduce._C was built with _GLIBCXX_USE_CXX11_ABI={int(built_abi)}, "
                f"but torch {running_version} uses {int(running_abi)}")
    return None


def check():
    """Raise ImportError when the built extension does not match this torch."""
    try:
        from . import _build_info
    except ImportError:
        raise ImportError("torch_ringreduce: the C++ extension has not been built here (no "
                          f"_build_info.py next to the package); {REBUILD}") from None
    why = mismatch(_build_info.TORCH_VERSION, _build_info.TORCH_CXX11_ABI,
                   torch.__version__, torch._C._GLIBCXX_USE_CXX11_ABI)
    if why:
        raise ImportError(f"{why}; {REBUILD}")
    return _build_info
