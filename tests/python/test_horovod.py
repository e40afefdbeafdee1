"""torch_ringreduce.horovod (Horovod's PyTorch API), the horovodrun-style
launcher, and examples/horovod_train.py against plain DDP."""
import os
import re
import subprocess
import sys
import textwrap

import pytest
import torch

from horovod_cases import REPO, api_sweep, ddp_reference, horovod_errors
from multiproc import run_world

LAUNCHER = [sys.executable, "-m", "torch_ringreduce.run"]


def _env(**extra):
    env = dict(os.environ)
    env.update({"UCX_NET_DEVICES": "lo", "OMP_NUM_THREADS": "1"})
    env["PYTHONPATH"] = os.pathsep.join(p for p in (REPO, env.get("PYTHONPATH")) if p)
    env.update(extra)
    return env


def _run(cmd, timeout=180, **kwargs):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kwargs)


@pytest.mark.parametrize("world_size", [2, 3])
def test_every_api_function_gives_exact_results(world_size):
    for rank, report in enumerate(run_world(world_size, api_sweep, timeout=240)):
        assert report["failures"] == [], f"rank {rank}:\n" + "\n".join(report["failures"][:30])
        assert report["checked"] > 150


def test_bad_use_raises_horovod_like_errors_and_mismatches_never_hang():
    results = run_world(2, horovod_errors, timeout=180)
    expected_words = {
        "name": ["'grad.a'", "'grad.b'"], "shape": ["[2, 3]", "[3, 2]"],
        "size": ["[4]", "[5]"], "dtype": ["float32", "int32"], "op": ["op Sum", "op Max"],
        "kind": ["allreduce", "broadcast"], "root": ["root 0", "root 1"],
        "allgather": ["[*, 3]", "[*, 4]"], "async": ["'a'", "'b'"],
        "optimizer": ["'allreduce.bias,weight'", "'allreduce.other.bias,other.weigh'..."],
    }
    for rank, result in enumerate(results):
        assert result["problems"] == {}, f"rank {rank}: {result['problems']}"
        assert result["usable"], f"rank {rank}: hvd unusable after argument errors"
        for case, words in expected_words.items():
            kind, message = result["seen"][case]
            assert kind == "CollectiveMismatchError", (rank, case, result["seen"][case])
            assert "Mismatched collectives" in message and "rank 1 called" in message, message
            for word in words:
                assert word in message, (case, message)
        kind, message = result["seen"]["after size"]
        assert kind == "HorovodInternalError", result["seen"]["after size"]
        assert "unusable after an earlier failure" in message and "different collective" in message


