"""Starting a benchmark's ranks as plain processes on this machine (the
scripts that launch themselves: anchors.py and collective_anchors.py through
anchor_harness.py, small_path_breakdown.py, zero3_step.py)."""
import socket
import subprocess
import time


def free_port():
    """A TCP port on loopback that nothing listens on now (MASTER_PORT)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_ranks(command, env, world):
    """One process per rank, each told its RANK and LOCAL_RANK."""
    return [subprocess.Popen(command, env=dict(env, RANK=str(r), LOCAL_RANK=str(r)))
            for r in range(world)]


def wait_for_ranks(ranks, limit_s):
    """The first non-zero exit status of the ranks (0 if none), waiting
    `limit_s` seconds in all; a rank still running then is killed, as is
    every rank when this is interrupted."""
    deadline = time.monotonic() + limit_s
    status = 0
    try:
        for p in ranks:
            status = status or p.wait(timeout=max(1, deadline - time.monotonic()))
    finally:
        for p in ranks:
            if p.poll() is None:
                p.kill()
                p.wait()
    return status
