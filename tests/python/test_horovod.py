"""torch_ringreduce.horovod: Horovod's PyTorch API on ringreduce."""
import pytest

from horovod_cases import api_sweep, horovod_errors
from multiproc import run_world


@pytest.mark.parametrize("world_size", [2, 3])
def test_every_api_function_gives_exact_results(world_size):
    for rank, report in enumerate(run_world(world_size, api_sweep, timeout=240)):
        assert report["failures"] == [], f"rank {rank}:\n" + "\n".join(report["failures"][:30])
        assert report["checked"] > 150


def test_bad_use_raises_horovod_like_errors_and_mismatches_never_hang():
    results = run_world(2, horovod_errors, timeout=180)
    expected_words = {
        "name": ["'grad.a'", "'grad.b'"], "shape": ["[2, 3]", "[3, 2]"],
        "size": ["[4]", "[5]"], "dtype": ["float32", "int32"], "op": ["op Sum", "op Max"],
        "kind": ["allreduce", "broadcast"], "root": ["root 0", "root 1"],
        "allgather": ["[*, 3]", "[*, 4]"], "async": ["'a'", "'b'"],
        "optimizer": ["'allreduce.bias,weight'", "'allreduce.other.bias,other.weigh'..."],
    }
    for rank, result in enumerate(results):
        assert result["problems"] == {}, f"rank {rank}: {result['problems']}"
        assert result["usable"], f"rank {rank}: hvd unusable after argument errors"
        for case, words in expected_words.items():
            kind, message = result["seen"][case]
            assert kind == "CollectiveMismatchError", (rank, case, result["seen"][case])
            assert "Mismatched collectives" in message and "rank 1 called" in message, message
            for word in words:
                assert word in message, (case, message)
        kind, message = result["seen"]["after size"]
        assert kind == "HorovodInternalError", result["seen"]["after size"]
        assert "unusable after an earlier failure" in message and "different collective" in message
