"""Builds torch_ringreduce._C with CMake against the torch that is installed.

Install with `pip install --no-build-isolation .` so the build sees this
environment's torch (an isolated build would pull a second, different torch
and produce an extension with the wrong C++ ABI).
"""
import os
import shlex
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

VERSION = "0.1.0"


class CMakeExtension(Extension):
    def __init__(self, name):
        super().__init__(name, sources=[])


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        # A stale install of this package (its source folder gone) makes
        # torch's backend autoload fail `import torch` itself; the build only
        # needs torch's paths, so it never loads backends.
        os.environ["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"
        try:
            import torch  # noqa: F401
        except ImportError:
            sys.exit("torch_ringreduce: install torch first and build with "
                     "`pip install --no-build-isolation .`")
        out_dir = os.path.abspath(os.path.dirname(self.get_ext_fullpath(ext.name)))
        root = os.path.dirname(os.path.abspath(__file__))
        # A persistent build folder in the tree keeps rebuilds incremental.
        build_dir = os.path.join(root, "build", "py")
        os.makedirs(build_dir, exist_ok=True)
        generator = ["-G", "Ninja"] if _has("ninja") else []
        subprocess.check_call(
            ["cmake", root, *generator,
             "-DCMAKE_BUILD_TYPE=Release",
             "-DRINGREDUCE_BUILD_PYTHON=ON",
             "-DRINGREDUCE_BUILD_TESTS=OFF",
             f"-DRINGREDUCE_OUTPUT_DIR={out_dir}",
             f"-DRINGREDUCE_VERSION={VERSION}",
             f"-DPython3_EXECUTABLE={sys.executable}",
             # e.g. -DRINGREDUCE_UCX_ROOT=... (scripts/gpu_check.sh)
             *shlex.split(os.environ.get("CMAKE_ARGS", ""))],
            cwd=build_dir)
        jobs = os.environ.get("MAX_JOBS", str(os.cpu_count() or 2))
        subprocess.check_call(["cmake", "--build", build_dir, "--target", "_C", "-j", jobs])


def _has(tool):
    from shutil import which
    return which(tool) is not None


setup(
    name="torch_ringreduce",
    version=VERSION,
    description="Horovod-style ring-allreduce as a torch.distributed backend over UCX",
    packages=["torch_ringreduce"],
    py_modules=["_torch_ringreduce_autoload"],
    ext_modules=[CMakeExtension("torch_ringreduce._C")],
    cmdclass={"build_ext": CMakeBuild},
    python_requires=">=3.9",
    entry_points={
        # `import torch` calls this (torch >= 2.5), so "ringreduce" works
        # without importing the package. The hook itself never raises.
        "torch.backends": ["ringreduce = _torch_ringreduce_autoload:load"],
    },
    zip_safe=False,
)
