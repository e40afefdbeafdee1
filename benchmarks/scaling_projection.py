"""The scaling projection of docs/SCALING.md: DDP steps of a ResNet-50-sized
model on 8 to 512 ranks (8 per node), each bucket's allreduce timed by the
virtual-time simulator (ringreduce_simulate: the real schedules of ring,
halving/doubling and two-level), overlapped with the backward pass as DDP
does. Prints a Markdown table and, with matplotlib, writes a plot.

    python3 benchmarks/scaling_projection.py [--plot docs/scaling.png]

The model, stated once (docs/SCALING.md explains each choice):
- gradients: 4 buckets of 25 MiB (~105 MB, ResNet-50 has 25.6 M fp32 parameters),
  ready at 1/4, 2/4, 3/4 and 4/4 of the backward pass;
- compute: forward 65 ms, backward 130 ms per step on every rank, identical;
- allreduces run one at a time in bucket order (one executor per group), each
  starting when its bucket is ready and the previous allreduce is done;
- step = forward + max(backward, end of the last allreduce);
  efficiency = (forward + backward) / step;
- links: inside a node 150 GB/s, 1 us; between nodes 25 or 100 Gbit/s, 5 us
  per message, one NIC per node shared by its 8 ranks;
- NCCL's tree, for comparison, by formula on the same links (no simulation):
  2 log2(nodes) network latencies + 2 (8-1) in-node hops + the NIC carrying
  2x the bucket each way.
"""
import argparse
import math
import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "torch_ringreduce"))
import simulate  # noqa: E402  (finds the ringreduce_simulate program)

BUCKET = 25 << 20
BUCKETS = 4
FORWARD = 0.065
BACKWARD = 0.130
PER_NODE = 8
RANKS = [8, 16, 32, 64, 128, 256, 512]
LINKS = {"25 Gbit/s": "25Gbit/s,5us", "100 Gbit/s": "100Gbit/s,5us"}
INTRA = "150GB/s,1us"
ALGORITHMS = ["ring", "halving_doubling", "two_level"]


def allreduce_seconds(ranks, inter):
    """Simulated seconds of one 25 MiB allreduce per algorithm (None: does not apply)."""
    out = subprocess.run([simulate.program(), "--nodes", str(ranks // PER_NODE),
                          "--ranks-per-node", str(PER_NODE), "--inter", inter,
                          "--intra", INTRA, "--sizes", str(BUCKET),
                          "--algorithms", ",".join(ALGORITHMS)],
                         capture_output=True, text=True, check=True).stdout
    row = [line.split() for line in out.splitlines() if line.strip().startswith("25 MiB")][0]
    cells = row[2:2 + 3 * len(ALGORITHMS)]
    times = {}
    for i, name in enumerate(ALGORITHMS):
        value = cells[3 * i]
        times[name] = None if value == "-" else float(value) * 1e-6
    return times


def tree_seconds(ranks, inter):
    """NCCL's double binary tree on the same links, by formula."""
    rate, latency = inter.split(",")
    beta = 8 / (float(rate.replace("Gbit/s", "")) * 1e9)
    alpha = float(latency.replace("us", "")) * 1e-6
    nodes = ranks // PER_NODE
    in_node = 2 * (PER_NODE - 1) * (1e-6 + BUCKET / PER_NODE / 150e9)
    across = 2 * math.ceil(math.log2(nodes)) * alpha + 2 * BUCKET * beta if nodes > 1 else 0
    return in_node + across


def efficiency(allreduce):
    """DDP step efficiency with each bucket's allreduce taking `allreduce` seconds."""
    if allreduce is None:
        return None
    end = 0.0
    for b in range(1, BUCKETS + 1):
        ready = BACKWARD * b / BUCKETS
        end = max(end, ready) + allreduce
    step = FORWARD + max(BACKWARD, end)
    return (FORWARD + BACKWARD) / step


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--plot", help="write a PNG of the efficiencies here")
    args = parser.parse_args()
    table = {}
    for link, inter in LINKS.items():
        for ranks in RANKS:
            times = allreduce_seconds(ranks, inter)
            times["nccl tree (formula)"] = tree_seconds(ranks, inter)
            table[(link, ranks)] = times
    names = ALGORITHMS + ["nccl tree (formula)"]
    print("| link | ranks | " + " | ".join(f"{n}: 25 MiB ms / efficiency" for n in names) + " |")
    print("|---|---:|" + "---:|" * len(names))
    for (link, ranks), times in table.items():
        cells = []
        for n in names:
            t = times[n]
            cells.append("-" if t is None else f"{t * 1e3:.2f} / {efficiency(t) * 100:.0f}%")
        print(f"| {link} | {ranks} | " + " | ".join(cells) + " |")
    if args.plot:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
        for ax, link in zip(axes, LINKS):
            for n in names:
                xs = [r for r in RANKS if table[(link, r)][n] is not None]
                ys = [efficiency(table[(link, r)][n]) * 100 for r in xs]
                ax.plot(xs, ys, marker="o", label=n)
            if link == "25 Gbit/s":
                ax.scatter([512], [90], marker="*", s=150, color="black",
                           label="Horovod, published: 90% at 512 GPUs\n"
                                 "(ResNet-101, 128 servers x 4 Pascal, 25 Gbit/s RoCE)")
            ax.set_xscale("log", base=2)
            ax.set_xticks(RANKS, [str(r) for r in RANKS])
            ax.set_title(f"{link} per node, 8 ranks per node")
            ax.set_xlabel("ranks")
            ax.grid(True, alpha=0.3)
        axes[0].set_ylabel("DDP scaling efficiency, %")
        axes[0].set_ylim(80, 101)
        for ax in axes:
            ax.legend(fontsize=7, loc="lower left")
        fig.tight_layout()
        fig.savefig(args.plot, dpi=110)
        print(f"\nplot: {args.plot}")


if __name__ == "__main__":
    main()
