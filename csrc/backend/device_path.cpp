// The group's own device data path (csrc/cuda) behind a torch-side interface (device_path.h)
#include "backend/device_path.h"

#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/util/Exception.h>

#include <map>
#include <mutex>

#include "backend/device_ring_steps.h"
#include "backend/device_trial_clock.h"
#include "backend/dtype_mapping.h"
#include "core/observe/log.h"

#ifdef RINGREDUCE_WITH_CUDA
#include "core/base/errors.h"
#include "cuda/device_info.h"
#include "cuda/kernels/reduce_copy.h"
#include "cuda/nccl/nccl_library.h"
#include "cuda/nccl/nccl_watchdog.h"
#include "cuda/own_stream.h"
#include "cuda/path_selection.h"
#include "cuda/signal/signal_watchdog.h"
#endif

namespace ringreduce {

namespace {

c10::Stream poolStream(c10::Device device) {
  return c10::impl::getDeviceGuardImpl(device.type())->getStreamFromGlobalPool(device, false);
}

}  // namespace

#ifdef RINGREDUCE_WITH_CUDA

namespace {

cuda::CollectiveCall collectiveCall(const DevicePath::Call& call) {
  cuda::CollectiveCall c;
  c.fingerprint = call.fingerprint;
  c.timeout = call.timeout;
  return c;
}

}  // namespace

struct DevicePath::State {
  int rank = 0;
  DevicePath::Hooks hooks;
  std::unique_ptr<cuda::PathSelection> paths;
  std::unique_ptr<cuda::SignalWatchdog> watchdog;
  std::unique_ptr<cuda::NcclWatchdog> ncclWatchdog;  // after `paths`: goes first
  std::unique_ptr<CudaRingSteps> ring;  // the device ring's slots, made on first use
  // Tensors whose memory peers may map, by storage: held until close().
  std::map<const void*, at::Tensor> held;
  size_t heldBytes = 0;
  size_t holdLimit = 0;
  bool warnedHoldLimit = false;
  // The tensors of the collective being run, for the export guard.
  std::vector<at::Tensor> exportable;

  // The caching allocator may free a segment peers still map, so a tensor
  // is exported only while the group holds it; over the limit, the
  // collective is staged through the group's own buffers instead.
  bool mayExport(const void* ptr) {
    for (const at::Tensor& t : exportable) {
      if (t.data_ptr() != ptr || !t.has_storage()) continue;
      const void* key = t.storage().data_ptr().get();
      if (held.count(key)) return true;
      const size_t bytes = t.storage().nbytes();
      if (heldBytes + bytes > holdLimit) {
        if (!warnedHoldLimit) {
          warnedHoldLimit = true;
          RR_LOG(Warn, rank, "CUDA tensors shared with peers reached "
                                 << holdLimit << " bytes (RINGREDUCE_CUDA_HOLD_BYTES): larger "
                                 << "collectives on new tensors are staged from now on");
        }
        return false;
      }
      held.emplace(key, t);
      heldBytes += bytes;
      return true;
    }
    return false;  // not a tensor of this collective: never exported
  }

