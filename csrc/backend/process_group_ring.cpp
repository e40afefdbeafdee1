#include "backend/process_group_ring.h"

#include <c10/core/StreamGuard.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/util/Exception.h>
#include <torch/csrc/distributed/c10d/debug.h>

#include "algorithms/collective_check.h"
#include "backend/error_translation.h"
#include "backend/host_staging.h"
#include "backend/store_adapter.h"
#include "core/errors.h"
#include "core/log.h"
#include "transport/tag.h"

namespace ringreduce {

namespace {

Config configFromEnvironment() {
  try {
    return Config::fromEnvironment();
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
  if (fp.reduceOp >= 0) {
    text += std::string(", ") + reduceOpName(static_cast<ReduceOp>(fp.reduceOp));
  }
  return text + ")";
}

// The 8 bits of a fingerprint that travel in every message tag (FNV-1a).
uint8_t fingerprintByte(const CollectiveFingerprint& fp) {
  const int64_t fields[] = {fp.opType, fp.dtype, fp.numel, fp.root, fp.reduceOp};
  uint32_t hash = 2166136261u;
  for (int64_t field : fields) {
    for (int i = 0; i < 8; ++i) {
      hash ^= static_cast<uint8_t>(static_cast<uint64_t>(field) >> (8 * i));
      hash *= 16777619u;
    }
  }
  return static_cast<uint8_t>(hash ^ (hash >> 8) ^ (hash >> 16) ^ (hash >> 24));
}

}  // namespace

ProcessGroupRing::ProcessGroupRing(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                   int size, std::chrono::milliseconds timeout,
                                   std::string groupName)
    : c10d::Backend(rank, size),
      groupName_(std::move(groupName)),
      config_(configFromEnvironment()),
      checkCollectives_(config_.checkCollectives ||
                        c10d::debug_level() == c10d::DebugLevel::Detail),
      timeoutMs_(timeout.count()) {
  try {
    transport_ = std::make_unique<UcxTransport>(
        rank, size, std::make_shared<C10dStoreAdapter>(store), timeout, config_);
    executor_ = std::make_unique<Executor>(*transport_);
  } catch (...) {
    executor_.reset();
    transport_.reset();
    std::rethrow_exception(translateCurrentException());
  }
  RR_LOG(Info, rank, "group '" << groupName_ << "' created: rank " << rank << " of " << size
                               << ", timeout " << timeout.count() << " ms, segment "
                               << config_.segmentBytes << " B");
}

ProcessGroupRing::~ProcessGroupRing() { shutdown(); }

uint64_t ProcessGroupRing::getSequenceNumberForGroup() {
  std::lock_guard<std::mutex> lock(submitMutex_);
  return nextSeq_;
}

void ProcessGroupRing::shutdown() {
  {
    std::lock_guard<std::mutex> lock(submitMutex_);
    if (!accepting_ || executor_ == nullptr) return;
    accepting_ = false;  // enqueue refuses new work from here on
  }
  // Runs what was queued (those tasks still use executor_ and transport_),
  // fails pending sends/receives and joins the thread; only then may the
  // executor and the transport go.
  executor_->stop();
  executor_.reset();
  if (devicePath_ && !failure_.empty()) devicePath_->abandon();
  devicePath_.reset();
  transport_.reset();
  RR_LOG(Info, rank_, "group '" << groupName_ << "' shut down");
}

OpContext ProcessGroupRing::Operation::context() const {
  OpContext op(name, seq, timeout);  // the deadline starts when the op starts
  op.pointToPoint = static_cast<bool>(post);
  op.fingerprint = fingerprint;
  return op;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupRing::enqueue(
    c10d::OpType type, const char* name, std::chrono::milliseconds requestedTimeout,
    std::vector<at::Tensor> outputs, const std::string& summary, Body body, CheckedArgs checked,
    uint64_t seqCount) {
  const std::chrono::milliseconds timeout =
      requestedTimeout == c10d::kUnsetTimeout ? this->timeout() : requestedTimeout;
  std::lock_guard<std::mutex> lock(submitMutex_);
  TORCH_CHECK(accepting_, "ringreduce: ", name, " on rank ", rank_, ": process group '",
              groupName_, "' has been shut down");
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
  if (checkCollectives_) {
    // The check runs first with the op's own sequence number and a neutral
    // tag fingerprint (it must see the mismatch to name it); the body's
    // parts follow it.
    body = [this, fp, inner = std::move(body)](const OpContext& ctx) {
      OpContext neutral = ctx;
      neutral.fingerprint = 0;
      verifySameCollective(*transport_, neutral, fp, describeFingerprint, config_);
      inner(ctx.part(1));
    };
    seqCount += 1;
  }
  const uint64_t seq = nextSeq_ + 1;
  nextSeq_ += seqCount;
  std::shared_ptr<DeviceCall> device = HostStaging::takeAttached();
  if (device) outputs = HostStaging::deviceOutputs(*device, outputs);
  auto work = c10::make_intrusive<WorkRing>(rank_, type, seq, std::move(outputs), device.get());
  RR_LOG(Info, rank_, groupName_ << " " << name << " #" << seq << ": " << summary
                                 << (device ? " on " + device->device.str() : std::string()));
  submit(Operation{work, name, seq, timeout, std::move(body), nullptr, seqCount,
                   fingerprintByte(fp), std::move(device)});
  return work;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupRing::enqueuePointToPoint(
    c10d::OpType type, const char* name, std::vector<at::Tensor> tensors,
    const std::string& summary, Post post) {
  std::lock_guard<std::mutex> lock(submitMutex_);
  TORCH_CHECK(accepting_, "ringreduce: ", name, " on rank ", rank_, ": process group '",
              groupName_, "' has been shut down");
  const uint64_t seq = ++nextP2PSeq_;
  std::shared_ptr<DeviceCall> device = HostStaging::takeAttached();
  if (device) tensors = HostStaging::deviceOutputs(*device, tensors);
  auto work = c10::make_intrusive<WorkRing>(rank_, type, seq, std::move(tensors), device.get());
  RR_LOG(Info, rank_, groupName_ << " " << name << " p2p#" << seq << ": " << summary);
  submit(Operation{work, name, seq, timeout(), nullptr, std::move(post), 1, 0,
                   std::move(device)});
  return work;
}

// Called with submitMutex_ held.
void ProcessGroupRing::submit(Operation operation) {
  if (coalescing_) {
    coalesced_.push_back(std::move(operation));
    return;
  }
  executor_->submit([this, operation = std::move(operation)] {
    if (operation.post) {
      startPointToPoint(operation);
    } else {
      runCollective(operation);
    }
  });
}

std::exception_ptr ProcessGroupRing::unusableError(const OpContext& op) const {
  return distBackendError("ringreduce: " + op.describe() + " on rank " + std::to_string(rank_) +
                          " was not run: process group '" + groupName_ +
                          "' is unusable after an earlier failure: " + failure_);
}

void ProcessGroupRing::runCollective(const Operation& operation) {
  const OpContext op = operation.context();
  if (!failure_.empty()) {
    operation.work->markFailed(unusableError(op));
    return;
  }
  try {
    // CUDA: everything below runs with the internal stream current.
    std::optional<c10::StreamGuard> onInternalStream;
    if (operation.device) {
      onInternalStream.emplace(operation.device->stream);
      startDeviceCall(*operation.device, op);
    }
    operation.body(op);
    if (operation.device) finishDeviceCall(*operation.device);
    operation.work->markSucceeded();
  } catch (const std::exception& e) {
    // Abandon what is still posted so no late message lands in the caller's
    // tensors, and stop using a group whose ranks are out of step.
    for (uint64_t i = 0; i < operation.seqCount; ++i) transport_->abandonOutstanding(op.part(i));
    if (dynamic_cast<const InvalidArgument*>(&e) == nullptr && failure_.empty()) {
      failure_ = e.what();
      // The peers may be waiting on this rank: let them fail now too.
      transport_->announceFailure(failure_);
    }
    RR_LOG(Warn, rank_, e.what());
    operation.work->markFailed(translateCurrentException());
  }
}

void ProcessGroupRing::startPointToPoint(const Operation& operation) {
  const OpContext op = operation.context();
  if (!failure_.empty()) {
    operation.work->markFailed(unusableError(op));
    return;
  }
  auto message = std::make_shared<PostedMessage>();
  try {
    *message = post(operation, op);
  } catch (...) {
    transport_->abandonOutstanding(op);
    operation.work->markFailed(translateCurrentException());
    return;
  }
  c10::intrusive_ptr<WorkRing> work = operation.work;
  if (pollMessage(*work, op, *message, false)) return;
  executor_->addPoller([this, work, op, message](bool abandon) {
    return pollMessage(*work, op, *message, abandon);
  });
}

ProcessGroupRing::PostedMessage ProcessGroupRing::post(const Operation& operation,
                                                      const OpContext& op) {
  if (!operation.device) return operation.post(op);
  std::shared_ptr<DeviceCall> device = operation.device;
  c10::StreamGuard onInternalStream(device->stream);
  startDeviceCall(*device, op);  // a send's data reaches its host copy first
  PostedMessage message = operation.post(op);
  message.finish = [inner = std::move(message.finish), device] {
    if (inner) inner();
    c10::StreamGuard onInternalStream(device->stream);
    finishDeviceCall(*device);  // a receive's data goes back to the device
  };
  return message;
}

c10::Stream ProcessGroupRing::internalStream(c10::Device device) {
  std::lock_guard<std::mutex> lock(streamMutex_);
  for (const auto& [d, stream] : internalStreams_) {
    if (d == device) return stream;
  }
  // One stream per device for the group's life, as ProcessGroupNCCL keeps.
  const c10::Stream stream =
      c10::impl::getDeviceGuardImpl(device.type())->getStreamFromGlobalPool(device, false);
  internalStreams_.emplace_back(device, stream);
  return stream;
}

// Completes `work` when its message is done, its deadline passed, or the
// group is shutting down. True once the work is completed either way.
bool ProcessGroupRing::pollMessage(WorkRing& work, const OpContext& op, PostedMessage& message,
                                   bool abandon) {
  try {
    if (abandon) {
      transport_->abandon(message.request);
      work.markFailed(distBackendError("ringreduce: " + op.describe() + " on rank " +
                                       std::to_string(rank_) + " was abandoned: process group '" +
                                       groupName_ + "' was shut down"));
      return true;
    }
    if (!transport_->test(message.request, op)) {
      transport_->checkPeersAlive(message.request.peer, op);
      if (Clock::now() < op.deadline) return false;
      const std::string reason = transport_->describeTimeout(message.request, op);
      transport_->abandon(message.request);
      work.markFailed(distBackendError(reason));
      return true;
    }
    if (message.finish) message.finish();
    if (message.request.isRecv) work.setSourceRank(tagSourceRank(message.request.senderTag));
    work.markSucceeded();
  } catch (...) {
    transport_->abandon(message.request);
    work.markFailed(translateCurrentException());
  }
  return true;
}

void ProcessGroupRing::startCoalescing() {
  std::lock_guard<std::mutex> lock(submitMutex_);
  TORCH_CHECK(!coalescing_, "ringreduce: startCoalescing on rank ", rank_,
              ": already coalescing (nested coalescing managers are not supported)");
  coalescing_ = true;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupRing::endCoalescing() {
  std::lock_guard<std::mutex> lock(submitMutex_);
  TORCH_CHECK(coalescing_, "ringreduce: endCoalescing on rank ", rank_,
              " without startCoalescing");
  coalescing_ = false;
  auto operations = std::make_shared<std::vector<Operation>>(std::move(coalesced_));
  coalesced_.clear();
  std::vector<at::Tensor> outputs;
  for (const Operation& operation : *operations) {
    for (const at::Tensor& t : operation.work->result()) outputs.push_back(t);
  }
  // CUDA: every part ran on the same internal stream; the combined work
  // completes after the last of them.
  const DeviceCall* device = nullptr;
  for (const Operation& operation : *operations) {
    if (operation.device) device = operation.device.get();
  }
  auto combined =
      c10::make_intrusive<WorkRing>(rank_, c10d::OpType::COALESCED, 0, outputs, device);
  TORCH_CHECK(accepting_, "ringreduce: endCoalescing on rank ", rank_,
              ": process group '", groupName_, "' has been shut down");
  RR_LOG(Info, rank_, groupName_ << " coalesced " << operations->size() << " operation(s)");
  executor_->submit([this, operations, combined] { runCoalesced(*operations, *combined); });
  return combined;
}

// Collectives run in order; sends and receives are all posted first and then
// waited for together, so a batch (batch_isend_irecv) never deadlocks on the
// order of its parts.
void ProcessGroupRing::runCoalesced(std::vector<Operation>& operations, WorkRing& combined) {
  std::exception_ptr firstError;
  std::vector<std::pair<Operation*, PostedMessage>> posted;
  for (Operation& operation : operations) {
    if (!operation.post) {
      runCollective(operation);
      if (!firstError && operation.work->exception()) firstError = operation.work->exception();
      continue;
    }
    const OpContext op = operation.context();
    try {
      if (!failure_.empty()) std::rethrow_exception(unusableError(op));
      posted.emplace_back(&operation, post(operation, op));
    } catch (...) {
      transport_->abandonOutstanding(op);
      operation.work->markFailed(translateCurrentException());
      if (!firstError) firstError = operation.work->exception();
    }
  }
  for (auto& [operation, message] : posted) {
    const OpContext op = operation->context();
    while (!pollMessage(*operation->work, op, message, false)) {
      if (transport_->progress() == 0) transport_->sleepUntilEvent(-1, 1);
    }
    if (!firstError && operation->work->exception()) firstError = operation->work->exception();
  }
  if (firstError) {
    combined.markFailed(firstError);
  } else {
    combined.markSucceeded();
  }
}

}  // namespace ringreduce
