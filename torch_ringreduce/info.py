"""python -m torch_ringreduce.info: versions, what was compiled in, and the
UCX transports this machine offers. Paste its output into bug reports."""
import platform

import torch

from . import _C, __version__


def collect():
    build = _C.build_info()
    return {
        "torch_ringreduce": __version__,
        "torch": torch.__version__,
        "python": platform.python_version(),
        "UCX": _C.ucx_version(),
        "CPU path": "compiled" if build["cpu_path"] else "missing",
        "CUDA path": ("compiled" if build["cuda_path"]
                      else "not compiled (CUDA tensors go through host staging)"),
        "CUDA runtime": build["cuda_runtime"],
        "NCCL loading": build["nccl_loading"],
        "UCX transports": ", ".join(_C.ucx_transports()) or "none found",
    }


def main():
    for key, value in collect().items():
        print(f"{key + ':':<18} {value}")


if __name__ == "__main__":
    main()
