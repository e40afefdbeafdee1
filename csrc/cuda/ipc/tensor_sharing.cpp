#include "cuda/ipc/tensor_sharing.h"

#include <vector>

namespace ringreduce::cuda {

namespace {

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
  std::vector<ShareRecord> all(size_);
  exchange(&record, all.data(), sizeof(ShareRecord));
  bool shareable = true, known = true;
  uint8_t agreed = 1;
  for (const ShareRecord& r : all) {
    shareable = shareable && r.range.ok;
    known = known && r.mappedByAll;
    agreed = agreed & r.note;
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
  std::vector<uint8_t> verdicts(size_);
  exchange(&mine8, verdicts.data(), 1);
  for (uint8_t v : verdicts) {
    if (!v) return false;
  }
  mappedByAll_.insert(range.handle);
  return true;
}

}  // namespace ringreduce::cuda
