// Shares one tensor of each rank with its peers for one collective, with the
// ranks agreeing on the outcome before any of them launches on it.
//
// Mapping a peer's tensor can fail on one rank alone (a small BAR over
// PCIe, an exhausted mapping space). A rank that then took another path
// while its peers launched kernels reading its tensor, or waited at a
// barrier it never reaches, would poison the group. So the mappings are
// agreed: after the ranges are exchanged and mapped, the ranks exchange
// whether every map succeeded, and all go through the shared tensors or
// none does.
//
// That verdict round costs a host message per collective, so it is made
// only while some mapping may be new: a rank marks the allocations of its
// own that every peer is known to have mapped (a verdict round said so,
// and mappings are kept until the group closes), and a collective whose
// ranges are all so marked on every rank needs no verdict: every map is a
// lookup in a cache that holds it on every rank.
#pragma once

#include <set>

#include "core/base/record_exchange.h"
#include "cuda/ipc/ipc_memory.h"

namespace ringreduce::cuda {

class TensorSharing {
 public:
  TensorSharing(int rank, int size, PeerMappings& mappings)
      : rank_(rank), size_(size), mappings_(mappings) {}

  // Collective. `range` is this rank's tensor as exported (ok = 0: it cannot
  // be shared); `note` a byte the ranks AND together (e.g. "aligned"),
  // returned in *agreedNote. True, with peers[q] = rank q's tensor in this
  // process (mine: `mine`), when every rank's tensor was shared and mapped
  // by every rank; false on every rank alike otherwise: then nothing mapped
  // here may be used for this collective.
  bool share(void* mine, const ExportedRange& range, uint8_t note, const RecordExchange& exchange,
             void** peers, uint8_t* agreedNote = nullptr);

  // How many verdict rounds share() has made (tests: the steady state makes
  // none).
  int verdictRounds() const { return verdictRounds_; }

 private:
  const int rank_;
  const int size_;
  PeerMappings& mappings_;
  std::set<IpcHandle> mappedByAll_;  // my allocations every peer has mapped
  int verdictRounds_ = 0;
};

}  // namespace ringreduce::cuda
