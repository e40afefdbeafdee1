"""Emulated clusters on one machine: N "nodes" as network namespaces joined by
veth links to a bridge (in a namespace of its own), R ranks per node, each
rank a ringreduce_emulated_rank process (csrc/simulator/emulated_rank_main.cpp)
talking UCX over TCP. Prints, per algorithm and size, the measured allreduce
time beside the virtual-time simulation of the same schedule on the links the
ranks measured (twice: with a core per rank, and on the cores the ranks
really share, with the CPU per message they measured), and checks every
result for exactness.

What is emulated how (this kernel has tbf and htb but no netem):
- nodes: network namespaces; ranks of a node talk TCP over the namespace's
  loopback, ranks of different nodes TCP over veth -> bridge -> veth;
- bandwidth (--rate): a tbf qdisc on both ends of each node's veth, so a
  node's traffic shares one rate-limited link each way, like a NIC;
- one-way delay (--delay-us): added in the sending rank by DelayedTransport
  (messages to another node are handed to UCX that long after they were
  posted), not on the wire;
- all ranks share this machine's cores (--cores, default the ones this
  process may run on): the "cores" simulation gives every message its
  measured CPU at both ends on that many shared cores; the plain one gives
  each rank a core of its own. Other work on the machine is not modelled:
  note the load average.

    sudo python3 benchmarks/emulated_cluster.py --nodes 8 --ranks-per-node 1 \\
        --delay-us 500 --sizes 4096
    sudo python3 benchmarks/emulated_cluster.py --nodes 4 --ranks-per-node 2 \\
        --delay-us 500 --rate 1gbit --sizes 4096,16777216
    sudo python3 benchmarks/emulated_cluster.py --node-sizes 3,1,2 \\
        --delay-us 500 --sizes 4096 --collectives allreduce,reduce_scatter,allgather

Needs root and iproute2; build the program first (scripts/test.sh does, or
`cmake --build build/py --target ringreduce_emulated_rank` after an install).
Addresses are from TEST-NET-2 (198.51.100.0/24, RFC 5737) and exist only
inside the namespaces, which are deleted afterwards.
"""
import argparse
import contextlib
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _built_program():
    """Where scripts/test.sh builds the program (the extension's own folder:
    RINGREDUCE_BUILD_DIR, else build/py), else a C++-only build (build/cpp)."""
    folders = [os.environ.get("RINGREDUCE_BUILD_DIR") or os.path.join(REPO, "build", "py"),
               os.path.join(REPO, "build", "cpp")]
    paths = [os.path.join(os.path.abspath(folder), "ringreduce_emulated_rank")
             for folder in folders]
    return next((path for path in paths if os.access(path, os.X_OK)), paths[0])


PROGRAM = os.environ.get("RINGREDUCE_EMULATED_RANK") or _built_program()


def _ip(*args, check=True):
    return subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30, check=check)


def _tc(namespace, *args):
    return subprocess.run(["ip", "netns", "exec", namespace, "tc", *args], capture_output=True,
                          text=True, timeout=30, check=True)


class Unavailable(Exception):
    """This machine cannot host the emulated cluster (not root, no namespaces)."""


