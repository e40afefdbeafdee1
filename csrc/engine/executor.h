// Who runs a group's operations: one at a time, in the order they were
// submitted (the order every c10d backend guarantees).
//
// Two kinds of thread take turns, one at a time (driveMutex_):
// - A caller about to block on a result (helpUntil, from Work::wait) runs
//   the queued tasks on its own thread. A synchronous collective then costs
//   no hand-off to another thread and no wake-up back: on a machine whose
//   idle cores halt, each of those costs 50-200 us, most of a small
//   collective's time. On its way out it also starts the sends and
//   receives queued next (isend, irecv, then a wait for each), and leaves
//   the messages still in flight to the worker only after kInFlightGrace
//   (the next wait usually comes first and drives them itself), or at once
//   when a wait stops polling and blocks (expediteMessages). A send or
//   receive with nothing queued ahead of it is posted by its caller at
//   once (claimIdle, runClaimed): never queued, it arms no alarm.
// - The group's worker thread runs what no caller runs: asynchronous work
//   (DDP's buckets) and a task nobody claimed within a short grace period.
//   While it has recently run tasks it also keeps the transport progressing
//   between them so that peers' late protocol messages (rendezvous acks,
//   wire-up) are answered, sleeping on the transport's event fd.
//
// Nothing of this spins while the group is idle: the worker sleeps on a
// timerfd that is armed for "now" (work to do), for "after the grace period"
// (a task a caller may claim), for a slow tick shortly after activity, or
// not at all. A caller that claims a task disarms the grace wake-up, so a
// loop of synchronous collectives never wakes the worker. A task whose
// caller is about to wait for it arms nothing at all: the caller runs it,
// and if it cannot (another thread drives), it arms the wake-up itself
// before it blocks.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "core/base/cpu_contention.h"
#include "engine/caller_core.h"
#include "engine/runner.h"
#include "transport/transport.h"

namespace ringreduce {

class Executor {
 public:
  using Task = std::function<void()>;  // must not throw
  // Whether a queued task would now wait for nothing but peers already in
  // it (runIfReady); any thread, cheap, never blocks.
  using Ready = std::function<bool()>;

  // `spinClock`: the worker's spin's clock (null: the steady clock), for
  // tests that drive that spin on a controlled one. `contended` (null:
  // CpuContention, /proc/loadavg): whether other work wants the cores, for
  // tests that decide it (awaitReadyAndRun's lesson from the worker).
  explicit Executor(Transport& transport, SpinBudget::Now spinClock = nullptr,
                    std::function<bool()> contended = nullptr);
  // Runs the tasks already submitted, gives up pending pollers and joins the
  // thread. Idempotent; submit() must not be called afterwards.
  void stop();
  ~Executor();
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  // `runner`: who is expected to run it (above).
  // `posts`: the task only starts a send or receive (it never waits), so a
  // caller that drives may run it on its way out (driveUntil).
  // `ready` (or null): says when a poll may run it (runIfReady).
  void submit(Task task, Runner runner = Runner::CallerOrWorker, bool posts = false,
              Ready ready = nullptr);

  // Any thread: tasks are queued or one is running. Lock-free (the direct
  // path asks on every collective): a task counts from submit() until it
  // has run, so there is no moment between its pop and its run when it
  // does not. After false, what the tasks did is visible to the caller.
  bool busy() const { return outstanding_.load(std::memory_order_acquire) != 0; }
  // More tasks runnable on this machine than it has cores (cpu_contention.h,
  // or the test's stand-in): a wait that learns to spin longer does not.
  bool cpuContended() const { return contended_(); }

  // A send's or receive's post that nothing queued precedes, run on the
  // issuing caller's thread instead of queued: claimIdle() (under the
  // engine's submit lock, which orders it with what is submitted next)
  // makes this thread the driver, the task counted as outstanding; false
  // where a task is queued or another thread drives. Then runClaimed() runs
  // it, once that lock is released (completions may issue new work), and
  // leaves whatever it left in flight to the next wait, or to the worker
  // after the in-flight grace (handBackToWorker). Every true claimIdle()
  // must be followed by runClaimed() on the same thread.
  bool claimIdle();
  void runClaimed(Task task);

  // Caller's thread, about to block until `done()`: if no thread drives the
  // transport now, runs queued tasks here until `done()` or the queue is
  // empty; otherwise polls `done()` for a moment. Returns `done()`. Never
  // blocks on the worker. Where this thread's own spin gave up (the result
  // not in), `gaveUpAt`, if given, says when: the caller then blocks, and
  // tells learnFromBlockedWait when its result came.
  bool helpUntil(const std::function<bool()>& done, Clock::time_point* gaveUpAt = nullptr);

