"""Two "nodes" on one machine: two network namespaces joined by a veth pair,
one torchrun per node, DDP over UCX's TCP path; then again with delay and
loss injected by tc netem. Needs root, network namespaces and (for the second
test) the netem qdisc; each test skips with the reason when one is missing.

Addresses are from TEST-NET-1 (192.0.2.0/24, RFC 5737): they exist only on
the veth pair inside the two namespaces this test creates and deletes.
"""
import contextlib
import os
import re
import shutil
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NODE_ADDRESSES = ["192.0.2.1", "192.0.2.2"]


def _ip(*args, check=True):
    return subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30, check=check)


@contextlib.contextmanager
def two_namespaces():
    if os.geteuid() != 0 or shutil.which("ip") is None:
        pytest.skip("needs root and iproute2 to create network namespaces")
    tag = f"rr{os.getpid() % 100000}"
    names = [f"{tag}a", f"{tag}b"]
    devices = [f"{tag}va", f"{tag}vb"]
    try:
        for name in names:
            made = _ip("netns", "add", name, check=False)
            if made.returncode != 0:
                pytest.skip(f"cannot create network namespaces here: {made.stderr.strip()}")
        _ip("link", "add", devices[0], "type", "veth", "peer", "name", devices[1])
        for name, device, address in zip(names, devices, NODE_ADDRESSES):
            _ip("link", "set", device, "netns", name)
            _ip("-n", name, "addr", "add", f"{address}/24", "dev", device)
            _ip("-n", name, "link", "set", device, "up")
            _ip("-n", name, "link", "set", "lo", "up")
        yield names, devices
    finally:
        for name in names:
            _ip("netns", "del", name, check=False)  # takes the veth pair with it


def _train_on_two_nodes(names, devices, steps=30):
    procs = []
    try:
        for node, (name, device) in enumerate(zip(names, devices)):
            env = dict(os.environ)
            env.update({"UCX_TLS": "tcp,self", "UCX_NET_DEVICES": device,
                        "OMP_NUM_THREADS": "1", "RINGREDUCE_DEBUG": "INFO"})
            cmd = ["ip", "netns", "exec", name, sys.executable, "-m", "torch.distributed.run",
                   "--nnodes", "2", "--node-rank", str(node), "--nproc-per-node", "1",
                   "--master-addr", NODE_ADDRESSES[0], "--master-port", "29500",
                   os.path.join(REPO, "examples", "train_ddp.py"), "--steps", str(steps)]
            procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE,
                                          stderr=subprocess.PIPE, text=True))
        outputs = [p.communicate(timeout=300) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(timeout=10)
    return [(p.returncode, out, err) for p, (out, err) in zip(procs, outputs)]


def _check_training(results, devices):
    for node, (code, out, err) in enumerate(results):
        assert code == 0, f"node {node} exited {code}:\n{err[-3000:]}"
    match = re.search(r"loss ([\d.]+) -> ([\d.]+)", results[0][1])
    assert match, results[0][1]
    assert float(match.group(2)) < float(match.group(1)) / 2
    # The ranks talked over TCP on the veth device, not shared memory.
    assert f"tcp/{devices[0]}" in results[0][2], results[0][2][-3000:]


def test_ddp_across_two_network_namespaces_over_tcp():
    with two_namespaces() as (names, devices):
        _check_training(_train_on_two_nodes(names, devices), devices)


def test_ddp_across_two_namespaces_with_delay_and_loss():
    with two_namespaces() as (names, devices):
        for name, device in zip(names, devices):
            added = subprocess.run(["ip", "netns", "exec", name, "tc", "qdisc", "add", "dev",
                                    device, "root", "netem", "delay", "5ms", "loss", "1%"],
                                   capture_output=True, text=True, timeout=30)
            if added.returncode != 0:
                pytest.skip(f"tc netem unavailable here: {added.stderr.strip()}")
        _check_training(_train_on_two_nodes(names, devices, steps=20), devices)


def _emulated_torchrun():
    import importlib.util
    path = os.path.join(REPO, "benchmarks", "emulated_torchrun.py")
    spec = importlib.util.spec_from_file_location("emulated_torchrun", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_readme_multi_node_command_on_emulated_nodes():
    """The README's "Past one machine" command as written: torchrun with the
    c10d rendezvous on each of two emulated nodes (own hostname, boot id and
    /etc/hosts, a 1 Gbit/s link), two processes each. ringreduce must see two
    nodes, use TCP over eth1 between them, and train."""
    if shutil.which("unshare") is None or shutil.which("tc") is None:
        pytest.skip("needs util-linux's unshare and iproute2's tc")
    nodes = _emulated_torchrun()
    env = dict(os.environ, UCX_NET_DEVICES="eth1", GLOO_SOCKET_IFNAME="eth1",
               RINGREDUCE_DEBUG="INFO")
    command = ["torchrun", "--nnodes", "2", "--nproc-per-node", "2", "--rdzv-backend", "c10d",
               "--rdzv-endpoint", "node0:29400", "--rdzv-id", "readme",
               os.path.join(REPO, "examples", "train_ddp.py"), "--steps", "30"]
    try:
        results = nodes.run(2, command, rate="1gbit", timeout=300, env=env)
    except nodes.Unavailable as why:
        pytest.skip(str(why))
    for node, (code, out, err) in enumerate(results):
        assert code == 0, f"node {node} exited {code}:\n{err[-3000:]}"
        assert "host identities: 2 node(s), at most 2 rank(s) per node" in err, err[-3000:]
        assert "tcp/eth1" in err, err[-3000:]
        assert f"node{node}:" in err  # RINGREDUCE_DEBUG's lines carry the node's own hostname
    match = re.search(r"world 4: loss ([\d.]+) -> ([\d.]+)", results[0][1])
    assert match, results[0][1]
    assert float(match.group(2)) < float(match.group(1)) / 2