@contextlib.contextmanager
def cluster(nodes, rate=None, device_name=None):
    """Yields [(namespace, device, address)] per node; removes everything after.
    `device_name` (e.g. "eth1") names every node's link alike inside its namespace,
    as on real machines, so that one command line serves every node."""
    if os.geteuid() != 0 or shutil.which("ip") is None:
        raise Unavailable("needs root and iproute2 to create network namespaces")
    tag = f"rre{os.getpid() % 10000}"
    switch = f"{tag}s"
    namespaces = [f"{tag}n{i}" for i in range(nodes)]
    made = []
    try:
        for name in [switch, *namespaces]:
            result = _ip("netns", "add", name, check=False)
            if result.returncode != 0:
                raise Unavailable(f"cannot create network namespaces: {result.stderr.strip()}")
            made.append(name)
        _ip("-n", switch, "link", "add", "rrbr", "type", "bridge")
        _ip("-n", switch, "link", "set", "rrbr", "up")
        nodes_out = []
        for i, name in enumerate(namespaces):
            inside, outside = f"{tag}v{i}", f"{tag}w{i}"
            address = f"198.51.100.{i + 1}"
            _ip("link", "add", inside, "type", "veth", "peer", "name", outside)
            _ip("link", "set", inside, "netns", name)
            _ip("link", "set", outside, "netns", switch)
            if device_name:
                _ip("-n", name, "link", "set", inside, "name", device_name)
                inside = device_name
            _ip("-n", name, "addr", "add", f"{address}/24", "dev", inside)
            _ip("-n", name, "link", "set", inside, "up")
            _ip("-n", name, "link", "set", "lo", "up")
            _ip("-n", switch, "link", "set", outside, "master", "rrbr")
            _ip("-n", switch, "link", "set", outside, "up")
            if rate:
                # Both directions of the node's link: out of the node, into it.
                for namespace, device in ((name, inside), (switch, outside)):
                    _tc(namespace, "qdisc", "add", "dev", device, "root", "tbf", "rate", rate,
                        "burst", "256kb", "latency", "500ms")
            nodes_out.append((name, inside, address))
        yield nodes_out
    finally:
        for name in made:
            _ip("netns", "del", name, check=False)  # takes its veth ends with it


def run(nodes, per_node, delay_us, rate, sizes, algorithms, iterations, timeout=600, cores=None,
        collectives=("allreduce",), node_sizes=None):
    """Runs every rank; returns (exit codes, rank 0's RESULT/LINKS/CPU lines, stderr tails).
    `node_sizes` (a list of rank counts, ranks in blocks) replaces nodes x per_node."""
    if node_sizes is None:
        node_sizes = [per_node] * nodes
    nodes, size = len(node_sizes), sum(node_sizes)
    if cores is None:
        cores = len(os.sched_getaffinity(0))
    if not os.access(PROGRAM, os.X_OK):
        raise Unavailable(f"no {PROGRAM}: build it with scripts/test.sh or "
                          "cmake --build build/py --target ringreduce_emulated_rank")
    store = tempfile.mkdtemp(prefix="ringreduce_store_")
    procs = []
    try:
        with cluster(nodes, rate) as hosts:
            for node, (namespace, device, _) in enumerate(hosts):
                for local in range(node_sizes[node]):
                    rank = sum(node_sizes[:node]) + local
                    env = dict(os.environ, UCX_TLS="tcp,self", UCX_NET_DEVICES=device,
                               UCX_LOG_LEVEL="error", RINGREDUCE_SPIN_US="20")
                    cmd = ["ip", "netns", "exec", namespace, PROGRAM, "--rank", str(rank),
                           "--size", str(size),
                           "--node-sizes", ",".join(str(n) for n in node_sizes),
                           "--store", store, "--delay-us", str(delay_us),
                           "--sizes", ",".join(str(s) for s in sizes),
                           "--algorithms", ",".join(algorithms),
                           "--collectives", ",".join(collectives),
                           "--iterations", str(iterations), "--cores", str(cores)]
                    procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE,
                                                  stderr=subprocess.PIPE, text=True))
            outputs = [p.communicate(timeout=timeout) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(timeout=10)
        shutil.rmtree(store, ignore_errors=True)
    codes = [p.returncode for p in procs]
    lines = [line for line in outputs[0][0].splitlines() if line.startswith(("RESULT", "LINKS", "CPU"))]
    return codes, lines, [err[-2000:] for _, err in outputs]


def parse(lines):
    results = []
    for line in lines:
        if line.startswith("RESULT"):
            fields = dict(re.findall(r"(\w+)=(\S+)", line))
            results.append({"collective": fields.get("collective", "allreduce"),
                            "asked": fields["asked"], "ran": fields["ran"],
                            "bytes": int(fields["bytes"]),
                            "measured": float(fields["measured_us"]),
                            "simulated": float(fields["simulated_us"]),
                            "simulated_cores": float(fields.get("simulated_cores_us", "nan")),
                            "exact": fields["exact"] == "1"})
    return results


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=4)
    parser.add_argument("--ranks-per-node", type=int, default=2)
    parser.add_argument("--node-sizes",
                        help="nodes of these many ranks, e.g. 3,1,2 (instead of --nodes and "
                             "--ranks-per-node)")
    parser.add_argument("--delay-us", type=float, default=500)
    parser.add_argument("--rate", help="tbf rate of each node's link, e.g. 1gbit")
    parser.add_argument("--sizes", default="4096")
    parser.add_argument("--algorithms", default="auto,ring,halving_doubling,two_level,direct")
    parser.add_argument("--collectives", default="allreduce",
                        help="comma separated: allreduce, reduce_scatter, allgather")
    parser.add_argument("--iterations", type=int, default=10)
    parser.add_argument("--cores", type=int,
                        help="cores the ranks share, for the simulation (default: the ones "
                             "this process may run on)")
    parser.add_argument("--repeat", type=int, default=1,
                        help="run the whole cluster this many times (fresh processes and "
                             "links each time) and end with the median and range per row")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    node_sizes = ([int(n) for n in args.node_sizes.split(",")] if args.node_sizes
                  else [args.ranks_per_node] * args.nodes)
    runs = []
    for _ in range(args.repeat):
        try:
            codes, lines, errors = run(args.nodes, args.ranks_per_node, args.delay_us, args.rate,
                                       sizes, args.algorithms.split(","), args.iterations,
                                       cores=args.cores, collectives=args.collectives.split(","),
                                       node_sizes=node_sizes)
        except Unavailable as why:
            sys.exit(f"emulated_cluster: {why}")
        results = print_run(args, node_sizes, lines)
        if any(codes) or not all(r["exact"] for r in results):
            for rank, (code, err) in enumerate(zip(codes, errors)):
                if code:
                    print(f"rank {rank} exited {code}: {err}", file=sys.stderr)
            sys.exit(1)
        runs.append(results)
    if len(runs) > 1:
        print_summary(runs)


