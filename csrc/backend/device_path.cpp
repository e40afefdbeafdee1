#include "backend/device_path.h"

#ifdef RINGREDUCE_WITH_CUDA
#include "cuda/device_allreduce.h"
#include "cuda/device_info.h"
#endif

namespace ringreduce {

#ifdef RINGREDUCE_WITH_CUDA

struct DevicePath::State {
  std::unique_ptr<cuda::DeviceAllreduce> allreduce;
};

bool DevicePath::compiled() { return true; }

std::string DevicePath::describe() { return cuda::runtimeDescription(); }

DevicePath::DevicePath(int rank, int size, c10::Device device, const Config& config,
                       const RecordExchange& exchange)
    : device_(device), state_(std::make_unique<State>()) {
  state_->allreduce =
      std::make_unique<cuda::DeviceAllreduce>(rank, size, device.index(), config, exchange);
}

std::string DevicePath::allreduce(const at::Tensor& tensor, DataType type, ReduceOp op,
                                  const c10::Stream& stream, const RecordExchange& exchange) {
  return state_->allreduce->run(tensor.data_ptr(), static_cast<size_t>(tensor.numel()), type, op,
                                stream.native_handle(), exchange);
}

#else

struct DevicePath::State {};

bool DevicePath::compiled() { return false; }

std::string DevicePath::describe() { return "not compiled (nvcc was not found at build time)"; }

DevicePath::DevicePath(int, int, c10::Device device, const Config&, const RecordExchange&)
    : device_(device), state_(std::make_unique<State>()) {}

std::string DevicePath::allreduce(const at::Tensor&, DataType, ReduceOp, const c10::Stream&,
                                  const RecordExchange&) {
  return "";
}

#endif

DevicePath::~DevicePath() = default;

void DevicePath::abandon() { (void)state_.release(); }

}  // namespace ringreduce
