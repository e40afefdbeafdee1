"""Runs a function on N fresh processes that form a process group, with a hard
time limit, and returns each rank's result. Every process it starts is killed
before it returns, whatever happens.

Rendezvous goes through a FileStore in a private temporary folder (file://),
so tests never race for ports.
"""
import faulthandler
import io
import multiprocessing
import os
import queue as queue_module
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback

LOOPBACK_ENV = {"UCX_NET_DEVICES": "lo"}
TRANSPORTS = {
    "tcp": {"UCX_TLS": "tcp,self"},
    "shm": {"UCX_TLS": "posix,sysv,cma,self"},
}


# Settings a rank reads at run time (when it makes its group), which a rank
# forked from the preloaded server (below) takes from its env as well as a
# fresh process would. Anything else (TORCH_*, UCX's global options, read
# when a library loads) asks for a fresh process. (Gloo's interface is read
# as its group is made, torchrun's LOCAL_WORLD_SIZE as ringreduce's is.)
_RUN_TIME_SETTINGS = ("RINGREDUCE_", "UCX_TLS", "UCX_NET_DEVICES", "OMP_NUM_THREADS",
                      "GLOO_SOCKET_IFNAME", "LOCAL_WORLD_SIZE")


# What the server imports once for all its ranks. Not this module: the
# server's sys.path is its environment's (multiprocessing hands it the
# parent's sys.path, which 3.11's forkserver ignores), where pytest's
# tests/python is not; a fork imports it from the path it is given.
_PRELOAD = ["torch", "torch.distributed", "torch_ringreduce"]


def _forkserver():
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(_PRELOAD)
    return ctx


def _context(env, torch_threads):
    """The start method for a world's ranks. Each fresh interpreter imports
    torch, 2.5-3 s of CPU on this suite's 2-core machines, most of a short
    test's time; so ranks fork from one server process per test session that
    imported torch and this package once (multiprocessing's forkserver,
    started by tests/conftest.py before any test changes the environment,
    and holding one thread, no group and no CUDA context). A fresh `spawn`
    where the test leaves torch's threads at its default (that reads
    OMP_NUM_THREADS as torch loads), names a setting read at load time, or
    RINGREDUCE_TEST_SPAWN=1."""
    if (torch_threads is None or os.environ.get("RINGREDUCE_TEST_SPAWN") == "1" or
            any(not key.startswith(_RUN_TIME_SETTINGS) for key in env)):
        return multiprocessing.get_context("spawn")
    return _forkserver()


class _ExitThroughShutdown:
    """What multiprocessing.forkserver sees as `os` in a forked rank that
    must leave as a user's script leaves: the server ends each fork with
    os._exit(code), which runs no atexit handler, no interpreter shutdown
    and no static destructor. Here that call raises SystemExit(code)
    instead, which unwinds out of the server's loop, so the rank's
    interpreter shuts down as any script's does and exits with that status
    (the server still reaps it and reports the status to the parent). Every
    other name is the real module's; the rank's own code keeps the real
    os._exit."""

    def __init__(self, real):
        self._real = real

    def __getattr__(self, name):
        return getattr(self._real, name)

    @staticmethod
    def _exit(code):
        raise SystemExit(code)


def _leave_through_shutdown():
    from multiprocessing import forkserver

    forkserver.os = _ExitThroughShutdown(os)


def _server_probe():
    """In a rank forked from the server: whether the server had made a CUDA
    context (torch marks a fork of a process that had as a bad fork)."""
    import torch

    return bool(torch.cuda._initialized or torch.cuda._is_in_bad_fork())


def start_rank_server():
    """Starts the server the ranks fork from (once per session, before any
    test changes the environment) and returns (its thread count, whether
    it made a CUDA context), read once it has imported what it preloads: a
    fork from a process with other threads copies only the forking one (a
    lock another held stays held in the child), and a CUDA context does
    not survive a fork."""
    from multiprocessing import forkserver

    ctx = _forkserver()
    forkserver.ensure_running()
    # The server forks only once its preloading is done: a rank it forks
    # answers after that.
    with ctx.Pool(1) as pool:
        cuda = pool.apply(_server_probe)
    pid = forkserver._forkserver._forkserver_pid
    with open(f"/proc/{pid}/status") as f:
        threads = int(next(line for line in f if line.startswith("Threads:")).split()[1])
    return threads, cuda


class _ParentStdio:
    """The parent's stdout and stderr as they are when the ranks start
    (pytest's capfd, say), for a rank forked from the server, whose own are
    the server's: sent with the rank's arguments, put in place as they
    arrive."""

    def __reduce__(self):
        from multiprocessing import reduction
        return (_adopt_stdio, (reduction.DupFd(1), reduction.DupFd(2)))


