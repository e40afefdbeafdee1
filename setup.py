"""Builds torch_ringreduce._C with CMake against the torch that is installed.

Install with `pip install --no-build-isolation .` so the build sees this
environment's torch (an isolated build would pull a second, different torch
and produce an extension with the wrong C++ ABI).
"""
import os
import re
import shlex
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

VERSION = "0.1.0"


def _check_wheel_support():
    """Every pip form (install, -e, wheel) builds a wheel: setuptools >= 70.1
    has bdist_wheel built in, older ones need the `wheel` package before 0.46.
    Without either, pip's own error ("invalid command 'bdist_wheel'") says
    nothing useful."""
    for module in ("setuptools.command.bdist_wheel", "wheel.bdist_wheel"):
        try:
            __import__(module)
            return
        except ImportError:
            continue
    sys.exit("torch_ringreduce: this environment cannot build wheels (setuptools "
             f"{__import__('setuptools').__version__} has no bdist_wheel): "
             "`python -m pip install 'setuptools>=70.1'`, then build again")


_check_wheel_support()


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
        # A persistent build folder in the tree keeps rebuilds incremental;
        # RINGREDUCE_BUILD_DIR gives each torch or toolkit its own
        # (scripts/torch_matrix.sh builds against several in turn).
        build_dir = os.path.abspath(os.environ.get("RINGREDUCE_BUILD_DIR")
                                    or os.path.join(root, "build", "py"))
        os.makedirs(build_dir, exist_ok=True)
        compilers = _pick_compilers(root, build_dir)
        # The C++ tests stay off in a new folder; scripts/test.sh turns them
        # on in this one to link what the extension compiled. Saying OFF again
        # here would make CMake delete the built tests at every rebuild.
        first_configure = not os.path.exists(os.path.join(build_dir, "CMakeCache.txt"))
        tests = ["-DRINGREDUCE_BUILD_TESTS=OFF"] if first_configure else []
        generator = ["-G", "Ninja"] if _has("ninja") else []
        subprocess.check_call(
            ["cmake", root, *generator,
             "-DCMAKE_BUILD_TYPE=Release",
             "-DRINGREDUCE_BUILD_PYTHON=ON",
             *tests,
             f"-DRINGREDUCE_OUTPUT_DIR={out_dir}",
             f"-DRINGREDUCE_VERSION={VERSION}",
             f"-DPython3_EXECUTABLE={sys.executable}",
             *compilers,
             # e.g. -DRINGREDUCE_UCX_ROOT=... (scripts/gpu_check.sh)
             *shlex.split(os.environ.get("CMAKE_ARGS", ""))],
            cwd=build_dir)
        jobs = os.environ.get("MAX_JOBS", str(os.cpu_count() or 2))
        subprocess.check_call(["cmake", "--build", build_dir, "--target", "_C",
                               "--target", "ringreduce_simulate", "-j", jobs])
        # CMake writes what _C was built against beside it (_build_info.py),
        # and the simulator program `python -m torch_ringreduce.simulate` runs.
        self._companions = [os.path.join(out_dir, "_build_info.py"),
                            os.path.join(out_dir, "ringreduce_simulate")]

    def copy_extensions_to_source(self):
        """Editable installs (PEP 660) and --inplace build into a build folder and
        copy the extension into the source tree: its build info goes with it."""
        super().copy_extensions_to_source()
        package_dir = self.get_finalized_command("build_py").get_package_dir("torch_ringreduce")
        for companion in getattr(self, "_companions", []):
            self.copy_file(companion, os.path.join(package_dir, os.path.basename(companion)))


def _pick_compilers(root, build_dir):
    """-D flags naming a C++ compiler (and CUDA host compiler) compatible with
    the torch being built against: the requested one (CXX, CUDAHOSTCXX, else
    c++) when it is, else the first compatible one on the machine, said
    aloud. CMake verifies the choice again (cmake/TorchToolchain.cmake)."""
    check = [sys.executable, os.path.join(root, "cmake", "toolchain_check.py"), "pick"]
    flags = []
    chosen = {}
    for variable, cmake_name in (("CXX", "CMAKE_CXX_COMPILER"),
                                 ("CUDAHOSTCXX", "CMAKE_CUDA_HOST_COMPILER")):
        requested = os.environ.get(variable)
        if requested or variable == "CXX":
            picked = subprocess.run(check + ["--cxx", requested or "c++"],
                                    stdout=subprocess.PIPE, text=True)
            if picked.returncode != 0:
                sys.exit(f"torch_ringreduce: no C++ compiler compatible with this torch "
                         f"(see above); requested {variable}={requested or 'c++'}")
            chosen[variable] = picked.stdout.strip()
        else:
            chosen[variable] = chosen["CXX"]  # nvcc's host compiler: the same one
        flags.append(f"-D{cmake_name}={chosen[variable]}")
        # CMake's CUDA detection takes CUDAHOSTCXX from the environment over
        # -DCMAKE_CUDA_HOST_COMPILER on a first configure (seen on the GPU
        # image, which sets both CXX and CUDAHOSTCXX to its /opt/gcc g++):
        # the environment cmake runs in names the chosen compilers too.
        os.environ[variable] = chosen[variable]
    # CMake records the compilers when a folder is first configured and cannot
    # switch them later: start the folder afresh when they change.
    cache = os.path.join(build_dir, "CMakeCache.txt")
    if os.path.exists(cache):
        with open(cache) as text:
            cached = dict(re.findall(r"^(CMAKE_CXX_COMPILER|CMAKE_CUDA_HOST_COMPILER):\w+=(.*)$",
                                     text.read(), re.MULTILINE))
        if (cached.get("CMAKE_CXX_COMPILER") != chosen["CXX"]
                or cached.get("CMAKE_CUDA_HOST_COMPILER") != chosen["CUDAHOSTCXX"]):
            os.remove(cache)
            shutil.rmtree(os.path.join(build_dir, "CMakeFiles"), ignore_errors=True)
    return flags


def _has(tool):
    return shutil.which(tool) is not None


setup(
    name="torch_ringreduce",
    version=VERSION,
    description="Horovod-style ring-allreduce as a torch.distributed backend over UCX",
    packages=["torch_ringreduce", "torch_ringreduce.horovod"],
    py_modules=["_torch_ringreduce_autoload"],
    ext_modules=[CMakeExtension("torch_ringreduce._C")],
    cmdclass={"build_ext": CMakeBuild},
    python_requires=">=3.9",
    entry_points={
        # `import torch` calls this (torch >= 2.5), so "ringreduce" works
        # without importing the package. The hook itself never raises.
        "torch.backends": ["ringreduce = _torch_ringreduce_autoload:load"],
        # horovodrun's everyday flags on torchrun (python -m torch_ringreduce.run).
        "console_scripts": ["ringreduce-run = torch_ringreduce.run:main"],
    },
    zip_safe=False,
)
