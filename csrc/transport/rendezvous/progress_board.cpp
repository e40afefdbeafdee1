// Where each rank is, published through the store when a collective waits long (progress_board.h)
#include "transport/rendezvous/progress_board.h"

#include <chrono>

namespace ringreduce {

ProgressBoard::ProgressBoard(std::shared_ptr<KeyValueStore> store, std::string prefix, int rank,
                             int size)
    : store_(std::move(store)), prefix_(std::move(prefix)), rank_(rank), size_(size) {}

void ProgressBoard::announce(uint64_t seq) {
  if (static_cast<int64_t>(seq) <= announced_) return;
  announced_ = static_cast<int64_t>(seq);
  const std::string text = std::to_string(seq);
  try {
    store_->set(keyOf(rank_), std::vector<uint8_t>(text.begin(), text.end()));
  } catch (const std::exception&) {
    // The store may be gone (its host died): the board is best effort.
  }
}

std::vector<ProgressBoard::Laggard> ProgressBoard::ranksBehind(uint64_t seq) {
  std::vector<Laggard> behind;
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    int64_t last = -1;
    try {
      if (store_->check(keyOf(r))) {
        const std::vector<uint8_t> value = store_->get(keyOf(r), std::chrono::milliseconds(1000));
        last = std::stoll(std::string(value.begin(), value.end()));
      }
    } catch (const std::exception&) {
      continue;  // unknown: do not accuse it
    }
    if (last < static_cast<int64_t>(seq)) behind.push_back({r, last});
  }
  return behind;
}

std::string ProgressBoard::describe(const std::vector<Laggard>& laggards) {
  std::string text;
  for (const Laggard& l : laggards) {
    if (!text.empty()) text += ", ";
    text += std::to_string(l.rank);
    text += l.lastSeq < 0 ? " (not seen waiting in any collective)"
                          : " (last seen waiting in #" + std::to_string(l.lastSeq) + ")";
  }
  return text;
}

}  // namespace ringreduce
