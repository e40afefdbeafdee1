// The host stand-in for the CUDA primitives the IPC protocol uses (fake_device.h)
#include "fake_device.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <utility>

#include "core/base/errors.h"
#include "cuda/device_info.h"
#include "cuda/ipc/ipc_memory.h"
#include "cuda/stream_tracker.h"
#include "cuda/kernels/operator_dispatch.h"
#include "cuda/kernels/reduce_copy.h"
#include "cuda/kernels/reduce_element.cuh"
#include "fake_call_counts.h"
#include "fake_device_context.h"

namespace ringreduce::testing {

namespace {
std::mutex unshareableMutex;
std::set<const void*> unshareable;
}  // namespace

void markUnshareable(const void* ptr) {
  std::lock_guard<std::mutex> lock(unshareableMutex);
  unshareable.insert(ptr);
}

void clearUnshareable() {
  std::lock_guard<std::mutex> lock(unshareableMutex);
  unshareable.clear();
}

std::atomic<int64_t> streamWaitLimitMs{30000};

void setFakeStreamWaitLimit(std::chrono::milliseconds limit) { streamWaitLimitMs = limit.count(); }
std::atomic<bool> streamMemOps{true};
void setFakeStreamMemOps(bool available) { streamMemOps = available; }

namespace {
std::mutex devicesMutex;
std::map<std::pair<int, int>, FakePeerAccess> peerAccess;  // (lower, higher) device
std::set<int> failingMaps;
thread_local std::set<int> devicesUsed;

// Where a fake handle keeps what the fake needs: the exporter's pointer,
// its device and (for our own buffers) the allocation's size.
constexpr size_t kDeviceAt = 8, kBytesAt = 16;
}  // namespace

void setFakePeerAccess(int deviceA, int deviceB, FakePeerAccess access) {
  std::lock_guard<std::mutex> lock(devicesMutex);
  peerAccess[{std::min(deviceA, deviceB), std::max(deviceA, deviceB)}] = access;
}

void failFakeMapsOn(int device) {
  std::lock_guard<std::mutex> lock(devicesMutex);
  failingMaps.insert(device);
}

void resetFakePeerAccess() {
  std::lock_guard<std::mutex> lock(devicesMutex);
  peerAccess.clear();
  failingMaps.clear();
}

std::set<int> takeDevicesUsedByThisThread() { return std::exchange(devicesUsed, {}); }

void used(int device) { devicesUsed.insert(device); }

FakeCallCounts& calls() { return fakeCallsOnThisThread; }

namespace {
thread_local bool kernelsRun = true;
}  // namespace

void setFakeKernelsRun(bool run) { kernelsRun = run; }
bool fakeKernelsRun() { return kernelsRun; }

namespace {
// Each stream's device clock: when its queued work ends, and how far the
// host that drives it is ahead of the real clock (it "waited" for marks
// the device reached later than now: the fake's host never sleeps).
struct StreamClock {
  std::chrono::steady_clock::time_point busyUntil{};
  std::chrono::nanoseconds hostAhead{0};
};
std::mutex deviceClockMutex;
std::map<const void*, StreamClock> streamClocks;
thread_local std::chrono::nanoseconds kernelTime{0};

std::chrono::steady_clock::time_point hostNow(const StreamClock& clock) {
  return std::chrono::steady_clock::now() + clock.hostAhead;
}
}  // namespace

void setFakeKernelTime(std::chrono::nanoseconds duration) { kernelTime = duration; }

void resetFakeDeviceClocks() {
  std::lock_guard<std::mutex> lock(deviceClockMutex);
  streamClocks.clear();
}

void fakeDeviceWork(void* stream, std::chrono::nanoseconds duration) {
  std::lock_guard<std::mutex> lock(deviceClockMutex);
  StreamClock& clock = streamClocks[stream];
  clock.busyUntil = std::max(clock.busyUntil, hostNow(clock)) + duration;
}

// When the device reaches a mark queued now on `stream`.
std::chrono::steady_clock::time_point deviceTimeOf(const void* stream) {
  std::lock_guard<std::mutex> lock(deviceClockMutex);
  const StreamClock& clock = streamClocks[stream];
  return std::max(clock.busyUntil, hostNow(clock));
}

// The host saw the device reach `at` on `stream`: it has waited until then.
void hostWaitedUntil(const void* stream, std::chrono::steady_clock::time_point at) {
  std::lock_guard<std::mutex> lock(deviceClockMutex);
  StreamClock& clock = streamClocks[stream];
  const auto now = hostNow(clock);
  if (at > now) clock.hostAhead += at - now;
}

// A mark of the fake: when the device reached it (timing marks only).
struct FakeMark {
  std::chrono::steady_clock::time_point at{};
  const void* stream = nullptr;  // timing marks only
};

FakePeerAccess accessBetween(int a, int b) {
  if (a == b) return FakePeerAccess::Present;
  std::lock_guard<std::mutex> lock(devicesMutex);
  const auto it = peerAccess.find({std::min(a, b), std::max(a, b)});
  return it == peerAccess.end() ? FakePeerAccess::Present : it->second;
}

bool mapsFailOn(int device) {
  std::lock_guard<std::mutex> lock(devicesMutex);
  return failingMaps.count(device) > 0;
}

ringreduce::cuda::IpcHandle fakeHandle(const void* ptr, int device, size_t bytes) {
  ringreduce::cuda::IpcHandle handle{};
  std::memcpy(handle.data(), &ptr, sizeof(ptr));
  std::memcpy(handle.data() + kDeviceAt, &device, sizeof(device));
  std::memcpy(handle.data() + kBytesAt, &bytes, sizeof(bytes));
  return handle;
}

}  // namespace ringreduce::testing

