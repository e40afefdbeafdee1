// Our own NCCL communicator for one process group (nccl_communicator.h)
#include "cuda/nccl/nccl_communicator.h"

#include <algorithm>
#include <cstring>
#include <thread>
#include <vector>

#include "core/math/element_math.h"
#include "core/base/errors.h"
#include "core/observe/log.h"
#include "cuda/device_scope.h"

namespace ringreduce::cuda {

namespace {

struct NcclType {
  int type;
  size_t scale;  // complex: twice as many reals
};

NcclType ncclType(DataType type) {
  switch (type) {
    case DataType::Float32: return {kNcclFloat32, 1};
    case DataType::Float64: return {kNcclFloat64, 1};
    case DataType::Float16: return {kNcclFloat16, 1};
    case DataType::BFloat16: return {kNcclBfloat16, 1};
    case DataType::Int8: return {kNcclInt8, 1};
    case DataType::UInt8: return {kNcclUint8, 1};
    case DataType::Bool: return {kNcclUint8, 1};
    case DataType::Int32: return {kNcclInt32, 1};
    case DataType::Int64: return {kNcclInt64, 1};
    case DataType::Complex64: return {kNcclFloat32, 2};
    case DataType::Complex128: return {kNcclFloat64, 2};
    case DataType::Int16: break;
  }
  throw InvalidArgument(std::string("ringreduce: NCCL has no ") + dataTypeName(type));
}

// Bool holds 0/1 bytes: its logical OR is MAX and its AND is MIN.
int ncclOp(DataType type, ReduceOp op) {
  if (type == DataType::Bool) {
    if (boolOperator(op) == ReduceOp::BOr) return kNcclMax;
    if (boolOperator(op) == ReduceOp::BAnd) return kNcclMin;
  }
  switch (op) {
    case ReduceOp::Sum: return kNcclSum;
    case ReduceOp::Avg: return kNcclAvg;
    case ReduceOp::Product: return kNcclProd;
    case ReduceOp::Min: return kNcclMin;
    case ReduceOp::Max: return kNcclMax;
    default: break;
  }
  throw InvalidArgument(std::string("ringreduce: NCCL has no ") + reduceOpName(op));
}

// One rank's init verdict, as exchanged: empty when it succeeded.
struct Verdict {
  char reason[256];
};

std::string describeOp(const char* op, size_t count, DataType type) {
  return std::string(op) + " of " + std::to_string(count) + " " + dataTypeName(type);
}

// Between two looks at NCCL's background work: short at first (an init or
// enqueue that is nearly done), then a few looks a second.
std::chrono::milliseconds nextPause(std::chrono::milliseconds pause) {
  return std::min(pause * 2, std::chrono::milliseconds(50));
}

}  // namespace

std::string NcclCommunicator::unsupportedType(DataType type) {
  return type == DataType::Int16 ? "NCCL has no int16" : "";
}

std::string NcclCommunicator::unsupportedReason(DataType type, ReduceOp op) {
  std::string reason = unsupportedType(type);
  if (!reason.empty()) return reason;
  reason = ::ringreduce::unsupportedReason(type, op);  // what no path can do at all
  if (!reason.empty()) return reason;
  if (isComplex(type) && op != ReduceOp::Sum && op != ReduceOp::Avg) {
    return std::string("NCCL cannot ") + reduceOpName(op) + " " + dataTypeName(type);
  }
  if (type == DataType::Bool) return op == ReduceOp::BXor ? "NCCL has no XOR" : "";
  if (op == ReduceOp::BAnd || op == ReduceOp::BOr || op == ReduceOp::BXor) {
    return std::string("NCCL has no bitwise ") + reduceOpName(op);
  }
  return "";
}

NcclCommunicator::NcclCommunicator(const NcclLibrary& nccl, int rank, int size, int device,
                                   const RecordExchange& exchange, std::chrono::milliseconds limit)
    : nccl_(nccl), rank_(rank), device_(device), limit_(limit) {
  // A failure before the init still takes part in both exchanges, so that
  // no peer waits for this rank until the exchange's deadline.
  std::string failure;
  NcclUniqueId mine{};
  if (rank == 0) {
    const NcclLibrary::Result made = nccl.getUniqueId(&mine);
    if (made != kNcclSuccess) failure = describe("ncclGetUniqueId", made);
  }
  std::vector<NcclUniqueId> all(size);
  exchange(&mine, all.data(), sizeof(NcclUniqueId));
  if (failure.empty()) {
    try {
      failure = initialise(all[0], size);
    } catch (const std::exception& e) {  // no device to make current: a verdict like any
      failure = e.what();
    }
  }

  Verdict verdict{};
  std::strncpy(verdict.reason, failure.c_str(), sizeof(verdict.reason) - 1);
  std::vector<Verdict> verdicts(size);
  try {
    exchange(&verdict, verdicts.data(), sizeof(Verdict));
  } catch (...) {
    abort("the NCCL init's verdict exchange failed");
    throw;
  }
  std::string failed;
  for (int q = 0; q < size; ++q) {
    verdicts[q].reason[sizeof(verdicts[q].reason) - 1] = '\0';
    if (verdicts[q].reason[0] == '\0') continue;
    failed += std::string(failed.empty() ? "" : "; ") + "rank " + std::to_string(q) + ": " +
              verdicts[q].reason;
  }
  if (!failed.empty()) {
    abort("the NCCL init failed");
    throw Error("ringreduce: NCCL init failed on " + failed +
                " (set NCCL_DEBUG=WARN on that rank for NCCL's own report)");
  }
}

std::string NcclCommunicator::initialise(const NcclUniqueId& id, int size) {
  DeviceScope scope(device_);
  std::unique_lock<std::mutex> lock(mutex_);
  if (nccl_.commInitRankConfig == nullptr) {
    RR_LOG(Warn, rank_, "NCCL " << nccl_.version << " lacks ncclCommInitRankConfig (older than "
                                << "2.14): its init blocks, with no deadline");
    const NcclLibrary::Result r = nccl_.commInitRank(&comm_, size, id, rank_);
    blocking_ = true;
    if (r == kNcclSuccess) return "";
    comm_ = nullptr;  // NCCL frees what a failed blocking init made
    return describe("ncclCommInitRank", r);
  }
  NcclConfig config;
  config.blocking = 0;
  NcclLibrary::Result r = nccl_.commInitRankConfig(&comm_, size, id, rank_, &config);
  bool timedOut = false;
  if (r == kNcclInProgress || (r == kNcclSuccess && comm_ != nullptr)) {
    r = settle(lock, std::chrono::steady_clock::now() + limit_, &timedOut);
  }
  if (r == kNcclSuccess && !timedOut && comm_ != nullptr) return "";
  const std::string why =
      timedOut ? "ncclCommInitRankConfig did not finish within " +
                     std::to_string(limit_.count()) + " ms"
               : describe("ncclCommInitRankConfig", r);
  abortLocked(why);
  return why;
}

NcclLibrary::Result NcclCommunicator::settle(std::unique_lock<std::mutex>& lock,
                                             std::chrono::steady_clock::time_point deadline,
                                             bool* timedOut) {
  std::chrono::milliseconds pause(1);
  for (;;) {
    if (comm_ == nullptr) return kNcclSuccess;  // aborted meanwhile: the caller says so
    NcclLibrary::Result state = kNcclInProgress;
    const NcclLibrary::Result asked = nccl_.commGetAsyncError(comm_, &state);
    if (asked != kNcclSuccess) return asked;
    if (state != kNcclInProgress) return state;
    if (std::chrono::steady_clock::now() >= deadline) {
      *timedOut = true;
      return kNcclInProgress;
    }
    lock.unlock();
    std::this_thread::sleep_for(pause);
    pause = nextPause(pause);
    lock.lock();
  }
}

NcclCommunicator::~NcclCommunicator() {
  std::unique_lock<std::mutex> lock(mutex_);
  closeLocked(lock, limit_);
}

void NcclCommunicator::close(std::chrono::milliseconds limit) {
  std::unique_lock<std::mutex> lock(mutex_);
  closeLocked(lock, limit);
}

void NcclCommunicator::closeLocked(std::unique_lock<std::mutex>& lock,
                                   std::chrono::milliseconds limit) {
  if (comm_ == nullptr) return;
  if (failed_) {
    abortLocked("NCCL reported an error");
    return;
  }
  try {
    DeviceScope scope(device_);
    if (nccl_.commFinalize != nullptr && !blocking_) {
      NcclLibrary::Result r = nccl_.commFinalize(comm_);
      bool timedOut = false;
      if (r == kNcclSuccess || r == kNcclInProgress) {
        r = settle(lock, std::chrono::steady_clock::now() + limit, &timedOut);
      }
      if (comm_ == nullptr) return;  // aborted meanwhile (a watchdog)
      if (timedOut || r != kNcclSuccess) {
        const std::string why =
            timedOut ? "ncclCommFinalize did not finish within " + std::to_string(limit.count()) +
                           " ms (a peer that does not close its communicator?)"
                     : describe("ncclCommFinalize", r);
        RR_LOG(Warn, rank_, why << ": NCCL's communicator is aborted instead of destroyed");
        abortLocked(why);
        return;
      }
    }
    (void)nccl_.commDestroy(comm_);
  } catch (...) {
    // No device to make current: the process is going wrong anyway.
  }
  comm_ = nullptr;
  abortReason_ = "it was closed";
}

void NcclCommunicator::abort(const std::string& why) {
  std::lock_guard<std::mutex> lock(mutex_);
  abortLocked(why);
}

void NcclCommunicator::abortLocked(const std::string& why) {
  if (comm_ == nullptr) return;
  abortReason_ = why;
  try {
    // NCCL makes its device current for the abort and then restores the
    // thread's, which is therefore ours (DeviceScope), not device 0.
    DeviceScope scope(device_);
    (void)nccl_.commAbort(comm_);
  } catch (...) {
    (void)nccl_.commAbort(comm_);
  }
  comm_ = nullptr;
}

bool NcclCommunicator::aborted() {
  std::lock_guard<std::mutex> lock(mutex_);
  return comm_ == nullptr;
}

std::string NcclCommunicator::asyncError() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (comm_ == nullptr) return "";
  NcclLibrary::Result state = kNcclSuccess;
  const NcclLibrary::Result asked = nccl_.commGetAsyncError(comm_, &state);
  if (asked != kNcclSuccess) state = asked;
  if (state == kNcclSuccess || state == kNcclInProgress) return "";
  failed_ = true;
  return "NCCL reported an error on rank " + std::to_string(rank_) +
         (lastOp_.empty() ? "" : " during " + lastOp_) + ": " + nccl_.getErrorString(state) +
         " (NCCL " + std::to_string(nccl_.version) + ")";
}

