"""--plot for the benchmarks: bus bandwidth and latency against message size,
one line per backend, written as a PNG with matplotlib (when installed)."""
import importlib.util
import platform

MISSING = "--plot needs matplotlib, which is not installed here: pip install matplotlib"


def available():
    return importlib.util.find_spec("matplotlib") is not None


def _size_label(nbytes):
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if nbytes >= scale:
            return f"{nbytes / scale:g} {unit}"
    return f"{nbytes} B"


def write(path, title, sizes, series):
    """series: {backend: (times in seconds, bus bandwidths in GB/s)}, one value per size."""
    import matplotlib

    matplotlib.use("Agg")  # no display needed
    import matplotlib.pyplot as plt

    fig, (bw_ax, lat_ax) = plt.subplots(1, 2, figsize=(11, 4.2))
    for backend, (times, busbw) in series.items():
        bw_ax.plot(sizes, busbw, marker="o", markersize=3, label=backend)
        lat_ax.plot(sizes, [t * 1e6 for t in times], marker="o", markersize=3, label=backend)
    ticks = sizes[::max(1, len(sizes) // 7)]
    for ax, ylabel in ((bw_ax, "bus bandwidth (GB/s)"), (lat_ax, "time (us)")):
        ax.set_xscale("log", base=2)
        ax.set_xticks(ticks, [_size_label(s) for s in ticks])
        ax.set_xlabel("message size")
        ax.set_ylabel(ylabel)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
    lat_ax.set_yscale("log")
    bw_ax.set_title("bus bandwidth (higher is better)")
    lat_ax.set_title("latency, median (lower is better)")
    fig.suptitle(f"{title} on {platform.node()} ({platform.machine()})")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
