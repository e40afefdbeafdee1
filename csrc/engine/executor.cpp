// Who runs a group's operations: the worker thread or a waiting caller (executor.h)
#include "engine/executor.h"

#include <poll.h>
#include <pthread.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <exception>

#include "core/base/errors.h"
#include "core/base/core_yield.h"

namespace ringreduce {

namespace {
// How often an idle worker with pending point-to-point work checks deadlines.
constexpr int kPollerTickMs = 20;
// How long messages a caller left in flight (isend or irecv not yet waited
// for) stay its own before the worker drives them. The next wait usually
// drives them first, and then the alarm is disarmed again: an alarm this
// far out is not the core's next timer event, so arming and disarming it
// cost 0.9 us on the 2-core EPYC VM, where at 100 us (the caller grace)
// each moved the next event through the hypervisor, 9 us a pair, most of
// an isend's cost. Only a transfer the peer waits on while this rank
// computes before its wait (a rendezvous) waits for it, and at most this.
constexpr auto kInFlightGrace = std::chrono::milliseconds(5);
// How long a task no peer waits for (Runner::CallerWhenWaited) stays its
// caller's: only a caller that neither waits for its Work nor asks for its
// future (nor queues anything after it) leaves it to the worker, which
// then completes it within this.
constexpr auto kUnwaitedGrace = std::chrono::milliseconds(5);
// After running tasks itself the worker watches the transport's event fd
// this long, so that peers' late protocol messages are answered at once.
constexpr auto kLinger = std::chrono::milliseconds(100);
// For this long after any task it still progresses the transport on a slow
// tick (a peer may wait on a message this rank must answer); then it sleeps
// until there is work, waking once a second: an idle group uses no CPU to
// speak of, and a task queued without an alarm (Executor::submit) whose
// caller never came is still run within that second.
constexpr auto kActiveWindow = std::chrono::seconds(2);
constexpr int kIdleTickMs = 50;
constexpr int kDormantTickMs = 1000;

// Workers of this process spinning after a task: at most one at a time. Each
// group has a worker, and several spinning at once (three busy groups on a
// two-core machine) take the cores that their callers and peers need.
std::atomic<int> spinningWorkers{0};

timespec toTimespec(Clock::time_point when) {
  // steady_clock is CLOCK_MONOTONIC, the timerfd's clock. Zero disarms, so
  // a time already due is written as 1 ns.
  const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(when.time_since_epoch());
  timespec ts{};
  ts.tv_sec = static_cast<time_t>(ns.count() / 1000000000);
  ts.tv_nsec = static_cast<long>(ns.count() % 1000000000);
  if (ts.tv_sec <= 0 && ts.tv_nsec <= 0) ts.tv_nsec = 1;
  return ts;
}
}  // namespace

Executor::Executor(Transport& transport, SpinBudget::Now spinClock,
                   std::function<bool()> contended)
    : transport_(transport),
      spin_(std::chrono::microseconds(transport.config().spinMicroseconds)),
      waitSpin_(std::chrono::microseconds(transport.config().waitSpinMicroseconds)),
      grace_(std::chrono::microseconds(transport.config().callerGraceMicroseconds)),
      yields_(transport.config().spinYields),
      adaptive_(transport.config().adaptiveSpin),
      hotSpin_(spin_, adaptive_, spinClock),
      readySpin_(std::min<std::chrono::microseconds>(grace_, kLongestReadyWait), adaptive_,
                 std::move(spinClock)),
      contended_(std::move(contended)),
      callerCore_(transport.config().workerFollowsCaller) {
  if (!contended_) contended_ = [this] { return contention_.contended(); };
  timerFd_ = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
  if (timerFd_ < 0) throw Error("ringreduce: timerfd_create() failed");
  if (yields_) {  // peers' turns between yields
    hotSpin_.setDescheduledGap(kLongYield);
    readySpin_.setDescheduledGap(kLongYield);
  }
  thread_ = std::thread([this] { run(); });
}

void Executor::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    wakeAt(Clock::now());
  }
  if (thread_.joinable()) thread_.join();
  // A caller may still be helping: wait for it, then let no one drive the
  // transport that is about to go.
  std::lock_guard<std::mutex> drive(driveMutex_);
  stopped_ = true;
}

