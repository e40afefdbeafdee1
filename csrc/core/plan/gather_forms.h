// Which way the host channel moves an all-gather's or equal all-to-all's
// blocks where both ways can: read in place from the peers' memory (the
// kernel copies once, but pins every 4 KiB page it reads: cross_memory_gather.h)
// or through the channel's buffers (two copies, no system call). Which is
// faster depends on the machine: world 2, 1 MiB per rank, back to back, in
// place against the buffers, all_gather_into_tensor 185 against 210 us on
// the 2-vCPU Xeon (AVX-512, AMX) of 2026-12-02, where a copy is slow, and 100
// against 66 on the 2-vCPU EPYC of 2026-12-04, where a copy is fast and the
// pinning is not (`process_vm_readv` of 1 MiB 70 us there, `memcpy` 18).
// So the ranks time both and agree on the faster, per size class.
//
// Each class of block sizes (powers of two from kFirstClassBytes) counts its
// calls, which every rank runs alike (a collective's sizes are agreed). A
// round of kRoundEvery calls holds, after kWarmUp calls, 2 * kTrials trial
// calls taking the forms in turn, the buffers first; the last trial, in
// place, is the one whose records carry each rank's vote (its fastest call
// of each form in the trials: a preemption inflates one timing, nothing
// deflates one), so every rank reads the same votes and takes the same
// decision, which the rest of the round follows. The first round's warm-up
// reads in place, as before the choice (a class's first calls pay for
// touching its tensors whichever way: trials there chose badly). Rounds
// repeat, so a VM that moves its cores turns the choice within one: the
// buffers' copies are what the cores' placement changes most (the same
// 1 MiB all_gather_into_tensor through them 64-68 us in one run, 111-121
// fifteen minutes later, against MPI's 90-98 both times).
//
// The choice alone, fed with timings: no clock, no memory of its own beyond
// the counts (unit-tested). One thread at a time: the channel's collectives
// run one at a time.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace ringreduce {

class GatherForms {
 public:
  static constexpr size_t kFirstClassBytes = size_t{256} << 10;
  static constexpr int kClasses = 16;  // 256 KiB, 512 KiB, ..., 8 GiB and up
  static constexpr uint32_t kTrials = 3;
  static constexpr uint32_t kWarmUp = 16;
  static constexpr uint32_t kRoundEvery = 1024;

  enum class Form : uint8_t { InPlace, Buffers };

  // A rank's fastest call of each form in a round's trials, in ns (0: none).
  struct Vote {
    uint64_t inPlaceNanos = 0;
    uint64_t buffersNanos = 0;
  };

  // One call of a class: how it moves its blocks, and whether its records
  // carry the votes (then every rank calls decide() with all of them).
  struct Call {
    Form form = Form::InPlace;
    bool votes = false;
    int sizeClass = 0;
  };

  // The next call of `bytes` per block (the gathers': at least
  // kFirstClassBytes; smaller ones fall into the first class): advances
  // the class's count, so every rank must call it once per such collective.
  Call next(size_t bytes);
  // What next() would give, without counting the call: for a run that only
  // publishes a collective's first turn ahead, whose later run takes the
  // call (and must take the same form, since the turn it adopts is put up).
  Call peek(size_t bytes) const;
  // That call took `nanos` on this rank.
  void record(const Call& call, uint64_t nanos);
  // This rank's vote for a call whose records carry the votes.
  Vote vote(const Call& call) const;
  // Every rank's vote, in rank order: the decision for the rest of the
  // round, alike on every rank. In place where the ranks' fastest calls in
  // place add up to less than their fastest through the buffers.
  void decide(const Call& call, const std::vector<Vote>& everyRank);
  // What the class uses outside its trials now, for tests and the log.
  Form decided(size_t bytes) const { return classes_[classOf(bytes)].decided; }
  Form decidedFor(const Call& call) const {
    return classes_[static_cast<size_t>(call.sizeClass)].decided;
  }

  static int classOf(size_t bytes);

 private:
  struct SizeClass {
    uint64_t calls = 0;
    Vote best;  // this round's trials so far
    Form decided = Form::InPlace;  // before any vote: the form measured first (Xeon)
  };
  std::array<SizeClass, kClasses> classes_{};
};

}  // namespace ringreduce
