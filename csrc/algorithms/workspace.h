// Scratch memory reused across the collectives of one group, so a training
// loop does not pay for allocation and page faults on every call.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <memory>

namespace ringreduce {

class Workspace {
 public:
  // kRecvA: reduce-scatter receive window; kStaging: the backend's copies
  // of caller tensors; kWire: float32 data rounded to a 16-bit wire dtype;
  // kReorder: a two-level reduce-scatter's or allgather's buffer in node
  // order (algorithms/two_level_scatter_gather.h).
  enum Slot { kRecvA = 0, kStaging = 1, kWire = 2, kReorder = 3, kSlotCount = 4 };

  // At least `bytes` of memory in `slot`, valid until the next call for that slot.
  void* get(Slot slot, size_t bytes) {
    Buffer& b = buffers_[slot];
    if (b.size < bytes) {
      // 64-byte alignment keeps the reduction loops' vector loads aligned.
      void* memory = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
      if (memory == nullptr) throw std::bad_alloc();
      b.data.reset(memory);
      b.size = bytes;
    }
    return b.data.get();
  }

 private:
  struct Free {
    void operator()(void* p) const { std::free(p); }
  };
  struct Buffer {
    std::unique_ptr<void, Free> data;
    size_t size = 0;
  };
  Buffer buffers_[kSlotCount];
};

}  // namespace ringreduce
