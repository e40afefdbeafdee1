"""Installing: a toolchain that would produce a crashing extension is refused
at configure time, an extension built for another torch is a clear
ImportError (and `import torch` still works), and the info command reports
what was built and fails when something asked for cannot work."""
import os
import shutil
import subprocess
import sys
import textwrap
import types

import pytest
import torch

import torch_ringreduce
from torch_ringreduce import _build_check

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CHECK = os.path.join(ROOT, "cmake", "toolchain_check.py")
SYSTEM_CXX = shutil.which("g++") or shutil.which("c++")


def run(args, env=None, timeout=120, cwd=ROOT):
    full_env = dict(os.environ, TORCH_DEVICE_BACKEND_AUTOLOAD="0")
    full_env.update(env or {})
    return subprocess.run(args, capture_output=True, text=True, timeout=timeout, env=full_env,
                          cwd=cwd)


@pytest.fixture
def newer_compiler(tmp_path):
    """A g++ whose libstdc++ claims GLIBCXX_3.4.99: newer than any runtime, as
    the GPU image's /opt/gcc/bin/g++ was newer than its system libstdc++."""
    if SYSTEM_CXX is None:
        pytest.skip("no g++ on this machine")
    fake_library = tmp_path / "libstdc++.so.6"
    fake_library.write_bytes(b"\x7fELF fake GLIBCXX_3.4\x00GLIBCXX_3.4.99\x00")
    wrapper = tmp_path / "g++-newer"
    wrapper.write_text(textwrap.dedent(f"""\
        #!/bin/sh
        if [ "$1" = "-print-file-name=libstdc++.so.6" ]; then echo {fake_library}; exit 0; fi
        exec {SYSTEM_CXX} "$@"
        """))
    wrapper.chmod(0o755)
    return str(wrapper)


@pytest.fixture
def static_runtime_compiler(tmp_path):
    """A g++ that links libstdc++ statically, as the GPU image's
    /opt/gcc/bin/g++ does (its lib folder holds libstdc++.a and no .so)."""
    if SYSTEM_CXX is None:
        pytest.skip("no g++ on this machine")
    probe = subprocess.run([SYSTEM_CXX, "-print-file-name=libstdc++.a"], capture_output=True,
                           text=True)
    if not os.path.isabs(probe.stdout.strip()):
        pytest.skip(f"{SYSTEM_CXX} has no libstdc++.a to link statically")
    wrapper = tmp_path / "g++-static-runtime"
    wrapper.write_text(f"#!/bin/sh\nexec {SYSTEM_CXX} \"$@\" -static-libstdc++\n")
    wrapper.chmod(0o755)
    return str(wrapper)


def test_the_system_compiler_passes_the_check():
    result = run([sys.executable, CHECK, "check", "--cxx", SYSTEM_CXX])
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith("runtime libstdc++ ")


def test_a_compiler_newer_than_the_runtime_is_refused_with_the_fix(newer_compiler):
    result = run([sys.executable, CHECK, "check", "--cxx", newer_compiler])
    assert result.returncode == 1
    assert newer_compiler in result.stdout
    assert "GLIBCXX_3.4.99" in result.stdout          # what the compiler needs
    assert "libstdc++.so" in result.stdout            # the runtime torch loads
    assert "Fix: build with the system compiler" in result.stdout


def test_pick_replaces_an_incompatible_compiler_with_a_compatible_one(newer_compiler):
    result = run([sys.executable, CHECK, "pick", "--cxx", newer_compiler])
    assert result.returncode == 0, result.stderr
    picked = result.stdout.strip()
    assert picked != newer_compiler and os.path.isabs(picked)
    assert f"not using {newer_compiler}" in result.stderr
    assert run([sys.executable, CHECK, "check", "--cxx", picked]).returncode == 0


def test_a_compiler_that_links_the_runtime_statically_is_refused_and_replaced(
        static_runtime_compiler):
    result = run([sys.executable, CHECK, "check", "--cxx", static_runtime_compiler])
    assert result.returncode == 1
    assert static_runtime_compiler in result.stdout
    assert "links libstdc++ statically" in result.stdout and "libstdc++.a" in result.stdout
    assert "Fix: build with the system compiler" in result.stdout
    picked = run([sys.executable, CHECK, "pick", "--cxx", static_runtime_compiler])
    assert picked.returncode == 0, picked.stderr
    assert picked.stdout.strip() != static_runtime_compiler
    assert f"not using {static_runtime_compiler}" in picked.stderr


