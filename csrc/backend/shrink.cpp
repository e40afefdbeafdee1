// dist.shrink_group on a ringreduce group: the ranks that stay make a new
// group of themselves, with the parent's settings, on the parent's store.
//
// ProcessGroupNCCL shrinks its communicator over the connections it has
// (ncclCommShrink). Ours are the parent transport's, which torch destroys
// right after shrink() returns, so the new group meets its peers afresh,
// as any new group does: a rendezvous on the store, under a prefix every
// rank that stays derives alike from what it knows (this group's store
// prefix and key generation, the excluded ranks), so that it never meets
// the keys of another shrink or of a re-created group; within it, in an
// attempt they agree on (backend/shrink_rendezvous.h), so that a retry never
// meets an arrival of an attempt that failed. A shrink of the new group
// nests in its prefix.
// It runs as the parent did: the parent's settings and timeout, each
// replaced by what the caller's options say (their config, key by key;
// their timeout, unless it is the default that options made without one
// carry), as a group made by split does.
// The store must still be reachable: if the process that hosted it (rank 0
// under torchrun, MASTER_ADDR) is among the lost ranks, no rendezvous is
// possible and the error says so.
#include <c10/util/Exception.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "backend/process_group_ring.h"
#include "backend/ring_options.h"
#include "backend/shrink_rendezvous.h"
#include "core/observe/log.h"

namespace ringreduce {

namespace {

// torch.distributed.distributed_c10d.SHRINK_DEFAULT / SHRINK_ABORT.
constexpr int kShrinkDefault = 0x00;
constexpr int kShrinkAbort = 0x01;

}  // namespace

c10::intrusive_ptr<c10d::Backend> ProcessGroupRing::shrink(
    const std::vector<int64_t>& ranksToExclude, int shrinkFlags,
    const c10::intrusive_ptr<Options>& optsOverride) {
  const std::string where =
      "ringreduce: shrink of group '" + groupName_ + "' on rank " + std::to_string(rank_);
  // torch's shrink_group checks these too; a direct caller of the backend
  // gets the same answers.
  TORCH_CHECK_VALUE(!ranksToExclude.empty(), where, ": ranks_to_exclude is empty");
  TORCH_CHECK_VALUE(shrinkFlags == kShrinkDefault || shrinkFlags == kShrinkAbort, where,
                    ": shrink_flags ", shrinkFlags, " is neither SHRINK_DEFAULT (0) nor ",
                    "SHRINK_ABORT (1)");
  std::vector<bool> excluded(static_cast<size_t>(size_), false);
  std::vector<int> excludedRanks;
  for (int64_t r : ranksToExclude) {
    TORCH_CHECK_VALUE(r >= 0 && r < size_, where, ": rank ", r,
                      " is not in the group of size ", size_);
    TORCH_CHECK_VALUE(!excluded[static_cast<size_t>(r)], where, ": rank ", r,
                      " is excluded twice");
    excluded[static_cast<size_t>(r)] = true;
    excludedRanks.push_back(static_cast<int>(r));
  }
  TORCH_CHECK_VALUE(!excluded[static_cast<size_t>(rank_)], where,
                    ": this rank is excluded, so it must not call shrink_group");
  TORCH_CHECK_VALUE(excludedRanks.size() < static_cast<size_t>(size_), where,
                    ": every rank is excluded");
  TORCH_CHECK(!engine_->executor().expired(), where,
              ": the group was shut down (destroy_process_group or abort)");
  std::sort(excludedRanks.begin(), excludedRanks.end());
  std::vector<int> staying;
  for (int r = 0; r < size_; ++r) {
    if (!excluded[static_cast<size_t>(r)]) staying.push_back(r);
  }
  const std::string what = where + " (excluding rank(s) " + joinRanks(excludedRanks) + ")";

  // ProcessGroupNCCL: SHRINK_ABORT aborts the parent's operations in flight;
  // SHRINK_DEFAULT lets them finish first, sends and receives included.
  // Ours finish within their timeout, and after a peer's death they have
  // all failed already, so the default also serves the recovery from a
  // death, which NCCL needs SHRINK_ABORT for.
  if (shrinkFlags == kShrinkAbort) {
    engine_->abort("process group '" + groupName_ + "' was aborted on rank " +
                   std::to_string(rank_) + " to shrink it (SHRINK_ABORT, excluding rank(s) " +
                   joinRanks(excludedRanks) + ")");
  }
  engine_->waitForQueued();
  pointToPoint_.waitForAll();

  // Options made without a timeout carry torch's default: that says nothing.
  const std::chrono::milliseconds childTimeout =
      optsOverride && optsOverride->timeout.count() > 0 &&
              optsOverride->timeout != ::kBackendDefaultTimeout
          ? optsOverride->timeout
          : timeout();
  std::map<std::string, std::string> childSettings = givenSettings_;
  if (const auto* ours = dynamic_cast<const RingOptions*>(optsOverride.get())) {
    for (const auto& [key, value] : ours->config) childSettings[key] = value;
  }
  // This group's keys' generation tells it from a group re-created on the
  // same store; the excluded ranks tell a retry that excludes more apart.
  std::string prefix = "ringreduce/shrink/gen" + std::to_string(storeGeneration_) + "/excluding";
  for (int r : excludedRanks) {
    prefix += '-';
    prefix += std::to_string(r);
  }
  auto meetingStore = c10::make_intrusive<c10d::PrefixStore>(prefix + "/", store_);
  RR_LOG(Info, rank_, what << ": meeting the " << staying.size() << " ranks that stay");
  const int64_t attempt = meetRanksThatStay(*meetingStore, rank_, staying, childTimeout, what);
  // The attempt that met names the new group's keys: nothing a failed
  // attempt wrote is read again.
  auto childStore = c10::make_intrusive<c10d::PrefixStore>(
      "attempt" + std::to_string(attempt) + "/group/", meetingStore);

  const int childRank =
      static_cast<int>(std::find(staying.begin(), staying.end(), rank_) - staying.begin());
  std::string childName = optsOverride && !optsOverride->group_name.empty()
                              ? optsOverride->group_name
                              : groupName_ + ":shrunk";
  // No ranks-on-host hint: the excluded ranks are leaving this machine's
  // cores (torch tells them to end), so the new group's own count is right.
  auto child = c10::make_intrusive<ProcessGroupRing>(
      childStore, childRank, static_cast<int>(staying.size()), childTimeout, std::move(childName),
      globalRank_ < 0 ? rank_ : globalRank_, 0, std::move(childSettings));
  if (timing_) child->enableCollectivesTiming();  // _enable_collectives_timing() too
  shrunk_ = true;
  return child;
}

}  // namespace ringreduce
