// ProcessGroupRing: the c10d::Backend behind dist.init_process_group("ringreduce").
//
// Each group owns a UCX transport (its own context, worker and endpoints) and
// an executor thread. Collectives are checked on the caller's thread, given a
// sequence number, and queued; the executor runs them in issue order and
// completes their Work and Future. Every wait is bounded by the op's timeout
// (or the group's). After a timeout or transport failure the peers are out of
// step, so the group fails every later call at once with the original reason.
#pragma once

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "algorithms/workspace.h"
#include "backend/work_ring.h"
#include "core/config.h"
#include "core/data_type.h"
#include "core/reduce_op.h"
#include "core/op_context.h"
#include "transport/executor.h"
#include "transport/ucx_transport.h"

namespace ringreduce {

class ProcessGroupRing : public c10d::Backend {
 public:
  ProcessGroupRing(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                   std::chrono::milliseconds timeout, std::string groupName);
  ~ProcessGroupRing() override;

  const std::string getBackendName() const override { return "ringreduce"; }
  void setTimeout(std::chrono::milliseconds timeout) override { timeoutMs_ = timeout.count(); }
  std::chrono::milliseconds timeout() const { return std::chrono::milliseconds(timeoutMs_.load()); }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                        const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
      at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                        std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                         std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& outputSplits,
                                               std::vector<int64_t>& inputSplits,
                                               const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs,
                                          std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override;

  // Runs what is queued, then releases the executor and the UCX resources.
  // Later calls raise. Called by destroy_process_group() and the destructor.
  void shutdown() override;

 private:
  using Body = std::function<void(const OpContext&)>;

  c10::intrusive_ptr<c10d::Work> enqueue(c10d::OpType type, const char* name,
                                         std::chrono::milliseconds requestedTimeout,
                                         std::vector<at::Tensor> outputs,
                                         const std::string& summary, Body body);
  void run(WorkRing& work, const char* name, const OpContext& op, const Body& body);
  void reduceScatterFlat(const OpContext& ctx, at::Tensor flat, const at::Tensor& output,
                         DataType type, ReduceOp op);

  const std::string groupName_;
  const Config config_;
  std::atomic<int64_t> timeoutMs_;
  std::unique_ptr<UcxTransport> transport_;
  std::unique_ptr<Executor> executor_;
  Workspace workspace_;     // used by the executor thread only
  std::string failure_;     // executor thread only: why the group is unusable
  std::mutex submitMutex_;  // orders sequence numbers with queue order
  uint64_t nextSeq_ = 0;
};

}  // namespace ringreduce
