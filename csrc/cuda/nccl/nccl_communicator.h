// Our own NCCL communicator for one process group: the fallback for ranks on
// other nodes, for what our kernels do not cover, and on request
// (RINGREDUCE_CUDA_ALGO=nccl). Bootstrapped over the group's transport (rank
// 0's unique id reaches the others in a record exchange), so it needs no
// second rendezvous. NCCL refuses two ranks on one GPU: the backend never
// builds one then.
#pragma once

#include <string>

#include "core/base/data_type.h"
#include "core/base/record_exchange.h"
#include "core/base/reduce_op.h"
#include "cuda/nccl/nccl_library.h"

namespace ringreduce::cuda {

class NcclCommunicator {
 public:
  NcclCommunicator(const NcclLibrary& nccl, int rank, int size, int device,
                   const RecordExchange& exchange);
  ~NcclCommunicator();
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  // Empty when NCCL reduces `type` with `op` (int16, bitwise ops and complex
  // products are not NCCL's); otherwise why not.
  static std::string unsupportedReason(DataType type, ReduceOp op);
  // Empty when NCCL can move `type` at all.
  static std::string unsupportedType(DataType type);

  // All on `stream`, device pointers, counts in elements of `type`.
  void allreduce(const void* in, void* out, size_t count, DataType type, ReduceOp op,
                 void* stream);
  void broadcast(void* data, size_t count, DataType type, int root, void* stream);
  void allgather(const void* in, void* out, size_t countPerRank, DataType type, void* stream);
  void reduceScatter(const void* in, void* out, size_t countPerRank, DataType type, ReduceOp op,
                     void* stream);

  // Makes NCCL give up kernels that wait on a dead peer (after a failure).
  void abort();

 private:
  void check(NcclLibrary::Result result, const char* what);

  const NcclLibrary& nccl_;
  const int rank_;
  const int device_;
  NcclLibrary::Comm comm_ = nullptr;
};

}  // namespace ringreduce::cuda