std::string NcclCommunicator::describe(const char* what, NcclLibrary::Result result) const {
  return std::string(what) + " failed on rank " + std::to_string(rank_) + ": " +
         nccl_.getErrorString(result) + " (NCCL " + std::to_string(nccl_.version) + ")";
}

void NcclCommunicator::check(NcclLibrary::Result result, const char* what) {
  if (result == kNcclSuccess) return;
  failed_ = true;
  throw Error("ringreduce: " + describe(what, result) +
              ", set NCCL_DEBUG=WARN for NCCL's own report");
}

template <typename Enqueue>
void NcclCommunicator::enqueue(const char* what, std::string description, Enqueue call) {
  DeviceScope scope(device_);
  std::unique_lock<std::mutex> lock(mutex_);
  if (comm_ == nullptr) {
    throw Error("ringreduce: the NCCL communicator of rank " + std::to_string(rank_) +
                " was aborted: " + abortReason_);
  }
  lastOp_ = std::move(description);
  NcclLibrary::Result r = call(comm_);
  bool timedOut = false;
  if (r == kNcclInProgress) r = settle(lock, std::chrono::steady_clock::now() + limit_, &timedOut);
  if (timedOut) {
    failed_ = true;
    abortLocked(std::string(what) + " was still being enqueued after " +
                std::to_string(limit_.count()) + " ms");
    throw Error("ringreduce: " + std::string(what) + " on rank " + std::to_string(rank_) +
                ": NCCL did not enqueue it within " + std::to_string(limit_.count()) +
                " ms (communicator aborted)");
  }
  if (comm_ == nullptr) {
    throw Error("ringreduce: the NCCL communicator of rank " + std::to_string(rank_) +
                " was aborted during " + what + ": " + abortReason_);
  }
  check(r, what);
}