def test_a_non_libstdcxx_compiler_is_refused(tmp_path):
    """A compiler whose headers are not libstdc++'s (clang with libc++) cannot
    match torch's C++ types. Simulated by a preprocessor that defines nothing."""
    wrapper = tmp_path / "c++-libcxx"
    wrapper.write_text("#!/bin/sh\necho '#define _LIBCPP_VERSION 170000'\n")
    wrapper.chmod(0o755)
    result = run([sys.executable, CHECK, "check", "--cxx", str(wrapper)])
    assert result.returncode == 1
    assert "not libstdc++" in result.stdout


def configure(tmp_path, extra_args, env=None):
    build = tmp_path / "build"
    return run(["cmake", "-S", ROOT, "-B", str(build), "-DRINGREDUCE_BUILD_PYTHON=ON",
                "-DRINGREDUCE_BUILD_TESTS=OFF", "-DRINGREDUCE_WITH_CUDA=OFF",
                f"-DPython3_EXECUTABLE={sys.executable}", *extra_args], env=env, timeout=300)


def test_configure_stops_on_a_compiler_newer_than_the_runtime(tmp_path, newer_compiler):
    result = configure(tmp_path, [f"-DCMAKE_CXX_COMPILER={newer_compiler}"])
    output = result.stdout + result.stderr
    assert result.returncode != 0
    assert "ringreduce: incompatible compiler" in output
    assert newer_compiler in output and "Fix:" in output
    assert not list((tmp_path / "build").glob("**/_C*.so"))


def test_configure_stops_when_cxxflags_change_the_string_abi(tmp_path):
    wrong = 1 - int(torch._C._GLIBCXX_USE_CXX11_ABI)
    result = configure(tmp_path, [], env={"CXXFLAGS": f"-D_GLIBCXX_USE_CXX11_ABI={wrong}"})
    output = result.stdout + result.stderr
    assert result.returncode != 0
    assert "incompatible compiler flags" in output
    assert f"_GLIBCXX_USE_CXX11_ABI={int(torch._C._GLIBCXX_USE_CXX11_ABI)}" in output


def test_cpu_and_cuda_builds_of_one_release_match_other_releases_do_not():
    assert _build_check.mismatch("2.13.0+cpu", 1, "2.13.0+cu130", True) is None
    why = _build_check.mismatch("2.12.1+cpu", 1, "2.13.0+cpu", True)
    assert "2.12.1+cpu" in why and "2.13.0+cpu" in why
    assert "_GLIBCXX_USE_CXX11_ABI=0" in _build_check.mismatch("2.13.0", 0, "2.13.0", True)


@pytest.fixture
def foreign_build(tmp_path):
    """A copy of the installed package whose build info says another torch
    (imported from its own folder, ahead of the checkout and the install)."""
    package = tmp_path / "torch_ringreduce"
    shutil.copytree(os.path.dirname(torch_ringreduce.__file__), package,
                    ignore=shutil.ignore_patterns("__pycache__"))
    info = package / "_build_info.py"

    def build_for(version, abi):
        text = info.read_text()
        lines = [f'TORCH_VERSION = "{version}"' if line.startswith("TORCH_VERSION =") else
                 f"TORCH_CXX11_ABI = {abi}" if line.startswith("TORCH_CXX11_ABI =") else line
                 for line in text.splitlines()]
        info.write_text("\n".join(lines) + "\n")
        return str(tmp_path)
    return build_for


def test_an_extension_built_for_another_torch_is_a_clear_import_error(foreign_build):
    path = foreign_build("2.0.0+cpu", int(torch._C._GLIBCXX_USE_CXX11_ABI))
    result = run([sys.executable, "-c", "import torch_ringreduce"], env={"PYTHONPATH": path},
                 cwd=path)
    assert result.returncode == 1
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError:")
    assert "2.0.0+cpu" in last and torch.__version__ in last
    assert "pip install --no-build-isolation" in last


def test_an_extension_with_another_string_abi_is_a_clear_import_error(foreign_build):
    path = foreign_build(torch.__version__, 1 - int(torch._C._GLIBCXX_USE_CXX11_ABI))
    result = run([sys.executable, "-c", "import torch_ringreduce"], env={"PYTHONPATH": path},
                 cwd=path)
    assert result.returncode == 1
    assert "_GLIBCXX_USE_CXX11_ABI" in result.stderr.strip().splitlines()[-1]