Executor::~Executor() {
  stop();
  ::close(timerFd_);
}

void Executor::submit(Task task, Runner runner, bool posts, Ready ready) {
  callerCore_.noteCaller();
  std::lock_guard<std::mutex> lock(mutex_);
  outstanding_.fetch_add(1, std::memory_order_relaxed);
  queue_.push_back({std::move(task), Clock::now(), runner, posts, std::move(ready)});
  // A sleeping worker starts it when it is due unless a caller that waits
  // for it runs it first; an awake worker sees the queue anyway.
  if (sleeping_ && runner != Runner::Caller) wakeAt(queue_.back().dueAt(grace_));
}

Clock::time_point Executor::Queued::dueAt(std::chrono::microseconds grace) const {
  switch (runner) {
    case Runner::Worker:
      return queuedAt;
    case Runner::CallerWhenWaited:
      return queuedAt + kUnwaitedGrace;
    default:
      return queuedAt + grace;
  }
}

Clock::time_point Executor::queueDue() const {
  Clock::time_point due = Clock::time_point::max();
  for (const Queued& queued : queue_) due = std::min(due, queued.dueAt(grace_));
  return due;
}

bool Executor::runIfReady() {
  // A task's completion callback may poll another work on this thread.
  if (driver_.load() == std::this_thread::get_id()) return false;
  std::unique_lock<std::mutex> drive(driveMutex_, std::try_to_lock);
  if (!drive.owns_lock() || stopped_) return false;
  Task task;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (queue_.empty() || !queue_.front().ready || !queue_.front().ready()) return false;
    task = std::move(queue_.front().task);
    queue_.pop_front();
  }
  runOnCaller(task);
  return true;
}

Executor::FrontReadiness Executor::frontReadiness() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (queue_.empty() || !queue_.front().ready) return FrontReadiness::NoReadyCheck;
  return queue_.front().ready() ? FrontReadiness::Ready : FrontReadiness::NotYet;
}

bool Executor::awaitReadyAndRun() {
  if (driver_.load() == std::this_thread::get_id()) return false;  // runIfReady's reason
  // One asker spins at a time (the budget is not for two threads); another
  // hands its work to the worker at once.
  std::unique_lock<std::mutex> spinning(readySpinMutex_, std::try_to_lock);
  if (!spinning.owns_lock()) return runIfReady();
  // The last give-up's peers came soon after it (the worker saw them in
  // when it took the task over): a spin would have caught them, unless
  // they were late for want of a core (cpu_contention.h). The worker's
  // pickup is later than their arrival by its own wake-up, so this only
  // bounds it; the most a wait spins is its ceiling.
  const int64_t lateNs = peersLateAfterGiveUp_.exchange(-1, std::memory_order_relaxed);
  if (lateNs >= 0 && !contended_()) {
    readySpin_.wokeAfter(std::min<std::chrono::nanoseconds>(std::chrono::nanoseconds(lateNs),
                                                            readySpin_.ceiling()));
  }
  bool spun = false;
  readySpin_.startWait();
  for (;;) {
    const Clock::time_point now = readySpin_.now();
    switch (frontReadiness()) {
      case FrontReadiness::Ready:
        readySpin_.finishWait();
        return runIfReady();
      case FrontReadiness::NoReadyCheck:  // nothing a wait here could run
        readySpin_.abandon();
        return false;
      case FrontReadiness::NotYet:
        break;
    }
    // An abort from another thread ends the wait: the worker then fails it.
    if (transport_.aborted()) {
      readySpin_.abandon();
      return false;
    }
    if (!readySpin_.keepSpinning(now)) {
      if (!spun) markGaveUp();  // its first pass: no clock read on the way in
      return false;
    }
    spun = true;
    if (yields_) yieldCore();
  }
}

