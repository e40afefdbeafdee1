// Argument checks run on the caller's thread before anything is queued, so
// bad input raises at the call site with a message naming the op, the rank
// and what is wrong, and the group stays usable.
#pragma once

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include <optional>
#include <string>
#include <vector>

#include "core/base/data_type.h"
#include "core/base/reduce_op.h"

namespace ringreduce {

struct CallSite {
  const char* op;
  int rank;
};

// Exactly one tensor (the multi-device list API is not supported).
void checkSingleTensor(const std::vector<at::Tensor>& tensors, const CallSite& site);
// Dense, strided, on the CPU. Any dtype: data movement only needs bytes.
void checkHostTensor(const at::Tensor& tensor, const CallSite& site, const char* role);
// Dense, strided, defined: a CUDA tensor for a device path (deviceOfCall
// has already checked that the call's tensors share one device).
void checkDeviceTensor(const at::Tensor& tensor, const CallSite& site, const char* role);
// A dtype the reduction loops handle (reduction ops only).
void checkReducibleDtype(const at::Tensor& tensor, const CallSite& site);
// Results can be written into `tensor` (no internal overlap).
void checkWritable(const at::Tensor& tensor, const CallSite& site, const char* role);
// The same for tensor `index` of a list, which the message names.
void checkWritable(const at::Tensor& tensor, size_t index, const CallSite& site, const char* role);
// No two tensors of the output list `list` share memory and none overlaps
// itself; strided views of one storage are checked element by element.
void checkNoOverlap(const std::vector<at::Tensor>& list, const CallSite& site, const char* role);
// As checkNoOverlap for tensors that are each their values in order
// (plainContiguous, the usual outputs), by a sort of their spans rather than
// a test of every pair, so many tensors cost little: false, checking
// nothing, where one of them is not.
bool checkNoOverlapPlain(const std::vector<at::Tensor>& tensors, const CallSite& site,
                         const char* role);
// Each tensor of `outputs` is written whole by one collective: none overlaps
// itself or another (checkNoOverlapPlain's sort where they are all plain,
// else checkNoOverlap). Before any communication, so that a bad call raises
// on each rank that makes it and leaves the group usable, instead of failing
// inside the collective when the results are copied in.
void checkOutputsApart(const std::vector<at::Tensor>& outputs, const CallSite& site);
// Every tensor of `list` is a host tensor like `like` (dtype and numel), and,
// unless `role` is "input", no two share memory.
void checkListLike(const std::vector<at::Tensor>& list, size_t expectedLength,
                   const at::Tensor& like, const CallSite& site, const char* role);
void checkSameDtype(const at::Tensor& a, const at::Tensor& b, const CallSite& site,
                    const char* roleA, const char* roleB);
void checkNumel(const at::Tensor& tensor, int64_t expected, const CallSite& site,
                const char* role);
void checkRoot(int64_t root, int size, const CallSite& site);

struct Reduction {
  DataType type;
  ReduceOp op;
  // PREMUL_SUM(f) (NCCL's): a SUM of every rank's input multiplied by f.
  std::optional<double> premul;
};
// "SUM", or "PREMUL_SUM(0.25)": for descriptions and logs.
std::string reductionName(const Reduction& red);
// The reduce op of a collective's fingerprint (what every rank must call):
// the core's op, or kPremulSumCode (factors may differ between ranks, as
// with NCCL, but SUM against PREMUL_SUM is a mismatch).
constexpr int kPremulSumCode = 100;
int checkedReduceOp(const Reduction& red);
// The tensor a reduction reads: `tensor` itself, or for PREMUL_SUM a new
// contiguous tensor of its values times the factor (so the caller's stays
// as it was).
at::Tensor premultiplied(const at::Tensor& tensor, const Reduction& red);
// `tensor` can be reduced with `op`: returns the core's types, or raises
// TypeError/ValueError naming the op, rank, dtype and operator.
Reduction checkReduction(const at::Tensor& tensor, const c10d::ReduceOp& op,
                         const CallSite& site);
// The same for the device path, which has no PREMUL_SUM.
Reduction checkDeviceReduction(const at::Tensor& tensor, const c10d::ReduceOp& op,
                               const CallSite& site);

}  // namespace ringreduce
