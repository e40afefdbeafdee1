"""Building against the installed torch takes its headers, libraries and ABI
from torch itself (cmake/torch_query.py), never through torch's CMake package,
whose Caffe2 part demands a complete CUDA toolkit for a CUDA wheel of torch.
A CUDA wheel is several GB, so its case is a stand-in: a torch module that
says CUDA 13.0 and whose lib folder holds only what the extension links
(scripts/torch_matrix.sh builds against the real ones)."""
import importlib.util
import os
import subprocess
import sys
import types

import pytest
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SPEC = importlib.util.spec_from_file_location(
    "torch_query", os.path.join(ROOT, "cmake", "torch_query.py"))
torch_query = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(torch_query)


def fake_torch(tmp_path, cuda="13.0", libraries=torch_query.LIBRARIES):
    """A torch module as a CUDA wheel looks to the query: headers, the four
    libraries the extension links, and none of torch's CUDA libraries."""
    package = tmp_path / "torch"
    (package / "include").mkdir(parents=True)
    (package / "lib").mkdir()
    for name in libraries:
        (package / "lib" / f"lib{name}.so").write_bytes(b"")
    distributed = types.SimpleNamespace(is_available=lambda: True,
                                        is_gloo_available=lambda: False)
    module = types.SimpleNamespace(
        __version__=f"2.14.1+cu{cuda.replace('.', '')}", __file__=str(package / "__init__.py"),
        version=types.SimpleNamespace(cuda=cuda), distributed=distributed,
        _C=types.SimpleNamespace(_GLIBCXX_USE_CXX11_ABI=True))
    include = [str(package / "include"), str(package / "include" / "torch" / "csrc" / "api")]
    return module, include, str(package / "lib")


def test_the_installed_torch_gives_what_the_extension_links():
    facts = torch_query.describe(torch, *torch_query.folders(torch))
    assert facts["TORCH_VERSION_STRING"] == torch.__version__
    assert facts["TORCH_CXX11_ABI"] == str(int(torch._C._GLIBCXX_USE_CXX11_ABI))
    assert facts["TORCH_CUDA_VERSION"] == (torch.version.cuda or "")
    names = [os.path.basename(path) for path in facts["TORCH_LIBRARY_FILES"]]
    assert names == ["libc10.so", "libtorch.so", "libtorch_cpu.so", "libtorch_python.so"]
    assert all(os.path.exists(path) for path in facts["TORCH_LIBRARY_FILES"])
    assert os.path.exists(os.path.join(facts["TORCH_INCLUDE_DIRS"][0], "torch", "extension.h"))
    # What torch's CMake package puts on torch_cpu, read from this torch.
    assert ("USE_DISTRIBUTED" in facts["TORCH_COMPILE_DEFINITIONS"]) == \
        torch.distributed.is_available()


def test_a_cuda_torch_needs_none_of_its_cuda_libraries(tmp_path):
    facts = torch_query.describe(*fake_torch(tmp_path))
    assert facts["TORCH_CUDA_VERSION"] == "13.0"
    assert not any("cuda" in os.path.basename(p) for p in facts["TORCH_LIBRARY_FILES"])
    assert facts["TORCH_COMPILE_DEFINITIONS"] == ["USE_DISTRIBUTED"]


def test_a_torch_without_a_library_it_links_is_named(tmp_path):
    module, include, lib = fake_torch(tmp_path, libraries=("c10", "torch", "torch_cpu"))
    with pytest.raises(torch_query.TorchQueryError, match="libtorch_python.so"):
        torch_query.describe(module, include, lib)


def test_the_cmake_text_quotes_paths():
    text = torch_query.cmake_text({"A": ['/x/"q"/$HOME', "/y"], "B": "1"})
    assert 'set(A "/x/\\"q\\"/\\$HOME" "/y")' in text
    assert 'set(B "1")' in text


def test_configure_never_loads_torchs_cmake_package(tmp_path):
    """The configure step takes torch from torch_query, not find_package(Torch)."""
    build = tmp_path / "build"
    result = subprocess.run(
        ["cmake", "-S", ROOT, "-B", str(build), "-DRINGREDUCE_BUILD_TESTS=OFF",
         "-DRINGREDUCE_WITH_CUDA=OFF", f"-DPython3_EXECUTABLE={sys.executable}"],
        capture_output=True, text=True, timeout=300,
        env=dict(os.environ, TORCH_DEVICE_BACKEND_AUTOLOAD="0"))
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"ringreduce: building against torch {torch.__version__} (" in result.stdout
    cache = (build / "CMakeCache.txt").read_text()
    assert "Torch_DIR" not in cache and "Caffe2_DIR" not in cache
    assert "set(TORCH_LIBRARY_FILES" in (build / "torch_facts.cmake").read_text()