namespace ringreduce::cuda {

std::array<uint8_t, 16> deviceUuid(int device) {
  testing::used(device);
  ++testing::calls().deviceQueries;
  return {0xfa, 0xce, static_cast<uint8_t>(device)};
}

// One GPU per rank, no MPS: the flags plan's inputs.
bool mpsActive(std::string* how) {
  ++testing::calls().deviceQueries;
  if (how) *how = "fake device: no MPS";
  return false;
}

int multiprocessors(int device) {
  testing::used(device);
  ++testing::calls().deviceQueries;
  return 8;
}

PeerAccess peerAccessTo(int device, const std::array<uint8_t, 16>& peer) {
  testing::used(device);
  ++testing::calls().deviceQueries;
  return testing::accessBetween(device, peer[2]) == testing::FakePeerAccess::Absent
             ? PeerAccess::No
             : PeerAccess::Yes;
}

ExportedRange exportRange(int device, const void* ptr, std::string* why) {
  testing::used(device);
  ++testing::calls().ipcCalls;
  ExportedRange range;
  {
    std::lock_guard<std::mutex> lock(testing::unshareableMutex);
    if (testing::unshareable.count(ptr)) {
      if (why) *why = "unshareable (test)";
      return range;
    }
  }
  range.handle = testing::fakeHandle(ptr, device, 0);
  range.ok = 1;
  return range;
}

void copyOnStream(int device, void* dst, const void* src, size_t bytes, void*) {
  testing::used(device);
  ++testing::calls().memcpys;
  if (bytes > 0 && dst != src) std::memmove(dst, src, bytes);
}

// Opens as cudaIpcOpenMemHandle would, once per handle; through a broken
// peer path the mapping is a decoy: what this rank writes never reaches the
// owner, and what it reads is not the owner's.
void* PeerMappings::map(const ExportedRange& range) {
  testing::used(device_);
  auto it = open_.find(range.handle);
  if (it == open_.end()) {
    ++testing::calls().ipcCalls;  // cudaIpcOpenMemHandle: only for a handle not yet open
    if (testing::mapsFailOn(device_)) {
      throw Error("fake cudaIpcOpenMemHandle: cannot map on device " + std::to_string(device_) +
                  " (test)");
    }
    void* base = nullptr;
    int owner = 0;
    size_t bytes = 0;
    std::memcpy(&base, range.handle.data(), sizeof(base));
    std::memcpy(&owner, range.handle.data() + testing::kDeviceAt, sizeof(owner));
    std::memcpy(&bytes, range.handle.data() + testing::kBytesAt, sizeof(bytes));
    if (bytes > 0 && testing::accessBetween(device_, owner) == testing::FakePeerAccess::Broken) {
      base = std::calloc(1, bytes);  // kept for the process, as a real mapping may be
    }
    it = open_.emplace(range.handle, base).first;
  }
  return static_cast<uint8_t*>(it->second) + range.offset;
}

void PeerMappings::closeAll() { open_.clear(); }

// Host "work" runs at once: nothing is ever pending.
bool StreamTracker::waitAll(int, std::chrono::milliseconds) const {
  ++testing::calls().hostSyncs;
  return true;
}

DeviceBuffer::DeviceBuffer(int device, size_t bytes) : device_(device), bytes_(bytes) {
  testing::used(device);
  ++testing::calls().allocations;
  data_ = std::aligned_alloc(256, (bytes + 255) / 256 * 256);
  if (data_ == nullptr) throw Error("fake DeviceBuffer: out of memory");
}

DeviceBuffer::~DeviceBuffer() { std::free(data_); }

ExportedRange DeviceBuffer::exported() {
  ++testing::calls().ipcCalls;
  ExportedRange range;
  range.handle = testing::fakeHandle(data_, device_, bytes_);
  range.ok = 1;
  return range;
}

// An event is a mutex: record() releases it after this rank's writes, a
// peer's waitOn() acquires it before that peer's reads. That is the order the
// device events give, and ThreadSanitizer sees it, so a missing wait in the
// protocol shows up as a data race.
SharedEvent::SharedEvent(int device) : device_(device) {
  testing::used(device);
  ++testing::calls().eventCreates;
  // Never freed (as the real events): kept reachable for the leak checker.
  static std::mutex poolMutex;
  static std::deque<std::mutex> pool;
  {
    std::lock_guard<std::mutex> lock(poolMutex);
    event_ = &pool.emplace_back();
  }
  std::memcpy(handle_.data(), &event_, sizeof(event_));
}
SharedEvent::~SharedEvent() = default;  // left to the process, as the real one
void SharedEvent::record(void*) {
  ++testing::calls().eventRecords;
  std::lock_guard<std::mutex> fence(*static_cast<std::mutex*>(event_)); }

PeerEvent::PeerEvent(int device, const IpcHandle& handle) : device_(device) {
  testing::used(device);
  ++testing::calls().ipcCalls;  // cudaIpcOpenEventHandle
  std::memcpy(&event_, handle.data(), sizeof(event_));
}
PeerEvent::~PeerEvent() = default;
void PeerEvent::waitOn(void*) {
  ++testing::calls().eventWaits;
  std::lock_guard<std::mutex> fence(*static_cast<std::mutex*>(event_)); }

namespace {

template <typename S, typename D, typename Op>
void run(const ReduceCopyArgs& a, size_t count) {
  const S* srcs[kMaxFanout];
  for (int s = 0; s < a.nsrc; ++s) srcs[s] = static_cast<const S*>(a.srcs[s]);
  for (size_t i = 0; i < count; ++i) {
    const D v = reduceElement<S, D, Op>(srcs, a.nsrc, i, a.avgDivisor);
    for (int d = 0; d < a.ndst; ++d) static_cast<D*>(a.dsts[d])[i] = v;
  }
}

template <typename T>
void sameType(const ReduceCopyArgs& a, size_t count) {
  const bool known =
      withOperator<T>(a.op, [&](auto functor) { run<T, T, decltype(functor)>(a, count); });
  if (!known) throw InvalidArgument("fake reduce-copy: operator not covered by the fake");
}

}  // namespace

// The fake covers what the protocol tests use: float32, int64, bfloat16
// and the float32 <-> 16-bit wire casts.
void launchReduceCopy(const ReduceCopyArgs& args, int device, void* stream) {
  testing::used(device);
  if (args.count > 0 && args.ndst > 0) ++testing::calls().kernelLaunches;  // as the real one
  if (testing::kernelTime.count() > 0) testing::fakeDeviceWork(stream, testing::kernelTime);
  if (args.nsrc < 1 || args.nsrc > kMaxFanout || args.ndst < 0 || args.ndst > kMaxFanout) {
    throw InvalidArgument("fake reduce-copy: bad fan-in/out");
  }
  if (!kernelSupports(args.srcType, args.dstType, args.op)) {
    throw InvalidArgument(kernelUnsupportedReason(args.srcType, args.dstType, args.op));
  }
  const DataType s = args.srcType, d = args.dstType;
  if (s == d && s == DataType::Float32) return sameType<float>(args, args.count);
  if (s == d && s == DataType::Int64) return sameType<int64_t>(args, args.count);
  if (s == d && s == DataType::BFloat16) return sameType<__nv_bfloat16>(args, args.count);
  if (s == DataType::Float32 && d == DataType::BFloat16) {
    return run<float, __nv_bfloat16, SumOp>(args, args.count);
  }
  if (s == DataType::BFloat16 && d == DataType::Float32) {
    return run<__nv_bfloat16, float, SumOp>(args, args.count);
  }
  if (s == DataType::Float32 && d == DataType::Float16) return run<float, __half, SumOp>(args, args.count);
  if (s == DataType::Float16 && d == DataType::Float32) return run<__half, float, SumOp>(args, args.count);
  if (s == d && s == DataType::Float16) return sameType<__half>(args, args.count);
  if (s == d && s == DataType::UInt8) return sameType<uint8_t>(args, args.count);
  throw InvalidArgument("fake reduce-copy: dtype not covered by the fake");
}

}  // namespace ringreduce::cuda

