// See stub_nccl.h. STUB_NCCL_WITHOUT_CONFIG builds an NCCL older than 2.14:
// no ncclCommInitRankConfig, no ncclCommFinalize.
#include "stub_nccl.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cstddef>
#include <cstring>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace {

// ncclResult_t values.
constexpr int kSuccess = 0;
constexpr int kSystemError = 2;
constexpr int kInvalidArgument = 4;
constexpr int kRemoteError = 6;
constexpr int kInProgress = 7;
constexpr int kMaxRanks = 64;
// What "never" lasts: far beyond every bound under test (a few seconds),
// short of ctest's timeout, so that a bound that broke fails its test
// (the work ends in ncclSystemError) instead of hanging it.
constexpr std::chrono::seconds kNever(30);

struct Comm {
  int rank = 0;
  int async = kSuccess;       // what ncclCommGetAsyncError answers
  int initResult = kSuccess;  // what a non-blocking init (or enqueue) ends with
  bool initHangs = false;     // it never ends (kNever)
  std::chrono::steady_clock::time_point since;  // the background work began
  int looksLeft = 0;  // a non-blocking init needs a few looks, as a real one
  bool finalizing = false;  // the background work is a finalize
  std::vector<StubNcclStream*> held;
};

std::mutex mutex;
std::atomic<int (*)()> deviceProbe{nullptr};
unsigned long long devicesUsed[kMaxRanks] = {};
std::set<std::thread::id> callingThreads[kMaxRanks];
int behaviour[kMaxRanks] = {};
int aborts[kMaxRanks] = {};
int destroysWhileHeld[kMaxRanks] = {};
int liveComms = 0;
int blockingInits = 0;
std::string calls[kMaxRanks];

void note(int rank, const char* what) {
  if (rank < 0 || rank >= kMaxRanks) return;
  calls[rank] += std::string(calls[rank].empty() ? "" : " ") + what;
}

int behaviourOf(int rank) { return rank >= 0 && rank < kMaxRanks ? behaviour[rank] : 0; }

// The calling thread's current device, asked outside the stub's lock (the
// probe takes its own); -1 without a probe.
int callersDevice() {
  int (*probe)() = deviceProbe.load();
  return probe == nullptr ? -1 : probe();
}

// With the lock held: rank `rank`'s communicator was used from this thread,
// whose current device was `device`.
void usedFrom(int rank, int device) {
  if (rank < 0 || rank >= kMaxRanks || device < 0) return;
  if (device < 64) devicesUsed[rank] |= 1ull << device;
  callingThreads[rank].insert(std::this_thread::get_id());
}

Comm* make(int rank) {
  auto* c = new Comm;
  c->rank = rank;
  ++liveComms;
  note(rank, "init");
  return c;
}

void release(Comm* c) {
  for (StubNcclStream* s : c->held) s->heldBy.fetch_sub(1);
  c->held.clear();
}

// An op enqueued on `stream` by `comm`: finishes at once, or holds the
// stream (its kernels would wait on a peer) until the abort.
int op(void* comm, void* stream) {
  const int device = callersDevice();
  std::lock_guard<std::mutex> lock(mutex);
  auto* c = static_cast<Comm*>(comm);
  if (c == nullptr) return kInvalidArgument;
  usedFrom(c->rank, device);
  const int b = behaviourOf(c->rank);
  if (b == kStubNcclAsyncErrorInOp || b == kStubNcclOpHangs) {
    auto* s = static_cast<StubNcclStream*>(stream);
    s->heldBy.fetch_add(1);
    c->held.push_back(s);
    if (b == kStubNcclAsyncErrorInOp) c->async = kRemoteError;
  }
  if (b == kStubNcclOpInProgress || b == kStubNcclOpStuck) {
    // A non-blocking communicator finishing the enqueue in the background.
    c->async = kInProgress;
    c->looksLeft = 3;
    c->since = std::chrono::steady_clock::now();
    c->initResult = kSuccess;
    c->initHangs = b == kStubNcclOpStuck;
    return kInProgress;
  }
  return kSuccess;
}

// NCCL's ncclConfig_t up to `blocking`, as every version since 2.14 lays it out.
struct ConfigHead {
  size_t size;
  unsigned int magic;
  unsigned int version;
  int blocking;
};

}  // namespace

