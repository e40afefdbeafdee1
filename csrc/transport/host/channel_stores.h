// How a rank writes its data into its host channel buffers: with ordinary
// stores (memcpy) or streaming ones (core/math/streaming_copy.h), chosen per
// size by timing both. (Since the turns move round the buffers,
// HostChannel::takeTurn, a small message seldom lands on lines its peers
// still hold; one that fills most of a buffer always does. The figures
// below were taken before, every turn on the lines read two turns ago.)
//
// Neither wins everywhere, and which one wins changes with where the ranks'
// cores sit, which the process cannot see and which a VM changes under it.
// Measured on the 2-vCPU AMD EPYC VM (writer's copy + the peer's copy out,
// us): 64 KiB with the cores close 7.2 + 1.5 memcpy, 2.1 + 4.1 streamed; with
// them apart 28 + 3.9 and 2.1 + 4.3; 1 MiB close 23 + 25 and 38 + 50, apart
// 420 + 43 and 38 + 45. The writer sees only its own half, and the reader's
// half decides between near timings: through all_gather_into_tensor and
// all_reduce in one run with the cores close, streaming lost at every size
// (64 KiB 17.1 against 15.4 us, 1 MiB allreduce 172 against 85) although
// its own copy took half memcpy's. So the writer streams only where memcpy
// takes more than kStreamAbove times the streamed copy: the placement where
// memcpy is 10x slower, never the one where it is 2-3x.
//
// Per size class (powers of two from kMinBytes), each kind keeps its last
// kWindow timings per byte and counts by the fastest of them (a preemption
// inflates one timing; nothing deflates one). The kind in use is timed on
// every copy, the other one on every kExploreEvery-th copy of the class, so
// a change of placement turns the choice within that many copies. Below
// kMinBytes: memcpy, untimed (the choice would not pay for its clock reads).
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>

#include "core/config/config.h"

namespace ringreduce {

// The choice alone, fed with timings: no clock, no copy (unit-tested).
class StoreChooser {
 public:
  static constexpr size_t kMinBytes = 2048;
  static constexpr int kClasses = 12;  // 2 KiB, 4 KiB, ..., 4 MiB and up
  static constexpr int kWindow = 4;
  static constexpr uint32_t kExploreEvery = 64;
  // Streams where memcpy's best timing per byte exceeds the streamed one's
  // by this ratio.
  static constexpr uint64_t kStreamAbove = 4;

  // Whether the next copy of `bytes` (>= kMinBytes) streams.
  bool streamNext(size_t bytes);
  // That copy took `nanos`.
  void record(size_t bytes, bool streamed, uint64_t nanos);
  // What this class uses now, for tests and the log.
  bool streaming(size_t bytes) const { return classes_[classOf(bytes)].streaming; }

 private:
  struct Timings {
    std::array<uint64_t, kWindow> picosPerByte{};
    int count = 0;  // how many of them are filled
    int next = 0;
    uint64_t best() const;
  };
  struct SizeClass {
    Timings cached, streamed;
    uint32_t copies = 0;
    bool streaming = false;
  };
  static int classOf(size_t bytes);
  std::array<SizeClass, kClasses> classes_{};
};

// A rank's writes into its channel buffers. One thread at a time (the
// channel's collectives run one at a time).
class ChannelWriter {
 public:
  explicit ChannelWriter(ChannelStores mode) : mode_(mode) {}
  void copy(void* dst, const void* src, size_t bytes);

 private:
  ChannelStores mode_;
  StoreChooser chooser_;
};

}  // namespace ringreduce
