// 2 MiB pages for the large buffers a collective moves between processes.
//
// Why: between ranks of one machine the bytes go by CMA (process_vm_readv),
// and the kernel pins every page of the peer's buffer it copies from. With
// 4 KiB pages that pinning is a large part of a big collective's system
// time: two ranks on two cores, 64 MiB allreduce, 11.4-13.3 ms per op with
// 4 KiB pages, 8.0-9.2 ms on 2 MiB pages, system time per op halved
// (benchmarks/RESULTS.md, "Caller buffers on 2 MiB pages"). torch gives
// tensors 4 KiB pages unless THP_MEM_ALLOC_ENABLE=1, which a user must set
// before torch starts.
//
// Two cases:
// - Our own scratch (Workspace): asked for huge pages before its first touch
//   (MADV_HUGEPAGE), free.
// - Caller buffers: moving them costs a copy of each page (MADV_COLLAPSE,
//   17-77 ms for 64 MiB here), worth it only for a buffer that comes back
//   (DDP's buckets, a training loop's flat gradients). So a buffer is
//   collapsed the second time a collective gets it, and at most kMaxBuffers
//   of them per group. Later sightings ask again: where the pages are still
//   huge that costs the kernel 1-3 us, and where torch freed the tensor and
//   the next one came back at the same address (new memory, 4 KiB pages: a
//   benchmark's warm-up tensor, then the measured one) it moves them again,
//   at most kMaxMoves more times per buffer, so a buffer that is new memory
//   at every step costs a few collapses, never one per step. Buffers
//   seen once wait in a bounded table where the least recently seen makes
//   room, so one-off buffers (a model's broadcast at start, evaluation)
//   never keep the recurring ones that come later from being noticed.
// The contents never change; a kernel without MADV_COLLAPSE (before 6.1) or
// memory it cannot move (pinned, device-mapped) just stays as it is.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

namespace ringreduce {

constexpr size_t kHugePageBytes = 2u << 20;

// The whole 2 MiB pages inside [data, data + bytes); bytes 0 when none.
struct PageRange {
  uintptr_t begin = 0;
  size_t bytes = 0;
};
PageRange hugePageInterior(const void* data, size_t bytes);

// MADV_HUGEPAGE on the whole huge pages of memory we own and have not
// touched yet. Ignores failure (THP off, old kernel): only speed depends on it.
void preferHugePages(void* data, size_t bytes);

// What MADV_COLLAPSE did to a range.
enum class CollapseOutcome {
  Refused,      // no whole huge page inside, an old kernel, memory it cannot move
  AlreadyHuge,  // nothing to move: the call returned in microseconds
  Moved,        // the kernel copied pages onto huge pages
};

// MADV_COLLAPSE on the whole huge pages inside [data, data + bytes). The
// kernel answers 0 both when it moved pages and when they were huge
// already; only the time tells them apart (64 MiB: 17-77 ms to move, 3 us
// to find them huge), so a call over kMovedAfterMicros counts as moved.
CollapseOutcome collapseIntoHugePages(const void* data, size_t bytes);
constexpr int64_t kMovedAfterMicros = 200;

class HugePageAdvisor {
 public:
  // Smaller buffers: their pinning costs less than a collapse could repay soon.
  static constexpr size_t kMinBytes = 4u << 20;
  static constexpr size_t kMaxBuffers = 64;      // collapses per group, ever
  static constexpr size_t kMaxCandidates = 1024;  // buffers seen once, remembered
  static constexpr int kMaxMoves = 2;  // moves per buffer after its first collapse
  using Collapse = std::function<CollapseOutcome(const void* data, size_t bytes)>;

  explicit HugePageAdvisor(Collapse collapse = collapseIntoHugePages);

  // A collective is about to move the caller buffer [data, data + bytes).
  // True when this call collapsed it: its first collapse, or a later one
  // that moved pages (new memory at a known address).
  bool noteCallerBuffer(const void* data, size_t bytes);

  // Buffers remembered: collapsed ones and those seen once.
  size_t buffersSeen() const { return seen_.size(); }
  size_t buffersCollapsed() const { return collapsed_; }

 private:
  struct Seen {
    uintptr_t data;
    size_t bytes;
    bool collapsed;
    uint64_t lastSeen;     // notes_ when it last came; candidates only
    bool movable = true;   // the kernel has not refused it
    int moves = 0;         // collapses after the first that moved pages
  };
  // Where a new candidate goes: a new slot while there are fewer than
  // kMaxCandidates, else that of the least recently seen candidate.
  Seen* slotForCandidate();

  Collapse collapse_;
  std::vector<Seen> seen_;
  size_t candidates_ = 0;
  size_t collapsed_ = 0;
  uint64_t notes_ = 0;
};

}  // namespace ringreduce