def _adopt_stdio(out, err):
    sys.stdout.flush()
    sys.stderr.flush()
    for target, received in ((1, out), (2, err)):
        fd = received.detach()
        os.dup2(fd, target)
        os.close(fd)


def _stacks_file(init_file, rank):
    return f"{init_file}.stacks.{rank}"


def _child(rank, world_size, init_file, env, fn, args, results, torch_threads=1, stdio=None,
           shutdown_at_exit=False):
    if shutdown_at_exit:
        _leave_through_shutdown()
    # SIGUSR1 writes every thread's Python stack here: the parent asks for
    # it when the rank overruns (faulthandler writes from the signal handler,
    # so it answers even while a native call holds the GIL).
    stacks = open(_stacks_file(init_file, rank), "w")
    faulthandler.register(signal.SIGUSR1, file=stacks, all_threads=True)
    try:
        os.environ.update(env)
        if torch_threads is None:
            # As mp.spawn leaves them: torch's default, unless the test's env
            # names OMP_NUM_THREADS (the suite's own setting is not the user's).
            if "OMP_NUM_THREADS" not in env:
                os.environ.pop("OMP_NUM_THREADS", None)
        else:
            os.environ.setdefault("OMP_NUM_THREADS", str(torch_threads))
        import warnings

        warnings.filterwarnings("ignore", category=FutureWarning)  # all_gather_into_tensor
        import torch

        if torch_threads is not None:
            torch.set_num_threads(torch_threads)
        import torch.distributed as dist

        import torch_ringreduce  # noqa: F401

        value = fn(rank, world_size, f"file://{init_file}", *args)
        # Serialise here: tensors put on a Queue directly travel as shared
        # memory handles that die with this process.
        buffer = io.BytesIO()
        torch.save(value, buffer)
        results.put((rank, "ok", buffer.getvalue()))
    except BaseException:  # report everything, including assertion errors
        results.put((rank, "error", traceback.format_exc()))
    finally:
        # The result leaves for the parent before the group is destroyed:
        # the queue's feeder thread could not send it while a teardown that
        # holds the GIL runs, and a slow teardown would look like a hang.
        results.close()
        results.join_thread()
        try:
            import torch.distributed as dist

            if dist.is_initialized():
                dist.destroy_process_group()
        except Exception:
            pass


class WorldFailed(AssertionError):
    pass


def _debugger():
    """gdb, else cuda-gdb (the GPU machines' image has only that one; it
    attaches to any process), else None."""
    for candidate in ("gdb", "cuda-gdb", "/usr/local/cuda/bin/cuda-gdb"):
        path = shutil.which(candidate)
        if path:
            return path
    return None


def _native_stacks(pids, limit_s=20):
    """Every thread's native stack of each live process in `pids`, where a
    debugger is installed: {pid: text}. The debuggers run side by side, so
    the whole takes `limit_s` at most however many ranks overran."""
    debugger = _debugger()
    if debugger is None:
        return {pid: "(neither gdb nor cuda-gdb installed: no native stacks)" for pid in pids}
    running = {pid: subprocess.Popen([debugger, "-p", str(pid), "-batch", "-nx", "-ex",
                                      "thread apply all bt 24"], stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
                                     text=True)
               for pid in pids}
    deadline = time.monotonic() + limit_s
    stacks = {}
    for pid, proc in running.items():
        try:
            out, _ = proc.communicate(timeout=max(deadline - time.monotonic(), 0.1))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            stacks[pid] = f"({os.path.basename(debugger)} did not answer in time)"
            continue
        # Each frame's line cut short: a pybind11 frame's template names run
        # to thousands of characters, and the message keeps a few thousand
        # per rank.
        stacks[pid] = "\n".join(line[:240] for line in out.splitlines()
                                if line.startswith(("#", "Thread ")) and "New LWP" not in line)
    return stacks


def _threads_holding(pid, signum):
    """The threads of `pid` for which `signum` is pending or blocked (from
    /proc: SigPnd, ShdPnd, SigBlk), or None once the process is gone. A
    handler installed without SA_NODEFER (faulthandler's, unchained) runs
    with its signal blocked, so a thread that holds it is still in it."""
    bit = 1 << (signum - 1)
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    holding = set()
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/status") as f:
                masks = dict(line.split(":", 1) for line in f)
        except OSError:
            continue  # the thread ended meanwhile
        if any(int(masks.get(k, "0"), 16) & bit for k in ("SigPnd", "ShdPnd", "SigBlk")):
            holding.add(tid)
    return holding