  // From the first collective that set up the device-flags path, or NCCL.
  void watchIfReady() {
    if (!ncclWatchdog && paths->ncclCommunicator()) {
      ncclWatchdog = std::make_unique<cuda::NcclWatchdog>(*paths->ncclCommunicator(),
                                                          hooks.fail, hooks.givenUp);
    }
    if (watchdog || !paths->signalGroup()) return;
    watchdog = std::make_unique<cuda::SignalWatchdog>(*paths->signalGroup(), hooks.fail,
                                                      hooks.givenUp);
  }
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

c10::Stream DevicePath::ownStream(c10::Device device) {
  // torch reads an external stream's id as the cudaStream_t itself (what
  // torch.cuda.ExternalStream relies on); the round trip checks that this
  // torch still does, else the pool serves.
  void* raw = cuda::createOwnStream(device.index());
  const c10::Stream stream(c10::Stream::UNSAFE, device,
                           static_cast<c10::StreamId>(reinterpret_cast<intptr_t>(raw)));
  bool roundTrip = false;
  try {
    roundTrip = stream.native_handle() == raw;
  } catch (const std::exception&) {
    roundTrip = false;
  }
  if (roundTrip) return stream;
  cuda::destroyOwnStream(device.index(), raw);
  RR_LOG(Warn, -1, "this torch does not take an external CUDA stream: using one of its pool");
  return poolStream(device);
}

bool DevicePath::capturing(const c10::Stream& stream) {
  return cuda::streamCapturing(stream.native_handle());
}

bool DevicePath::flagsCheckIt(const Config& config, OnCaller kind, size_t bytes, int ranks,
                              DataType type, ReduceOp op) {
  if (!config.cudaDeviceFlags) return false;
  switch (kind) {
    case OnCaller::Allreduce:  // any size: in place beyond the buffers
      return cuda::kernelSupports(type, type, op);
    case OnCaller::Allgather:
      return bytes <= config.cudaBufferBytes;
    case OnCaller::ReduceScatter:
      return bytes * static_cast<size_t>(ranks) <= config.cudaBufferBytes &&
             cuda::kernelSupports(type, type, op);
  }
  return false;
}

DevicePath::DevicePath(int rank, int size, c10::Device device, const Config& config,
                       const RecordExchange& exchange, Hooks hooks, bool carriesDevice)
    : device_(device), state_(std::make_unique<State>()) {
  state_->rank = rank;
  state_->hooks = std::move(hooks);
  state_->holdLimit = config.cudaHoldBytes;
  state_->paths = std::make_unique<cuda::PathSelection>(rank, size, device.index(), config,
                                                        exchange, carriesDevice);
  State* state = state_.get();
  state_->paths->setExportGuard([state](const void* ptr) { return state->mayExport(ptr); });
  if (config.cudaDeviceFlags) {
    RR_LOG(Info, rank, "device-flags path: " << state_->paths->flagsSyncReason());
  }
}

void DevicePath::reduceCopy(const std::vector<at::Tensor>& srcs,
                            const std::vector<at::Tensor>& dsts, const c10d::ReduceOp& op,
                            int avgDivisor) {
  const char* name = "reduce_copy";
  TORCH_CHECK_VALUE(!srcs.empty() && srcs.size() <= static_cast<size_t>(cuda::kMaxFanout) &&
                        dsts.size() <= static_cast<size_t>(cuda::kMaxFanout),
                    "reduce_copy: 1 to ", cuda::kMaxFanout, " sources and 0 to ",
                    cuda::kMaxFanout, " destinations, got ", srcs.size(), " and ", dsts.size());
  const at::Tensor& first = srcs[0];
  for (const auto* list : {&srcs, &dsts}) {
    for (const at::Tensor& t : *list) {
      TORCH_CHECK_VALUE(t.defined() && t.is_cuda() && t.device() == first.device() &&
                            t.is_contiguous() && t.numel() == first.numel(),
                        "reduce_copy: tensors must be contiguous, on one CUDA device, with "
                        "the same number of elements");
      TORCH_CHECK_VALUE(!t.is_conj() && !t.is_neg(),
                        "reduce_copy: conjugate and negative views are not plain memory; "
                        "resolve them first (resolve_conj(), resolve_neg())");
    }
  }
  for (const at::Tensor& t : srcs) {
    TORCH_CHECK_VALUE(t.scalar_type() == first.scalar_type(), "reduce_copy: sources differ in ",
                      "dtype (", first.scalar_type(), " and ", t.scalar_type(), ")");
  }
  for (const at::Tensor& t : dsts) {
    TORCH_CHECK_VALUE(t.scalar_type() == dsts[0].scalar_type(),
                      "reduce_copy: destinations differ in dtype (", dsts[0].scalar_type(),
                      " and ", t.scalar_type(), ")");
    // A destination is written element by element while sources are read:
    // the same memory is fine (in place), a shifted overlap is not.
    const auto* d = static_cast<const uint8_t*>(t.data_ptr());
    for (const at::Tensor& s : srcs) {
      const auto* p = static_cast<const uint8_t*>(s.data_ptr());
      const bool overlap = d < p + s.nbytes() && p < d + t.nbytes();
      TORCH_CHECK_VALUE(!overlap || d == p,
                        "reduce_copy: a destination partly overlaps a source");
    }
  }
  cuda::ReduceCopyArgs args;
  for (const at::Tensor& t : srcs) args.srcs[args.nsrc++] = t.data_ptr();
  for (const at::Tensor& t : dsts) args.dsts[args.ndst++] = t.data_ptr();
  args.count = static_cast<size_t>(first.numel());
  args.srcType = toDataType(first.scalar_type(), name);
  args.dstType = dsts.empty() ? args.srcType : toDataType(dsts[0].scalar_type(), name);
  args.op = toReduceOp(op, name);
  args.avgDivisor = avgDivisor;
  const std::string problem = cuda::reduceCopyArgsProblem(args);
  TORCH_CHECK_VALUE(problem.empty(), "reduce_copy: ", problem);
  const c10::Stream stream =
      c10::impl::getDeviceGuardImpl(first.device().type())->getStream(first.device());
  try {
    cuda::launchReduceCopy(args, first.device().index(), stream.native_handle());
  } catch (const InvalidArgument& e) {
    TORCH_CHECK_VALUE(false, e.what());
  }
}

DevicePathTaken DevicePath::allreduce(const at::Tensor& tensor, DataType type, ReduceOp op,
                                      const c10::Stream& stream, const RecordExchange& exchange,
                                      const Call& call) {
  state_->exportable = {tensor};
  const DevicePathTaken ran =
      state_->paths->allreduce(tensor.data_ptr(), static_cast<size_t>(tensor.numel()), type, op,
                               stream.native_handle(), exchange, collectiveCall(call));
  state_->exportable.clear();
  state_->watchIfReady();
  return ran;
}

bool DevicePath::ringOrNccl(DataType type, ReduceOp op, const RecordExchange& exchange,
                            const Call& call) {
  const bool both = state_->paths->ringOrNccl(type, op, exchange, collectiveCall(call));
  state_->watchIfReady();
  return both;
}

DevicePathTaken DevicePath::allreduceAcross(CudaAlgorithm algorithm, const at::Tensor& tensor,
                                            DataType type, ReduceOp op,
                                            const c10::Stream& stream) {
  return state_->paths->allreduceAcross(algorithm, tensor.data_ptr(),
                                        static_cast<size_t>(tensor.numel()), type, op,
                                        stream.native_handle());
}

std::unique_ptr<TrialClock> DevicePath::trialClock(const c10::Stream& stream,
                                                  const OpContext& op) {
  return std::make_unique<StreamTrialClock>(device_.index(), stream.native_handle(), op);
}

DevicePathTaken DevicePath::reduceScatter(const at::Tensor& input, const at::Tensor& output,
                                          DataType type, ReduceOp op, const c10::Stream& stream,
                                          const RecordExchange& exchange, const Call& call) {
  state_->exportable = {input, output};
  const DevicePathTaken ran = state_->paths->reduceScatter(
      input.data_ptr(), output.data_ptr(), static_cast<size_t>(output.numel()), type, op,
      stream.native_handle(), exchange, collectiveCall(call));
  state_->exportable.clear();
  state_->watchIfReady();
  return ran;
}

DevicePathTaken DevicePath::allgather(const at::Tensor& input, const at::Tensor& output,
                                      const c10::Stream& stream, const RecordExchange& exchange,
                                      const Call& call) {
  state_->exportable = {input, output};
  // Data movement: bytes, whatever the dtype.
  const DevicePathTaken ran =
      state_->paths->allgather(input.data_ptr(), output.data_ptr(), input.nbytes(),
                               DataType::UInt8, stream.native_handle(), exchange,
                               collectiveCall(call));
  state_->exportable.clear();
  state_->watchIfReady();
  return ran;
}

DevicePathTaken DevicePath::broadcast(const at::Tensor& tensor, int root,
                                      const c10::Stream& stream, const RecordExchange& exchange,
                                      const Call& call) {
  state_->exportable = {tensor};
  const DevicePathTaken ran =
      state_->paths->broadcast(tensor.data_ptr(), tensor.nbytes(), DataType::UInt8, root,
                               stream.native_handle(), exchange, collectiveCall(call));
  state_->exportable.clear();
  state_->watchIfReady();
  return ran;
}

bool DevicePath::onCallerApplies(OnCaller kind, size_t bytes, DataType type, ReduceOp op) const {
  const cuda::PathSelection& paths = *state_->paths;
  const cuda::SignalGroup* group = paths.signalGroup();
  if (group == nullptr) return false;
  switch (kind) {
    case OnCaller::Allreduce:
      return bytes <= group->bufferBytes() && cuda::kernelSupports(type, type, op);
    case OnCaller::Allgather:
      return bytes <= group->bufferBytes();
    case OnCaller::ReduceScatter:
      return bytes * static_cast<size_t>(group->size()) <= group->bufferBytes() &&
             cuda::kernelSupports(type, type, op);
  }
  return false;
}

DevicePathTaken DevicePath::allreduceOnCaller(const at::Tensor& tensor, DataType type, ReduceOp op,
                                              const c10::Stream& stream, const Call& call) {
  return state_->paths->allreduceOnCaller(tensor.data_ptr(), tensor.data_ptr(),
                                          static_cast<size_t>(tensor.numel()), type, op,
                                          stream.native_handle(), collectiveCall(call));
}

DevicePathTaken DevicePath::allgatherOnCaller(const at::Tensor& input, const at::Tensor& output,
                                              const c10::Stream& stream, const Call& call) {
  return state_->paths->allgatherOnCaller(input.data_ptr(), output.data_ptr(), input.nbytes(),
                                          DataType::UInt8, stream.native_handle(),
                                          collectiveCall(call));
}

DevicePathTaken DevicePath::reduceScatterOnCaller(const at::Tensor& input, const at::Tensor& output,
                                                  DataType type, ReduceOp op,
                                                  const c10::Stream& stream, const Call& call) {
  return state_->paths->reduceScatterOnCaller(input.data_ptr(), output.data_ptr(),
                                              static_cast<size_t>(output.numel()), type, op,
                                              stream.native_handle(), collectiveCall(call));
}

bool DevicePath::capturable(std::string* why) const { return state_->paths->capturable(why); }

std::string DevicePath::pathsDescription() const { return state_->paths->describe(); }

DeviceSteps* DevicePath::ringSteps(const c10::Stream& stream) {
  if (!state_->ring) state_->ring = std::make_unique<CudaRingSteps>(device_.index());
  state_->ring->bind(stream.native_handle());
  return state_->ring.get();
}

const Topology& DevicePath::nodes() const { return state_->paths->nodes(); }

bool DevicePath::close(const RecordExchange& exchange, std::chrono::milliseconds limit) {
  if (!state_) return false;
  state_->watchdog.reset();  // joins: nothing reads the group from here on
  state_->ncclWatchdog.reset();  // nor NCCL, which finalizes in the close
  const bool closed = state_->paths->close(exchange, limit);
  if (closed) {
    state_->held.clear();  // no peer maps them any more
  } else {
    RR_LOG(Warn, state_->rank, "CUDA memory shared with peers is kept for the life of the "
                               "process: the group could not close it with every rank");
    (void)state_.release();
  }
  return closed;
}

#else

struct DevicePath::State {};

bool DevicePath::compiled() { return false; }

std::string DevicePath::describe() { return "not compiled (nvcc was not found at build time)"; }

bool DevicePath::ncclAvailable(std::string* detail) {
  *detail = "not used: the CUDA path was not compiled";
  return false;
}

c10::Stream DevicePath::ownStream(c10::Device device) { return poolStream(device); }

bool DevicePath::capturing(const c10::Stream&) { return false; }

bool DevicePath::flagsCheckIt(const Config&, OnCaller, size_t, int, DataType, ReduceOp) {
  return false;
}

DevicePath::DevicePath(int, int, c10::Device device, const Config&, const RecordExchange&, Hooks,
                       bool)
    : device_(device), state_(std::make_unique<State>()) {}

DeviceSteps* DevicePath::ringSteps(const c10::Stream&) { return nullptr; }

std::unique_ptr<TrialClock> DevicePath::trialClock(const c10::Stream&, const OpContext&) {
  return nullptr;
}

const Topology& DevicePath::nodes() const {
  static const Topology none;
  return none;
}

DevicePathTaken DevicePath::allreduce(const at::Tensor&, DataType, ReduceOp, const c10::Stream&,
                                      const RecordExchange&, const Call&) {
  return DevicePathTaken::HostStaging;
}

DevicePathTaken DevicePath::reduceScatter(const at::Tensor&, const at::Tensor&, DataType,
                                          ReduceOp, const c10::Stream&, const RecordExchange&,
                                          const Call&) {
  return DevicePathTaken::HostStaging;
}

bool DevicePath::ringOrNccl(DataType, ReduceOp, const RecordExchange&, const Call&) {
  return false;
}

DevicePathTaken DevicePath::allreduceAcross(CudaAlgorithm, const at::Tensor&, DataType, ReduceOp,
                                            const c10::Stream&) {
  return DevicePathTaken::HostStaging;
}

DevicePathTaken DevicePath::allgather(const at::Tensor&, const at::Tensor&, const c10::Stream&,
                                      const RecordExchange&, const Call&) {
  return DevicePathTaken::HostStaging;
}

DevicePathTaken DevicePath::broadcast(const at::Tensor&, int, const c10::Stream&,
                                      const RecordExchange&, const Call&) {
  return DevicePathTaken::HostStaging;
}

bool DevicePath::onCallerApplies(OnCaller, size_t, DataType, ReduceOp) const { return false; }

DevicePathTaken DevicePath::allreduceOnCaller(const at::Tensor&, DataType, ReduceOp,
                                              const c10::Stream&, const Call&) {
  return DevicePathTaken::HostStaging;
}

DevicePathTaken DevicePath::allgatherOnCaller(const at::Tensor&, const at::Tensor&,
                                              const c10::Stream&, const Call&) {
  return DevicePathTaken::HostStaging;
}

DevicePathTaken DevicePath::reduceScatterOnCaller(const at::Tensor&, const at::Tensor&, DataType,
                                                  ReduceOp, const c10::Stream&, const Call&) {
  return DevicePathTaken::HostStaging;
}

bool DevicePath::capturable(std::string* why) const {
  if (why) *why = "the CUDA path was not compiled (no nvcc at build time)";
  return false;
}

std::string DevicePath::pathsDescription() const {
  return "the CUDA path was not compiled (no nvcc at build time)";
}

void DevicePath::reduceCopy(const std::vector<at::Tensor>&, const std::vector<at::Tensor>&,
                            const c10d::ReduceOp&, int) {
  TORCH_CHECK(false, "reduce_copy: the CUDA path was not compiled (no nvcc at build time)");
}

bool DevicePath::close(const RecordExchange&, std::chrono::milliseconds) { return true; }

#endif

DevicePath::~DevicePath() = default;

void DevicePath::abandon() {
#ifdef RINGREDUCE_WITH_CUDA
  // The watchdogs go (their hooks reach the group, which is going); the
  // memory and mappings stay. NCCL is aborted, not left: its kernels may
  // wait on a dead peer and hold the caller's streams.
  if (state_) {
    state_->watchdog.reset();
    state_->ncclWatchdog.reset();
    if (cuda::NcclCommunicator* nccl = state_->paths->ncclCommunicator()) {
      nccl->abort("the process group failed");
    }
  }
#endif
  (void)state_.release();
}

}  // namespace ringreduce
