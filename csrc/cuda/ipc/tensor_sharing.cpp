// One tensor of each rank shared with its peers for one collective (tensor_sharing.h)
#include "cuda/ipc/tensor_sharing.h"

#include <array>

#include "core/base/errors.h"

namespace ringreduce::cuda {

namespace {

// The most ranks of the groups that share tensors (the IPC kernels' and the
// device flags' fan-in): the records live on the stack, no allocation per
// collective.
constexpr int kMaxSharingRanks = 8;

struct ShareRecord {
  ExportedRange range;
  uint8_t mappedByAll = 0;  // every peer already maps this allocation
  uint8_t note = 0;
};

}  // namespace

bool TensorSharing::share(void* mine, const ExportedRange& range, uint8_t note,
                          const RecordExchange& exchange, void** peers, uint8_t* agreedNote) {
  ShareRecord record;
  record.range = range;
  record.mappedByAll = range.ok && mappedByAll_.count(range.handle) ? 1 : 0;
  record.note = note;
  if (size_ > kMaxSharingRanks) {
    throw InvalidArgument("ringreduce: tensor sharing takes at most " +
                          std::to_string(kMaxSharingRanks) + " ranks");
  }
  std::array<ShareRecord, kMaxSharingRanks> all;
  exchange(&record, all.data(), sizeof(ShareRecord));
  bool shareable = true, known = true;
  uint8_t agreed = 1;
  for (int q = 0; q < size_; ++q) {
    shareable = shareable && all[q].range.ok;
    known = known && all[q].mappedByAll;
    agreed = agreed & all[q].note;
  }
  if (agreedNote) *agreedNote = agreed;
  if (!shareable) return false;  // the same verdict everywhere: nobody maps
  bool mapped = true;
  for (int q = 0; q < size_; ++q) {
    if (q == rank_) {
      peers[q] = mine;
      continue;
    }
    try {
      peers[q] = mappings_.map(all[q].range);
    } catch (const std::exception&) {
      mapped = false;  // told to the peers below, never thrown alone
      peers[q] = nullptr;
    }
  }
  // Every range already mapped everywhere: every map above was a cache hit
  // on every rank, so every rank knows the verdict without asking.
  if (known) return true;
  ++verdictRounds_;
  const uint8_t mine8 = mapped ? 1 : 0;
  std::array<uint8_t, kMaxSharingRanks> verdicts{};
  exchange(&mine8, verdicts.data(), 1);
  for (int q = 0; q < size_; ++q) {
    if (!verdicts[q]) return false;
  }
  mappedByAll_.insert(range.handle);
  return true;
}

}  // namespace ringreduce::cuda
