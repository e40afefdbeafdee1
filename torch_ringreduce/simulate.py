"""python -m torch_ringreduce.simulate: how the host allreduce algorithms would
scale on a cluster you do not have.

    python -m torch_ringreduce.simulate --nodes 64 --ranks-per-node 8 \\
        --inter 100Gbit/s,5us --intra 150GB/s,1us --sizes 4K-256M

Runs the real algorithm code (ring, halving/doubling, two-level, direct) for
every rank in one process, in virtual time and without data, and prints per
size the simulated time, the bus bandwidth, the cost model's prediction
against it, and what RINGREDUCE_ALGORITHM=auto would pick with those links.
`--collective reduce_scatter` or `allgather` runs those instead of the
allreduce, and `--node-sizes 3,1,2` gives nodes of unequal sizes.
`--help` lists the options. The work is done by the ringreduce_simulate
program built beside _C (csrc/simulator); RINGREDUCE_SIMULATE names another.
"""
import os
import sys

_PROGRAM = "ringreduce_simulate"


def program():
    """The simulator program: $RINGREDUCE_SIMULATE, beside this file (installed),
    or in a source checkout's build folders."""
    named = os.environ.get("RINGREDUCE_SIMULATE")
    if named:
        return named
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(here)
    for candidate in (os.path.join(here, _PROGRAM),
                      os.path.join(root, "build", "py", _PROGRAM),
                      os.path.join(root, "build", "cpp", _PROGRAM)):
        if os.access(candidate, os.X_OK):
            return candidate
    raise SystemExit(f"torch_ringreduce.simulate: no {_PROGRAM} beside {here} or in the build "
                     "folders; reinstall the package or set RINGREDUCE_SIMULATE")


def main(argv=None):
    path = program()
    os.execv(path, [path, *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    main()
