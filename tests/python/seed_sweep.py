"""Seed sweep: the mixed call forms of test_mixed_call_forms.py over random
seeds, world sizes, transports and settings, for as long as asked, printing
each failing draw with the command that repeats it. Not part of the suite (a
tool, not a test): the suite runs a few fixed seeds; this looks for the rare
ones.

    python3 tests/python/seed_sweep.py --minutes 20           # results
    python3 tests/python/seed_sweep.py --minutes 20 --kill    # a rank SIGKILLed amid them
    python3 tests/python/seed_sweep.py --repeat '{"seed": ...}'   # one printed draw again

--kill: one rank SIGKILLs itself before a random step; every survivor must
raise DistBackendError naming it within 5 s (the suite's bound)."""
import argparse
import json
import os
import random
import sys
import tempfile
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from mixed_forms_cases import each_rank_its_own_form, killed_amid_forms  # noqa: E402
from multiproc import TRANSPORTS, run_world  # noqa: E402

# Settings that send the same collectives down other paths.
SETTINGS = [
    {},
    {"RINGREDUCE_SHM_BYTES": "8192"},           # small channel buffers: many pieces
    {"RINGREDUCE_ASYNC_ON_CALLER_BYTES": "0"},  # every asynchronous call queued
    {"RINGREDUCE_SHM_BYTES": "0"},              # no channel: UCX and cma
    {"RINGREDUCE_CROSS_MEMORY": "0"},           # no cma
    # The waits' other paths: every wait sleeps on the doorbell at once (the
    # sleepers' wake-ups), spins of a fixed length, a queued task never left
    # for its caller, every collective queued and checked against its
    # neighbour's.
    {"RINGREDUCE_SPIN_US": "0", "RINGREDUCE_WAIT_SPIN_US": "0"},
    {"RINGREDUCE_ADAPTIVE_SPIN": "0"},
    {"RINGREDUCE_CALLER_GRACE_US": "0"},
    {"RINGREDUCE_CHECK_COLLECTIVES": "1"},
]
STEPS = 300
KILL_BOUND_S = 5.0


def draw(rng, kill):
    world = rng.choice([2, 2, 3, 4])
    d = {"seed": rng.randrange(1, 10**6), "world": world,
         "transport": rng.choice(["shm", "shm", "tcp"]), "setting": rng.choice(SETTINGS)}
    if kill:
        d.update(victim=rng.randrange(world), die_at=rng.randrange(STEPS))
    return d


def problems_with_results(d):
    results = run_world(d["world"], each_rank_its_own_form, STEPS, d["seed"],
                        env={**TRANSPORTS[d["transport"]], **d["setting"]}, timeout=240)
    return [f"rank {rank}: {r['failed']} wrong, first {r['failures'][:2]}"
            for rank, r in enumerate(results) if r["failed"]]


def problems_with_a_kill(d):
    victim = d["victim"]
    with tempfile.TemporaryDirectory() as tmp:
        results = run_world(d["world"], killed_amid_forms, d["seed"], victim, d["die_at"],
                            os.path.join(tmp, "killed_at"),
                            env={**TRANSPORTS[d["transport"]], **d["setting"]}, timeout=120,
                            may_die={victim}, exit_path=True)
    problems = [] if results[victim] is None else [f"the victim returned {results[victim]}"]
    for rank, r in enumerate(results):
        if rank == victim:
            continue
        if r["error"] is None:
            problems.append(f"rank {rank} ran on past the death")
            continue
        kind, message = r["error"]
        if kind != "DistBackendError" or f"rank {victim} is gone" not in message:
            problems.append(f"rank {rank}: {kind}: {message[:300]}")
        if r["latency"] > KILL_BOUND_S:
            problems.append(f"rank {rank} learnt it after {r['latency']:.1f} s")
    return problems


def run_one(d):
    check = problems_with_a_kill if "victim" in d else problems_with_results
    try:
        return check(d)
    except Exception as e:  # a hang past the world's timeout, a crash
        return ["".join(traceback.format_exception_only(type(e), e))[-1500:]]


def describe(d):
    """One line that --repeat takes back."""
    return json.dumps(d, sort_keys=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--kill", action="store_true")
    parser.add_argument("--seed", type=int, default=None, help="the sweep's own seed")
    parser.add_argument("--repeat", help="one draw as printed, run again")
    args = parser.parse_args()
    if args.repeat:
        d = json.loads(args.repeat)
        problems = run_one(d)
        print(describe(d), "ok" if not problems else f"FAILED {problems}")
        return 1 if problems else 0
    sweep_seed = args.seed if args.seed is not None else random.randrange(10**9)
    rng = random.Random(sweep_seed)
    print(f"# sweep seed {sweep_seed}, {args.minutes} minutes, "
          f"{'a rank killed' if args.kill else 'results checked'}", flush=True)
    deadline = time.time() + 60 * args.minutes
    runs, failed = 0, []
    while time.time() < deadline:
        d = draw(rng, args.kill)
        start = time.time()
        problems = run_one(d)
        runs += 1
        status = "ok" if not problems else f"FAILED {problems}"
        print(f"{time.strftime('%H:%M:%S')} {describe(d)} {time.time() - start:.1f}s {status}",
              flush=True)
        if problems:
            failed.append(d)
    print(f"# {runs} draws, {len(failed)} failed")
    for d in failed:
        print(f"#   python3 tests/python/seed_sweep.py --repeat '{describe(d)}'")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