// ncclUniqueId, passed by value as NCCL passes it.
struct StubNcclUniqueId {
  char internal[128];
};

extern "C" {

void stubNcclReset() {
  std::lock_guard<std::mutex> lock(mutex);
  std::memset(behaviour, 0, sizeof(behaviour));
  std::memset(aborts, 0, sizeof(aborts));
  std::memset(destroysWhileHeld, 0, sizeof(destroysWhileHeld));
  blockingInits = 0;
  for (std::string& c : calls) c.clear();
  std::memset(devicesUsed, 0, sizeof(devicesUsed));
  for (auto& threads : callingThreads) threads.clear();
}

void stubNcclSetDeviceProbe(int (*probe)()) { deviceProbe.store(probe); }

unsigned long long stubNcclDevicesUsedBy(int rank) {
  std::lock_guard<std::mutex> lock(mutex);
  return rank >= 0 && rank < kMaxRanks ? devicesUsed[rank] : 0;
}

int stubNcclThreadsOf(int rank) {
  std::lock_guard<std::mutex> lock(mutex);
  return rank >= 0 && rank < kMaxRanks ? static_cast<int>(callingThreads[rank].size()) : 0;
}

int stubNcclCalls(int rank, char* out, int capacity) {
  std::lock_guard<std::mutex> lock(mutex);
  if (rank < 0 || rank >= kMaxRanks || capacity <= 0) return 0;
  const std::string& c = calls[rank];
  const size_t n = std::min(c.size(), static_cast<size_t>(capacity - 1));
  std::memcpy(out, c.data(), n);
  out[n] = '\0';
  return static_cast<int>(c.size());
}

void stubNcclSetBehaviour(int rank, int b) {
  std::lock_guard<std::mutex> lock(mutex);
  if (rank >= 0 && rank < kMaxRanks) behaviour[rank] = b;
}

int stubNcclAborts(int rank) {
  std::lock_guard<std::mutex> lock(mutex);
  return aborts[rank];
}

int stubNcclDestroysWhileHeld(int rank) {
  std::lock_guard<std::mutex> lock(mutex);
  return destroysWhileHeld[rank];
}

int stubNcclLiveComms() {
  std::lock_guard<std::mutex> lock(mutex);
  return liveComms;
}

int stubNcclBlockingInits() {
  std::lock_guard<std::mutex> lock(mutex);
  return blockingInits;
}

int ncclGetVersion(int* version) {
#ifdef STUB_NCCL_WITHOUT_CONFIG
  *version = 21304;
#else
  *version = 23203;
#endif
  return kSuccess;
}

const char* ncclGetErrorString(int result) {
  switch (result) {
    case kSuccess: return "no error";
    case kSystemError: return "unhandled system error (stub)";
    case kInvalidArgument: return "invalid argument (stub)";
    case kRemoteError: return "remote process exited or there was a network error (stub)";
    case kInProgress: return "NCCL operation in progress";
    default: return "unknown result (stub)";
  }
}

int ncclGetUniqueId(void* id) {
  std::memset(id, 0x5a, 128);
  return kSuccess;
}

// Blocking: a failing rank fails at once; a hanging one is not modelled
// (it would hang the test: NCCL before 2.14 cannot be bounded).
int ncclCommInitRank(void** comm, int, StubNcclUniqueId, int rank) {
  const int device = callersDevice();
  std::lock_guard<std::mutex> lock(mutex);
  usedFrom(rank, device);
  ++blockingInits;
  if (behaviourOf(rank) == kStubNcclInitFails || behaviourOf(rank) == kStubNcclInitHangs) {
    *comm = nullptr;
    return kSystemError;
  }
  *comm = make(rank);
  return kSuccess;
}

#ifndef STUB_NCCL_WITHOUT_CONFIG
// Non-blocking communicators only (what NcclCommunicator makes with a
// finalize at hand): in progress until quiescent.
int ncclCommFinalize(void* comm) {
  const int device = callersDevice();
  std::lock_guard<std::mutex> lock(mutex);
  auto* c = static_cast<Comm*>(comm);
  if (c == nullptr) return kInvalidArgument;
  usedFrom(c->rank, device);
  note(c->rank, "finalize");
  if (c->async != kSuccess && c->async != kInProgress) return c->async;  // an error stays
  c->finalizing = true;
  c->async = kInProgress;
  c->looksLeft = 3;
  c->since = std::chrono::steady_clock::now();
  c->initResult = kSuccess;
  c->initHangs = behaviourOf(c->rank) == kStubNcclFinalizeHangs || !c->held.empty();
  return kInProgress;
}

int ncclCommInitRankConfig(void** comm, int, StubNcclUniqueId, int rank, void* config) {
  ConfigHead head{};
  std::memcpy(&head, config, sizeof(head));
  if (head.magic != 0xcafebeef || head.size < sizeof(head) || head.version < 21400) {
    return kInvalidArgument;  // not made by NCCL_CONFIG_INITIALIZER's rules
  }
  const int device = callersDevice();
  std::lock_guard<std::mutex> lock(mutex);
  usedFrom(rank, device);
  Comm* c = make(rank);
  *comm = c;
  if (head.blocking != 0) {  // blocking, or left undefined (NCCL's default)
    if (behaviourOf(rank) == kStubNcclInitFails || behaviourOf(rank) == kStubNcclInitHangs) {
      return kSystemError;
    }
    return kSuccess;
  }
  c->async = kInProgress;
  c->looksLeft = 3;
  c->since = std::chrono::steady_clock::now();
  c->initHangs = behaviourOf(rank) == kStubNcclInitHangs;
  c->initResult = behaviourOf(rank) == kStubNcclInitFails ? kSystemError : kSuccess;
  return kInProgress;
}
#endif

int ncclCommGetAsyncError(void* comm, int* state) {
  const int device = callersDevice();
  std::lock_guard<std::mutex> lock(mutex);
  auto* c = static_cast<Comm*>(comm);
  if (c == nullptr) return kInvalidArgument;
  usedFrom(c->rank, device);
  if (c->async == kInProgress && c->initHangs &&
      std::chrono::steady_clock::now() - c->since > kNever) {
    c->async = kSystemError;
  } else if (c->async == kInProgress && !c->initHangs && --c->looksLeft <= 0) {
    c->async = c->initResult;
    if (c->finalizing) note(c->rank, "quiescent");
  }
  *state = c->async;
  return kSuccess;
}

int ncclCommAbort(void* comm) {
  const int device = callersDevice();
  std::lock_guard<std::mutex> lock(mutex);
  auto* c = static_cast<Comm*>(comm);
  if (c == nullptr) return kSuccess;
  usedFrom(c->rank, device);
  if (c->rank >= 0 && c->rank < kMaxRanks) ++aborts[c->rank];
  note(c->rank, "abort");
  release(c);  // the kernels give up: the streams go on
  --liveComms;
  delete c;
  return kSuccess;
}

int ncclCommDestroy(void* comm) {
  const int device = callersDevice();
  std::lock_guard<std::mutex> lock(mutex);
  auto* c = static_cast<Comm*>(comm);
  if (c == nullptr) return kSuccess;
  usedFrom(c->rank, device);
  if (!c->held.empty() && c->rank >= 0 && c->rank < kMaxRanks) ++destroysWhileHeld[c->rank];
  note(c->rank, "destroy");
  release(c);
  --liveComms;
  delete c;
  return kSuccess;
}

int ncclAllReduce(const void*, void*, size_t, int, int, void* comm, void* stream) {
  return op(comm, stream);
}
int ncclBroadcast(const void*, void*, size_t, int, int, void* comm, void* stream) {
  return op(comm, stream);
}
int ncclReduce(const void*, void*, size_t, int, int, int, void* comm, void* stream) {
  return op(comm, stream);
}
int ncclAllGather(const void*, void*, size_t, int, void* comm, void* stream) {
  return op(comm, stream);
}
int ncclReduceScatter(const void*, void*, size_t, int, int, void* comm, void* stream) {
  return op(comm, stream);
}
int ncclSend(const void*, size_t, int, int, void* comm, void* stream) { return op(comm, stream); }
int ncclRecv(void*, size_t, int, int, void* comm, void* stream) { return op(comm, stream); }
int ncclGroupStart() { return kSuccess; }
int ncclGroupEnd() { return kSuccess; }

}  // extern "C"
