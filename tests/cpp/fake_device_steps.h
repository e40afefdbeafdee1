// DeviceSteps on host memory, for the device ring's schedule tests without
// a GPU. Work runs later, not when it is enqueued: in order, each piece
// after a number of done() polls (drawn from [minPolls, maxPolls]), and only
// then does it read the slot and write its destination, with the host
// loops of core/math/host_reduce.h. So a schedule that sends a segment
// before its ticket is done sends stale data, and one that receives into a
// slot still being read feeds the pending reduction the wrong segment;
// both give wrong results, and the records say which rule was broken.
//
// Its wake fd (DeviceSteps::wakeFd): this device moves only when polled, so
// a waiter about to sleep is told at once to look again (the fd is readable
// as soon as it is asked for), except for work held back with holdFrom():
// that finishes when another thread calls release(), which is also what
// makes the fd readable, as a device that gets there late would.
#pragma once

#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <deque>
#include <functional>
#include <limits>
#include <memory>
#include <random>
#include <stdexcept>
#include <vector>

#include "algorithms/device/ring.h"
#include "core/math/half_conversion.h"
#include "core/math/host_reduce.h"
#include "schedule_log.h"

namespace ringreduce::testing {

class FakeDeviceSteps : public DeviceSteps {
 public:
  struct Options {
    int slots = 3;
    size_t slotBytes = 256;
    int minPolls = 1;
    int maxPolls = 3;
    uint32_t seed = 1;
    // > 0: the number of reduces the run will enqueue, each but the last of
    // which finishes only once the next one was enqueued: a slow device on
    // a fast network. A schedule that stops receiving and enqueuing while a
    // reduction is pending then never finishes (and times out).
    size_t overlapReduces = 0;
  };

  struct ReduceRecord {
    Ticket ticket = 0;
    int slot = -1;  // which staging slot it read (-1: none of ours)
    const void* dst = nullptr;
    void* alsoTo = nullptr;
    size_t count = 0;
    int avgDivisor = 0;
    bool finished = false;
    bool slotIntact = true;  // the slot held what arrived until the reduction read it
  };

