#include "backend/tensor_checks.h"

#include <ATen/MemoryOverlap.h>
#include <c10/util/Exception.h>

#include "backend/dtype_mapping.h"

namespace ringreduce {

namespace {
std::string where(const CallSite& site) {
  return std::string("ringreduce: ") + site.op + " on rank " + std::to_string(site.rank) + ": ";
}
}  // namespace

void checkSingleTensor(const std::vector<at::Tensor>& tensors, const CallSite& site) {
  TORCH_CHECK_VALUE(tensors.size() == 1, where(site), "expected exactly one tensor, got ",
                    tensors.size(), " (one tensor per process; the multi-device list form is "
                    "not supported)");
}

void checkHostTensor(const at::Tensor& tensor, const CallSite& site, const char* role) {
  TORCH_CHECK_VALUE(tensor.defined(), where(site), role, " tensor is undefined");
  TORCH_CHECK_VALUE(tensor.layout() == at::kStrided, where(site), role, " tensor has layout ",
                    tensor.layout(), "; only dense (strided) tensors are supported");
  // A call whose tensors are all on one CUDA device is staged before these
  // checks (host_staging.h); a CUDA tensor here came with CPU tensors.
  TORCH_CHECK_VALUE(!tensor.is_cuda(), where(site), role, " tensor is on ", tensor.device(),
                    " while other tensors of the call are on the CPU; one call's tensors "
                    "must all be on one device");
  TORCH_CHECK_VALUE(tensor.device().is_cpu(), where(site), role, " tensor is on ",
                    tensor.device(), "; ringreduce takes CPU tensors");
}

void checkReducibleDtype(const at::Tensor& tensor, const CallSite& site) {
  TORCH_CHECK_TYPE(isSupportedScalarType(tensor.scalar_type()), where(site),
                   "tensor has unsupported dtype ", tensor.scalar_type(),
                   " (supported: float32, float64, float16, bfloat16, int8, uint8, int16, "
                   "int32, int64, bool, complex64, complex128)");
}

void checkListLike(const std::vector<at::Tensor>& list, size_t expectedLength,
                   const at::Tensor& like, const CallSite& site, const char* role) {
  TORCH_CHECK_VALUE(list.size() == expectedLength, where(site), role, " list has ", list.size(),
                    " tensors, expected one per rank (", expectedLength, ")");
  for (const at::Tensor& t : list) {
    checkHostTensor(t, site, role);
    checkSameDtype(t, like, site, role, "input");
    checkNumel(t, like.numel(), site, role);
  }
  checkNoOverlap(list, site, role);
}

void checkDeviceTensor(const at::Tensor& tensor, const CallSite& site, const char* role) {
  TORCH_CHECK_VALUE(tensor.defined(), where(site), role, " tensor is undefined");
  TORCH_CHECK_VALUE(tensor.layout() == at::kStrided, where(site), role, " tensor has layout ",
                    tensor.layout(), "; only dense (strided) tensors are supported");
}

void checkWritable(const at::Tensor& tensor, const CallSite& site, const char* role) {
  // An expanded (stride 0) output would receive several results in one place.
  TORCH_CHECK_VALUE(at::has_internal_overlap(tensor) != at::MemOverlap::Yes, where(site), role,
                    " tensor has overlapping memory (an expanded view?); results would "
                    "overwrite each other");
}

void checkNoOverlap(const std::vector<at::Tensor>& list, const CallSite& site, const char* role) {
  for (size_t i = 0; i < list.size(); ++i) {
    if (role != std::string("input")) checkWritable(list[i], site, role);
    for (size_t j = i + 1; j < list.size(); ++j) {
      if (list[i].numel() == 0 || list[j].numel() == 0) continue;
      const at::MemOverlapStatus status = at::get_overlap_status(list[i], list[j]);
      // torch cannot tell for strided views ("too hard"): apart when their
      // storages are; views of one storage it cannot tell apart are refused.
      const bool apart = status == at::MemOverlapStatus::No ||
                         (status == at::MemOverlapStatus::TooHard &&
                          !list[i].storage().is_alias_of(list[j].storage()));
      TORCH_CHECK_VALUE(apart,
                        where(site), role, " tensors ", i, " and ", j,
                        " share memory (or are strided views of one storage that cannot be told"
                        " apart); each needs its own storage");
    }
  }
}

void checkSameDtype(const at::Tensor& a, const at::Tensor& b, const CallSite& site,
                    const char* roleA, const char* roleB) {
  TORCH_CHECK_TYPE(a.scalar_type() == b.scalar_type(), where(site), roleA, " dtype ",
                   a.scalar_type(), " differs from ", roleB, " dtype ", b.scalar_type());
}

void checkNumel(const at::Tensor& tensor, int64_t expected, const CallSite& site,
                const char* role) {
  TORCH_CHECK_VALUE(tensor.numel() == expected, where(site), role, " tensor has ",
                    tensor.numel(), " elements (shape ", tensor.sizes(), "), expected ",
                    expected);
}

void checkRoot(int64_t root, int size, const CallSite& site) {
  TORCH_CHECK_VALUE(root >= 0 && root < size, where(site), "invalid root rank ", root,
                    " for a group of size ", size);
}

}  // namespace ringreduce

namespace ringreduce {

Reduction checkReduction(const at::Tensor& tensor, const c10d::ReduceOp& op,
                         const CallSite& site) {
  checkReducibleDtype(tensor, site);
  Reduction r{toDataType(tensor.scalar_type(), site.op), toReduceOp(op, site.op)};
  const std::string reason = unsupportedReason(r.type, r.op);
  TORCH_CHECK_TYPE(reason.empty(), where(site), reason);
  return r;
}

}  // namespace ringreduce