void NcclCommunicator::allreduce(const void* in, void* out, size_t count, DataType type,
                                 ReduceOp op, void* stream) {
  const NcclType t = ncclType(type);
  const int o = ncclOp(type, op);
  enqueue("ncclAllReduce", describeOp("allreduce", count, type), [&](NcclLibrary::Comm comm) {
    return nccl_.allReduce(in, out, count * t.scale, t.type, o, comm, stream);
  });
}

void NcclCommunicator::broadcast(void* data, size_t count, DataType type, int root,
                                 void* stream) {
  const NcclType t = ncclType(type);
  enqueue("ncclBroadcast", describeOp("broadcast", count, type), [&](NcclLibrary::Comm comm) {
    return nccl_.broadcast(data, data, count * t.scale, t.type, root, comm, stream);
  });
}

void NcclCommunicator::allgather(const void* in, void* out, size_t countPerRank, DataType type,
                                 void* stream) {
  const NcclType t = ncclType(type);
  enqueue("ncclAllGather", describeOp("allgather", countPerRank, type),
          [&](NcclLibrary::Comm comm) {
            return nccl_.allGather(in, out, countPerRank * t.scale, t.type, comm, stream);
          });
}

void NcclCommunicator::reduceScatter(const void* in, void* out, size_t countPerRank,
                                     DataType type, ReduceOp op, void* stream) {
  const NcclType t = ncclType(type);
  const int o = ncclOp(type, op);
  enqueue("ncclReduceScatter", describeOp("reduce-scatter", countPerRank, type),
          [&](NcclLibrary::Comm comm) {
            return nccl_.reduceScatter(in, out, countPerRank * t.scale, t.type, o, comm, stream);
          });
}

}  // namespace ringreduce::cuda