// --- what the device-flags group (cuda/signal/signal_group.h) needs ------
//
// Streams run at once on the calling thread, so a kernel is its blocks as
// threads, joined before the call returns (the host model of
// test_signal_protocol.cpp), and a stream wait spins on the calling thread
// until the peer's write lands.

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "cuda/own_stream.h"
#include "cuda/signal/signal_collectives.h"
#include "cuda/signal/signal_launch.h"
#include "cuda/signal/stream_memops.h"
#include "host_signal_memory.h"

namespace ringreduce::cuda {

void fillOnStream(int device, void* dst, int value, size_t bytes, void*) {
  testing::used(device);
  ++testing::calls().memsets;
  // Byte by byte through atomics: a peer's kernel may be polling the word.
  for (size_t i = 0; i < bytes; ++i) {
    std::atomic_ref<uint8_t>(static_cast<uint8_t*>(dst)[i]).store(static_cast<uint8_t>(value));
  }
}

void synchronizeStream(int device, void*) {
  testing::used(device);
  ++testing::calls().hostSyncs;
}

PinnedMirror::PinnedMirror(int device, size_t bytes) {
  testing::used(device);
  ++testing::calls().allocations;
  host_ = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
  std::memset(host_, 0, bytes);
  device_ = host_;
}

PinnedMirror::~PinnedMirror() { std::free(host_); }

void* recordMark(int device, void*) {
  testing::used(device);
  ++testing::calls().eventCreates;
  ++testing::calls().eventRecords;
  return new testing::FakeMark;
}
void* recordTimingMark(int device, void* stream) {
  testing::used(device);
  ++testing::calls().eventCreates;
  ++testing::calls().eventRecords;
  return new testing::FakeMark{testing::deviceTimeOf(stream), stream};
}
double secondsBetweenMarks(void* start, void* end) {
  return std::chrono::duration<double>(static_cast<testing::FakeMark*>(end)->at -
                                       static_cast<testing::FakeMark*>(start)->at)
      .count();
}
// The fake's streams have done their work by the time it is queued.
void callAfterQueuedWork(void*, void (*fn)(void*), void* arg) {
  ++testing::calls().hostFunctions;
  fn(arg);
}
void recordMarkAgain(void*, void*) { ++testing::calls().eventRecords; }
bool markReached(void* mark) {
  ++testing::calls().eventQueries;
  const auto* m = static_cast<const testing::FakeMark*>(mark);
  if (m->stream != nullptr) testing::hostWaitedUntil(m->stream, m->at);
  return true;
}
void freeMark(void* mark) {
  ++testing::calls().eventDestroys;
  delete static_cast<testing::FakeMark*>(mark);
}

void* createOwnStream(int device) {
  testing::used(device);
  ++testing::calls().streamCreates;
  return new int(0);
}
void destroyOwnStream(int, void* stream) {
  ++testing::calls().streamCreates;
  delete static_cast<int*>(stream);
}

bool streamMemOpsAvailable(std::string* why) {
  ++testing::calls().deviceQueries;
  if (!testing::streamMemOps && why != nullptr) *why = "the fake driver has none (a test said so)";
  return testing::streamMemOps;
}

void streamWriteValue32(void*, uint32_t* address, uint32_t value) {
  ++testing::calls().streamMemOps;
  std::atomic_ref<uint32_t>(*address).store(value, std::memory_order_release);
}

void streamWaitValue32(void*, const uint32_t* address, uint32_t value) {
  ++testing::calls().streamMemOps;
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::milliseconds(testing::streamWaitLimitMs.load());
  std::atomic_ref<uint32_t> word(*const_cast<uint32_t*>(address));
  while (static_cast<int32_t>(word.load(std::memory_order_acquire) - value) < 0) {
    if (std::chrono::steady_clock::now() > deadline) {
      throw Error("fake stream wait: no peer wrote " + std::to_string(value));
    }
    std::this_thread::yield();
  }
}

void streamWaitValue32Equal(void*, const uint32_t* address, uint32_t value) {
  ++testing::calls().streamMemOps;
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::milliseconds(testing::streamWaitLimitMs.load());
  std::atomic_ref<uint32_t> word(*const_cast<uint32_t*>(address));
  while (word.load(std::memory_order_acquire) != value) {
    if (std::chrono::steady_clock::now() > deadline) {
      throw Error("fake stream wait: the word never became " + std::to_string(value));
    }
    std::this_thread::yield();
  }
}

namespace {

// A kernel of one block runs on the calling thread (no thread started, so
// the hot path's allocation counts see only the code under test); more
// blocks run as threads, joined before the launch returns.
template <typename T, class Op>
void runBlocks(const SignalView& view, const SignalOp& op) {
  auto block = [&view, &op](int b) {
    testing::HostSignalMemory m(static_cast<uint32_t>(view.rank * 977 + b), 20);
    runSignalBlock<testing::HostSignalMemory, T, T, Op>(m, view, op, b);
  };
  if (op.nblocks == 1) return block(0);
  std::vector<std::thread> blocks;
  for (int b = 0; b < op.nblocks; ++b) blocks.emplace_back(block, b);
  for (auto& t : blocks) t.join();
}

template <typename T>
void runTyped(const SignalView& view, const SignalOp& op, ReduceOp reduceOp) {
  const bool known =
      withOperator<T>(reduceOp, [&](auto functor) { runBlocks<T, decltype(functor)>(view, op); });
  if (!known) throw InvalidArgument("fake device-flags kernel: operator not covered");
}

}  // namespace

// The device half of launchSignalOp (signal_launch.cpp, which runs as it
// is: checks, the dtype's mapping, the device switch). The fake covers
// float32, int64 and bytes (allgather, bool).
void launchSignalKernel(const SignalView& view, const SignalOp& op, DataType type,
                        ReduceOp reduceOp, void*) {
  testing::used(testing::fakeCurrentDevice());
  ++testing::calls().kernelLaunches;
  if (!testing::fakeKernelsRun()) return;
  if (type == DataType::Float32) return runTyped<float>(view, op, reduceOp);
  if (type == DataType::Int64) return runTyped<int64_t>(view, op, reduceOp);
  if (type == DataType::UInt8) return runTyped<uint8_t>(view, op, reduceOp);
  throw InvalidArgument("fake device-flags kernel: dtype not covered by the fake");
}

}  // namespace ringreduce::cuda
