"""One command per node of an emulated cluster, as a user starts torchrun on
every machine of a real one.

    sudo python3 benchmarks/emulated_torchrun.py --nodes 2 --rate 1gbit --pin -- \\
        env UCX_NET_DEVICES=eth1 GLOO_SOCKET_IFNAME=eth1 \\
        torchrun --nnodes 2 --nproc-per-node 2 --rdzv-backend c10d \\
        --rdzv-endpoint node0:29400 --rdzv-id emulated benchmarks/allreduce.py

Each node is a network namespace (benchmarks/emulated_cluster.py builds
them: a veth link per node to a bridge, tbf at --rate on both ends of it)
and, inside it, a UTS and a mount namespace of its own: hostname node<i>,
its own /proc/sys/kernel/random/boot_id (a random one bound over the file)
and an /etc/hosts that names every node, as a cluster's DNS would. So
neither UCX (shared memory only within one boot id) nor ringreduce (hostname
and boot id are its host identity) takes two nodes for one machine, and the
ranks of one node still share memory. Node i's link is `eth1`, address
198.51.100.<i+1> (TEST-NET-2, RFC 5737; it exists only inside the
namespaces, which are deleted afterwards). No one-way delay: this kernel has
no netem (benchmarks/emulated_cluster.py adds one inside its own rank
program instead).

The command runs in the repository with this Python's bin folder first on
PATH (so `torchrun` is this environment's); `{node}` in it becomes the node's
index. With --pin, node i runs on CPU i (modulo the CPUs this process may
use), so that each node has cores of its own, as machines do, and a node's
ranks count the cores they really have (unpinned, every node's ranks count
all the machine's cores while the other nodes' ranks run on them too). Node 0's output is printed; --log-dir keeps every node's. Needs root
and iproute2 (ip, tc) and util-linux (unshare, mount).
"""
import argparse
import os
import signal
import subprocess
import sys
import tempfile
import uuid

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from emulated_cluster import Unavailable, cluster  # noqa: E402

DEVICE = "eth1"

# Inside the node's network namespace: a hostname, a boot id and a hosts file
# of its own, then the command. unshare --mount makes the binds private.
_NODE_SHELL = ('hostname "$1" && mount --bind "$2" /proc/sys/kernel/random/boot_id && '
               'mount --bind "$3" /etc/hosts && shift 3 && exec "$@"')


def hostname(node):
    return f"node{node}"


def run(nodes, command, rate=None, timeout=600, env=None, log_dir=None, pin=False):
    """Runs `command` (a list; "{node}" replaced) on every node at once.
    Returns [(exit code, stdout, stderr)] per node."""
    cpus = sorted(os.sched_getaffinity(0))
    procs = []
    with tempfile.TemporaryDirectory(prefix="ringreduce_nodes_") as scratch:
        with cluster(nodes, rate, device_name=DEVICE) as hosts:
            hosts_file = os.path.join(scratch, "hosts")
            with open(hosts_file, "w") as f:
                f.write("127.0.0.1 localhost\n")
                for node, (_, _, address) in enumerate(hosts):
                    f.write(f"{address} {hostname(node)}\n")
            base_env = dict(os.environ if env is None else env)
            base_env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + base_env.get("PATH", "")
            try:
                for node, (namespace, _, _) in enumerate(hosts):
                    boot_id = os.path.join(scratch, f"boot_id{node}")
                    with open(boot_id, "w") as f:
                        f.write(f"{uuid.uuid4()}\n")
                    argv = [a.replace("{node}", str(node)) for a in command]
                    if pin:
                        argv = ["taskset", "-c", str(cpus[node % len(cpus)]), *argv]
                    procs.append(subprocess.Popen(
                        ["ip", "netns", "exec", namespace, "unshare", "--uts", "--mount", "--",
                         "sh", "-c", _NODE_SHELL, "sh", hostname(node), boot_id, hosts_file,
                         *argv],
                        cwd=REPO, env=base_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                        text=True, start_new_session=True))
                try:
                    outputs = [p.communicate(timeout=timeout) for p in procs]
                except subprocess.TimeoutExpired:
                    for p in procs:  # what they printed until now comes back with the kill
                        if p.poll() is None:
                            os.killpg(p.pid, signal.SIGKILL)
                    outputs = [p.communicate() for p in procs]
            finally:
                for p in procs:
                    if p.poll() is None:
                        os.killpg(p.pid, signal.SIGKILL)  # the node's torchrun and its ranks
                        p.wait(timeout=10)
    results = [(p.returncode, out, err) for p, (out, err) in zip(procs, outputs)]
    if log_dir:
        os.makedirs(log_dir, exist_ok=True)
        for node, (_, out, err) in enumerate(results):
            for suffix, text in (("out", out), ("err", err)):
                with open(os.path.join(log_dir, f"node{node}.{suffix}"), "w") as f:
                    f.write(text)
    return results


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=2)
    parser.add_argument("--rate", help="tbf rate of each node's link, e.g. 1gbit (default: none)")
    parser.add_argument("--timeout", type=float, default=600)
    parser.add_argument("--log-dir", help="write node<i>.out and node<i>.err here")
    parser.add_argument("--pin", action="store_true",
                        help="node i runs on CPU i only (each node its own cores)")
    parser.add_argument("command", nargs=argparse.REMAINDER,
                        help="after --: the command every node runs")
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the command after --")
    try:
        results = run(args.nodes, command, args.rate, args.timeout, log_dir=args.log_dir,
                      pin=args.pin)
    except Unavailable as why:
        sys.exit(f"emulated_torchrun: {why}")
    sys.stdout.write(results[0][1])
    failed = [(node, code, err) for node, (code, _, err) in enumerate(results) if code]
    for node, code, err in failed:
        print(f"node {node} exited {code}:\n{err[-3000:]}", file=sys.stderr)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