void Executor::markGaveUp() {
  const Clock::time_point now = Clock::now();
  std::lock_guard<std::mutex> lock(mutex_);
  if (!queue_.empty() && queue_.front().ready) queue_.front().askerGaveUpAt = now;
}

bool Executor::progressMessages() {
  if (driver_.load() == std::this_thread::get_id()) return false;
  std::unique_lock<std::mutex> drive(driveMutex_, std::try_to_lock);
  // The pollers are the drive's: read only while it is held.
  if (!drive.owns_lock() || stopped_ || pollers_.empty()) return false;
  driver_ = std::this_thread::get_id();
  transport_.setWaiter(Transport::Waiter::Caller);
  transport_.progress();
  runPollers();
  handBackToWorker();
  driver_ = std::thread::id();
  return true;
}

void Executor::expedite() {
  std::lock_guard<std::mutex> lock(mutex_);
  // No caller runs what is queued now: a future's wait never runs tasks,
  // so a grace that waits for the caller's wait() only delays it (by up to
  // the grace: a future waited for at once took 30-60 us more than wait()
  // at 64 B, a then() callback's 40-190 us). Due at once, as a task only the
  // worker runs. A synchronous caller's own task (Runner::Caller) stays its.
  for (Queued& queued : queue_) {
    if (queued.runner != Runner::Caller) queued.runner = Runner::Worker;
  }
  if (!sleeping_) return;  // an awake worker sees the queue and its pollers anyway
  if (!queue_.empty()) wakeAt(queueDue());
  if (leftInFlight_.load(std::memory_order_acquire)) wakeAt(Clock::now());
}

void Executor::expediteMessages() {
  if (!leftInFlight_.load(std::memory_order_acquire)) return;
  std::lock_guard<std::mutex> lock(mutex_);
  if (sleeping_) wakeAt(Clock::now());
}

void Executor::expediteLocked() {
  for (Queued& queued : queue_) {
    if (queued.runner == Runner::CallerWhenWaited) queued.runner = Runner::CallerOrWorker;
  }
}

void Executor::armForQueued() {
  std::lock_guard<std::mutex> lock(mutex_);
  // Its caller waits now, and another thread drives: whoever drives next
  // takes it as an asynchronous task, not as one its caller will run.
  expediteLocked();
  if (sleeping_ && !queue_.empty()) wakeAt(queueDue());
}

void Executor::wakeAt(Clock::time_point when) {
  if (when >= alarm_) return;
  alarm_ = when;
  itimerspec spec{};
  spec.it_value = toTimespec(when);
  timerfd_settime(timerFd_, TFD_TIMER_ABSTIME, &spec, nullptr);
}

void Executor::disarmWake() {
  if (alarm_ == Clock::time_point::max()) return;
  alarm_ = Clock::time_point::max();
  itimerspec off{};
  timerfd_settime(timerFd_, 0, &off, nullptr);
}

Executor::Task Executor::popTask() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (queue_.empty()) return nullptr;
  Task task = std::move(queue_.front().task);
  queue_.pop_front();
  return task;
}

Executor::Task Executor::popPost() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (queue_.empty() || !queue_.front().posts) return nullptr;
  Task task = std::move(queue_.front().task);
  queue_.pop_front();
  return task;
}

void Executor::runTask(Task& task) {
  try {
    task();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ringreduce: internal error escaped a task: %s\n", e.what());
  }
  task = nullptr;  // what it holds goes before it stops counting as running
  outstanding_.fetch_sub(1, std::memory_order_release);
  lastActivity_ = Clock::now();
  runPollers();
}