def test_launcher_runs_ranks_that_see_their_size_and_ranks(tmp_path):
    script = tmp_path / "who.py"
    script.write_text(textwrap.dedent("""
        import torch, torch_ringreduce.horovod as hvd
        hvd.init()
        total = hvd.allreduce(torch.tensor([hvd.rank()]), op=hvd.Sum).item()
        print(f"rank {hvd.rank()} size {hvd.size()} local_rank {hvd.local_rank()} "
              f"local_size {hvd.local_size()} sum {total}", flush=True)
    """))
    proc = _run(LAUNCHER + ["-np", "2", "python", str(script)], env=_env(), cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    # The ranks share the pipe: their lines may interleave, so match each one exactly.
    lines = sorted(re.findall(r"rank \d size \d local_rank \d local_size \d sum \d", proc.stdout))
    assert lines == ["rank 0 size 2 local_rank 0 local_size 2 sum 1",
                     "rank 1 size 2 local_rank 1 local_size 2 sum 1"], proc.stdout


def test_without_a_launcher_init_makes_a_world_of_one(tmp_path):
    code = ("import torch, torch_ringreduce.horovod as hvd; hvd.init(); "
            "print(hvd.size(), hvd.rank(), hvd.local_size(), hvd.allreduce(torch.ones(2)).tolist(), "
            "hvd.allgather(torch.ones(1, 2)).shape[0]); hvd.shutdown(); print(hvd.is_initialized())")
    env = {k: v for k, v in _env().items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    proc = _run([sys.executable, "-c", code], env=env, cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split("\n")[:2] == ["1 0 1 [1.0, 1.0] 1", "False"], proc.stdout


def test_launcher_runs_two_hosts_as_two_torchrun_agents(tmp_path):
    """The several-hosts path, with both "hosts" on this machine: --ssh starts a
    local host's torchrun directly. Two agents are two nodes to hvd."""
    import socket

    with socket.socket() as s:  # a free port for the static rendezvous
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    script = tmp_path / "nodes.py"
    script.write_text(textwrap.dedent("""
        import torch_ringreduce.horovod as hvd
        hvd.init()
        print(f"rank {hvd.rank()} size {hvd.size()} local {hvd.local_rank()}/{hvd.local_size()} "
              f"cross {hvd.cross_rank()}/{hvd.cross_size()}", flush=True)
    """))
    proc = _run(LAUNCHER + ["-np", "2", "-H", "localhost:1,127.0.0.1:1", "--ssh",
                            "--master-port", str(port), "python", str(script)],
                env=_env(), cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = sorted(re.findall(r"rank \d size \d local \d/\d cross \d/\d", proc.stdout))
    # Node ranks follow -H: rank 0 on the first host, rank 1 on the second.
    assert lines == ["rank 0 size 2 local 0/1 cross 0/2",
                     "rank 1 size 2 local 0/1 cross 1/2"], proc.stdout


def test_launcher_prints_one_torchrun_per_host_for_several_hosts(capsys, monkeypatch):
    from torch_ringreduce import run

    monkeypatch.setenv("UCX_TLS", "tcp")
    code = run.main(["-np", "4", "-H", "nodeA:2,nodeB:2", "--network-interface", "eth1",
                     "-p", "2222", "--timeline-filename", "/tmp/tl.json",
                     "python", "train.py", "--epochs", "3"])
    out = capsys.readouterr().out
    assert code == 0
    lines = [line for line in out.splitlines() if line.startswith("[node")]
    assert [line.split()[0] for line in lines] == ["[nodeA]", "[nodeB]"], out
    for node_rank, line in enumerate(lines):
        for needle in ("-m torch.distributed.run --nnodes 2", f"--node-rank {node_rank}",
                       "--master-addr nodeA", "--nproc-per-node 2", "train.py --epochs 3",
                       "UCX_NET_DEVICES=eth1", "UCX_TLS=tcp",
                       "RINGREDUCE_TIMELINE='/tmp/tl.{rank}.json'"):
            assert needle in line, (needle, line)
    assert "Nothing was started" in out
    with pytest.raises(SystemExit, match="same number of processes"):
        run.main(["-np", "3", "-H", "nodeA:2,nodeB:2", "python", "train.py"])
    assert run.script_args(["python3", "-m", "pkg.train", "-x"]) == ["-m", "pkg.train", "-x"]
    assert run.script_args(["./train.sh"]) == ["--no-python", "./train.sh"]
    assert run.timeline_path("/a/t_{rank}.json") == "/a/t_{rank}.json"
    assert run.timeline_path("timeline") == "timeline.{rank}"


def test_example_trains_to_the_same_parameters_as_ddp(tmp_path):
    """examples/horovod_train.py under the launcher against the same training
    written with DistributedDataParallel: same seed, same data order."""
    args = {"seed": 7, "samples": 512, "batch_size": 16, "lr": 0.05, "momentum": 0.5,
            "epochs": 2}
    saved = tmp_path / "hvd.pt"
    proc = _run(LAUNCHER + ["-np", "2", "python", os.path.join(REPO, "examples", "horovod_train.py"),
                            "--seed", "7", "--samples", "512", "--batch-size", "16",
                            "--lr", "0.05", "--momentum", "0.5", "--epochs", "2",
                            "--save", str(saved)], env=_env(), cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    losses = [float(x) for x in re.findall(r"Test set: Average loss: ([\d.]+)", proc.stdout)]
    assert len(losses) == 2 and losses[1] < losses[0], proc.stdout
    horovod = torch.load(saved)
    ddp = run_world(2, ddp_reference, args, timeout=180)
    for rank in range(2):
        assert ddp[rank].keys() == horovod.keys()
        for name, value in horovod.items():
            # float32: the average is computed as sum/2 (hvd) or sum of halves (DDP).
            torch.testing.assert_close(value, ddp[rank][name], rtol=1e-5, atol=1e-6)


def test_elastic_run_resumes_from_the_last_commit_after_a_torchrun_restart(tmp_path):
    """Rank 1 dies mid-training; torchrun restarts both ranks; they resume from
    the state rank 0 committed to its file, apply every batch exactly once,
    and the file is gone at the end."""
    script = os.path.join(REPO, "tests", "python", "horovod_elastic_script.py")
    proc = _run(LAUNCHER + ["-np", "2", "--max-restarts", "1", "python", script,
                            "--batches", "12", "--kill-at", "5"],
                env=_env(TMPDIR=str(tmp_path)), cwd=str(tmp_path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout
    assert "rank 1 attempt 0: dying at batch 5" in out, out
    for rank in (0, 1):
        assert f"rank {rank} attempt 1: starting at batch 5" in out, out
        assert f"rank {rank}: reset" in out, out
        # -0.5 * sum over batches b of the averaged gradient [b + 1, 1.5].
        assert f"rank {rank} final weight [-39.0, -9.0]" in out, out
    assert not list(tmp_path.glob("ringreduce-elastic-*")), list(tmp_path.iterdir())
