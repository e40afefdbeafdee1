"""Each call form's own cost with no peer: world 1, one process, CPU, after compute.

What a backend costs per call before it communicates at all (its checks,
numbering, trace, Work and Future), against torch's `fake` backend (torch's
Python and dispatcher; its future holds None) and gloo, as the caches are
after the caller computed: groups of one in the same process, each call
after --compute-ms of busy work, the groups taking turns in every order
(so each follows each as often), the median per form and group.

    OMP_NUM_THREADS=1 python3 benchmarks/one_rank_forms.py [--compute-ms 2] [--groups ringreduce,fake,gloo]

Leaving gloo out (--groups ringreduce,fake) leaves the caches warmer: its
calls touch far more than ours or the fake's.
"""
import argparse
import itertools
import os
import statistics
import time

FORMS = {
    "all_reduce": lambda dist, t, g: dist.all_reduce(t, group=g),
    "async + wait()": lambda dist, t, g: dist.all_reduce(t, group=g, async_op=True).wait(),
    "get_future().wait()": lambda dist, t, g: dist.all_reduce(
        t, group=g, async_op=True).get_future().wait(),
    "then(hook).wait()": lambda dist, t, g: dist.all_reduce(
        t, group=g, async_op=True).get_future().then(lambda done: done.value()).wait(),
}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--compute-ms", type=float, default=2.0)
    parser.add_argument("--calls", type=int, default=600, help="per form and group")
    parser.add_argument("--groups", default="ringreduce,fake,gloo")
    args = parser.parse_args()

    import torch
    import torch.distributed as dist
    import torch.testing._internal.distributed.fake_pg  # noqa: F401  (registers "fake")

    import torch_ringreduce  # noqa: F401  (registers the backend)

    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29561")
    dist.init_process_group("ringreduce", rank=0, world_size=1)
    names = args.groups.split(",")
    groups = [(name, dist.group.WORLD if name == "ringreduce" else dist.new_group(backend=name))
              for name in names]
    t, x = torch.ones(16), torch.randn(256, 256)

    def compute():
        end = time.perf_counter() + args.compute_ms / 1000
        while time.perf_counter() < end:
            x.mul_(1.0000001)

    orders = list(itertools.permutations(groups))
    print(f"# world 1, 64 B float32 SUM, {args.compute_ms} ms of compute before each call, "
          f"p50 of {args.calls - 50} calls per form and group, us; torch {torch.__version__}")
    print("# form                | " + " | ".join(f"{n:>10}" for n in names)
          + " | " + " | ".join(f"{n} - fake" for n in names if n != "fake"))
    for form, call in FORMS.items():
        times = {name: [] for name in names}
        for i in range(args.calls):
            for name, group in orders[i % len(orders)]:
                if args.compute_ms:
                    compute()
                start = time.perf_counter_ns()
                call(dist, t, group)
                times[name].append((time.perf_counter_ns() - start) / 1000)
        p50 = {name: statistics.median(v[50:]) for name, v in times.items()}
        above = [f"{p50[n] - p50['fake']:>{len(n) + 7}.2f}" for n in names
                 if n != "fake" and "fake" in p50]
        print(f"{form:22s}| " + " | ".join(f"{p50[n]:10.2f}" for n in names)
              + (" | " + " | ".join(above) if above else ""), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
