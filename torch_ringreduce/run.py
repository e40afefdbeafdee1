"""horovodrun's everyday flags on torch's elastic launcher (torchrun).

    python -m torch_ringreduce.run -np 4 python train.py --epochs 3      # this host
    python -m torch_ringreduce.run -np 4 -H host1:2,host2:2 python train.py
    python -m torch_ringreduce.run -np 4 -H host1:2,host2:2 --ssh python train.py
    (also installed as the `ringreduce-run` command)

One host: torchrun --standalone in this process. Several hosts: torchrun
needs one launcher per host, all meeting at the first host (static
rendezvous, node ranks in -H order, so ranks are laid out as horovodrun lays
them out); this prints the command for each host, or runs them over ssh with
--ssh (the same Python path and working directory on every host). torchrun
starts the same number of processes on every host, so -np must fill the hosts
evenly in -H order.
"""
import argparse
import os
import re
import shlex
import socket
import subprocess
import sys
import time
import uuid

# Variables a remote launcher gets from ours (horovodrun forwards the
# environment too): UCX, ringreduce and Horovod knobs, and the usual few.
FORWARDED_PREFIXES = ("UCX_", "RINGREDUCE_", "HOROVOD_", "NCCL_", "TORCH_", "GLOO_")
FORWARDED_NAMES = ("PYTHONPATH", "OMP_NUM_THREADS", "PYTHONUNBUFFERED", "CUDA_VISIBLE_DEVICES")


def parse_args(argv):
    p = argparse.ArgumentParser(
        prog="python -m torch_ringreduce.run",
        description="Launch a training script like horovodrun does, on torchrun.")
    p.add_argument("-np", "--num-proc", type=int, dest="num_proc",
                   help="number of processes (default: all slots of -H/--hostfile)")
    p.add_argument("-H", "--hosts", help="host1:slots,host2:slots (slots default 1)")
    p.add_argument("--hostfile", help="a file of lines 'host slots=N'")
    p.add_argument("-p", "--ssh-port", type=int, help="ssh port of the remote hosts")
    p.add_argument("-i", "--ssh-identity-file", help="ssh private key for the remote hosts")
    p.add_argument("--ssh", action="store_true",
                   help="start the launchers of the hosts over ssh instead of printing them")
    p.add_argument("--network-interface", "--network-interfaces", dest="network_interface",
                   help="interfaces for the collectives, e.g. eth0 or mlx5_0:1 "
                        "(sets UCX_NET_DEVICES and GLOO_SOCKET_IFNAME)")
    p.add_argument("--master-port", type=int, default=29500,
                   help="port on the first host where several hosts meet (default 29500)")
    p.add_argument("--max-restarts", type=int, default=0,
                   help="torchrun restarts of all workers after a failure (hvd.elastic.run "
                        "resumes from the last commit)")
    p.add_argument("--fusion-threshold-mb", type=float,
                   help="DistributedOptimizer bucket size in MiB (HOROVOD_FUSION_THRESHOLD)")
    p.add_argument("--timeline-filename",
                   help="each rank writes a Chrome trace of its collectives (RINGREDUCE_TIMELINE); "
                        "{rank} in the name is the rank, else added before the extension")
    p.add_argument("--output-filename",
                   help="directory for each rank's stdout/stderr (torchrun's --log-dir layout), "
                        "also shown on the console")
    p.add_argument("--check-build", action="store_true",
                   help="print what ringreduce was built with and exit (python -m "
                        "torch_ringreduce.info)")
    p.add_argument("--verbose", action="store_true", help="print the torchrun command lines")
    for flag in ("--gloo", "--mpi", "--disable-cache"):
        p.add_argument(flag, action="store_true", help=argparse.SUPPRESS)
    p.add_argument("command", nargs=argparse.REMAINDER, help="e.g. python train.py --epochs 3")
    args = p.parse_args(argv)
    if not args.check_build and not args.command:
        p.error("give the command to run, e.g. python train.py")
    return args


def parse_hosts(spec):
    hosts = []
    for item in spec.split(","):
        item = item.strip()
        if not item:
            continue
        host, _, slots = item.rpartition(":") if ":" in item else (item, "", "1")
        hosts.append((host, int(slots)))
    return hosts


def read_hostfile(path):
    hosts = []
    with open(path) as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if line:
                match = re.match(r"^(\S+)(?:\s+slots\s*=\s*(\d+))?", line)
                hosts.append((match.group(1), int(match.group(2) or 1)))
    return hosts


def processes_per_host(hosts, num_proc):
    """Fills hosts in order, as horovodrun does; torchrun needs the same count on each."""
    total = sum(slots for _, slots in hosts)
    if num_proc is None:
        num_proc = total
    if num_proc > total:
        raise SystemExit(f"-np {num_proc} is more than the {total} slots of the hosts given")
    used, left = [], num_proc
    for host, slots in hosts:
        if left == 0:
            break
        used.append((host, min(slots, left)))
        left -= used[-1][1]
    counts = {n for _, n in used}
    if len(counts) != 1:
        layout = ", ".join(f"{h}:{n}" for h, n in used)
        raise SystemExit(f"-np {num_proc} over the hosts given puts {layout}; torchrun starts "
                         f"the same number of processes on every host: give -np and slots "
                         f"that fill the hosts evenly")
    return [h for h, _ in used], counts.pop()


def is_local(host):
    return host in ("localhost", "127.0.0.1", "::1", socket.gethostname(), socket.getfqdn())