def test_import_torch_still_works_with_a_foreign_build_installed(foreign_build):
    """torch's backend autoload imports us; our failure must not become torch's."""
    path = foreign_build("2.0.0+cpu", int(torch._C._GLIBCXX_USE_CXX11_ABI))
    result = run([sys.executable, "-c", "import torch; print('torch', torch.__version__)"],
                 env={"PYTHONPATH": path, "TORCH_DEVICE_BACKEND_AUTOLOAD": "1"}, cwd=path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"torch {torch.__version__}"
    assert "torch_ringreduce could not be loaded" in result.stderr
    assert "2.0.0+cpu" in result.stderr


def info(*args, env=None):
    return run([sys.executable, "-m", "torch_ringreduce.info", *args], env=env)


def info_facts(result):
    assert result.returncode == 0, result.stdout + result.stderr
    facts = dict(line.split(":", 1) for line in result.stdout.splitlines() if ":" in line)
    return {key.strip(): value.strip() for key, value in facts.items()}


def test_info_reports_builds_runtimes_and_transports():
    facts = info_facts(info())
    import torch_ringreduce
    # The build every rank of a group must share (FAILURES.md): its version and commit.
    assert facts["torch_ringreduce"].startswith(f"{torch_ringreduce.__version__}, commit "), facts
    assert facts["torch (running)"].startswith(torch.__version__)
    assert facts["torch (built against)"].split()[0] == torch.__version__
    assert facts["compiler"] and facts["C++ runtime (built)"].startswith("/")
    assert facts["CUDA path"].startswith(("compiled", "not compiled: "))
    assert facts["UCX"].startswith("1.")
    assert "tcp/lo" in facts["UCX transports"]
    assert facts["problems"] == "none"


def test_info_says_which_ucx_and_whether_it_registers_device_memory():
    from torch_ringreduce import _C, _build_info
    facts = info_facts(info())
    assert facts["UCX"].startswith(f"{_C.ucx_version()} (loaded /")
    assert facts["UCX (built against)"].startswith(
        f"{_build_info.UCX_VERSION} from {_build_info.UCX_ORIGIN} (/")
    if not _C.ucx_device_memory()["cuda_module"]:  # Debian's UCX: built without CUDA
        assert facts["device memory over UCX"] == (
            f"no (UCX {_C.ucx_version()} from {_build_info.UCX_ORIGIN} has no CUDA transports)")


def test_device_memory_line_names_the_cuda_transports_or_why_not():
    from torch_ringreduce.info import device_memory_over_ucx
    build = types.SimpleNamespace(UCX_ORIGIN="libucx-cu13 (pip)")
    memory = {"error": "", "cuda": True, "memory_types": ["host", "cuda"], "cuda_module": True}
    transports = ["tcp/lo", "cuda_copy/cuda", "cuda_ipc/cuda", "cuda_copy/cuda"]
    assert device_memory_over_ucx(memory, transports, "1.22.0", build) == (
        "yes (cuda_copy, cuda_ipc)")
    memory.update(cuda=False, memory_types=["host"])
    assert device_memory_over_ucx(memory, ["tcp/lo"], "1.22.0", build) == (
        "no (UCX 1.22.0 from libucx-cu13 (pip) has CUDA transports, but they find no CUDA "
        "driver or device here)")
    memory.update(error="UCX context init failed: No such device")
    assert device_memory_over_ucx(memory, [], "1.22.0", build).startswith("unknown (UCX context")


def test_info_fails_when_the_requested_nccl_cannot_load():
    result = info(env={"RINGREDUCE_NCCL_LIBRARY": "/nonexistent/libnccl.so.2"})
    assert result.returncode == 1
    assert "RINGREDUCE_NCCL_LIBRARY=/nonexistent/libnccl.so.2 asks for NCCL" in result.stdout


def test_info_fails_when_ucx_tls_names_only_missing_transports():
    result = info(env={"UCX_TLS": "rc_mlx5,ud_mlx5"})
    assert result.returncode == 1
    assert "UCX_TLS=rc_mlx5,ud_mlx5: UCX sees none of these transports" in result.stdout
    assert info(env={"UCX_TLS": "tcp,shm"}).returncode == 0


def test_info_require_gpu_matches_what_torch_sees():
    result = info("--require", "gpu")
    if torch.cuda.is_available():
        assert result.returncode == 0, result.stdout
    else:
        assert result.returncode == 1
        assert "--require gpu: torch sees no CUDA device" in result.stdout


def test_info_rejects_an_unknown_requirement():
    result = info("--require", "quantum")
    assert result.returncode == 2
    assert "unknown quantum" in result.stderr
