#include "backend/process_group_ring.h"

#include <c10/util/Exception.h>

#include "backend/error_translation.h"
#include "backend/store_adapter.h"
#include "core/errors.h"
#include "core/log.h"

namespace ringreduce {

namespace {

Config configFromEnvironment() {
  try {
    return Config::fromEnvironment();
  } catch (...) {
    std::rethrow_exception(translateCurrentException());
  }
}

}  // namespace

ProcessGroupRing::ProcessGroupRing(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                   int size, std::chrono::milliseconds timeout,
                                   std::string groupName)
    : c10d::Backend(rank, size),
      groupName_(std::move(groupName)),
      config_(configFromEnvironment()),
      timeoutMs_(timeout.count()) {
  try {
    C10dStoreAdapter adapter(store);
    transport_ = std::make_unique<UcxTransport>(rank, size, adapter, timeout, config_);
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

void ProcessGroupRing::shutdown() {
  std::unique_ptr<Executor> executor;
  std::unique_ptr<UcxTransport> transport;
  {
    std::lock_guard<std::mutex> lock(submitMutex_);
    executor = std::move(executor_);
    transport = std::move(transport_);
  }
  if (executor == nullptr) return;
  executor.reset();  // drains the queue and joins the thread first
  transport.reset();
  RR_LOG(Info, rank_, "group '" << groupName_ << "' shut down");
}

c10::intrusive_ptr<c10d::Work> ProcessGroupRing::enqueue(
    c10d::OpType type, const char* name, std::chrono::milliseconds requestedTimeout,
    std::vector<at::Tensor> outputs, const std::string& summary, Body body) {
  const std::chrono::milliseconds timeout =
      requestedTimeout == c10d::kUnsetTimeout ? this->timeout() : requestedTimeout;
  std::lock_guard<std::mutex> lock(submitMutex_);
  TORCH_CHECK(executor_ != nullptr, "ringreduce: ", name, " on rank ", rank_, ": process group '",
              groupName_, "' has been shut down");
  const uint64_t seq = ++nextSeq_;
  auto work = c10::make_intrusive<WorkRing>(rank_, type, seq, std::move(outputs));
  RR_LOG(Info, rank_, groupName_ << " " << name << " #" << seq << ": " << summary);
  executor_->submit([this, work, name, seq, timeout, body = std::move(body)] {
    run(*work, name, OpContext(name, seq, timeout), body);
  });
  return work;
}

void ProcessGroupRing::run(WorkRing& work, const char* name, const OpContext& op,
                           const Body& body) {
  if (!failure_.empty()) {
    work.markFailed(distBackendError("ringreduce: " + op.describe() + " on rank " +
                                     std::to_string(rank_) + " was not run: process group '" +
                                     groupName_ + "' is unusable after an earlier failure: " +
                                     failure_));
    return;
  }
  try {
    body(op);
    work.markSucceeded();
  } catch (const std::exception& e) {
    // Abandon what is still posted so no late message lands in the caller's
    // tensors, and stop using a group whose ranks are out of step.
    transport_->abandonOutstanding(op);
    if (dynamic_cast<const InvalidArgument*>(&e) == nullptr) failure_ = e.what();
    RR_LOG(Warn, rank_, e.what());
    work.markFailed(translateCurrentException());
  }
}

}  // namespace ringreduce