void Executor::runPollers(bool abandon) {
  for (size_t i = 0; i < pollers_.size();) {
    if (pollers_[i](abandon) || abandon) {
      pollers_[i] = std::move(pollers_.back());
      pollers_.pop_back();
    } else {
      ++i;
    }
  }
}

bool Executor::helpUntil(const std::function<bool()>& done, Clock::time_point* gaveUpAt) {
  if (done()) return true;
  if (driveUntil(done)) return true;
  armForQueued();
  // Another thread drives: poll the result for a moment before the caller
  // blocks, so that a result that comes soon costs no wake-up. Only
  // briefly: two threads of one rank spinning may take a core a peer needs.
  // The driver may be the worker between two turns of its loop, which
  // leaves this caller's task to it (run()): take the drive when it lets go.
  // Each caller thread keeps its own account of whether this poll pays.
  thread_local SpinBudget pollSpin;
  pollSpin.setLimits(spin_, adaptive_);
  pollSpin.setDescheduledGap(yields_ ? kLongYield : SpinBudget::kDescheduledGap);
  pollSpin.startWait();
  while (!done()) {
    const auto passStart = pollSpin.now();
    if (driveUntil(done)) {
      pollSpin.moved(passStart);  // it ran the rest itself: work, not a gap
      break;
    }
    if (!pollSpin.keepSpinning(passStart)) {
      if (done()) return true;
      expediteMessages();
      if (gaveUpAt != nullptr) *gaveUpAt = Clock::now();
      return done();
    }
    if (yields_) yieldCore();
  }
  pollSpin.finishWait();
  return true;
}

bool Executor::driveUntil(const std::function<bool()>& done) {
  // A task's completion callback may wait for another work on this thread.
  if (driver_.load() == std::this_thread::get_id()) return false;
  std::unique_lock<std::mutex> drive(driveMutex_, std::try_to_lock);
  if (!drive.owns_lock() || stopped_) return false;
  driver_ = std::this_thread::get_id();
  transport_.setWaiter(Transport::Waiter::Caller);  // this thread's caller is blocked anyway
  while (!done()) {
    Task task = popTask();
    if (!task) break;
    runTask(task);
    // The latest task was the caller's, which waited for its own messages:
    // the worker's linger (watching the transport after a task it ran) has
    // nothing left to answer, and keeping it would wake the worker on every
    // message of every later task its callers run.
    workerDrove_ = false;
  }
  // Sends and receives queued next (isend then irecv, then a wait for
  // each): started here, they cost the caller a post each, not the worker a
  // wake-up and the next wait a hand-off.
  if (done()) {
    while (Task task = popPost()) runTask(task);
  }
  // A receive completes through its poller: keep progressing for as long as
  // the caller's waits spin, as long as the last blocked caller's result
  // says they should (learnFromBlockedWait).
  SpinBudget& spin = transport_.spinBudget();
  // Read first: a locked exchange at every drive only where there is news.
  if (resultLateAfterGiveUp_.load(std::memory_order_relaxed) >= 0) {
    const int64_t lateNs = resultLateAfterGiveUp_.exchange(-1, std::memory_order_relaxed);
    if (lateNs >= 0 && !contended_()) spin.wokeAfter(std::chrono::nanoseconds(lateNs));
  }
  spin.startWait();
  while (!done() && !pollers_.empty()) {
    const auto passStart = spin.now();
    const bool moved = transport_.progress() > 0;
    if (moved) spin.moved(passStart);
    runPollers();
    // After work, a read of its end: the spin's length is still bounded.
    if (!spin.keepSpinning(moved ? spin.now() : passStart)) break;
  }
  if (done()) {
    spin.finishWait();
  } else {
    spin.abandon();
  }
  handBackToWorker();
  driver_ = std::thread::id();
  drive.unlock();
  return done();
}

