"""python -m torch_ringreduce.info: what was built, against what, and whether
what this environment asks for can work here (our `horovodrun --check-build`).

Prints one `name: value` line per fact, then the problems found. Exits 1 when
something asked for cannot work: a setting in the environment
(RINGREDUCE_CUDA_ALGO, RINGREDUCE_NCCL_LIBRARY, UCX_TLS) or a capability named
with --require. Paste its output into bug reports.

Under torchrun (WORLD_SIZE and RANK set) with a GPU and the CUDA path, every
rank also forms a group, runs one CUDA allreduce on its LOCAL_RANK's GPU and
prints what its CUDA paths are: the topology, the peer-access probe's verdict
(which pair failed and why), which paths set up and why the others did not.
"""
import argparse
import os
import platform
import sys

import torch

from . import _C, _build_info

# What each UCX_TLS alias stands for, by transport-name prefix.
_UCX_ALIASES = {"sm": ("sysv", "posix", "cma", "knem", "xpmem"),
                "shm": ("sysv", "posix", "cma", "knem", "xpmem"),
                "mm": ("sysv", "posix", "xpmem"), "ib": ("rc", "ud", "dc"),
                "rc": ("rc",), "ud": ("ud",), "dc": ("dc",), "cuda": ("cuda",),
                "rocm": ("rocm",)}
_DEVICE_ALGORITHMS = ("oneshot", "twoshot", "staged", "nccl", "flags", "ring")
REQUIREMENTS = ("cuda", "nccl", "gpu")


def loaded_libstdcxx():
    with open("/proc/self/maps") as maps:
        for line in maps:
            path = line.split()[-1]
            if os.path.basename(path).startswith("libstdc++.so"):
                return os.path.realpath(path)
    return "none loaded"


def ucx_tls_problem(requested, transports):
    """Why UCX_TLS cannot be met by the transports UCX sees, or None."""
    if not requested or requested.startswith("^"):
        return None
    names = {t.split("/")[0] for t in transports}
    missing = []
    for entry in filter(None, (e.strip() for e in requested.split(","))):
        if entry == "all":
            return None
        prefixes = _UCX_ALIASES.get(entry, (entry,))
        if not any(name == p or name.startswith(p + "_") for name in names for p in prefixes):
            missing.append(entry)
    if len(missing) == len([e for e in requested.split(",") if e.strip()]):
        return (f"UCX_TLS={requested}: UCX sees none of these transports here "
                f"(it sees {', '.join(sorted(names)) or 'none'})")
    return None


def ucx_built_against(build):
    """Which UCX the build linked: where from, its release and library folder
    (builds from before these were recorded say only the API version)."""
    origin = getattr(build, "UCX_ORIGIN", "")
    if not origin:
        return f"UCX API {_C.ucx_built_version()}"
    return f"{build.UCX_VERSION} from {origin} ({build.UCX_LIBRARY_DIR})"


def device_memory_over_ucx(memory, transports, version, build):
    """Whether UCX registers CUDA memory (ucp_context_query's memory types), so
    that a device pointer could go to UCX itself, and why not."""
    if memory["error"]:
        return f"unknown ({memory['error']})"
    if memory["cuda"]:
        cuda = sorted({t.split("/")[0] for t in transports if t.startswith("cuda")})
        return f"yes ({', '.join(cuda) or 'memory types: ' + ', '.join(memory['memory_types'])})"
    origin = getattr(build, "UCX_ORIGIN", "")
    which = f"UCX {version}" + (f" from {origin}" if origin else "")
    if memory["cuda_module"]:
        return f"no ({which} has CUDA transports, but they find no CUDA driver or device here)"
    return f"no ({which} has no CUDA transports)"


def _small_loops(build):
    """', avx2 below 256 KiB' where calls over fewer bytes take a narrower set
    (core/math/host_loops.h: the same bits, no 512-bit warm-up per call)."""
    small = build.get("host_loops_small")
    if small is None or small == build.get("host_loops"):
        return ""
    return f", {small} below {build['host_loops_wide_from'] >> 10} KiB"


