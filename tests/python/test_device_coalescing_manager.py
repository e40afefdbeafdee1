"""torch's coalescing manager given a device (DeepSpeed's all_gather_coalesced,
torch's batch_isend_irecv, `_coalescing_manager(device=...)`): the block's
one coalesced call runs as the plain manager's does, on the caller's thread
where the peers are there, and is exact on either path; a blocking call
inside a block runs as outside it, or raises where it would wait on what the
block holds, never hangs (Engine::startCoalescing). Fault tests of these
blocks are in test_failures.py and test_abort_from_another_thread.py."""
import pytest

from multiproc import LOOPBACK_ENV, run_world
import device_coalescing_cases

COALESCED_OPS = ("allreduce_coalesced", "all_gather_into_tensor_coalesced",
                 "reduce_scatter_tensor_coalesced")


@pytest.mark.parametrize("world_size", [2, 3])
def test_device_blocks_are_exact_and_run_on_the_callers_thread_where_they_can(world_size):
    reports = run_world(world_size, device_coalescing_cases.device_blocks, env=LOOPBACK_ENV,
                        timeout=180)
    for rank, report in enumerate(reports):
        assert report["failures"] == [], f"rank {rank}: {report['failures'][:10]}"
    for op in COALESCED_OPS:
        # Each block's coalesced call ran on a caller's thread somewhere (a
        # device block queued every one before), and queued somewhere (a
        # late peer, an asynchronous block whose peers were not there).
        assert sum(report["paths"][op][0] for report in reports) > 0, (op, reports)
        assert sum(report["paths"][op][1] for report in reports) > 0, (op, reports)


@pytest.mark.parametrize("world_size", [2, 3])
def test_device_blocks_are_exact_where_every_call_is_queued(world_size):
    env = dict(LOOPBACK_ENV, RINGREDUCE_SHM_BYTES="0")  # no channel: UCX, the executor
    reports = run_world(world_size, device_coalescing_cases.device_blocks, 60, env=env,
                        timeout=180)
    for rank, report in enumerate(reports):
        assert report["failures"] == [], f"rank {rank}: {report['failures'][:10]}"
        for op in COALESCED_OPS:
            assert report["paths"][op][0] == 0 and report["paths"][op][1] > 0, (op, report)


def _shm_env(shm_bytes):
    """Loopback, with RINGREDUCE_SHM_BYTES set where given ("0": no channel)."""
    env = dict(LOOPBACK_ENV)
    if shm_bytes is not None:
        env["RINGREDUCE_SHM_BYTES"] = shm_bytes
    return env


@pytest.mark.parametrize("shm_bytes", [None, "0"])
def test_a_blocking_call_behind_an_asynchronous_one_in_a_block_raises_not_hangs(shm_bytes):
    reports = run_world(2, device_coalescing_cases.wait_behind_held, env=_shm_env(shm_bytes),
                        timeout=120)
    for rank, report in enumerate(reports):
        assert report["error"] is not None, report
        kind, message = report["error"]
        assert kind == "ValueError", report
        assert f"broadcast on rank {rank} waits for its result inside a coalescing block" in \
            message, message
        assert "async_op=True" in message and "operation(s) it held run now" in message, message
        # Raised at once, not at the group's timeout.
        assert report["raised_s"] < 10, report
        assert report["first"] == [0.0, 0.0], report   # the held broadcast ran, exact
        assert report["second"] == [float(rank)] * 2, report  # the refused one did not
        assert report["after"] == 2.0, report
        assert report["block_after"] == (1.0, 0.0), report
        # The refused call never reached the queue: nothing numbered it.
        assert report["trace_ops"].count("broadcast") == 3, report


def test_a_send_or_recv_waited_for_inside_a_block_raises_and_still_runs_at_its_end():
    reports = run_world(2, device_coalescing_cases.p2p_wait_inside_block, env=LOOPBACK_ENV,
                        timeout=120)
    for rank, report in enumerate(reports):
        kind, message = report["error"]
        assert kind == "ValueError", report
        op = "SEND" if rank == 0 else "RECV"
        assert f"wait() on {op} #1 on rank {rank} inside the coalescing block" in message, message
        assert report["raised_s"] < 10, report  # at once, not at a timeout
        assert report["after"] == 2.0, report
    assert reports[1]["received"] == [7.0, 7.0], reports  # rank 0's, sent at the block's end


@pytest.mark.parametrize("shm_bytes", [None, "0"])
def test_a_block_whose_coalesced_call_raises_is_ended_and_the_group_goes_on(shm_bytes):
    # torch's manager ends a device block only after its one coalesced call
    # returns; where that call raised, the block was left open, holding every
    # later asynchronous call of the group and refusing every later block.
    reports = run_world(2, device_coalescing_cases.coalesced_call_raises,
                        env=_shm_env(shm_bytes), timeout=120)
    for rank, report in enumerate(reports):
        assert len(report) == 6, report
        for case, result in report.items():
            assert result["error"] is not None, (rank, case)
            kind, message = result["error"]
            assert kind == "ValueError", (rank, case, result)
            assert f"on rank {rank}" in message and "overlapping memory" in message, message
            assert result["after"] == [2.0, 2.0, 2.0], (rank, case, result)
            assert result["block"] is True, (rank, case, result)


@pytest.mark.parametrize("shm_bytes", [None, "0"])
def test_a_block_torchs_manager_leaves_open_ends_at_the_next_call_and_the_group_goes_on(
        shm_bytes):
    # torch's manager raises on collectives of mixed kinds only after the
    # backend's block opened, and never ends it; the next all_reduce,
    # all_gather_into_tensor, reduce_scatter_tensor or block ends it, what
    # it held (an asynchronous broadcast) running first.
    world = 2
    reports = run_world(world, device_coalescing_cases.manager_raises_first,
                        env=_shm_env(shm_bytes), timeout=120)
    total = float(world * (world + 1) // 2)
    for rank, report in enumerate(reports):
        assert len(report) == 8, report
        for case, result in report.items():
            if case in ("large after", "functional in a block"):
                continue
            assert "mixed types" in (result["error"] or ""), (rank, case, result)
            assert result["held"] == [float(world - 1)] * 4, (rank, case, result)
        expected = {
            "all_reduce": [total] * 4,
            "async all_reduce": [total] * 4,
            "all_gather_into_tensor": [1.0] * 4 + [2.0] * 4,
            "reduce_scatter_tensor": [total] * 4,
            "block": [total] * 8,
            "async block": [total] * 8,
            "large after": [2.0, 2.0],
            "functional in a block": [total] * 8,
        }
        for case, values in expected.items():
            assert report[case]["values"] == values, (rank, case, report[case])
