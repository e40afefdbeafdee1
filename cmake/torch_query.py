"""What building against the installed torch takes, asked of torch itself.

torch's own CMake package (TorchConfig.cmake) loads Caffe2Config.cmake, which
for a CUDA build of torch demands a complete CUDA toolkit where its bundled
FindCUDA guesses it (cudart, NVRTC, ...), although the extension uses none of
torch's CUDA libraries: our CUDA path links the CUDA runtime statically and
loads NCCL with dlopen. So, as `torch.utils.cpp_extension` does, the include
folders, libraries and flags come from torch itself, and a plain `pip install
torch` (a CUDA wheel) builds on a machine with no CUDA toolkit at all.

Usage: python torch_query.py OUTPUT.cmake
Writes CMake `set()` lines (TORCH_VERSION_STRING, TORCH_CXX11_ABI,
TORCH_CUDA_VERSION, TORCH_INCLUDE_DIRS, TORCH_LIBRARY_FILES,
TORCH_COMPILE_DEFINITIONS) for cmake/TorchToolchain.cmake; exits 1 with a
sentence naming what is missing when this torch cannot be built against.
"""
import logging
import os
import sys

# What the extension links: the c10d classes live in torch_cpu, their pybind11
# bindings in torch_python. Never torch_cuda or c10_cuda: streams are reached
# through c10's device-generic interfaces (DESIGN.md).
LIBRARIES = ("c10", "torch", "torch_cpu", "torch_python")


class TorchQueryError(RuntimeError):
    pass


def folders(torch_module):
    """(include folders, library folder) as torch.utils.cpp_extension gives
    them for a CPU extension; the wheel's fixed layout when that module cannot
    be imported (it needs setuptools)."""
    # Importing it logs a guess of CUDA_HOME for a CUDA torch ("No CUDA
    # runtime is found, using CUDA_HOME=..."), which misleads here: the
    # CUDA path finds its toolkit itself (cmake/CudaPath.cmake).
    logging.getLogger("torch.utils.cpp_extension").setLevel(logging.ERROR)
    try:
        from torch.utils import cpp_extension
        return list(cpp_extension.include_paths()), cpp_extension.library_paths()[0]
    except ImportError:
        root = os.path.dirname(os.path.abspath(torch_module.__file__))
        include = os.path.join(root, "include")
        return ([include, os.path.join(include, "torch", "csrc", "api", "include")],
                os.path.join(root, "lib"))


def compile_definitions(torch_module):
    """The USE_* macros torch's CMake package puts on torch_cpu, read from what
    this torch was built with: some headers (torch/csrc/Exceptions.h) change
    with them."""
    definitions = []
    distributed = getattr(torch_module, "distributed", None)
    if distributed is None or not distributed.is_available():
        return definitions
    definitions.append("USE_DISTRIBUTED")
    if distributed.is_gloo_available():
        definitions.append("USE_C10D_GLOO")
    rpc_bindings = getattr(torch_module._C, "_distributed_rpc", None)
    if rpc_bindings is not None:
        definitions.append("USE_RPC")
        if hasattr(rpc_bindings, "TensorPipeAgent"):
            definitions.append("USE_TENSORPIPE")
    return definitions


def describe(torch_module, include_dirs, library_dir):
    """The facts the build needs, or TorchQueryError naming what is missing."""
    missing = [d for d in include_dirs[:1] if not os.path.isdir(d)]
    if missing:
        raise TorchQueryError(f"torch {torch_module.__version__} has no C++ headers "
                              f"({missing[0]} is missing): install a torch wheel that ships "
                              "them (every wheel from PyPI and download.pytorch.org does)")
    libraries = []
    for name in LIBRARIES:
        path = os.path.join(library_dir, f"lib{name}.so")
        if not os.path.exists(path):
            raise TorchQueryError(f"torch {torch_module.__version__} lacks {path}, which the "
                                  f"extension links ({', '.join(LIBRARIES)})")
        libraries.append(path)
    return {
        "TORCH_VERSION_STRING": torch_module.__version__,
        "TORCH_CXX11_ABI": str(int(torch_module._C._GLIBCXX_USE_CXX11_ABI)),
        "TORCH_CUDA_VERSION": torch_module.version.cuda or "",
        "TORCH_INCLUDE_DIRS": include_dirs,
        "TORCH_LIBRARY_FILES": libraries,
        "TORCH_COMPILE_DEFINITIONS": compile_definitions(torch_module),
    }


def cmake_quote(text):
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("$", "\\$") + '"'


def cmake_text(facts):
    lines = ["# Written by cmake/torch_query.py: the torch this build compiles against."]
    for key, value in facts.items():
        values = value if isinstance(value, list) else [value]
        lines.append(f"set({key} {' '.join(cmake_quote(v) for v in values)})")
    return "\n".join(lines) + "\n"


def main(argv):
    if len(argv) != 2:
        print(__doc__.strip().split("\n\n")[2], file=sys.stderr)
        return 2
    # Only torch's paths are needed: never load backends (a stale install of
    # this package would otherwise break `import torch`).
    os.environ.setdefault("TORCH_DEVICE_BACKEND_AUTOLOAD", "0")
    try:
        import torch
    except ImportError as error:
        print(f"ringreduce: cannot import torch with {sys.executable}: {error}. Install torch "
              "first and build with `pip install --no-build-isolation .`", file=sys.stderr)
        return 1
    try:
        facts = describe(torch, *folders(torch))
    except TorchQueryError as error:
        print(f"ringreduce: {error}", file=sys.stderr)
        return 1
    with open(argv[1], "w") as output:
        output.write(cmake_text(facts))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
