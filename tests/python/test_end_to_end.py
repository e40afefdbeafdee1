"""What a user runs: torchrun on the example, the info CLI, debug logging, and
the torch.backends autoload (including a broken install)."""
import os
import re
import shutil
import subprocess
import sys
import textwrap

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TORCHRUN = [sys.executable, "-m", "torch.distributed.run"]


def _env(**extra):
    env = dict(os.environ)
    env.update({"UCX_NET_DEVICES": "lo", "OMP_NUM_THREADS": "1"})
    env.update(extra)
    return env


def _needed_libraries(path):
    """The DT_NEEDED entries of an ELF file: what it links by name."""
    out = subprocess.run(["readelf", "-d", path], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", out.stdout)


def _run(cmd, timeout=240, **kwargs):
    # subprocess.run kills the child when the timeout expires.
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kwargs)


def test_torchrun_ddp_example_trains():
    proc = _run(TORCHRUN + ["--standalone", "--nproc-per-node", "2",
                            os.path.join(REPO, "examples", "train_ddp.py"), "--steps", "60"],
                env=_env(), cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-3000:]
    match = re.search(r"backend ringreduce, world 2: loss ([\d.]+) -> ([\d.]+)", proc.stdout)
    assert match, proc.stdout
    first, last = float(match.group(1)), float(match.group(2))
    assert last < first / 4, (first, last)


def _nvcc_present():
    return shutil.which("nvcc") is not None or os.path.exists("/usr/local/cuda/bin/nvcc")


def test_cuda_path_is_compiled_wherever_nvcc_is_and_links_cudart_statically():
    import torch_ringreduce
    from torch_ringreduce import _C, _build_info
    info = _C.build_info()
    # An nvcc whose toolkit lacks what the path links builds the CPU path
    # only, and says so (cmake/CudaPath.cmake).
    assert info["cuda_path"] is _nvcc_present() or (
        "cannot build a CUDA program" in _build_info.CUDA_DETAIL), (info, _build_info.CUDA_DETAIL)
    if info["cuda_path"]:
        assert "linked statically" in info["cuda_runtime"], info
    # The extension must load where there is no CUDA runtime or driver:
    # nothing CUDA (nor NCCL) among the libraries it names itself. (ldd's
    # list holds torch's own too: a CUDA torch's libraries bring its wheel's
    # libcudart and libnccl, which the extension does not need.)
    so = torch_ringreduce._C.__file__
    needed = _needed_libraries(so)
    assert needed and "libtorch_cpu.so" in needed, needed
    for name in needed:
        assert not name.startswith(("libcudart", "libnccl", "libcuda.", "libtorch_cuda")), needed


def test_debug_info_logs_group_transports_and_collectives(tmp_path):
    script = tmp_path / "two_ops.py"
    script.write_text(textwrap.dedent("""
        import torch, torch.distributed as dist, torch_ringreduce
        dist.init_process_group("ringreduce")
        dist.all_reduce(torch.ones(8))
        dist.broadcast(torch.ones(8), src=0)
        dist.all_reduce(torch.ones(2 << 20))  # 8 MiB: past the host channel, over UCX
        dist.destroy_process_group()
    """))
    proc = _run(TORCHRUN + ["--standalone", "--nproc-per-node", "2", str(script)],
                env=_env(RINGREDUCE_DEBUG="INFO"), cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    log = proc.stderr
    assert re.search(r"\[0\] RINGREDUCE INFO group '.*' created: rank 0 of 2", log), log[-3000:]
    assert "connected to rank 1" in log and "lane[" in log, log[-3000:]
    # Queued ("8 x float32 SUM") or through the host channel past the queue
    # ("8 x float32 SUM (direct)"): the same names either way.
    assert re.search(r"allreduce #1: 8 x float32 SUM", log), log[-3000:]
    assert "broadcast #2" in log, log[-3000:]


def test_import_torch_autoloads_the_backend(tmp_path):
    code = ("import torch.distributed as dist; "
            "print('RINGREDUCE' in dist.Backend._plugins)")
    proc = _run([sys.executable, "-c", code], timeout=120, env=_env(), cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "True", proc.stdout + proc.stderr


def test_broken_install_does_not_break_import_torch(tmp_path):
    fake = tmp_path / "torch_ringreduce"
    fake.mkdir()
    (fake / "__init__.py").write_text("raise ImportError('simulated broken extension')\n")
    proc = _run([sys.executable, "-c", "import torch; print('torch imported')"], timeout=120,
                env=_env(PYTHONPATH=str(tmp_path)), cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert "torch imported" in proc.stdout
    assert "torch_ringreduce could not be loaded" in proc.stderr
    assert "simulated broken extension" in proc.stderr


def test_torchrun_restarts_a_killed_worker_and_resumes_from_checkpoint(tmp_path):
    checkpoint = tmp_path / "ckpt.pt"
    # torchrun checks its workers every 0.1 s by default and SIGTERMs the
    # survivor as soon as it sees the death, which can come before the
    # survivor has heard of it (30-40 ms here; with a 2 s interval CI still
    # lost that race about once in fifty runs). The example ends its step on
    # SIGTERM, so the survivor's report never depends on that race, while a
    # survivor that only a timeout would free is still SIGKILLed by torchrun
    # with nothing reported.
    proc = _run(TORCHRUN + ["--standalone", "--nproc-per-node", "2", "--max-restarts", "2",
                            "--monitor-interval", "2",
                            os.path.join(REPO, "examples", "train_resilient.py"),
                            "--checkpoint", str(checkpoint), "--steps", "30",
                            "--kill-at-step", "12"],
                env=_env(), cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout
    assert "rank 1: killing myself at step 12" in out, out
    # The survivor saw the death reported, not a timeout.
    assert "rank 1 is gone" in proc.stderr, proc.stderr[-3000:]
    assert "attempt 1: resumed from step 10" in out, out
    assert "attempt 1: finished 30 steps" in out, out
