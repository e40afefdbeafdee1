// The device collectives of one process group and the path each takes (path_selection.h)
#include "cuda/path_selection.h"

#include <algorithm>
#include <vector>

#include "core/base/errors.h"
#include "core/base/host_identity.h"
#include "core/observe/log.h"
#include "cuda/device_info.h"
#include "cuda/kernels/vector_pack.h"
#include "cuda/peer_probe.h"
#include "cuda/signal/flags_plan.h"
#include "cuda/signal/stream_memops.h"

namespace ringreduce::cuda {

static_assert(Config::kDeviceFlagsMaxRanks <= kSignalRanks,
              "auto must not choose the device flags for more ranks than the kernels serve");

namespace {

// What every rank tells the others at set-up (RankDevice, as plain bytes).
struct IdentityRecord {
  uint64_t host = 0;
  std::array<uint8_t, 16> gpu{};
  uint8_t mps = 0;
  uint8_t memOps = 0;
  uint8_t carriesDevice = 0;  // the transport moves device memory (UCX with CUDA)
  uint8_t peerAccess = 0;     // RINGREDUCE_CUDA_P2P is not off here
  int32_t sms = 0;
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
  if (path == DevicePathTaken::DeviceRing) return path;  // the caller runs it
  if (path == DevicePathTaken::Ipc && onIpc()) return path;
  if (path == DevicePathTaken::Nccl && onNccl()) return path;
  return DevicePathTaken::HostStaging;
}

}  // namespace

PathSelection::PathSelection(int rank, int size, int device, const Config& config,
                             const RecordExchange& exchange, bool carriesDevice)
    : rank_(rank), size_(size), device_(device), config_(config) {
  IdentityRecord mine;
  mine.host = hostIdentityHash();
  mine.gpu = deviceUuid(device);
  std::string mpsHow;
  mine.mps = mpsActive(&mpsHow) ? 1 : 0;
  mine.memOps = streamMemOpsAvailable(nullptr) ? 1 : 0;
  mine.sms = multiprocessors(device);
  mine.carriesDevice = carriesDevice ? 1 : 0;
  mine.peerAccess = config.cudaPeerAccess ? 1 : 0;
  std::vector<IdentityRecord> records(size);
  exchange(&mine, records.data(), sizeof(IdentityRecord));
  for (int q = 0; q < size && peerAccessFailure_.empty(); ++q) {
    if (!records[q].peerAccess) {
      peerAccessFailure_ = "peer access is off (RINGREDUCE_CUDA_P2P=off on rank " +
                           std::to_string(q) + ")";
    }
  }
  ringUsable_ = true;
  for (int q = 0; q < size && ringUsable_; ++q) {  // the same verdict on every rank
    if (!records[q].carriesDevice) {
      ringUsable_ = false;
      ringFailure_ = "rank " + std::to_string(q) +
                     "'s UCX does not move CUDA memory (python -m torch_ringreduce.info: "
                     "\"device memory over UCX\"; pip's libucx-cu13 or a site UCX built "
                     "with CUDA does)";
    }
  }
  std::vector<uint64_t> hosts;
  for (const IdentityRecord& r : records) hosts.push_back(r.host);
  nodes_ = Topology::fromHostHashes(hosts);
  std::vector<RankDevice> ranks;
  for (const IdentityRecord& r : records) {
    ranks.push_back(RankDevice{r.host, r.gpu, r.mps != 0, r.memOps != 0, r.sms});
  }
  const FlagsPlan plan = planFlags(ranks, config.cudaSync, config.cudaBlocks, mpsHow);
  // What CUDA collectives across nodes will take, said once per group.
  if (plan.sameNode && config.cudaAlgorithm != CudaAlgorithm::Ring) {
    RR_LOG(Info, rank, "CUDA paths: " << plan.topology << ", one node: "
                                      << (config.cudaDeviceFlags
                                              ? "device flags (allreduce, "
                                                "all_gather_into_tensor, reduce_scatter_tensor), "
                                                "IPC kernels for the rest"
                                              : "IPC kernels"));
  } else if (ringUsable_) {
    RR_LOG(Info, rank, "CUDA paths: " << plan.topology
                                      << ": the device ring (every rank's UCX moves CUDA memory)"
                                      << (nodes_.equalNodesOfSeveralRanks()
                                              ? ", allreduce in two levels (equal nodes)"
                                              : ""));
    const WireDtype wire = config.deviceRingWire();
    if (wire != WireDtype::None) {
      RR_LOG(Info, rank, "device ring: float32 SUM/AVG allreduces travel as " << nameOf(wire));
    }
  } else {
    RR_LOG(Info, rank, "CUDA paths: " << plan.topology << ": NCCL where it loads, else host "
                                      << "staging; no device ring: " << ringFailure_);
  }
  if (plan.sameNode && !peerAccessFailure_.empty()) {
    RR_LOG(Info, rank, "CUDA paths: " << peerAccessFailure_
                                      << ": NCCL where it can run, else host staging");
  }
  sameNode_ = plan.sameNode;
  gpuShared_ = plan.gpuShared;
  topology_ = plan.topology;
  sync_ = plan.sync;
  syncReason_ = plan.reason;
  maxBlocks_ = plan.maxBlocks;
}

PathSelection::~PathSelection() = default;

bool PathSelection::ipcUsable(const RecordExchange& exchange) {
  if (!ipcTried_) {
    ipcTried_ = true;
    if (!peerAccessFailure_.empty()) {
      ipcFailure_ = peerAccessFailure_;  // the same on every rank: none sets up
      return false;
    }
    ipc_ = IpcCollectives::setUp(rank_, size_, device_, config_.cudaScratchBytes, exchange,
                                 &ipcFailure_);
    if (ipc_ && exportGuard_) ipc_->setExportGuard(exportGuard_);
    if (!ipc_) {
      RR_LOG(Warn, rank_, "CUDA IPC path unavailable: " << ipcFailure_);
      if (isPeerAccessFailure(ipcFailure_)) peerAccessFailure_ = ipcFailure_;
    }
  }
  return ipc_ != nullptr;
}

bool PathSelection::ncclUsable(const RecordExchange& exchange,
                               std::chrono::milliseconds opTimeout) {
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
      // Bounded by half the timeout of the collective asking (initLimit);
      // an init that fails on any rank throws on all.
      try {
        nccl_ = std::make_unique<NcclCommunicator>(*lib, rank_, size_, device_, exchange,
                                                   NcclCommunicator::initLimit(opTimeout));
      } catch (const std::exception& e) {
        ncclFailure_ = e.what();  // the same on every rank: later asks say it
        throw;
      }
    } else {
      ncclFailure_ = why;
      RR_LOG(Info, rank_, "NCCL path unavailable: " << why);
    }
  }
  return nccl_ != nullptr;
}

