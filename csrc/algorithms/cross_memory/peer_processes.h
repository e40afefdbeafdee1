// Whether every rank of a group can reach every other's memory directly
// (transport/cross_memory.h), learnt once per group in its first allreduce:
// each rank publishes its pid and a probe word with the host identity it
// already exchanges, tries to read each peer's word, and the ranks agree on
// the outcome, so that all of them choose the same algorithm.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "algorithms/comm.h"
#include "core/base/op_context.h"

namespace ringreduce {

// What a rank tells the others about its process. Fixed size, plain data.
struct ProcessRecord {
  uint64_t hostHash = 0;      // core/base/host_identity.h
  uint64_t pid = 0;
  uint64_t probeAddress = 0;  // crossMemoryProbeWord()
  uint64_t probeValue = 0;    // what is there
};

// This process's record.
ProcessRecord thisProcess();

struct PeerProcesses {
  std::vector<int> pids;  // by rank
  bool usable = false;    // every rank can read and write every other's memory
  std::string why;        // when not usable: why, naming the ranks
};

// Tests reading each other rank's probe word (`all`: every rank's record,
// by rank) and agrees on the outcome with every rank in one exchange of
// `round`. Not usable across hosts: cross-memory attach reaches this host's
// processes only. A rank with comm.config.crossMemory off turns it off for
// every rank, taking part in the exchange all the same.
PeerProcesses agreePeerProcesses(const Comm& comm, const OpContext& op,
                                 const std::vector<ProcessRecord>& all, uint32_t round);

}  // namespace ringreduce
