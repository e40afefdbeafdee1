// ProcessGroupRing's set-up, teardown and queueing; the ops are in ops/ (process_group_ring.h)
#include "backend/process_group_ring.h"

#include "backend/caller_work.h"

#include <algorithm>

#include <c10/core/StreamGuard.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/util/Exception.h>
#include <torch/csrc/distributed/c10d/debug.h>

#include "algorithms/checks/collective_check.h"
#include "backend/error_translation.h"
#include "backend/host_staging.h"
#include "backend/ring_options.h"
#include "backend/store_adapter.h"
#include "backend/tensor_checks.h"
#include "backend/work_callbacks.h"
#include "core/base/errors.h"
#include "core/config/settings_agreement.h"
#include "core/math/host_loops.h"
#include "core/observe/latency_probe.h"
#include "core/observe/log.h"
#include "core/observe/timeline.h"
#include "transport/rendezvous/progressing_store.h"
#include "transport/ucx/ucx_transport.h"

namespace ringreduce {

namespace {

Config configFromEnvironment(const std::map<std::string, std::string>& given) {
  try {
    return Config::fromEnvironment(0, given);
  } catch (...) {
    std::rethrow_exception(translateCurrentException());
  }
}

// "allreduce(Float, 1024 elements, reduce op 0)" for mismatch messages.
std::string describeFingerprint(const CollectiveFingerprint& fp) {
  std::string text = c10d::opTypeToString(static_cast<c10d::OpType>(fp.opType)) + "(";
  text += fp.dtype < 0 ? std::string("no tensors")
                       : std::string(c10::toString(static_cast<at::ScalarType>(fp.dtype)));
  text += ", " + std::to_string(fp.numel) + " elements";
  if (fp.root >= 0) text += ", root " + std::to_string(fp.root);
  if (fp.reduceOp == kPremulSumCode) {
    text += ", PREMUL_SUM";
  } else if (fp.reduceOp >= 0) {
    text += std::string(", ") + reduceOpName(static_cast<ReduceOp>(fp.reduceOp));
  }
  return text + ")";
}

// "Float" and the bytes of the collective's elements, for its timeline event.
Engine::Label timelineLabel(const CollectiveFingerprint& fp) {
  if (fp.dtype < 0) return {"none", 0};
  const auto type = static_cast<at::ScalarType>(fp.dtype);
  return {c10::toString(type), static_cast<uint64_t>(fp.numel) * c10::elementSize(type)};
}

}  // namespace

ProcessGroupRing::ProcessGroupRing(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                   std::chrono::milliseconds timeout, std::string groupName,
                                   int globalRank, int ranksOnHostHint,
                                   std::map<std::string, std::string> settings)
    : c10d::Backend(rank, size),
      groupName_((probe::configureFromEnvironment(), std::move(groupName))),
      store_(store),
      globalRank_(globalRank),
      givenSettings_(std::move(settings)),
      config_(configFromEnvironment(givenSettings_)),
      timeoutMs_(timeout.count()) {
  // RINGREDUCE_CHECK_COLLECTIVES or TORCH_DISTRIBUTED_DEBUG=DETAIL. With
  // DETAIL torch also wraps the group in its own checker, which compares op,
  // shapes and dtypes but not reduce ops or roots: ours does all of them.
  const bool checkCollectives =
      config_.checkCollectives || c10d::debug_level() == c10d::DebugLevel::Detail;
  try {
    // A bad RINGREDUCE_HOST_ISA fails the group's creation, not its first
    // reduction on the worker thread.
    (void)hostLoops();
    std::shared_ptr<Timeline> timeline;
    if (!config_.timelinePath.empty()) {
      timeline = Timeline::forProcess(config_.timelinePath, globalRank < 0 ? rank : globalRank);
    }
    auto storeAdapter = std::make_shared<C10dStoreAdapter>(store);
    auto transport = std::make_unique<UcxTransport>(rank, size, storeAdapter, timeout, config_,
                                                    checkCollectives);
    // The address exchange told how many ranks share this machine, which
    // the spin and placement defaults need where no LOCAL_WORLD_SIZE says
    // (Lightning's launcher, mp.spawn, srun).
    ranksOnThisHost_ = std::max(transport->ranksOnThisHost(), ranksOnHostHint);
    storeGeneration_ = transport->storeGeneration();
    config_ = Config::fromEnvironment(ranksOnThisHost_, givenSettings_);
    config_.resolveDeviceFlags(transport->ranksOnThisHost() == size, size);
    transport->adoptConfig(config_);
    Engine::ChannelOpener opener = hostChannelOpener(storeAdapter, *transport, timeout);
    engine_ = std::make_unique<Engine>(std::move(transport), config_, groupName_,
                                       checkCollectives, describeFingerprint,
                                       std::move(timeline), timelineLabel);
    engine_->openChannelWhenFirstNeeded(std::move(opener));
    timing_ = config_.enableTiming;
    if (config_.autotune) tuner_ = std::make_unique<AllreduceTuner>(config_);
    // Across nodes the device ring and NCCL are timed by default: which is
    // faster depends on the network, and only a measurement can say.
    if (config_.autotune || config_.cudaAutotune) {
      cudaTuner_ = std::make_unique<AllreduceTuner>(config_, AllreduceTuner::cudaPaths());
    }
  } catch (...) {
    std::rethrow_exception(translateCurrentException());
  }
  RR_LOG(Info, rank,
         "group '" << groupName_ << "' created: rank " << rank << " of " << size << ", timeout "
                   << timeout.count() << " ms, segment " << config_.segmentBytes << " B, "
                   << ranksOnThisHost_ << " ranks on this machine, "
                   << (config_.spinYields ? "yielding" : "spinning") << " waits, worker "
                   << (config_.workerFollowsCaller ? "beside its caller" : "unbound"));
}

ProcessGroupRing::~ProcessGroupRing() { shutdown(); }

Engine::ChannelOpener ProcessGroupRing::hostChannelOpener(std::shared_ptr<KeyValueStore> store,
                                                          const UcxTransport& transport,
                                                          std::chrono::milliseconds timeout) {
  // Every rank decides alike: the address exchange told each how many ranks
  // share its host.
  if (size_ < 2 || transport.ranksOnThisHost() != size_) return nullptr;
  HostChannel::Options options;
  options.bufferBytes = config_.hostChannelBytes;
  options.yields = config_.spinYields;
  options.callerSpin = std::chrono::microseconds(config_.waitSpinMicroseconds);
  options.adaptiveSpin = config_.adaptiveSpin;
  options.separateCores = config_.separateCores;
  options.stores = config_.channelStores;
  options.crossMemory = config_.crossMemory;
  // What decides which way a collective runs must agree on every rank.
  for (const auto& [name, value] : config_.describe()) {
    if (name == "RINGREDUCE_ALGORITHM" || name == "RINGREDUCE_WIRE_DTYPE") {
      options.agreedSettings += name + "=" + value + "\n";
    }
  }
  const bool checks =
      config_.checkCollectives || c10d::debug_level() == c10d::DebugLevel::Detail;
  options.agreedSettings += collectiveCheckSetting(checks) + "\n";
  // Opened at the group's first host collective, on the thread that runs
  // the queue (Engine::needChannel).
  return [store, prefix = transport.storePrefix() + "host_channel/", rank = rank_, size = size_,
          options, timeout](Transport& driven) -> std::unique_ptr<HostChannel> {
    // A peer that left or died will not come: no channel then, and the
    // collective that asked for it runs over UCX, which names that peer.
    const OpContext setUp("host channel set-up", 0, timeout);
    ProgressingStore waiting(*store, driven, [&driven, &setUp, rank, size] {
      for (int peer = 0; peer < size; ++peer) {
        if (peer != rank && driven.peerLeft(peer)) {
          throw TransportError("rank " + std::to_string(peer) + " has left the group");
        }
      }
      driven.checkPeersAlive(-1, setUp);
    });
    std::string why;
    std::unique_ptr<HostChannel> channel;
    try {
      channel = HostChannel::open(waiting, prefix, rank, size, options, timeout, &why);
    } catch (const InvalidArgument&) {
      throw;  // the ranks' settings differ: the group cannot go on
    } catch (const std::exception& e) {
      why = e.what();
    }
    if (channel) {
      RR_LOG(Info, rank, "host channel: " << channel->bufferBytes() << " B per buffer");
    } else {
      RR_LOG(Info, rank, "no host channel (small collectives take UCX): " << why);
    }
    return channel;
  };
}

c10::intrusive_ptr<c10d::Backend::Options> ProcessGroupRing::getBackendOptions() {
  auto options = c10::make_intrusive<RingOptions>(timeout());
  options->group_name = groupName_;
  options->config = givenSettings_;
  return options;
}

void ProcessGroupRing::performNocolorSplit(c10::Device device) {
  TORCH_CHECK_VALUE(device.is_cpu() || device.is_cuda(),
                    "ringreduce: perform_nocolor_split on rank ", rank_,
                    ": the group serves CPU and CUDA tensors, not ", device);
}

c10::intrusive_ptr<c10d::Backend> ProcessGroupRing::split(
    const c10::intrusive_ptr<c10d::Store>& store, const std::vector<int>& ranks,
    const c10::intrusive_ptr<Options>& opts) {
  std::vector<int> members = ranks;
  std::sort(members.begin(), members.end());
  for (int member : members) {
    TORCH_CHECK_VALUE(member >= 0 && member < size_, "ringreduce: split_group on rank ", rank_,
                      ": rank ", member, " is not in the parent group of size ", size_);
  }
  const auto me = std::find(members.begin(), members.end(), rank_);
  if (me == members.end()) return nullptr;
  const auto childTimeout = opts ? opts->timeout : timeout();
  std::string childName = opts && !opts->group_name.empty()
                              ? opts->group_name
                              : groupName_ + ":split:" + std::to_string(members.front());
  // Our own options (deep-copied from `options` by torch's split_group) say
  // the child's settings; others (torch's base Options) leave ours.
  const auto* ours = dynamic_cast<const RingOptions*>(opts.get());
  return c10::make_intrusive<ProcessGroupRing>(store, static_cast<int>(me - members.begin()),
                                               static_cast<int>(members.size()), childTimeout,
                                               std::move(childName), -1, ranksOnThisHost_,
                                               ours ? ours->config : givenSettings_);
}

void ProcessGroupRing::abort() {
  engine_->abort("process group '" + groupName_ + "' was aborted on rank " +
                 std::to_string(rank_) + " (ProcessGroup.abort())");
  shutdown();
}

void ProcessGroupRing::shutdownAtExit() {
  if (engine_->busy()) {
    engine_->abort("process group '" + groupName_ + "': rank " + std::to_string(rank_) +
                   " is exiting with collectives in flight");
  }
  shutdown();
}

void ProcessGroupRing::registerOnCompletionHook(
    std::function<void(std::shared_ptr<c10d::WorkInfo>)>&& hook) {
  hooks_->add(std::move(hook));
}

void ProcessGroupRing::waitForPendingWorks() {
  engine_->waitForQueued();
  hooks_->drain();
}

void ProcessGroupRing::shutdown() {
  // The device path goes after the executor (its last tasks may use it) and
  // before the transport, which its cross-rank close still uses: every rank
  // closes its mappings of the peers' memory before any rank frees its own.
  // After a failure or a shrink its resources are kept, since freeing them
  // could block on a peer that never comes.
  const bool stopped = engine_->shutdown([this] {
    if (!devicePath_) return;
    devicePathMade_ = nullptr;
    if (engine_->failed() || engine_->givenUp() || shrunk_) {
      devicePath_->abandon();
    } else {
      const auto limit = std::min<std::chrono::milliseconds>(timeout(), std::chrono::seconds(60));
      try {
        devicePath_->close(engine_->closingExchange(limit), limit);
      } catch (const std::exception& e) {
        RR_LOG(Warn, rank_, "closing the CUDA paths: " << e.what());
        devicePath_->abandon();
      }
    }
    devicePath_.reset();
  });
  hooks_->stop();
  if (stopped) RR_LOG(Info, rank_, "group '" << groupName_ << "' shut down");
}

c10::intrusive_ptr<c10d::Work> ProcessGroupRing::enqueue(const Staged& staged, c10d::OpType type,
                                                         const char* name,
                                                         const CallOptions& call,
                                                         std::vector<at::Tensor> outputs,
                                                         const std::string& summary, Body body,
                                                         CheckedArgs checked, uint64_t seqCount,
                                                         bool neighbourCheck) {
  const std::chrono::milliseconds timeout =
      call.timeout == c10d::kUnsetTimeout ? this->timeout() : call.timeout;
  const CollectiveFingerprint fp = fingerprintOf(type, outputs, checked);
  const Staged& device = staged;
  if (device) outputs = HostStaging::deviceOutputs(*device, outputs);
  c10::intrusive_ptr<WorkRing> work;
  try {
    // A collective on host memory: the group's channel opens ahead of the
    // first (a CUDA group's staged calls do not ask for it).
    if (!device) engine_->needChannel();
    // A CUDA call's wait() never runs the host part (work_ring.h): nobody
    // but the worker will, so it starts at once.
    const Runner runner = device            ? Runner::Worker
                          : call.callerWaits ? Runner::Caller
                                             : Runner::CallerOrWorker;
    engine_->submitCollective(name, timeout, runner, fp, seqCount,
                              summary + (device ? " on " + device->device.str() : std::string()),
                              std::move(body), [&](uint64_t seq) {
                                work = c10::make_intrusive<WorkRing>(
                                    rank_, type, seq, std::move(outputs), device.get(),
                                    engine_->executor(), timing_.load());
                                return std::make_shared<WorkCallbacks>(work, device, hooks_);
                              },
                              neighbourCheck);
  } catch (...) {
    std::rethrow_exception(translateCurrentException());
  }
  probe::mark(ProbePoint::Queued);
  return work;
}

CollectiveFingerprint ProcessGroupRing::fingerprintOf(c10d::OpType type,
                                                      at::TensorList outputs,
                                                      const CheckedArgs& checked) const {
  CollectiveFingerprint fp;
  fp.opType = static_cast<int32_t>(type);
  fp.dtype = checked.dtype >= 0 ? checked.dtype
             : outputs.empty()  ? -1
                                : static_cast<int32_t>(outputs[0].scalar_type());
  fp.numel = checked.numel;
  if (fp.numel < 0) {
    fp.numel = 0;
    for (const at::Tensor& t : outputs) fp.numel += t.numel();
  }
  fp.root = checked.root;
  fp.reduceOp = checked.reduceOp;
  return fp;
}

CollectiveFingerprint ProcessGroupRing::fingerprintOf(c10d::OpType type, const at::Tensor& output,
                                                      const CheckedArgs& checked) const {
  CollectiveFingerprint fp;
  fp.opType = static_cast<int32_t>(type);
  fp.dtype = checked.dtype >= 0 ? checked.dtype : static_cast<int32_t>(output.scalar_type());
  fp.numel = checked.numel < 0 ? output.numel() : checked.numel;
  fp.root = checked.root;
  fp.reduceOp = checked.reduceOp;
  return fp;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupRing::enqueuePointToPoint(
    const Staged& staged, c10d::OpType type, const char* name, std::vector<at::Tensor> tensors,
    const OpFields& fields, Post post) {
  const Staged& device = staged;
  if (device) tensors = HostStaging::deviceOutputs(*device, tensors);
  c10::intrusive_ptr<WorkRing> work;
  try {
    engine_->submitPointToPoint(name, timeout(),
                                device ? Runner::Worker : Runner::CallerOrWorker, fields,
                                std::move(post), [&](uint64_t seq) {
      work = c10::make_intrusive<WorkRing>(rank_, type, seq, std::move(tensors), device.get(),
                                           engine_->executor(), timing_.load());
      return std::make_shared<WorkCallbacks>(work, device);
    });
  } catch (...) {
    std::rethrow_exception(translateCurrentException());
  }
  pointToPoint_.add(work);
  return work;
}

c10::Stream ProcessGroupRing::internalStream(c10::Device device) {
  std::lock_guard<std::mutex> lock(streamMutex_);
  for (const auto& [d, stream] : internalStreams_) {
    if (d == device) return stream;
  }
  // One stream per device for the group's life, as ProcessGroupNCCL keeps,
  // and its own: two groups drawing the same pooled stream could queue
  // their cross-rank barriers in different orders on different ranks.
  const c10::Stream stream = DevicePath::ownStream(device);
  internalStreams_.emplace_back(device, stream);
  return stream;
}

void ProcessGroupRing::startCoalescing() {
  try {
    engine_->startCoalescing();
  } catch (...) {
    std::rethrow_exception(translateCurrentException());
  }
}

void ProcessGroupRing::endBlockTorchLeftOpen(const char* op) {
  if (!engine_->coalescing()) return;
  engine_->endOpenBlock(op);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupRing::endCoalescing() {
  c10::intrusive_ptr<WorkRing> combined;
  bool completeNow = false;
  try {
    completeNow = engine_->endCoalescing([&](const std::vector<std::shared_ptr<OperationCallbacks>>& parts) {
      std::vector<at::Tensor> outputs;
      // CUDA: every part ran on the same internal stream; the combined work
      // completes after the last of them.
      std::shared_ptr<DeviceCall> device;
      for (const auto& part : parts) {
        const auto& callbacks = static_cast<const WorkCallbacks&>(*part);
        for (const at::Tensor& t : callbacks.work()->result()) outputs.push_back(t);
        if (callbacks.device()) device = callbacks.device();
      }
      combined = c10::make_intrusive<WorkRing>(rank_, c10d::OpType::COALESCED, 0, outputs,
                                               device.get(), engine_->executor(), timing_.load());
      // Its duration runs from its first part's start (an empty block's
      // from now).
      if (parts.empty()) {
        combined->markStarted();
      } else {
        combined->startsWith(static_cast<const WorkCallbacks&>(*parts.front()).work());
      }
      return std::make_shared<WorkCallbacks>(combined, nullptr);
    });
  } catch (...) {
    std::rethrow_exception(translateCurrentException());
  }
  if (completeNow) {
    // Its one call ran on the caller's thread (the device coalescing
    // manager's): a Work that is complete as it is made.
    return c10::make_intrusive<CallerWork>(rank_, c10d::OpType::COALESCED, 0, at::Tensor(),
                                           std::nullopt, CallerTiming{});
  }
  return combined;
}

}  // namespace ringreduce