void Executor::learnFromBlockedWait(Clock::time_point gaveUpAt, Clock::time_point endedAt) {
  if (gaveUpAt == Clock::time_point{} || endedAt == Clock::time_point{}) return;
  // Ended just before the give-up looked last: the spin all but caught it.
  const auto late = std::max(endedAt - gaveUpAt, Clock::duration::zero());
  if (late > waitSpin_) return;  // longer than any spin: blocking was right
  resultLateAfterGiveUp_.store(std::chrono::duration_cast<std::chrono::nanoseconds>(late).count(),
                               std::memory_order_relaxed);
}

void Executor::handBackToWorker() {
  transport_.setWaiter(Transport::Waiter::Worker);
  leftInFlight_.store(!pollers_.empty(), std::memory_order_release);
  std::lock_guard<std::mutex> lock(mutex_);
  if (!queue_.empty()) {
    // The worker takes over the rest, at once, unless what is left is
    // only its callers' (CallerWhenWaited: then when that is due).
    const bool callersOnly = std::all_of(queue_.begin(), queue_.end(), [](const Queued& q) {
      return q.runner == Runner::CallerWhenWaited;
    });
    if (sleeping_) wakeAt(callersOnly ? queueDue() : Clock::now());
  } else if (!pollers_.empty()) {
    // Messages in flight: a caller that waits for one soon drives them
    // itself; if none has within kInFlightGrace, the worker does.
    if (sleeping_) wakeAt(Clock::now() + std::max<std::chrono::microseconds>(grace_, kInFlightGrace));
  } else if (sleeping_ && !stopping_ && alarm_ - Clock::now() < kInFlightGrace / 2) {
    // The grace wake-up for what this thread ran, while it is near (a
    // queued task's grace: a wake-up now would take a core from the next
    // call). A far one (kInFlightGrace, armed for messages left in flight)
    // stays armed: at most one idle wake-up per kInFlightGrace instead of
    // a timerfd_settime at every isend/irecv and wait, 1.8 us a send_recv
    // on the 2-core VM (5% of it).
    disarmWake();
  }
}

bool Executor::claimIdle() {
  if (driver_.load() == std::this_thread::get_id()) return false;
  if (!driveMutex_.try_lock()) return false;
  bool claimed = false;
  if (!stopped_) {
    std::lock_guard<std::mutex> lock(mutex_);
    claimed = queue_.empty() && !stopping_;
    if (claimed) outstanding_.fetch_add(1, std::memory_order_relaxed);
  }
  if (!claimed) {
    driveMutex_.unlock();
    return false;
  }
  driver_ = std::this_thread::get_id();
  return true;
}

void Executor::runClaimed(Task task) {
  callerCore_.noteCaller();
  runOnCaller(task);
  driveMutex_.unlock();
}

void Executor::runOnCaller(Task& task) {
  driver_ = std::this_thread::get_id();
  transport_.setWaiter(Transport::Waiter::Caller);
  runTask(task);
  workerDrove_ = false;  // as driveUntil: the worker's linger has nothing to answer
  handBackToWorker();
  driver_ = std::thread::id();
}

bool Executor::claimSpin() {
  int none = 0;
  if (!holdsSpin_) holdsSpin_ = spinningWorkers.compare_exchange_strong(none, 1);
  return holdsSpin_;
}

void Executor::releaseSpin() {
  if (!holdsSpin_) return;
  holdsSpin_ = false;
  spinningWorkers.store(0);
}

void Executor::sleep(bool watchTransport, int timeoutMs) {
  if (watchTransport) {
    transport_.sleepArmed(timerFd_, timeoutMs);
  } else {
    pollfd fd{timerFd_, POLLIN, 0};
    ::poll(&fd, 1, timeoutMs);
  }
  std::lock_guard<std::mutex> lock(mutex_);
  sleeping_ = false;
  disarmWake();  // awake: the loop sees the queue; it re-arms when it sleeps
  uint64_t expirations;
  [[maybe_unused]] ssize_t got = ::read(timerFd_, &expirations, sizeof(expirations));
}

