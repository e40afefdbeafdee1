#include "backend/device_path.h"

#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/util/Exception.h>

#include "backend/dtype_mapping.h"

#ifdef RINGREDUCE_WITH_CUDA
#include "core/base/errors.h"
#include "cuda/device_info.h"
#include "cuda/kernels/reduce_copy.h"
#include "cuda/nccl/nccl_library.h"
#include "cuda/path_selection.h"
#endif

namespace ringreduce {

#ifdef RINGREDUCE_WITH_CUDA

struct DevicePath::State {
  std::unique_ptr<cuda::PathSelection> paths;
};

bool DevicePath::compiled() { return true; }

std::string DevicePath::describe() { return cuda::runtimeDescription(); }

bool DevicePath::ncclAvailable(std::string* detail) {
  std::string why;
  const cuda::NcclLibrary* nccl = cuda::NcclLibrary::load(&why);
  if (nccl == nullptr) {
    *detail = why;
    return false;
  }
  *detail = "NCCL " + std::to_string(nccl->version / 10000) + "." +
            std::to_string(nccl->version / 100 % 100) + "." + std::to_string(nccl->version % 100) +
            " from " + nccl->path;
  return true;
}

DevicePath::DevicePath(int rank, int size, c10::Device device, const Config& config,
                       const RecordExchange& exchange)
    : device_(device), state_(std::make_unique<State>()) {
  state_->paths =
      std::make_unique<cuda::PathSelection>(rank, size, device.index(), config, exchange);
}

void DevicePath::reduceCopy(const std::vector<at::Tensor>& srcs,
                            const std::vector<at::Tensor>& dsts, const c10d::ReduceOp& op,
                            int avgDivisor) {
  const char* name = "reduce_copy";
  TORCH_CHECK_VALUE(!srcs.empty() && srcs.size() <= static_cast<size_t>(cuda::kMaxFanout) &&
                        dsts.size() <= static_cast<size_t>(cuda::kMaxFanout),
                    "reduce_copy: 1 to ", cuda::kMaxFanout, " sources and up to ",
                    cuda::kMaxFanout, " destinations");
  const at::Tensor& first = srcs[0];
  cuda::ReduceCopyArgs args;
  for (const auto* list : {&srcs, &dsts}) {
    for (const at::Tensor& t : *list) {
      TORCH_CHECK_VALUE(t.is_cuda() && t.device() == first.device() && t.is_contiguous() &&
                            t.numel() == first.numel(),
                        "reduce_copy: tensors must be contiguous, on one CUDA device, with "
                        "the same number of elements");
    }
  }
  for (const at::Tensor& t : srcs) {
    TORCH_CHECK_VALUE(t.scalar_type() == first.scalar_type(), "reduce_copy: sources differ in dtype");
    args.srcs[args.nsrc++] = t.data_ptr();
  }
  for (const at::Tensor& t : dsts) args.dsts[args.ndst++] = t.data_ptr();
  args.count = static_cast<size_t>(first.numel());
  args.srcType = toDataType(first.scalar_type(), name);
  args.dstType = dsts.empty() ? args.srcType : toDataType(dsts[0].scalar_type(), name);
  args.op = toReduceOp(op, name);
  args.avgDivisor = avgDivisor;
  const c10::Stream stream =
      c10::impl::getDeviceGuardImpl(first.device().type())->getStream(first.device());
  try {
    cuda::launchReduceCopy(args, first.device().index(), stream.native_handle());
  } catch (const InvalidArgument& e) {
    TORCH_CHECK_VALUE(false, e.what());
  }
}

DevicePathTaken DevicePath::allreduce(const at::Tensor& tensor, DataType type, ReduceOp op,
                                      const c10::Stream& stream, const RecordExchange& exchange) {
  return state_->paths->allreduce(tensor.data_ptr(), static_cast<size_t>(tensor.numel()), type,
                                  op, stream.native_handle(), exchange);
}

DevicePathTaken DevicePath::reduceScatter(const at::Tensor& input, const at::Tensor& output,
                                          DataType type, ReduceOp op, const c10::Stream& stream,
                                          const RecordExchange& exchange) {
  return state_->paths->reduceScatter(input.data_ptr(), output.data_ptr(),
                                      static_cast<size_t>(output.numel()), type, op,
                                      stream.native_handle(), exchange);
}

DevicePathTaken DevicePath::allgather(const at::Tensor& input, const at::Tensor& output,
                                      const c10::Stream& stream, const RecordExchange& exchange) {
  // Data movement: bytes, whatever the dtype.
  return state_->paths->allgather(input.data_ptr(), output.data_ptr(), input.nbytes(),
                                  DataType::UInt8, stream.native_handle(), exchange);
}

DevicePathTaken DevicePath::broadcast(const at::Tensor& tensor, int root,
                                      const c10::Stream& stream, const RecordExchange& exchange) {
  return state_->paths->broadcast(tensor.data_ptr(), tensor.nbytes(), DataType::UInt8, root,
                                  stream.native_handle(), exchange);
}

#else

struct DevicePath::State {};

bool DevicePath::compiled() { return false; }

std::string DevicePath::describe() { return "not compiled (nvcc was not found at build time)"; }

bool DevicePath::ncclAvailable(std::string* detail) {
  *detail = "not used: the CUDA path was not compiled";
  return false;
}

DevicePath::DevicePath(int, int, c10::Device device, const Config&, const RecordExchange&)
    : device_(device), state_(std::make_unique<State>()) {}

DevicePathTaken DevicePath::allreduce(const at::Tensor&, DataType, ReduceOp, const c10::Stream&,
                                      const RecordExchange&) {
  return DevicePathTaken::HostStaging;
}

DevicePathTaken DevicePath::reduceScatter(const at::Tensor&, const at::Tensor&, DataType,
                                          ReduceOp, const c10::Stream&, const RecordExchange&) {
  return DevicePathTaken::HostStaging;
}

DevicePathTaken DevicePath::allgather(const at::Tensor&, const at::Tensor&, const c10::Stream&,
                                      const RecordExchange&) {
  return DevicePathTaken::HostStaging;
}

DevicePathTaken DevicePath::broadcast(const at::Tensor&, int, const c10::Stream&,
                                      const RecordExchange&) {
  return DevicePathTaken::HostStaging;
}

void DevicePath::reduceCopy(const std::vector<at::Tensor>&, const std::vector<at::Tensor>&,
                            const c10d::ReduceOp&, int) {
  TORCH_CHECK(false, "reduce_copy: the CUDA path was not compiled (no nvcc at build time)");
}

#endif

DevicePath::~DevicePath() = default;

void DevicePath::abandon() { (void)state_.release(); }

}  // namespace ringreduce