  // Any thread, a caller whose wait gave up its spin at `gaveUpAt`
  // (helpUntil) and then blocked until its result came at `endedAt`. Where
  // that was within the callers' spin ceiling (RINGREDUCE_WAIT_SPIN_US), a
  // spin would have caught it and saved the two wake-ups (the worker's,
  // which completed it, and this thread's): the next caller that drives
  // spins again (SpinBudget::wokeAfter), unless other work wants the cores.
  // Without this a caller's budget for the messages it drives, once at 0,
  // came back only through probes (an eighth of the ceiling), which a
  // rendezvous of MiBs outlasts: after gloo's calls had put the ranks out
  // of step, every 4 MiB isend/irecv exchange slept, 1.2-1.8 ms against
  // 0.4-0.6 (benchmarks/history/2026-12-05-message-waits-learn.md).
  void learnFromBlockedWait(Clock::time_point gaveUpAt, Clock::time_point endedAt);

  // A poller is called between tasks and while the worker is idle until it
  // returns true (finished). Point-to-point operations use this so that a
  // pending recv never blocks the collectives queued behind it. When the
  // executor stops, each remaining poller is called once with
  // abandon = true and must give up (fail its work). Call addPoller only
  // from a task.
  using Poller = std::function<bool(bool abandon)>;
  void addPoller(Poller poller) { pollers_.push_back(std::move(poller)); }

  // A caller's poll (is_completed()): runs the first queued task on this
  // thread if it has a `ready` that says so now, and nothing else; true if
  // it ran one. It never waits for the drive (another thread driving: false)
  // and never runs a task that could wait for something this rank does
  // later: a poll must return. A published-ahead collective whose peers are
  // all in it is such a task: what is left of it is reading their parts.
  bool runIfReady();
  // A caller's poll of a send or receive (is_completed()): one pass of the
  // transport and the message pollers on this thread, where no other
  // thread drives (the worker sleeps between its passes). A message that
  // came meanwhile completes here, at the poll, instead of at the worker's
  // next wake-up. Like runIfReady it never waits: the drive taken
  // elsewhere, or no message in flight, it does nothing. True if it ran.
  bool progressMessages();

  // Any thread: whatever was left for a caller that waits is the worker's
  // now, because this caller will not run it: its Work's future was asked
  // for (a future's wait never runs tasks on its thread). The tasks queued
  // now (but a synchronous caller's, Runner::Caller) are due at once, as
  // Runner::Worker's, and messages a caller left in flight are driven by
  // the worker at once (expediteMessages).
  void expedite();
  // Any thread, the asker of a Work's future (get_future()), before the queue
  // becomes the worker's (expedite): where the first queued task waits for
  // nothing but its peers' arrival (it has a `ready`: a published-ahead
  // collective), waits for them up to the caller grace
  // (RINGREDUCE_CALLER_GRACE_US), learnt as every spin is (readySpin_:
  // where they come later call after call, it soon stops waiting), and runs
  // it here once they are in, as a poll does (runIfReady). True if it ran
  // one. Handed to the worker instead, the future completes across two
  // threads' wake-ups, and that hand-off puts the ranks out of step for the
  // next call, whose peer then comes late too: back to back at 64 B a
  // future waited for at once took 45-111 us against torch's own 17-21, a
  // then() hook 82-113 against 20-27; with a wait of 25 us, learnt, 45-111
  // still (the hand-offs' lateness outlasts it, so it learnt to stop); with
  // the grace, 16-18 against 11.5, hooks 33-45 against 19-25. The grace is
  // what a caller that will wait is given anyway (the queued task's own
  // grace, Runner::CallerOrWorker); DDP's buckets do not reach it (from 512
  // KiB an allreduce has a second phase and no `ready`). Never longer than
  // kLongestReadyWait, whatever the grace: a peer that never comes is the
  // worker's to time out (its op's deadline), not a spin's to wait for.
  //
  // A wait that stopped at once (its budget at 0) learns from the worker
  // whether it should have waited: where the worker, taking the task over,
  // finds its peers already in within kLongestReadyWait of that give-up,
  // the next wait spins again (SpinBudget::wokeAfter), unless other work
  // wants the cores. Without this both ranks' budgets stay at 0 once they
  // fell there (after a slow neighbour's calls, gloo's: the cores come back
  // from idle slowly): each rank's peer then comes a hand-off late, every
  // call, too late for the probes (in the whole anchor harness a 64 B hook
  // took 43 us at p50 against 5.4 without gloo's blocks between).
  bool awaitReadyAndRun();
  // Longer than a scheduler's time slice, a spin only holds a core.
  static constexpr std::chrono::microseconds kLongestReadyWait{1000};
  // Any thread, a caller that polls (is_completed()) or that stops polling
  // and blocks on its result (helpUntil): messages a caller left in flight
  // are driven by the worker at once instead of after kInFlightGrace (the
  // transport's events do not wake it for every protocol step: a
  // rendezvous's acknowledgement over shared memory waited 5 ms, a polled
  // irecv saw its message about 3 ms late). A poll's
  // queued tasks stay as they are: a poll runs a published-ahead collective
  // itself once it is ready (runIfReady), and handed to the worker it would
  // hold the drive, asleep in its wait for the peers, while the poll could
  // not take it.
  void expediteMessages();
  // The account of the worker's spin after a task (core/base/spin_budget.h),
  // for tests: the worker thread writes it, so read it only while the
  // worker sleeps (after something it did before sleeping was seen).
  const SpinBudget& workerSpin() const { return hotSpin_; }
  // awaitReadyAndRun's account, for tests: read it only between its calls.
  const SpinBudget& readySpin() const { return readySpin_; }

