"""benchmarks/null_backend: the floor of collective_anchors.py. Every call
through torch.distributed must return done and leave every tensor as it
was, in each call form the benchmark times (a floor that copied, as torch's
fake backend does in its gathers, would grow with the bytes)."""
import os
import subprocess
import sys
import textwrap

BENCHMARKS = os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks")

SCRIPT = textwrap.dedent("""
    import os, sys, warnings
    import torch, torch.distributed as dist
    import torch.distributed._functional_collectives as funcol
    sys.path.insert(0, sys.argv[1])
    import null_backend
    warnings.simplefilter("ignore", FutureWarning)
    null_backend.register()
    null_backend.register()  # twice: registered once
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=sys.argv[2])
    dist.init_process_group("null", rank=0, world_size=2, store=dist.HashStore())
    x = torch.arange(4.0)
    out = torch.full((8,), -1.0)
    outs = [torch.full((4,), -2.0) for _ in range(2)]
    dist.all_reduce(x)
    dist.all_gather_into_tensor(out, x)
    dist.all_gather(outs, x)
    dist.reduce_scatter_tensor(x, out)
    dist.all_to_all_single(out, torch.arange(8.0))
    dist.broadcast(x, 1)
    dist.send(x, 1)
    dist.recv(x, 1)
    dist.barrier()
    work = dist.all_reduce(x, async_op=True)
    future = work.get_future()
    assert work.is_completed() and work.wait() and future.done()
    with dist._coalescing_manager(async_ops=True) as manager:
        dist.all_reduce(x)
        dist.all_reduce(x)
    manager.wait()
    with dist._coalescing_manager():
        dist.all_gather_into_tensor(out, x)
        dist.all_gather_into_tensor(out, x)
    reduced = funcol.all_reduce(x, "sum", dist.group.WORLD).wait()
    assert dist.get_backend() == "null"
    assert torch.equal(x, torch.arange(4.0)), x
    assert torch.equal(out, torch.full((8,), -1.0)), out
    assert all(torch.equal(o, torch.full((4,), -2.0)) for o in outs)
    assert reduced.shape == x.shape
    dist.destroy_process_group()
    print("null backend: every call done, nothing moved")
""")


def test_every_call_returns_done_and_moves_nothing(tmp_path):
    port = str(20000 + os.getpid() % 20000)
    env = dict(os.environ, TORCH_EXTENSIONS_DIR=str(tmp_path / "extensions"))
    done = subprocess.run([sys.executable, "-c", SCRIPT, BENCHMARKS, port], env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "every call done, nothing moved" in done.stdout