def script_args(command):
    """torchrun's form of the user's command: drop a leading python (torchrun
    runs the script with its own interpreter), else --no-python."""
    if re.fullmatch(r"python[\d.]*", os.path.basename(command[0])):
        rest = command[1:]
        while rest and rest[0] == "-u":
            rest = rest[1:]
        if rest and rest[0] == "-m":
            return ["-m"] + rest[1:]
        return rest
    return ["--no-python"] + command


def launcher_env(args):
    env = {}
    if args.network_interface:
        env["UCX_NET_DEVICES"] = args.network_interface
        env["GLOO_SOCKET_IFNAME"] = args.network_interface.split(",")[0].split(":")[0]
    if args.fusion_threshold_mb is not None:
        env["HOROVOD_FUSION_THRESHOLD"] = str(int(args.fusion_threshold_mb * (1 << 20)))
    if args.timeline_filename:
        env["RINGREDUCE_TIMELINE"] = timeline_path(args.timeline_filename)
    return env


def timeline_path(name):
    """Horovod writes one timeline (rank 0's); ringreduce one per rank, so the
    ranks of one host must not share a name: "t.json" -> "t.{rank}.json"."""
    if "{rank}" in name:
        return name
    root, ext = os.path.splitext(name)
    return f"{root}.{{rank}}{ext}"


def common_torchrun_args(args, nproc):
    out = ["--nproc-per-node", str(nproc), "--max-restarts", str(args.max_restarts)]
    if args.output_filename:
        out += ["--log-dir", args.output_filename, "--redirects", "3", "--tee", "3"]
    return out


def host_commands(args, hosts, nproc):
    """(host, argv of torchrun on that host) for a job over several hosts."""
    run_id = uuid.uuid4().hex[:12]  # keys hvd.elastic's state file to this job
    commands = []
    for node_rank, host in enumerate(hosts):
        torchrun = ["--nnodes", str(len(hosts)), "--node-rank", str(node_rank),
                    "--master-addr", hosts[0], "--master-port", str(args.master_port),
                    "--rdzv-id", run_id] + common_torchrun_args(args, nproc)
        commands.append((host, [sys.executable, "-m", "torch.distributed.run"] + torchrun
                         + script_args(args.command)))
    return commands


def remote_shell_command(argv, env):
    forwarded = {k: v for k, v in os.environ.items()
                 if k.startswith(FORWARDED_PREFIXES) or k in FORWARDED_NAMES}
    forwarded.update(env)
    assignments = [f"{k}={shlex.quote(v)}" for k, v in sorted(forwarded.items())]
    return (f"cd {shlex.quote(os.getcwd())} && "
            + " ".join(["env"] + assignments + [shlex.quote(a) for a in argv]))


def ssh_argv(args, host, shell_command):
    argv = ["ssh", "-o", "BatchMode=yes"]
    if args.ssh_port:
        argv += ["-p", str(args.ssh_port)]
    if args.ssh_identity_file:
        argv += ["-i", args.ssh_identity_file]
    return argv + [host, shell_command]


def run_over_ssh(args, commands, env):
    """Starts every host's launcher; the first failure stops the others."""
    procs = []
    for host, argv in commands:
        if is_local(host):
            procs.append(subprocess.Popen(argv, env={**os.environ, **env}))
        else:
            procs.append(subprocess.Popen(ssh_argv(args, host, remote_shell_command(argv, env))))
    try:
        while True:
            codes = [p.poll() for p in procs]
            failed = [c for c in codes if c not in (None, 0)]
            if failed or all(c == 0 for c in codes):
                return failed[0] if failed else 0
            time.sleep(0.5)
    finally:
        for p in procs:
            if p.poll() is None:
                p.terminate()
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.check_build:
        from torch_ringreduce import info
        return info.main([])
    if args.gloo or args.mpi:
        print("torch_ringreduce.run: --gloo/--mpi ignored: collectives run in ringreduce",
              file=sys.stderr)
    hosts = parse_hosts(args.hosts) if args.hosts else (
        read_hostfile(args.hostfile) if args.hostfile else None)
    env = launcher_env(args)
    if hosts is None or (len(hosts) == 1 and is_local(hosts[0][0])):
        if args.num_proc is None and hosts is None:
            raise SystemExit("give -np (the number of processes)")
        nproc = processes_per_host(hosts, args.num_proc)[1] if hosts else args.num_proc
        torchrun = (["--standalone", "--nnodes", "1"] + common_torchrun_args(args, nproc)
                    + script_args(args.command))
        if args.verbose:
            print("torchrun " + shlex.join(torchrun), file=sys.stderr)
        os.environ.update(env)
        from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
        from torch.distributed.run import main as torchrun_main
        try:
            torchrun_main(torchrun)
        except ChildFailedError:
            return 1
        return 0
    host_names, nproc = processes_per_host(hosts, args.num_proc)
    commands = host_commands(args, host_names, nproc)
    if args.ssh:
        if args.verbose:
            for host, argv in commands:
                print(f"[{host}] {shlex.join(argv)}", file=sys.stderr)
        return run_over_ssh(args, commands, env)
    print(f"# {len(commands)} hosts: run each line on its host (or add --ssh to have "
          f"torch_ringreduce.run start them over ssh). Nothing was started.")
    for host, argv in commands:
        print(f"[{host}] {remote_shell_command(argv, env)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
