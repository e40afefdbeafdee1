// dist.shrink_group on a ringreduce group: the ranks that stay make a new
// group of themselves, with the parent's settings, on the parent's store.
//
// ProcessGroupNCCL shrinks its communicator over the connections it has
// (ncclCommShrink). Ours are the parent transport's, which torch destroys
// right after shrink() returns, so the new group meets its peers afresh,
// as any new group does: a rendezvous on the store, under a prefix every
// rank that stays derives alike from what it knows (this group's store
// prefix and key generation, the excluded ranks), so that it never meets
// the keys of another shrink or of a re-created group. A shrink of the new
// group nests in its prefix.
// The store must still be reachable: if the process that hosted it (rank 0
// under torchrun, MASTER_ADDR) is among the lost ranks, no rendezvous is
// possible and the error says so.
#include <c10/util/Exception.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "backend/process_group_ring.h"
#include "core/observe/log.h"

namespace ringreduce {

namespace {

// torch.distributed.distributed_c10d.SHRINK_DEFAULT / SHRINK_ABORT.
constexpr int kShrinkDefault = 0x00;
constexpr int kShrinkAbort = 0x01;

std::string joinRanks(const std::vector<int>& ranks) {
  std::string text;
  for (int r : ranks) {
    if (!text.empty()) text += ", ";
    text += std::to_string(r);
  }
  return text;
}

// What a store that fails here means.
constexpr const char* kStoreHostGone =
    "The new group meets on the group's store; if the process that hosted it (torchrun's "
    "agent on the rendezvous host, or rank 0 with init_method=tcp:// or MASTER_ADDR) is "
    "gone, the ranks that stay cannot meet: restart the job instead.";

// "arrived/<parent rank>" for every rank that stays, each waiting for the
// others' within `timeout`; then every one of them is there to make the
// group. Names all the ranks that did not come, not just the first. A
// retry after a rank did not come meets under the same keys: its own key
// is still true, and the late rank's now is.
void awaitRanksThatStay(c10d::Store& store, int rank, const std::vector<int>& staying,
                        std::chrono::milliseconds timeout, const std::string& what) {
  const auto key = [](int r) { return "arrived/" + std::to_string(r); };
  std::vector<std::string> others;
  for (int r : staying) {
    if (r != rank) others.push_back(key(r));
  }
  try {
    store.set(key(rank), std::vector<uint8_t>{1});
  } catch (const std::exception& e) {
    C10_THROW_ERROR(DistBackendError,
                    what + ": the store is unreachable (" + e.what() + "). " + kStoreHostGone);
  }
  try {
    store.wait(others, timeout);
    return;
  } catch (const std::exception& e) {
    std::vector<int> missing;
    try {
      for (int r : staying) {
        if (r != rank && !store.check({key(r)})) missing.push_back(r);
      }
    } catch (const std::exception&) {
      missing.clear();  // the store itself failed: say so below
    }
    if (missing.empty()) {
      C10_THROW_ERROR(DistBackendError, what + ": the store failed while the ranks that stay met "
                                               "on it (" + e.what() + "). " + kStoreHostGone);
    }
    C10_THROW_ERROR(DistBackendError,
                    what + ": rank(s) " + joinRanks(missing) +
                        " did not call shrink_group within " + std::to_string(timeout.count()) +
                        " ms. Every rank that stays must call it with the same ranks to "
                        "exclude; a rank that died too must be excluded as well.");
  }
}

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
  // SHRINK_DEFAULT lets them finish first. Ours finish within their timeout,
  // and after a peer's death they have all failed already, so the default
  // also serves the recovery from a death, which NCCL needs SHRINK_ABORT for.
  if (shrinkFlags == kShrinkAbort) {
    engine_->abort("process group '" + groupName_ + "' was aborted on rank " +
                   std::to_string(rank_) + " to shrink it (SHRINK_ABORT, excluding rank(s) " +
                   joinRanks(excludedRanks) + ")");
  }
  engine_->waitForQueued();

  const std::chrono::milliseconds childTimeout =
      optsOverride && optsOverride->timeout.count() > 0 ? optsOverride->timeout : timeout();
  // This group's keys' generation tells it from a group re-created on the
  // same store; the excluded ranks tell a retry that excludes more apart.
  std::string prefix = "ringreduce/shrink/gen" + std::to_string(storeGeneration_) + "/excluding";
  for (int r : excludedRanks) {
    prefix += '-';
    prefix += std::to_string(r);
  }
  auto childStore = c10::make_intrusive<c10d::PrefixStore>(prefix + "/", store_);
  RR_LOG(Info, rank_, what << ": meeting the " << staying.size() << " ranks that stay");
  awaitRanksThatStay(*childStore, rank_, staying, childTimeout, what);

  const int childRank =
      static_cast<int>(std::find(staying.begin(), staying.end(), rank_) - staying.begin());
  std::string childName = optsOverride && !optsOverride->group_name.empty()
                              ? optsOverride->group_name
                              : groupName_ + ":shrunk";
  // No ranks-on-host hint: the excluded ranks are leaving this machine's
  // cores (torch tells them to end), so the new group's own count is right.
  auto child = c10::make_intrusive<ProcessGroupRing>(
      childStore, childRank, static_cast<int>(staying.size()), childTimeout, std::move(childName),
      globalRank_ < 0 ? rank_ : globalRank_, 0);
  shrunk_ = true;
  return child;
}

}  // namespace ringreduce