bool PathSelection::signalUsable(const RecordExchange& exchange) {
  if (!signalTried_) {
    signalTried_ = true;
    if (sync_ == CudaSync::Auto) {
      signalFailure_ = syncReason_;  // the same on every rank: none sets up
    } else if (!peerAccessFailure_.empty()) {
      signalFailure_ = peerAccessFailure_;
    } else {
      SignalGroupOptions options;
      options.bufferBytes = config_.cudaBufferBytes;
      options.sync = sync_;
      options.maxBlocks = maxBlocks_;
      options.oneShotBytes = config_.cudaOneShotBytes;
      signal_ = SignalGroup::setUp(rank_, size_, device_, options, exchange, &signalFailure_);
    }
    signalReady_.store(signal_.get(), std::memory_order_release);
    if (signal_) {
      RR_LOG(Info, rank_, "device-flags path: " << syncReason_ << ", up to " << maxBlocks_
                                                << " blocks, " << config_.cudaBufferBytes
                                                << "-byte buffers");
    } else {
      RR_LOG(Warn, rank_, "device-flags path unavailable: " << signalFailure_);
      // A failed probe fails the IPC kernels' alike: no second probe.
      if (isPeerAccessFailure(signalFailure_)) peerAccessFailure_ = signalFailure_;
    }
  }
  return signal_ != nullptr;
}