def print_run(args, node_sizes, lines):
    """One run's table; returns its rows with "versus" (measured / the ring's) added."""
    shape = "+".join(str(n) for n in node_sizes)
    print(f"# {len(node_sizes)} nodes of {shape} ranks, delay {args.delay_us} us one-way "
          f"between nodes (DelayedTransport), rate {args.rate or 'unlimited'} per node link "
          f"(tbf), UCX over TCP; load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    for line in lines:
        if line.startswith("LINKS"):
            print("# measured links:", line[len("LINKS "):])
        if line.startswith("CPU"):
            print("# measured CPU per message, simulated on", line[len("CPU "):])
    results = parse(lines)
    ring = {(r["collective"], r["bytes"]): r["measured"] for r in results if r["asked"] == "ring"}
    print(f"{'collective':>14} {'algorithm':>18} {'ran':>17} {'bytes':>10} {'measured us':>12} {'simulated us':>13} "
          f"{'sim/meas':>8} {'cores us':>9} {'cores/meas':>10} {'vs ring':>8} exact")
    for r in results:
        key = (r["collective"], r["bytes"])
        r["versus"] = r["measured"] / ring[key] if key in ring else float("nan")
        print(f"{r['collective']:>14} {r['asked']:>18} {r['ran']:>17} {r['bytes']:>10} {r['measured']:>12.1f} "
              f"{r['simulated']:>13.1f} {r['simulated'] / r['measured']:>8.2f} "
              f"{r['simulated_cores']:>9.1f} {r['simulated_cores'] / r['measured']:>10.2f} "
              f"{r['versus']:>8.2f} "
              f"{'yes' if r['exact'] else 'NO'}")
    return results


def print_summary(runs):
    """Per row, the median over the runs and (in brackets) their range."""
    def cell(values, digits):
        values = sorted(values)
        return (f"{statistics.median(values):.{digits}f} "
                f"({values[0]:.{digits}f}-{values[-1]:.{digits}f})")
    print(f"# median (range) over {len(runs)} runs")
    print(f"{'collective':>14} {'algorithm':>18} {'bytes':>10} {'measured us':>26} "
          f"{'cores/meas':>18} {'vs ring':>18}")
    for i, first in enumerate(runs[0]):
        rows = [run[i] for run in runs]
        print(f"{first['collective']:>14} {first['asked']:>18} {first['bytes']:>10} "
              f"{cell([r['measured'] for r in rows], 1):>26} "
              f"{cell([r['simulated_cores'] / r['measured'] for r in rows], 2):>18} "
              f"{cell([r['versus'] for r in rows], 2):>18}")

if __name__ == "__main__":
    main()
