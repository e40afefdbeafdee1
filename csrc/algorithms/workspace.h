// Scratch memory reused across the collectives of one group, so a training
// loop does not pay for allocation and page faults on every call; and which
// caller buffers the group has seen, to put the ones that come back on huge
// pages (core/base/huge_pages.h).
#pragma once

#include <cstddef>
#include <cstdlib>
#include <memory>

#include "core/base/huge_pages.h"

namespace ringreduce {

class Workspace {
 public:
  // kRecvA: reduce-scatter receive window; kStaging: the backend's copies
  // of caller tensors; kWire: float32 data rounded to a 16-bit wire dtype;
  // kReorder: a two-level reduce-scatter's or allgather's buffer in node
  // order (algorithms/two_level_scatter_gather.h); kReducedChunk: the chunk
  // a rank that is not the root reduces for a reduce (reduce_to_root.h).
  enum Slot {
    kRecvA = 0,
    kStaging = 1,
    kWire = 2,
    kReorder = 3,
    kReducedChunk = 4,
    kSlotCount = 5
  };

  // At least `bytes` of memory in `slot`, valid until the next call for that slot.
  void* get(Slot slot, size_t bytes) {
    Buffer& b = buffers_[slot];
    if (b.size < bytes) {
      // 64-byte alignment keeps the reduction loops' vector loads aligned;
      // from one huge page up, 2 MiB so that peers copying from it (CMA)
      // pin 512x fewer pages.
      const size_t alignment = bytes >= kHugePageBytes ? kHugePageBytes : 64;
      const size_t rounded = (bytes + alignment - 1) / alignment * alignment;
      void* memory = std::aligned_alloc(alignment, rounded);
      if (memory == nullptr) throw std::bad_alloc();
      preferHugePages(memory, rounded);
      b.data.reset(memory);
      b.size = bytes;
    }
    return b.data.get();
  }

  HugePageAdvisor& callerBuffers() { return callerBuffers_; }

 private:
  struct Free {
    void operator()(void* p) const { std::free(p); }
  };
  struct Buffer {
    std::unique_ptr<void, Free> data;
    size_t size = 0;
  };
  Buffer buffers_[kSlotCount];
  HugePageAdvisor callerBuffers_;
};

}  // namespace ringreduce