std::string PathSelection::describe() const {
  auto verdict = [](bool tried, bool usable, const std::string& failure) -> std::string {
    if (!tried) return "not tried yet";
    return usable ? "set up" : "unavailable: " + failure;
  };
  std::string text = topology_ + "; peer access: " +
                     (!peerAccessFailure_.empty() ? peerAccessFailure_
                      : signalTried_ || ipcTried_ ? "probed, every pair ok"
                                                  : "not probed yet");
  text += "; device flags: " + verdict(signalTried_, signal_ != nullptr, signalFailure_);
  text += "; IPC kernels: " + verdict(ipcTried_, ipc_ != nullptr, ipcFailure_);
  text += "; NCCL: " + verdict(ncclTried_, nccl_ != nullptr, ncclFailure_);
  text += "; device ring: " +
          (ringUsable_ ? std::string("usable") : "unavailable: " + ringFailure_);
  return text;
}

bool PathSelection::capturable(std::string* why) const {
  const SignalGroup* group = signalGroup();
  if (group && group->capturable()) return true;
  if (why) {
    *why = !group ? "CUDA graphs capture ringreduce collectives on the device-flags path "
                      "only (every rank on one node, RINGREDUCE_CUDA_ALGO auto or flags, set up "
                      "by one collective before capture)"
                    : "ranks sharing a GPU without MPS synchronise with stream memory "
                      "operations, whose values the host counts: a replay would reuse "
                      "them (start MPS, or give each rank its own GPU)";
  }
  return false;
}

void PathSelection::setExportGuard(IpcCollectives::ExportGuard guard) {
  exportGuard_ = guard;
  if (ipc_) ipc_->setExportGuard(std::move(guard));
}

SignalGroup::Call PathSelection::signalCall(void* stream, const CollectiveCall& call) const {
  SignalGroup::Call c;
  c.fingerprint = call.fingerprint;
  c.timeout = call.timeout;
  c.stream = stream;
  return c;
}

