// ProcessGroupRing: the c10d::Backend behind dist.init_process_group("ringreduce").
//
// The c10d overrides: each checks its arguments on the caller's thread, maps
// tensors to buffers (staging CUDA tensors through the host where no device
// path applies) and hands the engine (engine/engine.h) a body that runs the
// algorithms, with a WorkRing to complete. The engine owns the transport
// (UCX: its own context, worker and endpoints per group), the executor
// thread, the sequence numbers and the failure state.
#pragma once

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "algorithms/allreduce.h"
#include "algorithms/tuning/autotune.h"
#include "algorithms/comm.h"
#include "algorithms/pairwise_exchange.h"
#include "algorithms/workspace.h"
#include "backend/call_options.h"
#include "backend/completion_hooks.h"
#include "backend/device_path.h"
#include "backend/host_staging.h"
#include "backend/point_to_point_in_flight.h"
#include "backend/tensor_checks.h"
#include "backend/work_ring.h"
#include "backend/work_timing.h"
#include "core/config/config.h"
#include "core/base/data_type.h"
#include "core/base/reduce_op.h"
#include "core/base/op_context.h"
#include "engine/engine.h"
#include "engine/function_ref.h"
#include "engine/op_fields.h"

namespace ringreduce {

class UcxTransport;

// What the collective check (algorithms/checks/collective_check.h) compares besides
// the op type, the first output's dtype and the outputs' element count (when
// numel is not given).
struct CheckedArgs {
  int64_t root = -1;
  int reduceOp = -1;
  int64_t numel = -1;  // 0 where ranks legitimately differ (uneven all-to-all)
  int dtype = -1;      // -1: the first output's
};

class ProcessGroupRing : public c10d::Backend {
 public:
  // globalRank: this process's rank in the default group (names its
  // RINGREDUCE_TIMELINE file); -1: `rank`. ranksOnHostHint: the most ranks
  // on this machine that another live group of this process counted (a
  // subgroup's members are not all the processes that share the cores);
  // the defaults that depend on it take the larger of it and this group's
  // own count where torchrun's LOCAL_WORLD_SIZE is not set. `settings`:
  // RINGREDUCE_* settings given to the group (its pg_options' config,
  // ring_options.h), over the environment.
  ProcessGroupRing(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                   std::chrono::milliseconds timeout, std::string groupName,
                   int globalRank = -1, int ranksOnHostHint = 0,
                   std::map<std::string, std::string> settings = {});
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
  // Blocks the caller; raises naming the ranks that did not arrive.
  void monitoredBarrier(const c10d::BarrierOptions& opts, bool waitAllRanks) override;
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

  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dstRank,
                                      int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int srcRank,
                                      int tag) override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors, int tag) override;

  // Coalesced forms: one queued operation each. allreduce_coalesced fuses
  // tensors of one dtype into a single ring allreduce (tensor fusion).
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
      std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(
      std::vector<std::vector<at::Tensor>>& outputLists, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::ReduceScatterOptions& opts) override;

  // ProcessGroup.split_group: a child group over some of this group's ranks,
  // created on the store torch hands over (a prefix of this group's). A rank
  // outside `ranks` gets no group (nullptr), as ProcessGroupNCCL's do.
  bool supportsSplitting() const override { return true; }
  c10::intrusive_ptr<c10d::Backend> split(const c10::intrusive_ptr<c10d::Store>& store,
                                          const std::vector<int>& ranks,
                                          const c10::intrusive_ptr<Options>& opts) override;
  // What a split child inherits: the timeout, the name and the settings
  // given (a RingOptions; Python's `options`, which torch deep-copies).
  c10::intrusive_ptr<Options> getBackendOptions() override;
  // A rank outside a new group made from this one while it is bound to a
  // device (torch's new_group then calls this where NCCL must join its
  // parent communicator's split). Our groups are made by their members
  // alone, on the new group's own store keys, so taking part is doing
  // nothing; raises for a device the backend does not serve.
  void performNocolorSplit(c10::Device device);

  // Work.get_duration() for every collective issued from now on, and only
  // for those (work_timing.h): CUDA events, and host times from the start
  // to the end of host collectives. Also on with RINGREDUCE_ENABLE_TIMING.
  void enableCollectivesTiming() override { timing_ = true; }

  // dist.shrink_group (backend/shrink.cpp): a new group of this group's
  // ranks but `ranksToExclude`, made on this group's store by the ranks
  // that stay, after this group's queued work and its sends and receives
  // in flight have run (SHRINK_DEFAULT) or been aborted (SHRINK_ABORT). It keeps this group's timeout, settings
  // and timing but what optsOverride says. Within that timeout or a
  // DistBackendError naming the ranks that did not come.
  bool supportsShrinking() const override { return true; }
  c10::intrusive_ptr<c10d::Backend> shrink(const std::vector<int64_t>& ranksToExclude,
                                           int shrinkFlags,
                                           const c10::intrusive_ptr<Options>& optsOverride) override;

  // torch's coalescing manager: operations issued between the two calls
  // are held back and run as one queued operation. torch calls these for
  // every backend; supportsCoalescing() only steers batch_isend_irecv, which
  // then issues its sends and receives one by one, each with its own Work,
  // as its documentation says and as with gloo. Ours never block on their
  // peer (posted, then completed by a poller), so the order of a batch's
  // parts cannot deadlock, and a block around them cost 20-25 us more per
  // batch here (torch's manager and ours; benchmarks/RESULTS.md,
  // point-to-point) than the same two calls without it.
  bool supportsCoalescing() const override { return false; }
  void startCoalescing() override;
  c10::intrusive_ptr<c10d::Work> endCoalescing() override;

  // Every rank numbers its collectives from 0, so the numbers agree without
  // a store round trip. TORCH_DISTRIBUTED_DEBUG=DETAIL's wrapper uses them.
  void setSequenceNumberForGroup() override {}
  uint64_t getSequenceNumberForGroup() override { return engine_->sequenceNumber(); }

  // Runs what is queued, then releases the executor and the UCX resources.
  // Later calls raise. Called by destroy_process_group() and the destructor.
  void shutdown() override;
  // ProcessGroup.abort(): the running collective and every queued or later
  // one fail at once with a clear error, the peers are told, the trace is
  // written (RINGREDUCE_TRACE_DIR), then the group shuts down. A new group
  // may be created afterwards.
  void abort() override;
  // At interpreter exit (torch_ringreduce registers it with atexit): a group
  // the script did not destroy is shut down while Python can still take the
  // tensors its finished operations release; with operations still in
  // flight it is aborted first, so the exit never waits for the timeout.
  void shutdownAtExit();

  // pg._register_on_completion_hook(hook): every collective's WorkInfo goes to
  // `hook` on a thread of its own (backend/completion_hooks.h).
  void registerOnCompletionHook(
      std::function<void(std::shared_ptr<c10d::WorkInfo>)>&& hook) override;
  // pg._wait_for_pending_works(): everything queued has run and the hooks
  // have seen it.
  void waitForPendingWorks() override;

  // The flight recorder (engine/op_trace.h) as JSON, and written to
  // RINGREDUCE_TRACE_DIR (the path, or "" when unset).
  std::string traceJson() const { return engine_->traceJson("requested"); }
  // The ranks on this machine its defaults went by: this group's own count,
  // or ranksOnHostHint where larger (LOCAL_WORLD_SIZE aside).
  int ranksOnThisHost() const { return ranksOnThisHost_; }
  // Whether CUDA allreduce, all_gather_into_tensor and reduce_scatter_tensor
  // take the device-flags path (Config::resolveDeviceFlags).
  bool deviceFlags() const { return config_.cudaDeviceFlags; }
  // The CUDA paths this group set up on its first CUDA collective, and why
  // the others are not (DevicePath::pathsDescription); read it after a
  // CUDA collective completed.
  std::string cudaPaths() const {
    const DevicePath* path = devicePathMade_.load();
    if (path) return path->pathsDescription();
    if (size_ == 1) {
      return "a group of one: allreduce, reduce_scatter_tensor, all_gather_into_tensor and "
             "broadcast complete on the caller's stream with no device path; the other "
             "collectives set one up when they first run";
    }
    return "not set up (no CUDA collective has run)";
  }
  // The settings the group was created with (RINGREDUCE_* names and values).
  std::vector<std::pair<std::string, std::string>> effectiveConfig() const {
    return config_.describe();
  }
  // RINGREDUCE_AUTOTUNE's choices so far, by size class (none without it).
  std::vector<AllreduceTuner::Choice> autotuneChoices() const {
    std::vector<AllreduceTuner::Choice> all;
    for (const auto* tuner : {tuner_.get(), cudaTuner_.get()}) {
      if (!tuner) continue;
      for (auto& choice : tuner->choices()) all.push_back(std::move(choice));
    }
    return all;
  }
  std::string dumpTrace() const { return engine_->dumpTrace("requested"); }

 private:
  // A collective's work on the executor thread; throws on failure.
  using Body = Operation::Body;
  using Post = Operation::Post;

  // The host forms of the ops that stage CUDA tensors through the host (the
  // public overrides map CUDA tensors to pinned host copies, then call these
  // with the staged call; host tensors come with none).
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                     const c10d::AllreduceCoalescedOptions& opts,
                                                     const Staged& staged);
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(
      std::vector<std::vector<at::Tensor>>& outputLists, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts, const Staged& staged);
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                 std::vector<at::Tensor>& inputs,
                                                                 const c10d::AllgatherOptions& opts,
                                                                 const Staged& staged);
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::ReduceScatterOptions& opts, const Staged& staged);
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts,
                                           const Staged& staged);
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                        std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts, const Staged& staged);
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                         std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts, const Staged& staged);
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& outputSplits,
                                               std::vector<int64_t>& inputSplits,
                                               const c10d::AllToAllOptions& opts,
                                               const Staged& staged);
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs,
                                          std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts, const Staged& staged);
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dstRank, int tag,
                                      const Staged& staged);
  c10::intrusive_ptr<c10d::Work> enqueueReceive(std::vector<at::Tensor>& tensors, int srcRank,
                                                int tag, const CallSite& site,
                                                const Staged& staged);
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                        const c10d::ReduceOptions& opts, const Staged& staged);
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts,
                                                const Staged& staged);

  // Queues a collective on the engine, with a WorkRing for its outputs; for
  // a staged CUDA call, the Work completes on the device (device_call.h).
  // `seqCount` consecutive sequence numbers for ops that run several
  // collectives (OpContext::part).
  // `call.callerWaits` counts for host calls only: a CUDA call's wait() does
  // not run the host part (work_ring.h), so the worker runs it at once.
  c10::intrusive_ptr<c10d::Work> enqueue(const Staged& staged, c10d::OpType type, const char* name,
                                         const CallOptions& call,
                                         std::vector<at::Tensor> outputs,
                                         const std::string& summary, Body body,
                                         CheckedArgs checked = {}, uint64_t seqCount = 1,
                                         bool neighbourCheck = true);
  c10::intrusive_ptr<c10d::Work> enqueuePointToPoint(const Staged& staged, c10d::OpType type,
                                                     const char* name,
                                                     std::vector<at::Tensor> tensors,
                                                     const OpFields& fields, Post post);
  c10::intrusive_ptr<c10d::Work> enqueueReceive(std::vector<at::Tensor>& tensors, int srcRank,
                                                int tag, const CallSite& site);
  // Caller's thread: the group's internal stream for a CUDA device, and a
  // host staging of a call on that device (host_staging.h).
  c10::Stream internalStream(c10::Device device);
  // `name`: the op, for the error when its stream is being captured into a
  // CUDA graph (host-staged work cannot be captured).
  HostStaging stagingFor(c10::Device device, const char* name) {
    refuseCapture(name, device);
    return HostStaging(device, internalStream(device), CallSite{name, rank_});
  }
  // The sequence numbers a CUDA collective reserves, whichever way it runs
  // (queued: enqueueOnDevice; on the caller's thread: runDeviceOnCaller):
  // its device path's and its host fallback's. Ranks that run it different
  // ways must reserve alike, or they number every later collective apart.
  static constexpr uint64_t kDeviceSeqCount = 2;
  // CUDA ops with a device path (ops/device_ops.cpp). The body gets the
  // group's DevicePath (null when not compiled), the internal stream and a
  // record exchange; it falls back to host staging itself.
  struct DeviceStep {
    DevicePath* path;
    c10::Stream stream;
    RecordExchange exchange;
    DevicePath::Call call;  // fingerprint and timeout, for the device-flags path
  };
  using DeviceBody = std::function<void(const OpContext&, const DeviceStep&)>;
  // `onDevice`: the device-flags path will run it, fingerprint in its
  // flags (DevicePath::flagsCheckIt), so no neighbour check is posted.
  c10::intrusive_ptr<c10d::Work> enqueueOnDevice(c10d::OpType type, const char* name,
                                                 std::chrono::milliseconds timeout,
                                                 const at::Tensor& output,
                                                 std::vector<at::Tensor> touched,
                                                 const std::string& summary, DeviceBody body,
                                                 CheckedArgs checked = {},
                                                 bool onDevice = false);
  // The device-flags path from the caller's thread (ops/device_on_caller.cpp):
  // when the group is idle and the path set up, the collective goes on the
  // caller's current stream at once and its Work completes at once, as
  // NCCL's does; null when it cannot (the caller then queues it). Under
  // CUDA graph capture it must run so, or raise saying why not.
  // `fields`: what the trace says of it (engine/op_fields.h); `launch`
  // is called, not kept (no allocation).
  using CallerLaunch =
      FunctionRef<DevicePathTaken(DevicePath&, const c10::Stream&, const DevicePath::Call&)>;
  c10::intrusive_ptr<c10d::Work> runDeviceOnCaller(c10d::OpType type, const char* name,
                                                   std::chrono::milliseconds timeout,
                                                   const at::Tensor& output,
                                                   const OpFields& fields,
                                                   const CollectiveFingerprint& fingerprint,
                                                   DevicePath::OnCaller kind, size_t bytes,
                                                   DataType dtype, ReduceOp op,
                                                   CallerLaunch launch);
  // Raises when the caller's stream on `device` is being captured into a
  // CUDA graph: `name` cannot be (it would run outside the graph).
  void refuseCapture(const char* name, c10::Device device);
  // Caller's thread, as device work is issued: work on `issuedOn` follows
  // the group's previous device collective, whichever stream it ran on;
  // this one will run on `runsOn`.
  void orderAfterLastDeviceOp(const c10::Stream& issuedOn, const c10::Stream& runsOn,
                              bool capturing);
  // What enqueue() fingerprints a collective as (it must be the same for
  // a collective run directly).
  CollectiveFingerprint fingerprintOf(c10d::OpType type, at::TensorList outputs,
                                      const CheckedArgs& checked) const;
  // The same for one output, with no vector to build (the on-caller paths).
  CollectiveFingerprint fingerprintOf(c10d::OpType type, const at::Tensor& output,
                                      const CheckedArgs& checked) const;
  // torch's device coalescing manager records its block's all_reduce,
  // all_gather_into_tensor and reduce_scatter_tensor calls and issues them
  // as one coalesced call, so these reach the backend inside an open block
  // only where the manager raised before its end (mixed collectives in one
  // block) and left the block open, or from a functional collective in the
  // block's body. Either way the block ends here (Engine::endOpenBlock):
  // held in it, the call would wait behind a block nobody may end. The
  // same call on every rank, so every rank ends its block alike.
  void endBlockTorchLeftOpen(const char* op);
  // _allgather_base and _reduce_scatter_base past that: the coalesced forms
  // of one tensor, inside a block torch will end, come here directly.
  c10::intrusive_ptr<c10d::Work> allgatherIntoTensorCall(at::Tensor& output, at::Tensor& input,
                                                         const c10d::AllgatherOptions& opts);
  c10::intrusive_ptr<c10d::Work> reduceScatterTensorCall(at::Tensor& output, at::Tensor& input,
                                                         const c10d::ReduceScatterOptions& opts);
  // A group of one (ops/group_of_one.cpp): the op completes on the caller's
  // thread with nothing sent or launched; null when the group is larger or
  // the engine has the op queue (see there).
  c10::intrusive_ptr<c10d::Work> allreduceAlone(const at::Tensor& tensor, const Reduction& red,
                                                std::chrono::milliseconds timeout);
  c10::intrusive_ptr<c10d::Work> reduceScatterAlone(const at::Tensor& output,
                                                    const at::Tensor& input, const Reduction& red,
                                                    std::chrono::milliseconds timeout);
  c10::intrusive_ptr<c10d::Work> allgatherAlone(const at::Tensor& output, const at::Tensor& input,
                                                std::chrono::milliseconds timeout);
  c10::intrusive_ptr<c10d::Work> broadcastAlone(const at::Tensor& tensor,
                                                std::chrono::milliseconds timeout);
  // Every other host collective of a group of one: each of `outputs` takes
  // the values of the input beside it in `inputs` (a list all-gather, a
  // gather, a scatter, the all-to-alls, a list reduce-scatter, the
  // coalesced forms; a reduce or allreduce_coalesced gives its tensors as
  // both), times PREMUL_SUM's factor where `red` has one; a barrier gives
  // none. Fingerprinted as its queued form (`checked`, the outputs). Null
  // where the group is larger or the engine has the op queue, and where an
  // output's size is not its input's (the queued form says what is wrong).
  // (Lists, not vectors: a larger group's call builds nothing to be told no;
  // one tensor as at::TensorList(t), which copies no reference.)
  c10::intrusive_ptr<c10d::Work> copiesAlone(c10d::OpType type, const char* name,
                                             std::chrono::milliseconds timeout,
                                             at::TensorList outputs, at::TensorList inputs,
                                             const CheckedArgs& checked,
                                             const Reduction* red = nullptr);
  // A CPU allreduce through the host channel from the caller's thread
  // (ops/host_channel_allreduce.cpp): done, with its Work or none (the caller has its
  // result); nothing when it does not apply or the engine has the op queue.
  std::optional<c10::intrusive_ptr<c10d::Work>> allreduceOnHostChannel(const at::Tensor& tensor,
                                                                       const Reduction& red,
                                                                       const CallOptions& call);
  // allreduce_coalesced of tensors of one dtype (torch's coalescing
  // manager around all_reduce calls, all_reduce_coalesced) the same way:
  // fused into one flat buffer, reduced and copied back, on the caller's
  // thread where allreduceOnHostChannel would run it.
  std::optional<c10::intrusive_ptr<c10d::Work>> allreduceCoalescedOnHostChannel(
      const std::vector<at::Tensor>& tensors, const Reduction& red, const CallOptions& call);
  // Whether a CPU allreduce of `bytes` goes through the host channel,
  // whoever runs it (hostAllreduce takes it first). Any thread.
  bool throughHostChannel(size_t bytes);
  // The group's host channel, opened at the first host collective that asks
  // (Engine::needChannel, which raises torch's error if the ranks cannot
  // agree on it); null where there is none.
  const HostChannel* hostChannel();
  // What opens the group's host channel at its first host collective
  // (Engine::openChannelWhenFirstNeeded) when every rank is on this host;
  // null otherwise. The channel is null when any rank could not set it up.
  Engine::ChannelOpener hostChannelOpener(std::shared_ptr<KeyValueStore> store,
                                          const UcxTransport& transport,
                                          std::chrono::milliseconds timeout);
  // The other CPU collectives through the host channel from the caller's
  // thread (ops/host_channel_collectives.cpp), under the same rule: done,
  // with the Work to return (none: the caller has its result); nothing when
  // runsOnCaller says no or the engine has the op queue.
  using HostChannelResult = std::optional<c10::intrusive_ptr<c10d::Work>>;
  // A host form's body, given the comm it runs over (runOnHostChannel).
  using HostChannelBody = FunctionRef<void(const Comm&, const OpContext&)>;
  HostChannelResult allgatherOnHostChannel(const at::Tensor& output, const at::Tensor& input,
                                           const CallOptions& call);
  HostChannelResult allgatherListOnHostChannel(const std::vector<at::Tensor>& outputs,
                                               const at::Tensor& input, const CallOptions& call);
  HostChannelResult reduceScatterOnHostChannel(const at::Tensor& output, const at::Tensor& input,
                                               const Reduction& red, const CallOptions& call);
  HostChannelResult broadcastOnHostChannel(const at::Tensor& tensor, int root,
                                           const CallOptions& call);
  HostChannelResult barrierOnHostChannel(const CallOptions& call);
  HostChannelResult reduceScatterListOnHostChannel(const at::Tensor& output,
                                                   const std::vector<at::Tensor>& inputs,
                                                   const Reduction& red, const CallOptions& call);
  HostChannelResult reduceOnHostChannel(const at::Tensor& tensor, const Reduction& red, int root,
                                        const CallOptions& call);
  HostChannelResult gatherOnHostChannel(const std::vector<at::Tensor>& outputs,
                                        const at::Tensor& input, int root, const CallOptions& call);
  HostChannelResult scatterOnHostChannel(const at::Tensor& output,
                                         const std::vector<at::Tensor>& inputs, int root,
                                         const CallOptions& call);
  // all_to_all_single with equal splits (`even`: no split sizes given).
  HostChannelResult alltoallOnHostChannel(const at::Tensor& output, const at::Tensor& input,
                                          bool even, const CallOptions& call);
  // all_to_all_single with split sizes, and all_to_all (the list form),
  // through the channel's uneven all-to-all where it starts there and this
  // rank's blocks fit its turns (hostChannelUnevenAlltoallFits): on the
  // caller's thread it cannot decline (no transport), so its peers take as
  // many turns as the blocks need.
  HostChannelResult alltoallUnevenOnHostChannel(const at::Tensor& output, const at::Tensor& input,
                                                const BlockLayout& send, const BlockLayout& recv,
                                                const CallOptions& call);
  HostChannelResult alltoallListOnHostChannel(const std::vector<at::Tensor>& outputs,
                                              const std::vector<at::Tensor>& inputs,
                                              const BlockLayout& send, const BlockLayout& recv,
                                              const CallOptions& call);
  // Whether an uneven all-to-all of these layouts may run on the caller's thread.
  bool unevenAlltoallOnCaller(const CallOptions& call, const BlockLayout& send,
                              const BlockLayout& recv);
  // all_gather_into_tensor_coalesced and reduce_scatter_tensor_coalesced
  // of several tensors (torch's coalescing manager around those calls, the
  // functional *_coalesced), where the channel carries the block's `bytes`
  // (channelCarries, the same on every rank): one collective whose tensors
  // are one message, on the caller's thread where runsOnCaller says so;
  // nothing otherwise (the queued form then runs the same body).
  HostChannelResult allgatherCoalescedOnHostChannel(const std::vector<at::Tensor>& outputs,
                                                    const std::vector<at::Tensor>& inputs,
                                                    size_t bytes, const CallOptions& call);
  // torch's all_gather_coalesced, the same way: lists[i][r] receives input
  // i of rank r; `outputs` are those tensors in the order the queued form
  // fingerprints them (rank by rank).
  HostChannelResult allgatherListsOnHostChannel(const std::vector<at::Tensor>& outputs,
                                                const std::vector<at::Tensor>& inputs,
                                                size_t bytes, const CallOptions& call);
  // What those two share: a gather of the tensors as one message, fingerprinted
  // as the queued form does (its outputs together), traced as its first input;
  // `parts`: how many tensors (hostChannelAllgatherPartsReadInPlace).
  HostChannelResult gatherMessageOnHostChannel(c10d::OpType type, const char* name,
                                               const std::vector<at::Tensor>& outputs,
                                               const at::Tensor& firstInput, size_t bytes,
                                               const CallOptions& call, size_t parts,
                                               HostChannelBody body);
  HostChannelResult reduceScatterCoalescedOnHostChannel(const std::vector<at::Tensor>& outputs,
                                                        const std::vector<at::Tensor>& inputs,
                                                        const Reduction& red, size_t bytes,
                                                        const CallOptions& call);
  // Their bodies, on whichever thread runs them (ops/coalesced.cpp). The
  // reduce-scatter's tensors share one dtype; its inputs stay as they were.
  void allgatherParts(const Comm& c, const OpContext& ctx, const std::vector<at::Tensor>& inputs,
                      const std::vector<at::Tensor>& outputs);
  // all_gather_coalesced's message: outputs rank by rank (r * inputs + i).
  void allgatherListParts(const Comm& c, const OpContext& ctx,
                          const std::vector<at::Tensor>& inputs,
                          const std::vector<at::Tensor>& outputs);
  void reduceScatterParts(const Comm& c, const OpContext& ctx,
                          const std::vector<at::Tensor>& inputs,
                          const std::vector<at::Tensor>& outputs, const Reduction& red);
  // Whether a collective other than allreduce that puts `bytes` into each
  // rank's channel buffers goes through the channel, whoever runs it (its
  // algorithm's selector takes it first: hostChannelCollectiveApplies);
  // never one of no bytes, which keeps its queued form. Any thread.
  bool channelCarries(size_t bytes);
  // Whether the channel carries an all-gather, a gather or an equal
  // all-to-all of `blockBytes` per rank's block beyond what its buffers
  // carry: it reads the peers' blocks in place (crossMemoryGatherCarries;
  // the same on every rank). Their rules: channelCarries(bytes) || this.
  bool channelReadsBlocks(size_t blockBytes);
  // Whether a broadcast of `bytes` goes through the channel: within its
  // buffers' four turns (channelCarries) or beyond them (large_broadcast.h;
  // hostChannelBroadcastApplies, the same on every rank).
  bool channelBroadcasts(size_t bytes);
  // The same for a barrier (hostBarrier takes the channel first).
  bool channelSynchronizes();
  // The same for an all_to_all_single with split sizes, whose sizes differ
  // per rank: whether it starts on the channel (its first turn then tells
  // whether it stays there: hostChannelUnevenAlltoall).
  bool channelStartsUnevenAlltoall();
  // The one rule for every on-caller host form: whether a collective whose
  // algorithm takes the channel (`onChannel`, alike on every rank) and
  // puts `bytes` in each rank's buffers runs on the caller's thread past
  // the queue: where the caller waits at once (async_op=False), and where
  // it asks for a Work (async_op=True, the functional collectives and
  // their wait_tensor) of a message small enough that a thread hand-off
  // would cost more than the collective (RINGREDUCE_ASYNC_ON_CALLER_BYTES)
  // and every peer is in the collective already (runOnHostChannel): it gets
  // a completed Work back. A larger asynchronous one (DDP's buckets, FSDP's
  // gathers) stays queued, so the caller computes meanwhile.
  bool runsOnCaller(const CallOptions& call, size_t bytes, bool onChannel) const {
    return onChannel && (call.callerWaits || bytes <= config_.asyncOnCallerBytes);
  }
  // What every on-caller host form shares: runs `body` (given the comm it
  // runs on: the caller's spin budget, no transport to drive) through
  // Engine::runOnCaller, numbered, fingerprinted, traced and timed; raises as
  // a queued op's Work would. Nothing when the engine has the op queue.
  // An asynchronous caller whose peers are not there yet publishes its
  // first turn before it queues the op (Engine::runOnCaller's publishAhead),
  // unless `mayPublishAhead` is false: a body that changes the caller's
  // tensors before its first turn (a premultiplied allreduce or reduce
  // scales the tensor in place), which the queued run would do again; or
  // one whose first turn puts up where its input lies for the peers to read
  // in place (channelReadsBlocks), which may be a copy the body makes and
  // drops when it returns.
  HostChannelResult runOnHostChannel(c10d::OpType type, const char* name, const CallOptions& call,
                                     const CollectiveFingerprint& fingerprint,
                                     const OpFields& fields, const at::Tensor& output,
                                     HostChannelBody body, bool mayPublishAhead = true);
  // The group's host channel when every rank is on this host
  // (constructor); null otherwise, or when any rank could not set it up.
  std::unique_ptr<HostChannel> openHostChannel(KeyValueStore& store,
                                               const UcxTransport& transport,
                                               std::chrono::milliseconds timeout);
  template <typename Fn>
  c10::intrusive_ptr<c10d::Work> runAlone(c10d::OpType type, const char* name,
                                          std::chrono::milliseconds timeout,
                                          const at::Tensor& output,
                                          const CollectiveFingerprint& fingerprint,
                                          const OpFields& fields, const Fn& body);
  // The completed Work of a collective run from the caller's thread, given
  // to the completion hooks if any are registered. `queuedOn`: the CUDA
  // stream it went on (none: a host op, or one captured into a graph).
  // `timing`: what its CallerTimer measured (work_timing.h).
  c10::intrusive_ptr<c10d::Work> finishOnCaller(c10d::OpType type, uint64_t seq,
                                                const at::Tensor& output,
                                                std::optional<c10::Stream> queuedOn,
                                                const CallerTiming& timing);
  // What finishOnCaller tells the completion hooks, for an on-caller collective
  // that returns no Work.
  void noteCompletedOnCaller(c10d::OpType type, uint64_t seq, const CallerTiming& timing);
  // What the trace and the log say of an on-caller collective named by
  // `tensor`: its dtype, count and device, and the op's reduce op
  // (checkedReduceOp) and root, -1 where it has none.
  static OpFields fieldsOf(const at::Tensor& tensor, int reduceOp = -1, int root = -1);
  c10::intrusive_ptr<c10d::Work> allreduceOnDevice(const at::Tensor& tensor, const Reduction& red,
                                                   const c10d::AllreduceOptions& opts);
  c10::intrusive_ptr<c10d::Work> broadcastOnDevice(const at::Tensor& tensor, int root,
                                                   std::chrono::milliseconds timeout);
  c10::intrusive_ptr<c10d::Work> allgatherOnDevice(const at::Tensor& output,
                                                   const at::Tensor& input,
                                                   std::chrono::milliseconds timeout);
  c10::intrusive_ptr<c10d::Work> reduceScatterOnDevice(const at::Tensor& output,
                                                       const at::Tensor& input,
                                                       const Reduction& red,
                                                       std::chrono::milliseconds timeout);

  // Shared bodies of the single and coalesced forms.
  // Bodies shared by the queued and on-caller forms; `onChannel`: the
  // channel's algorithm (channelCarries), else the pairwise exchange.
  void gatherBody(const Comm& c, const OpContext& ctx, const at::Tensor& input,
                  const std::vector<at::Tensor>& outputs, int root, bool onChannel);
  void scatterBody(const Comm& c, const OpContext& ctx, const at::Tensor& output,
                   const std::vector<at::Tensor>& inputs, int root, bool onChannel);
  // reduce's body through the channel (the other forms: reduce's queued body).
  void reduceOnChannel(const Comm& c, const OpContext& ctx, const at::Tensor& tensor,
                       const Reduction& red, int root);
  // all_to_all_single's body through the channel (equal blocks).
  void alltoallEqual(const Comm& c, const OpContext& ctx, const at::Tensor& input,
                     const at::Tensor& output);
  // The uneven forms' bodies: through the channel's uneven all-to-all where
  // `onChannel` (declining, where `mayDecline`, to pairwise messages), else
  // pairwise messages.
  void alltoallUneven(const Comm& c, const OpContext& ctx, const at::Tensor& input,
                      const at::Tensor& output, const BlockLayout& send, const BlockLayout& recv,
                      bool onChannel, bool mayDecline);
  void alltoallList(const Comm& c, const OpContext& ctx, const std::vector<at::Tensor>& inputs,
                    const std::vector<at::Tensor>& outputs, const BlockLayout& send,
                    const BlockLayout& recv, bool onChannel, bool mayDecline);
  // `on`: the comm to run on (an on-caller form's); null: comm().
  void allgatherIntoTensor(const OpContext& ctx, const at::Tensor& input, const at::Tensor& output,
                           const Comm* on = nullptr);
  c10::intrusive_ptr<c10d::Work> allreduceSparse(const at::Tensor& tensor,
                                                 const c10d::AllreduceOptions& opts);
  void allgatherIntoList(const OpContext& ctx, const at::Tensor& input,
                         const std::vector<at::Tensor>& outputs, const Comm* on = nullptr);
  // Its body through the channel: `in` (contiguous) gathered into the list.
  void allgatherStraightIntoList(const Comm& c, const OpContext& ctx, at::Tensor in,
                                 const std::vector<at::Tensor>& outputs);
  // Executor thread only: views of the workspace's staging memory, valid
  // until the next staging call.
  at::Tensor stagedBuffer(int64_t numel, const at::TensorOptions& options);
  at::Tensor stagedCopy(const at::Tensor& tensor);
  void reduceScatterFlat(const OpContext& ctx, at::Tensor flat, const at::Tensor& output,
                         DataType type, ReduceOp op);
  // reduce_scatter's (list) body: the inputs stay as they were.
  void reduceScatterList(const OpContext& ctx, const at::Tensor& output,
                         const std::vector<at::Tensor>& inputList, const Reduction& red,
                         const Comm* on = nullptr);
  // reduce_scatter_tensor's body: `input` stays as it was.
  void reduceScatterTensor(const OpContext& ctx, const at::Tensor& output, const at::Tensor& input,
                           DataType type, ReduceOp op, const Comm* on = nullptr);

  // What the algorithms run on (executor thread).
  Comm comm() {
    Comm c = engine_->comm();
    c.selector = &allreduceSelector_;
    c.tuner = tuner_.get();
    return c;
  }

  const std::string groupName_;
  // What shrink() needs: the store the group was made on, the generation
  // its keys there carry (the same on all its ranks, another for a group
  // re-created on the store), the rank that names this process's timeline
  // file; and whether it was shrunk (the excluded ranks take no part in
  // this group's close).
  const c10::intrusive_ptr<c10d::Store> store_;
  int64_t storeGeneration_ = 0;
  const int globalRank_;
  std::atomic<bool> shrunk_{false};
  const std::map<std::string, std::string> givenSettings_;  // over the environment
  std::atomic<bool> timing_{false};  // enableCollectivesTiming
  // From the environment; its defaults that depend on the ranks sharing this
  // machine are settled once the transport has met the peers (constructor).
  Config config_;
  int ranksOnThisHost_ = 0;
  std::atomic<int64_t> timeoutMs_;
  std::unique_ptr<Engine> engine_;
  std::shared_ptr<CompletionHooks> hooks_ = std::make_shared<CompletionHooks>();
  PointToPointInFlight pointToPoint_;  // what shrink's SHRINK_DEFAULT waits for
  AllreduceSelector allreduceSelector_;  // executor thread; learns the nodes on the first allreduce
  // RINGREDUCE_AUTOTUNE=1 only (made in the constructor); runs on the executor thread.
  std::unique_ptr<AllreduceTuner> tuner_;
  // The device ring or NCCL for CUDA allreduces across nodes
  // (AllreduceTuner::cudaPaths), with RINGREDUCE_AUTOTUNE=1.
  std::unique_ptr<AllreduceTuner> cudaTuner_;
  std::unique_ptr<DevicePath> devicePath_;  // executor thread; made on the first CUDA collective
  // devicePath_ for the caller's thread, once made (the on-caller path reads it).
  std::atomic<DevicePath*> devicePathMade_{nullptr};
  std::mutex deviceMutex_;                  // guards the two below
  std::optional<c10::Device> groupDevice_;  // devicePath_'s device
  std::optional<c10::Stream> lastDeviceStream_;  // where the latest device collective runs
  std::mutex streamMutex_;
  std::vector<std::pair<c10::Device, c10::Stream>> internalStreams_;
};

}  // namespace ringreduce
