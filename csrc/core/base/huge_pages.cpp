// 2 MiB pages for the large buffers a collective moves between processes (huge_pages.h)
#include "core/base/huge_pages.h"

#include <sys/mman.h>

#include <chrono>
#include <utility>

// Linux 6.1's value; older headers lack the name, older kernels answer EINVAL.
#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25
#endif

namespace ringreduce {

PageRange hugePageInterior(const void* data, size_t bytes) {
  const uintptr_t start = reinterpret_cast<uintptr_t>(data);
  const uintptr_t begin = (start + kHugePageBytes - 1) & ~(uintptr_t{kHugePageBytes} - 1);
  const uintptr_t end = (start + bytes) & ~(uintptr_t{kHugePageBytes} - 1);
  if (data == nullptr || end <= begin) return {};
  return {begin, static_cast<size_t>(end - begin)};
}

void preferHugePages(void* data, size_t bytes) {
  const PageRange pages = hugePageInterior(data, bytes);
  if (pages.bytes > 0) madvise(reinterpret_cast<void*>(pages.begin), pages.bytes, MADV_HUGEPAGE);
}

CollapseOutcome collapseIntoHugePages(const void* data, size_t bytes) {
  const PageRange pages = hugePageInterior(data, bytes);
  if (pages.bytes == 0) return CollapseOutcome::Refused;
  const auto start = std::chrono::steady_clock::now();
  if (madvise(reinterpret_cast<void*>(pages.begin), pages.bytes, MADV_COLLAPSE) != 0) {
    return CollapseOutcome::Refused;
  }
  const auto took = std::chrono::steady_clock::now() - start;
  return took > std::chrono::microseconds(kMovedAfterMicros) ? CollapseOutcome::Moved
                                                              : CollapseOutcome::AlreadyHuge;
}

HugePageAdvisor::HugePageAdvisor(Collapse collapse) : collapse_(std::move(collapse)) {}

bool HugePageAdvisor::noteCallerBuffer(const void* data, size_t bytes) {
  if (data == nullptr || bytes < kMinBytes) return false;
  const uintptr_t address = reinterpret_cast<uintptr_t>(data);
  ++notes_;
  for (Seen& seen : seen_) {
    if (seen.data != address || seen.bytes != bytes) continue;
    if (seen.collapsed) {
      // Microseconds where it is still on huge pages; new memory at this
      // address is moved, up to kMaxMoves times.
      if (!seen.movable || seen.moves >= kMaxMoves) return false;
      const CollapseOutcome outcome = collapse_(data, bytes);
      seen.movable = outcome != CollapseOutcome::Refused;
      if (outcome != CollapseOutcome::Moved) return false;
      ++seen.moves;
      return true;
    }
    if (collapsed_ == kMaxBuffers) {  // budget spent: stays a candidate
      seen.lastSeen = notes_;
      return false;
    }
    // Back a second time: worth the copy. Tried once whatever the answer,
    // so memory the kernel will not move costs no further calls.
    seen.collapsed = true;
    --candidates_;
    ++collapsed_;
    seen.movable = collapse_(data, bytes) != CollapseOutcome::Refused;
    return true;
  }
  if (Seen* slot = slotForCandidate()) *slot = Seen{address, bytes, false, notes_};
  return false;
}

HugePageAdvisor::Seen* HugePageAdvisor::slotForCandidate() {
  if (candidates_ < kMaxCandidates) {
    ++candidates_;
    seen_.push_back({});
    return &seen_.back();
  }
  Seen* oldest = nullptr;  // a linear scan: only for a new buffer of >= 4 MiB
  for (Seen& seen : seen_) {
    if (!seen.collapsed && (oldest == nullptr || seen.lastSeen < oldest->lastSeen)) {
      oldest = &seen;
    }
  }
  return oldest;
}

}  // namespace ringreduce