 private:
  struct Queued {
    Task task;
    Clock::time_point queuedAt;
    Runner runner;
    bool posts = false;
    Ready ready;  // null: a poll never runs it
    // When awaitReadyAndRun stopped waiting for it without a spin (its
    // budget at 0), if it did: the worker then tells it how late the peers
    // were (peersLateAfterGiveUp_).
    Clock::time_point askerGaveUpAt{};
    // When the worker starts it if no caller has (kUnwaitedGrace: that of
    // a Runner::CallerWhenWaited task).
    Clock::time_point dueAt(std::chrono::microseconds grace) const;
  };
  // With mutex_ held, the queue not empty: when the worker starts on it (the
  // soonest task's due time; it then runs the queue from the front).
  Clock::time_point queueDue() const;
  void run();
  // With mutex_ held: the worker wakes at `when` (or earlier if already due).
  void wakeAt(Clock::time_point when);
  void disarmWake();
  // A caller that could not drive: the worker wakes for the queue's first
  // task when its grace ends (it may have been queued without an alarm),
  // the caller's own task expedited (it waits for it now).
  void armForQueued();
  // awaitReadyAndRun stopped without a spin (at its first pass): the first
  // queued task, if it has a `ready`, is marked now for the worker's lesson.
  void markGaveUp();
  // With mutex_ held: every CallerWhenWaited task becomes CallerOrWorker.
  void expediteLocked();
  Task popTask();
  // The first task if it only posts a send or receive, else none.
  Task popPost();
  void runTask(Task& task);
  // A task run on a caller's thread, which holds driveMutex_ (runClaimed,
  // runIfReady): it drives the transport meanwhile, then hands what is
  // left to the worker.
  void runOnCaller(Task& task);
  // Whether the first queued task has a `ready`, and if so what it says now.
  enum class FrontReadiness { NoReadyCheck, NotYet, Ready };
  FrontReadiness frontReadiness();
  void runPollers(bool abandon = false);
  bool driveUntil(const std::function<bool()>& done);
  // The end of a caller's drive: the worker takes over what is queued at
  // once and the messages still in flight after kInFlightGrace; else its
  // grace wake-up is disarmed.
  void handBackToWorker();
  void sleep(bool watchTransport, int timeoutMs);
  // The worker's hot spin after a task, one worker per process at a time.
  bool claimSpin();
  void releaseSpin();

  Transport& transport_;
  const std::chrono::microseconds spin_;      // RINGREDUCE_SPIN_US
  const std::chrono::microseconds waitSpin_;  // RINGREDUCE_WAIT_SPIN_US
  const std::chrono::microseconds grace_;     // RINGREDUCE_CALLER_GRACE_US
  const bool yields_;                         // RINGREDUCE_SPIN_YIELD
  const bool adaptive_;                       // RINGREDUCE_ADAPTIVE_SPIN
  SpinBudget hotSpin_;                        // worker thread only: the spin after a task
  // awaitReadyAndRun's, held by the one thread that spins there at a time.
  std::mutex readySpinMutex_;
  SpinBudget readySpin_;
  // The worker's word to the next asker: how long after an asker's give-up
  // it found that task's peers in (ns; -1: nothing to learn).
  std::atomic<int64_t> peersLateAfterGiveUp_{-1};
  // A blocked caller's word to the next driving caller: how long after its
  // spin gave up its result came (ns; -1: nothing to learn).
  std::atomic<int64_t> resultLateAfterGiveUp_{-1};
  CpuContention contention_;
  std::function<bool()> contended_;
  int timerFd_ = -1;                          // the worker's alarm clock
  CallerCore callerCore_;                     // RINGREDUCE_WORKER_FOLLOWS_CALLER

  std::mutex mutex_;  // guards the queue, the flags and the alarm below
  std::deque<Queued> queue_;
  bool stopping_ = false;
  bool sleeping_ = false;  // the worker is asleep (or about to be)
  Clock::time_point alarm_ = Clock::time_point::max();

  std::atomic<uint64_t> outstanding_{0};  // tasks submitted and not yet run to their end

  std::mutex driveMutex_;  // held while running tasks, pollers or progress
  std::atomic<std::thread::id> driver_{};  // the thread holding driveMutex_, if any
  bool stopped_ = false;                   // guarded by driveMutex_: no one may drive
  std::vector<Poller> pollers_;            // guarded by driveMutex_
  // Whether the last driver left pollers (written with driveMutex_ held,
  // read by a caller about to block without it).
  std::atomic<bool> leftInFlight_{false};
  Clock::time_point lastActivity_{};       // guarded by driveMutex_: last task run
  bool workerDrove_ = false;               // guarded by driveMutex_: the worker ran the latest task
  bool holdsSpin_ = false;                 // worker thread only

  std::thread thread_;
};

}  // namespace ringreduce