  explicit FakeDeviceSteps(Options options, ScheduleLog* log = nullptr)
      : options_(options), log_(log), random_(options.seed),
        memory_(static_cast<size_t>(options.slots) * options.slotBytes),
        wakeFd_(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {
    if (wakeFd_ < 0) throw std::runtime_error("fake device: no eventfd");
  }
  ~FakeDeviceSteps() override { ::close(wakeFd_); }
  FakeDeviceSteps(const FakeDeviceSteps&) = delete;
  FakeDeviceSteps& operator=(const FakeDeviceSteps&) = delete;

  int slots() const override { return options_.slots; }
  size_t slotBytes() const override { return options_.slotBytes; }
  void* slot(int index) override {
    if (index < 0 || index >= options_.slots) throw std::out_of_range("fake device: no such slot");
    return memory_.data() + static_cast<size_t>(index) * options_.slotBytes;
  }

  Ticket reduce(void* dst, const void* received, void* alsoTo, size_t count, DataType type,
                ReduceOp op, int avgDivisor) override {
    if (onReduce) onReduce(records_.size());
    const size_t index = records_.size();
    const size_t bytes = count * elementSize(type);
    records_.push_back({0, slotIndexOf(received), dst, alsoTo, count, avgDivisor});
    // What arrived, to compare with what the slot holds when the work runs.
    auto arrived = std::make_shared<std::vector<uint8_t>>(
        static_cast<const uint8_t*>(received), static_cast<const uint8_t*>(received) + bytes);
    records_[index].ticket = enqueue(index, [=] {
      records_[index].slotIntact = std::memcmp(arrived->data(), received, bytes) == 0;
      if (avgDivisor != 0) {
        reduceAndAverage(type, dst, received, count, avgDivisor);
      } else {
        reduceInto(type, op, dst, received, count);
      }
      if (alsoTo != nullptr) std::memcpy(alsoTo, dst, bytes);
      records_[index].finished = true;
    });
    return records_[index].ticket;
  }
  Ticket copy(void* dst, const void* src, size_t bytes) override {
    ++copies_;
    return enqueue(npos, [=] { std::memmove(dst, src, bytes); });
  }
  // As the device would: float32 <-> float16/bfloat16, rounding to nearest
  // even (the host's conversions, which the wire-dtype host ring uses too).
  Ticket convert(void* dst, DataType dstType, const void* src, DataType srcType,
                 size_t count) override {
    ++converts_;
    return enqueue(npos, [=] {
      if (srcType == DataType::Float32) {
        floatBufferToHalf(dstType == DataType::Float16, static_cast<const float*>(src),
                          static_cast<uint16_t*>(dst), count);
      } else {
        halfBufferToFloat(srcType == DataType::Float16, static_cast<const uint16_t*>(src),
                          static_cast<float*>(dst), count);
      }
    });
  }
  void* workspace(size_t bytes) override {
    if (workspace_.size() < bytes) workspace_.resize(bytes);
    return workspace_.data();
  }
  Ticket fence() override {
    const Ticket ticket = enqueue(npos, [] {});
    fences_.push_back(ticket);
    return ticket;
  }
  // One poll is one step of the device: the oldest piece of work moves on.
  bool done(Ticket ticket) override {
    if (ticket == 0 || ticket > next_) throw std::logic_error("fake device: unknown ticket");
    step();
    return ticket <= finished_;
  }

  int wakeFd(Ticket ticket) override {
    if (ticket == 0 || ticket > next_) throw std::logic_error("fake device: unknown ticket");
    uint64_t said;
    [[maybe_unused]] const ssize_t got = ::read(wakeFd_, &said, sizeof(said));
    ++wakeRequests_;
    const Ticket held = heldFrom_.load();
    // Held work wakes the waiter when it is released; the rest "moves on"
    // as soon as the waiter looks again.
    if (held == 0 || ticket < held || released_.load()) signal();
    return wakeFd_;
  }
  // Work from `ticket` on does not finish until release() (any thread):
  // a device busy with something else, that gets there late.
  void holdFrom(Ticket ticket) { heldFrom_ = ticket; }
  // The held work may finish: the wake fd becomes readable, as the host
  // function queued behind it would make it.
  void release() {
    released_ = true;
    signal();
  }
  // How often a waiter asked for the wake fd (each time it was about to sleep).
  size_t wakeRequests() const { return wakeRequests_; }
  int wakeDescriptor() const { return wakeFd_; }

  // Called before each reduce with its index (0, 1, ...): a test makes the
  // device fail there (throw) or aborts the rank's transport.
  std::function<void(size_t)> onReduce;
  // From reduce `index` on, nothing finishes: a kernel that hangs.
  void stallFromReduce(size_t index) { stallFrom_ = index; }

  const std::vector<ReduceRecord>& reduces() const { return records_; }
  const std::vector<Ticket>& fences() const { return fences_; }
  size_t copies() const { return copies_; }
  size_t converts() const { return converts_; }
  size_t unfinished() const { return queue_.size(); }
  int slotIndexOf(const void* p) const {
    const auto* at = static_cast<const uint8_t*>(p);
    if (at < memory_.data() || at >= memory_.data() + memory_.size()) return -1;
    return static_cast<int>(static_cast<size_t>(at - memory_.data()) / options_.slotBytes);
  }

 private:
  struct Work {
    Ticket ticket;
    int pollsLeft;
    size_t reduceIndex;  // npos: not a reduce
    std::function<void()> run;
  };
  static constexpr size_t npos = std::numeric_limits<size_t>::max();

  Ticket enqueue(size_t reduceIndex, std::function<void()> run) {
    const Ticket ticket = ++next_;
    std::uniform_int_distribution<int> polls(options_.minPolls, options_.maxPolls);
    queue_.push_back({ticket, polls(random_), reduceIndex, std::move(run)});
    if (log_) log_->push_back({ScheduleEvent::Kind::Enqueued, nullptr, 0, ticket});
    return ticket;
  }
  void step() {
    if (queue_.empty()) return;
    Work& work = queue_.front();
    if (heldFrom_.load() != 0 && work.ticket >= heldFrom_.load() && !released_.load()) return;
    if (work.reduceIndex != npos) {
      if (work.reduceIndex >= stallFrom_) return;
      const size_t next = work.reduceIndex + 1;
      if (next < options_.overlapReduces && records_.size() <= next) return;
    }
    if (--work.pollsLeft > 0) return;
    work.run();
    finished_ = work.ticket;
    if (log_) log_->push_back({ScheduleEvent::Kind::Finished, nullptr, 0, work.ticket});
    queue_.pop_front();
  }

  void signal() {
    const uint64_t one = 1;
    [[maybe_unused]] const ssize_t written = ::write(wakeFd_, &one, sizeof(one));
  }

  Options options_;
  ScheduleLog* log_;
  std::mt19937 random_;
  std::vector<uint8_t> memory_;
  std::vector<ReduceRecord> records_;
  std::vector<Ticket> fences_;
  size_t copies_ = 0;
  size_t converts_ = 0;
  std::vector<uint8_t> workspace_;
  std::deque<Work> queue_;
  Ticket next_ = 0;      // the last ticket handed out
  Ticket finished_ = 0;  // the last one finished (all before it too)
  size_t stallFrom_ = npos;
  const int wakeFd_;
  size_t wakeRequests_ = 0;
  std::atomic<Ticket> heldFrom_{0};  // 0: nothing held
  std::atomic<bool> released_{false};
};

}  // namespace ringreduce::testing
