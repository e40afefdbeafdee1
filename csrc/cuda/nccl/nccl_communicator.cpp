#include "cuda/nccl/nccl_communicator.h"

#include <cuda_runtime_api.h>

#include <vector>

#include "core/math/element_math.h"
#include "core/base/errors.h"
#include "cuda/cuda_error.h"
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
                                   const RecordExchange& exchange)
    : nccl_(nccl), rank_(rank), device_(device) {
  NcclUniqueId mine{};
  if (rank == 0) check(nccl.getUniqueId(&mine), "ncclGetUniqueId");
  std::vector<NcclUniqueId> all(size);
  exchange(&mine, all.data(), sizeof(NcclUniqueId));
  DeviceScope scope(device);
  // Every rank has just answered the exchange, so none is missing here; a
  // rank that dies inside the init still blocks it (NCCL's blocking init).
  check(nccl.commInitRank(&comm_, size, all[0], rank), "ncclCommInitRank");
}

NcclCommunicator::~NcclCommunicator() {
  if (comm_ != nullptr) (void)nccl_.commDestroy(comm_);
}

void NcclCommunicator::abort() {
  if (comm_ != nullptr) (void)nccl_.commAbort(comm_);
  comm_ = nullptr;
}

void NcclCommunicator::check(NcclLibrary::Result result, const char* what) {
  if (result == 0) return;
  throw Error(std::string("ringreduce: ") + what + " failed on rank " + std::to_string(rank_) +
              ": " + nccl_.getErrorString(result) + " (NCCL " + std::to_string(nccl_.version) +
              ", set NCCL_DEBUG=WARN for NCCL's own report)");
}

void NcclCommunicator::allreduce(const void* in, void* out, size_t count, DataType type,
                                 ReduceOp op, void* stream) {
  if (comm_ == nullptr) throw Error("ringreduce: the NCCL communicator was aborted");
  const NcclType t = ncclType(type);
  DeviceScope scope(device_);
  check(nccl_.allReduce(in, out, count * t.scale, t.type, ncclOp(type, op), comm_, stream),
        "ncclAllReduce");
}

void NcclCommunicator::broadcast(void* data, size_t count, DataType type, int root,
                                 void* stream) {
  if (comm_ == nullptr) throw Error("ringreduce: the NCCL communicator was aborted");
  const NcclType t = ncclType(type);
  DeviceScope scope(device_);
  check(nccl_.broadcast(data, data, count * t.scale, t.type, root, comm_, stream),
        "ncclBroadcast");
}

void NcclCommunicator::allgather(const void* in, void* out, size_t countPerRank, DataType type,
                                 void* stream) {
  if (comm_ == nullptr) throw Error("ringreduce: the NCCL communicator was aborted");
  const NcclType t = ncclType(type);
  DeviceScope scope(device_);
  check(nccl_.allGather(in, out, countPerRank * t.scale, t.type, comm_, stream),
        "ncclAllGather");
}

void NcclCommunicator::reduceScatter(const void* in, void* out, size_t countPerRank,
                                     DataType type, ReduceOp op, void* stream) {
  if (comm_ == nullptr) throw Error("ringreduce: the NCCL communicator was aborted");
  const NcclType t = ncclType(type);
  DeviceScope scope(device_);
  check(nccl_.reduceScatter(in, out, countPerRank * t.scale, t.type, ncclOp(type, op), comm_,
                            stream),
        "ncclReduceScatter");
}

}  // namespace ringreduce::cuda