def _file_size(path):
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def _dump_python_stacks(files_by_pid, limit_s=10.0):
    """Signals each process to write its Python stacks (faulthandler, on
    SIGUSR1, into its file in `files_by_pid`) and waits until every one has:
    the signal delivered, no thread still in the handler beyond the threads
    that blocked it before (a library's thread that blocks every signal), and
    its file written and no longer growing. The file too: between taking
    the signal off its pending set and blocking it for the handler, a thread
    shows neither in /proc, which under load the poll caught (an empty stack
    in CI). Bounded by `limit_s`."""
    pids = list(files_by_pid)
    blocked_before = {pid: _threads_holding(pid, signal.SIGUSR1) or set() for pid in pids}
    for pid in pids:
        try:
            os.kill(pid, signal.SIGUSR1)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + limit_s
    waiting = set(pids)
    sizes = {pid: -1 for pid in pids}
    while waiting and time.monotonic() < deadline:
        for pid in list(waiting):
            holding = _threads_holding(pid, signal.SIGUSR1)
            size = _file_size(files_by_pid[pid])
            written = size > 0 and size == sizes[pid]
            sizes[pid] = size
            if holding is None or (holding <= blocked_before[pid] and written):
                waiting.discard(pid)
        if waiting:
            time.sleep(0.01)


def _stacks_of(procs, ranks, init_file, per_rank_chars=6000):
    """What each rank in `ranks` is doing: its Python stacks (faulthandler,
    on SIGUSR1) and native stacks, for the message of a world that overran."""
    _dump_python_stacks({procs[r].pid: _stacks_file(init_file, r) for r in ranks})
    # Within a bounded phase (RINGREDUCE_PHASE_DEADLINE) the debuggers get
    # less, so the message is out before the phase is cut.
    native = _native_stacks([procs[r].pid for r in ranks if procs[r].is_alive()],
                            limit_s=15 if os.environ.get("RINGREDUCE_PHASE_DEADLINE") else 20)
    parts = []
    for r in ranks:
        try:
            with open(_stacks_file(init_file, r)) as f:
                python = f.read()
        except OSError:
            python = "(none written)"
        parts.append(f"--- rank {r} (pid {procs[r].pid}), Python stacks ---\n"
                     f"{python[-per_rank_chars:]}\n"
                     f"--- rank {r}, native stacks ---\n"
                     f"{native.get(procs[r].pid, '(exited)')[-per_rank_chars:]}")
    return "\n".join(parts)


def _errors_of(collected):
    """The tracebacks of ranks that ended in an error, for the message of a
    world that overran: a rank that raised alone leaves its peers waiting
    in a collective, and its error is then the cause to read first."""
    return "".join(f"--- rank {r} raised ---\n{value}\n"
                   for r, (status, value) in sorted(collected.items()) if status != "ok")


def _within_phase(timeout):
    """(the world's time limit, what set it for the message). Where a bounded
    caller set RINGREDUCE_PHASE_DEADLINE (seconds since the epoch: the GPU
    check's phases, scripts/gpu_quick.sh), no later than that, so a world
    that overruns still reports its ranks' stacks before the phase's own
    `timeout` kills everything with nothing said."""
    deadline = os.environ.get("RINGREDUCE_PHASE_DEADLINE")
    if not deadline:
        return timeout, ""
    left = float(deadline) - time.time()
    if left >= timeout:
        return timeout, ""
    return max(left, 1.0), " (what was left of the phase: RINGREDUCE_PHASE_DEADLINE)"


