"""Process group life cycle: rendezvous methods, re-creation, several groups,
and an idle group that leaves the CPU alone."""
import socket

import pytest

from lifecycle_cases import idle_cpu, reinit_same_store, several_groups, tcp_init_and_reinit
from multiproc import TRANSPORTS, run_world


def _free_port_block(n):
    """A base port with n free ports after it (asked of the kernel, not fixed)."""
    for _ in range(50):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            base = s.getsockname()[1]
        if base + n >= 65535:
            continue
        try:
            socks = []
            for p in range(base, base + n):
                s = socket.socket()
                s.bind(("127.0.0.1", p))
                socks.append(s)
            return base
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise RuntimeError("no block of free ports")


def test_tcp_rendezvous_and_reinit_in_same_process():
    port = _free_port_block(3)
    sums = run_world(2, tcp_init_and_reinit, port, timeout=120, exit_path=True)
    for round_ in range(3):
        assert sums[0][round_] == sums[1][round_] == float(0 + 1 + 2 * round_)


def test_reinit_on_the_same_store_never_reads_stale_addresses():
    sums = run_world(3, reinit_same_store, timeout=120, exit_path=True)
    for round_ in range(3):
        assert {s[round_] for s in sums} == {float(0 + 10 + 20 + 3 * round_)}


def test_several_groups_at_once():
    results = run_world(3, several_groups, timeout=120, exit_path=True)
    for rank, r in enumerate(results):
        assert r["everyone"] == 0 + 1 + 2
        assert r["reversed"] == 2 * (0 + 1 + 2)
    assert results[0]["low"] == results[1]["low"] == [3.0] * 3
    assert results[1]["high"] == results[2]["high"] == [3.0] * 3


def test_idle_group_uses_no_cpu():
    # Four ranks on this machine's cores: a spinning progress thread would
    # burn close to a full core per rank (about 1.5 s each here).
    for rank, r in enumerate(run_world(4, idle_cpu, timeout=120, exit_path=True)):
        assert r["cpu"] < 0.25 * r["wall"], f"rank {rank} used {r['cpu']:.2f} s CPU while idle"


def test_destroy_with_work_in_flight_finishes_queued_work_and_fails_pending_receives():
    from lifecycle_cases import destroy_with_work_in_flight

    # The receive waits on the next rank, which destroys its group too. Which
    # of the two this rank learns first is a race, and either is the right
    # answer: its own shutdown abandoned the receive, or the peer said goodbye
    # without sending. Both must name the receive; nothing else may happen.
    for rank, r in enumerate(run_world(3, destroy_with_work_in_flight, timeout=120,
                                       exit_path=True)):
        assert r["done"] and r["sums_ok"], (rank, r)
        peer = (rank + 1) % 3
        own_shutdown = "was shut down" in r["orphan"]
        peer_left = f"rank {peer} has left the group" in r["orphan"]
        assert own_shutdown or peer_left, (rank, r)
        assert "recv" in r["orphan"], (rank, r)


@pytest.mark.parametrize("transport", sorted(TRANSPORTS))
def test_a_rank_leaving_after_its_peers_prints_no_ucx_error(transport, tmp_path):
    """Rank 0 destroys its group 0.5 s after the others have left. It closed
    its endpoint to each of them with a flush into a closed connection, which
    UCX printed as "error during flush: Endpoint timeout", one per peer, at
    the end of a run that went well (over TCP: every time; so did 16 ranks
    leaving one after the other, in about half the runs). A peer now says
    goodbye once its endpoints are flushed, and rank 0 closes its endpoints
    to peers that said goodbye without a flush. UCX's own log goes to a file
    per process (UCX_LOG_FILE); at level info each starts with UCX's version."""
    from lifecycle_cases import all_to_all_then_destroy

    env = dict(TRANSPORTS[transport], UCX_LOG_FILE=str(tmp_path / "ucx.%p.log"),
               UCX_LOG_LEVEL="info")
    assert run_world(4, all_to_all_then_destroy, 0, env=env, timeout=120,
                     exit_path=True) == [True] * 4
    logs = [path.read_text() for path in sorted(tmp_path.glob("ucx.*.log"))]
    assert sum("Version" in text for text in logs) >= 4, "UCX did not log to the files"
    errors = [line for text in logs for line in text.splitlines() if " ERROR " in line]
    assert errors == []
