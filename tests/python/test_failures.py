"""A rank killed mid-job: survivors get a clear error fast, not at the timeout,
and still exit by themselves."""
import pytest

from failure_cases import killed_mid_job
from multiproc import TRANSPORTS, run_world


@pytest.mark.parametrize("transport", ["shm", "tcp"])
@pytest.mark.parametrize("nbytes", [4096, 4 << 20])
def test_sigkilled_rank_is_reported_fast_by_every_survivor(transport, nbytes, tmp_path):
    victim = 1
    kill_file = str(tmp_path / "killed_at")
    results = run_world(3, killed_mid_job, victim, kill_file, nbytes, env=TRANSPORTS[transport],
                        timeout=120, may_die={victim})
    assert results[victim] is None
    for rank in (0, 2):
        r = results[rank]
        kind, message = r["first"]
        assert kind == "DistBackendError", r["first"]
        assert f"rank {victim} is gone" in message and f"on rank {rank}" in message, message
        assert "allreduce #" in message, message
        # Far below the 120 s group timeout: the bound is 5 s.
        assert r["latency"] < 5.0, r
        kind, later = r["later"]
        assert kind == "DistBackendError" and "unusable after an earlier failure" in later, later
        assert f"rank {victim} is gone" in later
        assert r["later_s"] < 2.0, r
