#include "cuda/path_selection.h"

#include <set>
#include <vector>

#include "core/base/errors.h"
#include "core/base/host_identity.h"
#include "core/observe/log.h"
#include "cuda/device_info.h"

namespace ringreduce::cuda {

namespace {

struct IdentityRecord {
  uint64_t host = 0;
  std::array<uint8_t, 16> gpu{};
};

DataType wireOf(const Config& config, DataType type, ReduceOp op) {
  if (type != DataType::Float32 || (op != ReduceOp::Sum && op != ReduceOp::Avg)) return type;
  if (config.cudaWireDtype == WireDtype::Fp16) return DataType::Float16;
  if (config.cudaWireDtype == WireDtype::Bf16) return DataType::BFloat16;
  return type;
}

// Runs a collective other than allreduce on the path chosen for it: `onIpc`
// or `onNccl` returns false when it must be staged through the host after
// all (IPC: some rank's tensor cannot be shared, on every rank alike).
template <typename OnIpc, typename OnNccl>
DevicePathTaken runOn(DevicePathTaken path, OnIpc onIpc, OnNccl onNccl) {
  if (path == DevicePathTaken::Ipc && onIpc()) return path;
  if (path == DevicePathTaken::Nccl && onNccl()) return path;
  return DevicePathTaken::HostStaging;
}

}  // namespace

PathSelection::PathSelection(int rank, int size, int device, const Config& config,
                             const RecordExchange& exchange)
    : rank_(rank), size_(size), device_(device), config_(config) {
  IdentityRecord mine;
  mine.host = hostIdentityHash();
  mine.gpu = deviceUuid(device);
  std::vector<IdentityRecord> all(size);
  exchange(&mine, all.data(), sizeof(IdentityRecord));
  std::set<uint64_t> hosts;
  std::set<std::pair<uint64_t, std::array<uint8_t, 16>>> gpus;
  for (const IdentityRecord& r : all) {
    hosts.insert(r.host);
    gpus.insert({r.host, r.gpu});
  }
  sameNode_ = hosts.size() == 1;
  gpuShared_ = gpus.size() < static_cast<size_t>(size);
  topology_ = std::to_string(size) + " rank(s) on " + std::to_string(hosts.size()) +
              " node(s), " + std::to_string(gpus.size()) + " GPU(s)";
}

PathSelection::~PathSelection() = default;

bool PathSelection::ipcUsable(const RecordExchange& exchange) {
  if (!ipcTried_) {
    ipcTried_ = true;
    ipc_ = IpcCollectives::setUp(rank_, size_, device_, config_.cudaScratchBytes, exchange,
                                 &ipcFailure_);
    if (!ipc_) RR_LOG(Warn, rank_, "CUDA IPC path unavailable: " << ipcFailure_);
  }
  return ipc_ != nullptr;
}

bool PathSelection::ncclUsable(const RecordExchange& exchange) {
  if (!ncclTried_) {
    ncclTried_ = true;
    std::string why;
    const NcclLibrary* lib = gpuShared_ ? nullptr : NcclLibrary::load(&why);
    if (gpuShared_) why = "two ranks share a GPU, which NCCL refuses";
    const uint8_t loaded = lib != nullptr ? 1 : 0;
    std::vector<uint8_t> all(size_);
    exchange(&loaded, all.data(), 1);
    for (int q = 0; q < size_ && why.empty(); ++q) {
      if (!all[q]) why = "NCCL is not loadable on rank " + std::to_string(q);
    }
    if (why.empty()) {
      // The unique id exchange also proves every rank is here before the
      // (blocking) NCCL init starts.
      nccl_ = std::make_unique<NcclCommunicator>(*lib, rank_, size_, device_, exchange);
    } else {
      ncclFailure_ = why;
      RR_LOG(Info, rank_, "NCCL path unavailable: " << why);
    }
  }
  return nccl_ != nullptr;
}

DevicePathTaken PathSelection::choose(const Request& request, const RecordExchange& exchange) {
  const CudaAlgorithm algo = config_.cudaAlgorithm;
  if (algo == CudaAlgorithm::Host) return DevicePathTaken::HostStaging;
  if (algo == CudaAlgorithm::Nccl) {
    if (!request.ncclCannot.empty()) {
      throw InvalidArgument("ringreduce: RINGREDUCE_CUDA_ALGO=nccl: " + request.ncclCannot);
    }
    if (!ncclUsable(exchange)) {
      throw InvalidArgument("ringreduce: RINGREDUCE_CUDA_ALGO=nccl cannot run: " + ncclFailure_);
    }
    return DevicePathTaken::Nccl;
  }
  const bool oneNode = sameNode_ && size_ <= kMaxFanout;
  const bool forced = request.allreduce && algo != CudaAlgorithm::Auto;
  if (forced && !oneNode) {
    throw InvalidArgument(std::string("ringreduce: RINGREDUCE_CUDA_ALGO=") + nameOf(algo) +
                          " needs every rank on one node, at most " +
                          std::to_string(kMaxFanout) + " ranks (" + topology_ + ")");
  }
  if (oneNode) {
    if (ipcUsable(exchange)) {
      if (!request.allreduce) return DevicePathTaken::Ipc;
      if (algo == CudaAlgorithm::OneShot ||
          (algo == CudaAlgorithm::Auto && request.bytes <= config_.cudaOneShotBytes)) {
        return DevicePathTaken::OneShot;
      }
      return algo == CudaAlgorithm::Staged ? DevicePathTaken::Staged : DevicePathTaken::TwoShot;
    }
    if (forced) {
      throw InvalidArgument(std::string("ringreduce: RINGREDUCE_CUDA_ALGO=") + nameOf(algo) +
                            " cannot run: " + ipcFailure_);
    }
  }
  if (request.ncclCannot.empty() && ncclUsable(exchange)) return DevicePathTaken::Nccl;
  return DevicePathTaken::HostStaging;
}

DevicePathTaken PathSelection::allreduce(void* data, size_t count, DataType type, ReduceOp op,
                                         void* stream, const RecordExchange& exchange) {
  Request request;
  request.allreduce = true;
  request.bytes = count * elementSize(type);
  request.ncclCannot = NcclCommunicator::unsupportedReason(type, op);
  const DevicePathTaken path = choose(request, exchange);
  switch (path) {
    case DevicePathTaken::OneShot:
    case DevicePathTaken::TwoShot:
    case DevicePathTaken::Staged:
      return ipc_->allreduce(data, count, type, op, wireOf(config_, type, op), path, stream,
                             exchange);
    case DevicePathTaken::Nccl:
      nccl_->allreduce(data, data, count, type, op, stream);
      return path;
    default:
      return DevicePathTaken::HostStaging;
  }
}

// The others need NCCL only to move `type`; a reduce-scatter whose op NCCL
// lacks is staged through the host after the choice.
DevicePathTaken PathSelection::reduceScatter(const void* input, void* output,
                                             size_t countPerRank, DataType type, ReduceOp op,
                                             void* stream, const RecordExchange& exchange) {
  Request request;
  request.ncclCannot = NcclCommunicator::unsupportedType(type);
  return runOn(
      choose(request, exchange),
      [&] { return ipc_->reduceScatter(input, output, countPerRank, type, op, stream, exchange); },
      [&] {
        if (!NcclCommunicator::unsupportedReason(type, op).empty()) return false;
        nccl_->reduceScatter(input, output, countPerRank, type, op, stream);
        return true;
      });
}

DevicePathTaken PathSelection::allgather(const void* input, void* output, size_t countPerRank,
                                         DataType type, void* stream,
                                         const RecordExchange& exchange) {
  Request request;
  request.ncclCannot = NcclCommunicator::unsupportedType(type);
  return runOn(
      choose(request, exchange),
      [&] { return ipc_->allgather(input, output, countPerRank, type, stream, exchange); },
      [&] {
        nccl_->allgather(input, output, countPerRank, type, stream);
        return true;
      });
}

DevicePathTaken PathSelection::broadcast(void* data, size_t count, DataType type, int root,
                                         void* stream, const RecordExchange& exchange) {
  Request request;
  request.ncclCannot = NcclCommunicator::unsupportedType(type);
  return runOn(
      choose(request, exchange),
      [&] { return ipc_->broadcast(data, count, type, root, stream, exchange); },
      [&] {
        nccl_->broadcast(data, count, type, root, stream);
        return true;
      });
}

}  // namespace ringreduce::cuda