def collect(require=()):
    """(facts as an ordered dict, problems as a list of sentences)."""
    build = _C.build_info()
    nccl_found, nccl_detail = _C.nccl_status()
    transports = _C.ucx_transports()
    cuda_available = torch.cuda.is_available()
    facts = {
        # The version and source commit every rank of a group must share.
        "torch_ringreduce": _C.build_identity(),
        "torch (built against)": f"{_build_info.TORCH_VERSION} "
                                 f"(_GLIBCXX_USE_CXX11_ABI={_build_info.TORCH_CXX11_ABI})",
        "torch (running)": f"{torch.__version__} "
                           f"(_GLIBCXX_USE_CXX11_ABI={int(torch._C._GLIBCXX_USE_CXX11_ABI)})",
        "python": f"{platform.python_version()} ({sys.executable})",
        "compiler": _build_info.CXX_COMPILER,
        "C++ runtime (built)": _build_info.LIBSTDCXX_RUNTIME,
        "C++ runtime (loaded)": loaded_libstdcxx(),
        "CPU path": "compiled" if build["cpu_path"] else "missing",
        "CPU reduction loops": (f"{build.get('host_loops', 'none')}{_small_loops(build)} "
                                f"(this CPU runs: {', '.join(build['host_loops_available'])})"),
        "CUDA path": (f"compiled ({_build_info.CUDA_DETAIL})" if build["cuda_path"]
                      else f"not compiled: {_build_info.CUDA_DETAIL} "
                           "(CUDA tensors go through host staging)"),
        "CUDA runtime": build["cuda_runtime"],
        "CUDA devices (torch)": (f"{torch.cuda.device_count()}" if cuda_available
                                 else f"none (torch {'has' if torch.version.cuda else 'lacks'} CUDA)"),
        "NCCL": (nccl_detail if nccl_found else f"not found: {nccl_detail}"),
        "UCX": f"{_C.ucx_version()} (loaded {_C.ucx_library() or 'from an unknown file'})",
        "UCX (built against)": ucx_built_against(_build_info),
        "UCX transports": ", ".join(transports) or "none found",
        "device memory over UCX": device_memory_over_ucx(_C.ucx_device_memory(), transports,
                                                         _C.ucx_version(), _build_info),
    }

    problems = []
    if "host_loops_error" in build:
        problems.append(build["host_loops_error"])
    if not transports:
        problems.append("UCX finds no transport: no collective can run")
    tls = ucx_tls_problem(os.environ.get("UCX_TLS", ""), transports)
    if tls:
        problems.append(tls)
    algorithm = os.environ.get("RINGREDUCE_CUDA_ALGO", "")
    if algorithm in _DEVICE_ALGORITHMS and not build["cuda_path"]:
        problems.append(f"RINGREDUCE_CUDA_ALGO={algorithm} needs the CUDA path, which was "
                        f"not compiled ({_build_info.CUDA_DETAIL})")
    if (algorithm == "nccl" or os.environ.get("RINGREDUCE_NCCL_LIBRARY")) and not nccl_found:
        asked = ("RINGREDUCE_CUDA_ALGO=nccl" if algorithm == "nccl"
                 else f"RINGREDUCE_NCCL_LIBRARY={os.environ['RINGREDUCE_NCCL_LIBRARY']}")
        problems.append(f"{asked} asks for NCCL, which cannot be loaded: {nccl_detail}")
    if "cuda" in require and not build["cuda_path"]:
        problems.append(f"--require cuda: the CUDA path was not compiled "
                        f"({_build_info.CUDA_DETAIL})")
    if "nccl" in require and not nccl_found:
        problems.append(f"--require nccl: NCCL cannot be loaded: {nccl_detail}")
    if "gpu" in require and not cuda_available:
        problems.append("--require gpu: torch sees no CUDA device")
    return facts, problems


def group_cuda_paths():
    """Under torchrun on GPUs: this rank's CUDA paths after one allreduce
    (None elsewhere)."""
    if "WORLD_SIZE" not in os.environ or "RANK" not in os.environ:
        return None
    if not torch.cuda.is_available() or not _C.build_info()["cuda_path"]:
        return None
    import torch.distributed as dist
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
    torch.cuda.set_device(device)
    dist.init_process_group("ringreduce")
    try:
        probe = torch.ones(1024, device=device)
        dist.all_reduce(probe)
        torch.cuda.synchronize(device)
        backend = dist.group.WORLD._get_backend(device)
        return backend._cuda_paths()
    finally:
        dist.destroy_process_group()


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m torch_ringreduce.info",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--require", default="",
                        help=f"comma-separated capabilities that must work: {', '.join(REQUIREMENTS)}")
    args = parser.parse_args(argv)
    require = {r.strip() for r in args.require.split(",") if r.strip()}
    unknown = require - set(REQUIREMENTS)
    if unknown:
        parser.error(f"--require: unknown {', '.join(sorted(unknown))} "
                     f"(known: {', '.join(REQUIREMENTS)})")
    facts, problems = collect(require)
    paths = group_cuda_paths()
    if paths is not None:
        facts[f"CUDA paths (rank {os.environ['RANK']})"] = paths
    for key, value in facts.items():
        print(f"{key + ':':<23} {value}")
    if problems:
        print("problems:")
        for problem in problems:
            print(f"  - {problem}")
        return 1
    print("problems:               none")
    return 0


if __name__ == "__main__":
    sys.exit(main())