def run_world(world_size, fn, *args, env=None, timeout=120, may_die=(), torch_threads=1,
              exit_path=False):
    """fn(rank, world_size, init_method, *args) -> picklable value, per rank.

    Ranks in `may_die` may end without a result (their value is None); every
    other rank must return one and then exit by itself with status 0.
    `exit_path`: the ranks end as a user's script ends (atexit handlers,
    interpreter shutdown, static destructors), so that exiting by itself
    with status 0 covers those, for tests of what happens as a process
    leaves (a forked rank: _ExitThroughShutdown; a spawned one ends so
    anyway).
    `torch_threads`: torch's intra-op threads per rank; None leaves torch's
    default (OMP_NUM_THREADS unset unless `env` sets it), as mp.spawn does
    (fn's module must then not import torch at its top: the children import
    it before the thread count is settled)."""
    full_env = dict(LOOPBACK_ENV)
    full_env.update(env or {})
    timeout, limited_by = _within_phase(timeout)
    ctx = _context(full_env, torch_threads)
    forked = ctx.get_start_method() == "forkserver"
    results = ctx.Queue()
    with tempfile.TemporaryDirectory(prefix="ringreduce-test-") as tmp:
        init_file = os.path.join(tmp, "store")
        procs = [ctx.Process(target=_child,
                             args=(r, world_size, init_file, full_env, fn, args, results,
                                   torch_threads, forked and _ParentStdio(), forked and exit_path),
                             daemon=True)
                 for r in range(world_size)]
        # Spawned children inherit the environment at start: variables read
        # when a module is imported (TORCH_DISTRIBUTED_DEBUG, UCX_*) are in
        # place before the pickled target's module imports torch. (Forked
        # ones apply full_env in _child, before their group reads it; the
        # server itself started with the session (tests/conftest.py), or
        # here on first use outside pytest, with the environment as it was
        # before this update.)
        if forked:
            from multiprocessing import forkserver
            forkserver.ensure_running()
        saved = dict(os.environ)
        os.environ.update(full_env)
        try:
            for p in procs:
                p.start()
        finally:
            os.environ.clear()
            os.environ.update(saved)
        collected = {}
        late = []  # ranks that overran: killed at once, not waited for
        try:
            deadline = time.monotonic() + timeout
            while any(r not in collected for r in range(world_size) if r not in may_die):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    late = [r for r in range(world_size)
                            if r not in collected and procs[r].is_alive()]
                    raise WorldFailed(f"world of {world_size} did not finish within "
                                      f"{timeout:.0f} s{limited_by}; "
                                      f"ranks done: {sorted(collected)}\n"
                                      + _errors_of(collected)
                                      + _stacks_of(procs, late, init_file))
                try:
                    rank, status, value = results.get(timeout=min(remaining, 1.0))
                    collected[rank] = (status, value)
                except queue_module.Empty:
                    dead = [r for r, p in enumerate(procs)
                            if r not in collected and r not in may_die and p.exitcode is not None]
                    if dead:
                        raise WorldFailed(f"rank(s) {dead} exited without a result "
                                          f"(exit codes {[procs[r].exitcode for r in dead]})")
        finally:
            # Ranks allowed to die (or stopped on purpose) are not waited for.
            for r, p in enumerate(procs):
                if (r in may_die and r not in collected) or r in late:
                    p.kill()
            for p in procs:
                p.join(timeout=20)
            hung = [r for r, p in enumerate(procs) if p.is_alive() and r not in may_die]
            # Where a rank that returned its result is stuck on its way out:
            # every thread (a group's worker in a collective, its caller joining it).
            stacks = _stacks_of(procs, hung, init_file, per_rank_chars=30000) if hung else ""
            for p in procs:
                if p.is_alive():
                    p.kill()
                    p.join(timeout=5)
    if hung:
        raise WorldFailed(f"rank(s) {hung} did not exit by themselves and were killed\n" + stacks)
    bad_exit = [r for r, p in enumerate(procs) if r not in may_die and p.exitcode != 0]
    if bad_exit:
        raise WorldFailed(f"rank(s) {bad_exit} exited with {[procs[r].exitcode for r in bad_exit]}")
    errors = {r: v for r, (s, v) in collected.items() if s != "ok"}
    if errors:
        raise WorldFailed("\n".join(f"--- rank {r} ---\n{tb}" for r, tb in sorted(errors.items())))
    import torch

    return [torch.load(io.BytesIO(collected[r][1]), weights_only=False) if r in collected else None
            for r in range(world_size)]


def event_store(init_method, world_size, timeout_s=60):
    """A store beside the group's own, through which a test's ranks tell each
    other that something happened (set a key; wait for it, bounded by
    timeout_s), whatever state the group is in: synchronisation on events,
    not on sleeps."""
    import datetime

    import torch.distributed as dist

    assert init_method.startswith("file://"), init_method
    store = dist.FileStore(init_method[len("file://"):] + ".events", world_size)
    store.set_timeout(datetime.timedelta(seconds=timeout_s))
    return store


def run_session(cmd, env, timeout, cwd=None, preexec_fn=None):
    """Runs the command `cmd` (torchrun, a launcher) in a session of its own
    and kills the whole session afterwards, so that no process it started
    outlives the caller, whether it finishes, fails or hangs. Returns
    (exit status, stdout, stderr); raises WorldFailed past `timeout` s."""
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True,
                            preexec_fn=preexec_fn)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        raise WorldFailed(f"{' '.join(cmd)} did not finish within {timeout} s:\n{err[-3000:]}")
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return proc.returncode, out, err