void Executor::run() {
  // Named for top -H, py-spy and perf (15 characters at most).
  pthread_setname_np(pthread_self(), "ringreduce-work");

  // Right after a task the next one usually follows within microseconds
  // (DDP's buckets): poll for a short while before sleeping, and take new
  // tasks at once while hot, except one whose caller is about to run it:
  // taking that costs the caller a hand-off to this thread and back, and
  // the worker, hot again after it, would go on taking every later one.
  auto hotUntil = Clock::now();
  while (true) {
    std::unique_lock<std::mutex> drive(driveMutex_);
    driver_ = std::this_thread::get_id();
    Task task;
    bool stop;
    bool waiting = false;  // a task is in its grace period
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop = stopping_;
      if (!queue_.empty()) {
        const auto now = Clock::now();
        const Queued& first = queue_.front();
        // Hot, it takes what no caller is about to run (a caller waits
        // for Caller's at once; no peer waits for CallerWhenWaited's).
        const bool callers = first.runner == Runner::Caller ||
                             (first.runner == Runner::CallerWhenWaited && queue_.size() == 1);
        if (stop || (now < hotUntil && !callers) || now >= queueDue()) {
          // A task an asker stopped waiting for at once: were its peers in
          // soon after (awaitReadyAndRun's lesson)?
          const auto sinceGiveUp = now - first.askerGaveUpAt;
          if (first.askerGaveUpAt != Clock::time_point{} && sinceGiveUp <= kLongestReadyWait &&
              first.ready()) {
            peersLateAfterGiveUp_.store(
                std::chrono::duration_cast<std::chrono::nanoseconds>(sinceGiveUp).count(),
                std::memory_order_relaxed);
          }
          task = std::move(queue_.front().task);
          queue_.pop_front();
        } else {
          waiting = true;
        }
      }
    }
    if (task) {
      hotSpin_.finishWait();  // a task came while hot: the spin paid, if it spun
      releaseSpin();
      callerCore_.follow();
      runTask(task);
      workerDrove_ = true;
      hotSpin_.startWait();
      hotUntil = Clock::now() + hotSpin_.budget();
      continue;
    }
    if (stop) {
      releaseSpin();
      runPollers(/*abandon=*/true);
      return;
    }
    // The pass's clock read, before it looks (core/base/spin_budget.h);
    // only a hot spin needs one.
    const auto passStart = hotSpin_.waiting() ? hotSpin_.now() : Clock::time_point{};
    if (transport_.progress() > 0) {
      hotSpin_.moved(passStart);
      runPollers();
      continue;
    }
    runPollers();
    if (!waiting && hotSpin_.waiting() && claimSpin() && hotSpin_.keepSpinning(passStart)) {
      if (yields_) yieldCore();
      continue;
    }
    hotSpin_.abandon();  // a task in its grace period, or another worker spins
    releaseSpin();

    const auto sinceActivity = Clock::now() - lastActivity_;
    const bool watchTransport =
        !pollers_.empty() || (workerDrove_ && sinceActivity < kLinger);
    const int timeoutMs = !pollers_.empty()                ? kPollerTickMs
                          : sinceActivity < kActiveWindow ? kIdleTickMs
                                                          : kDormantTickMs;
    if (watchTransport && !transport_.armForSleep()) continue;
    if (!watchTransport) workerDrove_ = false;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      // A task queued while this thread looked: wake when it is due.
      if (!queue_.empty()) wakeAt(queueDue());
      if (stopping_) wakeAt(Clock::now());
      sleeping_ = true;
    }
    leftInFlight_.store(!pollers_.empty(), std::memory_order_release);
    driver_ = std::thread::id();
    drive.unlock();  // a caller may drive while this thread sleeps
    sleep(watchTransport, timeoutMs);
  }
}

}  // namespace ringreduce