DevicePathTaken PathSelection::choose(const Request& request, const RecordExchange& exchange) {
  const CudaAlgorithm algo = config_.cudaAlgorithm;
  if (algo == CudaAlgorithm::Host) return DevicePathTaken::HostStaging;
  if (algo == CudaAlgorithm::Ring && request.ringable) {
    if (!ringUsable_) {
      throw InvalidArgument("ringreduce: RINGREDUCE_CUDA_ALGO=ring cannot run: " + ringFailure_);
    }
    return DevicePathTaken::DeviceRing;
  }
  if (algo == CudaAlgorithm::Nccl) {
    if (!request.ncclCannot.empty()) {
      throw InvalidArgument("ringreduce: RINGREDUCE_CUDA_ALGO=nccl: " + request.ncclCannot);
    }
    if (!ncclUsable(exchange, request.timeout)) {
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
  // Across nodes: the device ring where every rank's UCX moves device
  // memory, NCCL where it does not, the host where neither can.
  if (!oneNode && request.ringable && ringUsable_) return DevicePathTaken::DeviceRing;
  if (request.ncclCannot.empty() && ncclUsable(exchange, request.timeout)) {
    return DevicePathTaken::Nccl;
  }
  return DevicePathTaken::HostStaging;
}

DevicePathTaken PathSelection::allreduce(void* data, size_t count, DataType type, ReduceOp op,
                                         void* stream, const RecordExchange& exchange,
                                         const CollectiveCall& call) {
  if (config_.cudaDeviceFlags) {
    // Asked for, the flags path runs or raises; chosen by auto, it gives
    // way to the IPC kernels where it cannot (every rank alike: the set-up
    // and the dtype's kernel are the same verdict everywhere).
    const bool asked = config_.cudaAlgorithm == CudaAlgorithm::Flags;
    const bool usable = signalUsable(exchange);
    if (!usable && asked) {
      throw InvalidArgument("ringreduce: RINGREDUCE_CUDA_ALGO=flags cannot run: " +
                            signalFailure_);
    }
    const bool supported = kernelSupports(type, type, op);
    if (!supported && asked) {
      throw InvalidArgument("ringreduce: " + kernelUnsupportedReason(type, type, op));
    }
    if (usable && supported) {
      if (count * elementSize(type) <= signal_->bufferBytes()) {
        return signal_->allreduce(data, data, count, type, op, signalCall(stream, call));
      }
      return allreduceLarge(data, count, type, op, stream, exchange, call);
    }
  }
  Request request(call);
  request.allreduce = true;
  request.ringable = kernelSupports(type, type, op);
  request.bytes = count * elementSize(type);
  request.ncclCannot = NcclCommunicator::unsupportedReason(type, op);
  const DevicePathTaken path = choose(request, exchange);
  switch (path) {
    case DevicePathTaken::DeviceRing:
      return path;
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

bool PathSelection::ringOrNccl(DataType type, ReduceOp op, const RecordExchange& exchange,
                               const CollectiveCall& call) {
  const bool oneNode = sameNode_ && size_ <= kMaxFanout;
  if (config_.cudaAlgorithm != CudaAlgorithm::Auto || oneNode || !ringUsable_ ||
      !kernelSupports(type, type, op) ||
      !NcclCommunicator::unsupportedReason(type, op).empty()) {
    return false;
  }
  // Only a candidate here: an NCCL that cannot be set up (its verdict is
  // the same on every rank) leaves the device ring to run alone, instead of
  // failing an allreduce the ring can do.
  try {
    return ncclUsable(exchange, call.timeout);
  } catch (const std::exception& e) {
    RR_LOG(Warn, rank_, "NCCL could not be set up, the device ring runs alone across nodes: "
                            << e.what());
    return false;
  }
}

DevicePathTaken PathSelection::allreduceAcross(CudaAlgorithm algorithm, void* data,
                                               size_t count, DataType type, ReduceOp op,
                                               void* stream) {
  if (algorithm == CudaAlgorithm::Nccl && nccl_) {
    nccl_->allreduce(data, data, count, type, op, stream);
    return DevicePathTaken::Nccl;
  }
  if (algorithm == CudaAlgorithm::Ring && ringUsable_) return DevicePathTaken::DeviceRing;
  throw Error(std::string("ringreduce: the autotuner's ") + nameOf(algorithm) +
              " cannot run this allreduce");
}

// Larger than the buffers: in place on the ranks' own tensors, each mapped
// by every peer (and held by its owner until the group closes); through the
// buffers, a buffer at a time, when some rank's tensor cannot be shared.
DevicePathTaken PathSelection::allreduceLarge(void* data, size_t count, DataType type,
                                              ReduceOp op, void* stream,
                                              const RecordExchange& exchange,
                                              const CollectiveCall& call) {
  std::string why;
  ExportedRange range = exportRange(device_, data, &why);
  if (range.ok && exportGuard_ && !exportGuard_(data)) range.ok = 0;
  void* tensors[kSignalRanks] = {};
  uint8_t aligned = 0;
  const SignalGroup::Call c = signalCall(stream, call);
  // Shared and mapped on every rank, or on none (tensor_sharing.h): never a
  // rank that launches while a peer could not map.
  if (signal_->sharing().share(data, range, packAligned(data) ? 1 : 0, exchange, tensors,
                               &aligned)) {
    signal_->allreduceInPlace(tensors, count, type, op, aligned != 0, c);
    return DevicePathTaken::FlagsInPlace;
  }
  const size_t esize = elementSize(type);
  const size_t chunk = signal_->bufferBytes() / esize / 16 * 16;
  for (size_t done = 0; done < count; done += chunk) {
    void* part = static_cast<uint8_t*>(data) + done * esize;
    signal_->allreduce(part, part, std::min(chunk, count - done), type, op, c);
  }
  return DevicePathTaken::FlagsTwoShot;
}

DevicePathTaken PathSelection::allreduceOnCaller(const void* input, void* output, size_t count,
                                                 DataType type, ReduceOp op, void* stream,
                                                 const CollectiveCall& call) {
  if (!signal_ || !config_.cudaDeviceFlags ||
      count * elementSize(type) > signal_->bufferBytes() ||
      !kernelSupports(type, type, op)) {
    return DevicePathTaken::HostStaging;
  }
  return signal_->allreduce(input, output, count, type, op, signalCall(stream, call));
}

DevicePathTaken PathSelection::allgatherOnCaller(const void* input, void* output,
                                                 size_t countPerRank, DataType type, void* stream,
                                                 const CollectiveCall& call) {
  if (!signal_ || !config_.cudaDeviceFlags ||
      countPerRank * elementSize(type) > signal_->bufferBytes()) {
    return DevicePathTaken::HostStaging;
  }
  signal_->allgather(input, output, countPerRank, type, signalCall(stream, call));
  return DevicePathTaken::Flags;
}

DevicePathTaken PathSelection::reduceScatterOnCaller(const void* input, void* output,
                                                     size_t countPerRank, DataType type,
                                                     ReduceOp op, void* stream,
                                                     const CollectiveCall& call) {
  if (!signal_ || !config_.cudaDeviceFlags ||
      countPerRank * elementSize(type) * size_ > signal_->bufferBytes() ||
      !kernelSupports(type, type, op)) {
    return DevicePathTaken::HostStaging;
  }
  signal_->reduceScatter(input, output, countPerRank, type, op, signalCall(stream, call));
  return DevicePathTaken::Flags;
}

bool PathSelection::close(const RecordExchange& exchange, std::chrono::milliseconds limit) {
  bool ok = true;
  // The same paths exist on every rank (their set-ups agree), so every rank
  // runs the same exchanges in the same order.
  if (signal_) ok = signal_->close(exchange, limit) && ok;
  if (ipc_) ok = ipc_->close(exchange, limit) && ok;
  if (nccl_) nccl_->close(limit);  // aborted where it cannot finalize: nothing kept
  return ok;
}

// The others need NCCL only to move `type`; a reduce-scatter whose op NCCL
// lacks is staged through the host after the choice.
DevicePathTaken PathSelection::reduceScatter(const void* input, void* output,
                                             size_t countPerRank, DataType type, ReduceOp op,
                                             void* stream, const RecordExchange& exchange,
                                             const CollectiveCall& call) {
  if (config_.cudaDeviceFlags && signalUsable(exchange)) {
    const DevicePathTaken ran =
        reduceScatterOnCaller(input, output, countPerRank, type, op, stream, call);
    if (ran != DevicePathTaken::HostStaging) return ran;
  }
  Request request(call);
  request.ringable = kernelSupports(type, type, op);
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
                                         const RecordExchange& exchange,
                                         const CollectiveCall& call) {
  if (config_.cudaDeviceFlags && signalUsable(exchange)) {
    const DevicePathTaken ran = allgatherOnCaller(input, output, countPerRank, type, stream, call);
    if (ran != DevicePathTaken::HostStaging) return ran;
  }
  Request request(call);
  request.ringable = true;
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
                                         void* stream, const RecordExchange& exchange,
                                         const CollectiveCall& call) {
  Request request(call);
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
