"""What the sharded training-step benchmarks share (fsdp_step.py,
zero3_step.py): their model and step options, the small MLP they train, the
slowest rank's time per step, and the table they print."""
import torch
import torch.distributed as dist

from build_info import loaded_build


def add_step_arguments(parser):
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--width", type=int, default=1024)
    parser.add_argument("--batch", type=int, default=32, help="rows per rank and step")
    parser.add_argument("--steps", type=int, default=30, help="timed steps per configuration")
    parser.add_argument("--warmup", type=int, default=3,
                        help="untimed steps per configuration first")
    parser.add_argument("--quick", action="store_true", help="a smoke run: figures mean nothing")


def parsed_step_arguments(parser):
    """The arguments, made small by --quick (a smoke run)."""
    args = parser.parse_args()
    if args.quick:
        args.layers, args.width, args.steps, args.warmup = 2, 256, 3, 1
    return args


def build_mlp(layers, width):
    """`layers` Linear+ReLU blocks of width x width, the same weights on every rank."""
    torch.manual_seed(0)
    blocks = []
    for _ in range(layers):
        blocks += [torch.nn.Linear(width, width), torch.nn.ReLU()]
    return torch.nn.Sequential(*blocks)


def slowest_per_step(seconds, group):
    """Per step, the slowest rank's seconds (what every rank waits for)."""
    t = torch.tensor(seconds, dtype=torch.float64)
    dist.all_reduce(t, op=dist.ReduceOp.MAX, group=group)
    return t.tolist()


def percentile(samples, q):
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def print_table(title, steps, compute=None):
    """steps: {configuration: [seconds per step]}; compute: the configuration
    without communication (its p50 is subtracted for "exposed"), if any.
    Ratios compare ringreduce (and "ucx", where run) with gloo."""
    print(title)
    print(f"# {loaded_build()}")
    print(f"# {'config':>12} | {'steps':>5} | {'p50 ms':>8} | {'p90 ms':>8} | {'mean ms':>8} | "
          f"{'exposed p50 ms':>14}")
    base = percentile(steps[compute], 0.5) if compute in steps else None
    for name, samples in steps.items():
        p50 = percentile(samples, 0.5)
        exposed = f"{(p50 - base) * 1e3:14.2f}" if base is not None and name != compute else \
            f"{'-':>14}"
        print(f"  {name:>12} | {len(samples):5d} | {p50 * 1e3:8.2f} | "
              f"{percentile(samples, 0.9) * 1e3:8.2f} | {sum(samples) / len(samples) * 1e3:8.2f} | "
              f"{exposed}")
    if "gloo" not in steps:
        return
    gloo = steps["gloo"]
    # "ucx": ringreduce with its host channel off (UCX and cma alone), the
    # path every collective but a synchronous allreduce took before issue 53.
    for name in ("ringreduce", "ucx"):
        if name not in steps:
            continue
        ours = steps[name]
        for q in (0.5, 0.9):
            print(f"# step p{int(q * 100)}: {name} / gloo = "
                  f"{percentile(ours, q) / percentile(gloo, q):.2f}")
        if base is not None and percentile(gloo, 0.5) > base:
            print(f"# exposed communication at p50: {name} "
                  f"{(percentile(ours, 0.5) - base) / (percentile(gloo, 0.5) - base):.2f}x gloo's")
    # "fake": torch's backend that communicates nothing, the framework's own
    # cost around its collectives; what each backend adds above it.
    if "fake" in steps:
        fake = percentile(steps["fake"], 0.5)
        above = ", ".join(f"{name} {(percentile(steps[name], 0.5) - fake) * 1e3:.2f} ms"
                          for name in ("ringreduce", "ucx", "gloo") if name in steps)
        print(f"# p50 above the fake backend's step ({fake * 1e3:.2f} ms): {above}")
