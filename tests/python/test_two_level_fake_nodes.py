"""The two-level collectives through torch on "nodes" faked on one host: each
rank moves into a UTS namespace of its own and takes the hostname of its
node, so the backend's exchange of host identities finds 2 nodes of 2 ranks
(or of 3 and 1) and RINGREDUCE_ALGORITHM=two_level runs the two-level
allreduce, reduce-scatter and allgather for real, on uneven nodes too (the
sweeps check every op x dtype against local references and gloo). UCX's shared-memory transports pair
processes by host, so the ranks talk TCP over the loopback; gloo is pointed
at the loopback for the same reason. Needs root (CAP_SYS_ADMIN) for
unshare; skipped otherwise. The last two tests need neither: ranks named
onto nodes by RINGREDUCE_HOST_ID."""
import os

import pytest

from collective_cases import run_sweep, run_sweep_more
from multiproc import TRANSPORTS, run_world

CLONE_NEWUTS = 0x04000000


def _on_fake_node(rank, world, init_method, nodes_of, sweep):
    import ctypes
    import socket

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(CLONE_NEWUTS) != 0:
        return {"skip": f"unshare(CLONE_NEWUTS): {os.strerror(ctypes.get_errno())}"}
    socket.sethostname(f"ringreduce-fake-node-{nodes_of[rank]}")
    report = sweep(rank, world, init_method)
    report["hostname"] = socket.gethostname()
    return report


# Blocks (torchrun's layout), nodes whose ranks are not contiguous, and
# nodes of 3 and 1 ranks.
@pytest.mark.parametrize("nodes_of", [(0, 0, 1, 1), (0, 1, 1, 0), (0, 1, 0, 0)],
                         ids=["blocks", "interleaved", "uneven"])
@pytest.mark.parametrize("sweep,checked", [(run_sweep, 800), (run_sweep_more, 400)],
                         ids=["allreduce_allgather", "reduce_scatter"])
def test_two_level_on_two_fake_nodes_matches_references(nodes_of, sweep, checked):
    env = dict(TRANSPORTS["tcp"], RINGREDUCE_ALGORITHM="two_level", GLOO_SOCKET_IFNAME="lo")
    reports = run_world(4, _on_fake_node, list(nodes_of), sweep, env=env, timeout=300)
    if "skip" in reports[0]:
        pytest.skip(reports[0]["skip"])
    for rank, report in enumerate(reports):
        assert report["hostname"] == f"ringreduce-fake-node-{nodes_of[rank]}"
        assert report["failures"] == [], f"rank {rank}:\n" + "\n".join(report["failures"][:20])
        assert report["checked"] > checked


def _collectives_once(rank, world, init_method):
    import torch
    import torch.distributed as dist

    dist.init_process_group("ringreduce", init_method=init_method, rank=rank, world_size=world)
    full = torch.arange(4 * world * 3, dtype=torch.int64) + rank
    dist.all_reduce(full)
    summed = full.tolist()
    out = torch.empty(4 * 3, dtype=torch.int64)
    dist.reduce_scatter_tensor(out, torch.arange(4 * world * 3, dtype=torch.int64) + rank)
    gathered = torch.empty(world * 5, dtype=torch.int64)
    dist.all_gather_into_tensor(gathered, torch.full((5,), rank, dtype=torch.int64))
    return {"all_reduce": summed, "reduce_scatter": out.tolist(), "all_gather": gathered.tolist()}


@pytest.mark.parametrize("nodes_of,most", [([0, 1, 1, 0], 2), ([0, 1, 0, 0], 3)],
                         ids=["interleaved", "uneven"])
def test_two_level_runs_on_two_fake_nodes(capfd, nodes_of, most):
    """The sweeps above pass whatever ran; this shows what ran: the exchange
    finds 2 nodes and all_reduce, reduce_scatter and all_gather take the
    two-level form, on uneven nodes too (RINGREDUCE_DEBUG=TRACE names each
    choice on stderr)."""
    env = dict(TRANSPORTS["tcp"], RINGREDUCE_ALGORITHM="two_level", RINGREDUCE_DEBUG="TRACE")
    reports = run_world(4, _on_fake_node, nodes_of, _collectives_once, env=env, timeout=120)
    if "skip" in reports[0]:
        pytest.skip(reports[0]["skip"])
    _check_two_level_ran(capfd.readouterr().err, reports, most)


def _check_two_level_ran(err, reports, most):
    assert f"host identities: 2 node(s), at most {most} rank(s) per node" in err, err[-3000:]
    summed = [4 * i + 6 for i in range(4 * 4 * 3)]  # arange + r, over ranks 0..3
    for rank, report in enumerate(reports):
        assert report["all_reduce"] == summed
        assert report["reduce_scatter"] == summed[rank * 12:(rank + 1) * 12]
        assert report["all_gather"] == [r for r in range(4) for _ in range(5)]
    for name in ("allreduce", "reduce_scatter_tensor", "all_gather_into_tensor"):
        lines = [line for line in err.splitlines() if name in line and " B: " in line]
        assert lines and all("two_level (across nodes:" in line for line in lines), lines


# The same multi-node logic without root or namespaces, so that an
# unprivileged CI runs it too: RINGREDUCE_HOST_ID names each rank's node
# (core/base/host_identity.h), and the exchange of host identities finds the
# nodes while the processes share one machine (UCX's shared memory still
# pairs them, so these run on its default transports).
def _on_named_node(rank, world, init_method, nodes_of, body):
    os.environ["RINGREDUCE_HOST_ID"] = f"ringreduce-named-node-{nodes_of[rank]}"
    return body(rank, world, init_method)


# Two worlds only (the suite's time): what ran on uneven nodes, and one
# sweep on nodes whose ranks are not contiguous.
def test_two_level_runs_on_named_uneven_nodes_without_root(capfd):
    env = {"RINGREDUCE_ALGORITHM": "two_level", "RINGREDUCE_DEBUG": "TRACE"}
    reports = run_world(4, _on_named_node, [0, 1, 0, 0], _collectives_once, env=env, timeout=120)
    _check_two_level_ran(capfd.readouterr().err, reports, 3)


def test_two_level_on_named_interleaved_nodes_matches_references():
    """Every op x dtype against local references and gloo, without root."""
    env = {"RINGREDUCE_ALGORITHM": "two_level", "GLOO_SOCKET_IFNAME": "lo"}
    reports = run_world(4, _on_named_node, [0, 1, 1, 0], run_sweep, env=env, timeout=300)
    for rank, report in enumerate(reports):
        assert report["failures"] == [], f"rank {rank}:\n" + "\n".join(report["failures"][:20])
        assert report["checked"] > 800
