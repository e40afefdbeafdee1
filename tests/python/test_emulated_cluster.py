"""Emulated clusters (benchmarks/emulated_cluster.py): 8 "nodes" x 1 rank,
4 x 2, and nodes of 3, 1 and 2 ranks, in network namespaces, UCX over TCP
between them, one-way delay added by DelayedTransport and (4 x 2) each
node's link rate-limited by tbf. Every
algorithm, and the one the selection picks, of the allreduce, the
reduce-scatter and the allgather must give exact results. No
timings are asserted: the benchmark prints them beside the simulation.
Skips without root, network namespaces or the built ringreduce_emulated_rank.
"""
import importlib.util
import os

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_spec = importlib.util.spec_from_file_location(
    "emulated_cluster", os.path.join(REPO, "benchmarks", "emulated_cluster.py"))
emulated_cluster = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(emulated_cluster)

ALGORITHMS = ["auto", "ring", "halving_doubling", "two_level", "direct"]
COLLECTIVES = ["allreduce", "reduce_scatter", "allgather"]


@pytest.mark.parametrize("node_sizes,rate", [([1] * 8, None), ([2] * 4, "1gbit"), ([3, 1, 2], None)],
                         ids=["8x1", "4x2_1gbit", "uneven_3_1_2"])
def test_every_algorithm_exact_on_an_emulated_cluster(node_sizes, rate):
    try:
        codes, lines, errors = emulated_cluster.run(len(node_sizes), None, delay_us=500, rate=rate,
                                                    sizes=[4096, 1 << 20], algorithms=ALGORITHMS,
                                                    iterations=2, timeout=300,
                                                    collectives=COLLECTIVES,
                                                    node_sizes=node_sizes)
    except emulated_cluster.Unavailable as why:
        pytest.skip(str(why))
    assert codes == [0] * sum(node_sizes), errors
    results = emulated_cluster.parse(lines)
    asked = {(r["collective"], r["asked"], r["bytes"]) for r in results}
    for collective in COLLECTIVES:
        for algorithm in ALGORITHMS:
            if algorithm == "two_level" and max(node_sizes) == 1:
                continue  # does not apply: one rank per node
            for size in (4096, 1 << 20):
                assert (collective, algorithm, size) in asked, lines
    assert all(r["exact"] for r in results), lines
