// Whether every rank reaches every other's memory, agreed once per group (peer_processes.h)
#include "algorithms/cross_memory/peer_processes.h"

#include <unistd.h>

#include <cstring>

#include "algorithms/record_allgather.h"
#include "core/base/host_identity.h"
#include "transport/cross_memory.h"

namespace ringreduce {

namespace {

// Why this rank cannot reach rank q's memory; empty when it can.
std::string probePeer(const ProcessRecord& me, const ProcessRecord& peer, int q) {
  if (peer.hostHash != me.hostHash) return "rank " + std::to_string(q) + " is on another host";
  uint64_t seen = 0;
  const int error = crossMemoryRead(static_cast<int>(peer.pid), peer.probeAddress, &seen,
                                    sizeof(seen));
  if (error != 0) {
    return "reading rank " + std::to_string(q) + "'s memory (pid " + std::to_string(peer.pid) +
           ") failed: " + std::strerror(error);
  }
  if (seen != peer.probeValue) {
    return "pid " + std::to_string(peer.pid) + " is not rank " + std::to_string(q) +
           "'s process here (another pid namespace)";
  }
  return {};
}

}  // namespace

ProcessRecord thisProcess() {
  ProcessRecord record;
  record.hostHash = hostIdentityHash();
  record.pid = static_cast<uint64_t>(getpid());
  record.probeAddress = reinterpret_cast<uintptr_t>(crossMemoryProbeWord());
  record.probeValue = *crossMemoryProbeWord();
  return record;
}

PeerProcesses agreePeerProcesses(const Comm& comm, const OpContext& op,
                                 const std::vector<ProcessRecord>& all, uint32_t round) {
  const int n = comm.size();
  const int rank = comm.rank();
  PeerProcesses result;
  for (const ProcessRecord& record : all) result.pids.push_back(static_cast<int>(record.pid));
  // The first rank this one cannot reach, -1 if none, kTurnedOff: what it
  // tells the others.
  constexpr int32_t kTurnedOff = -2;
  int32_t unreachable = comm.config.crossMemory ? -1 : kTurnedOff;
  std::string why;
  for (int q = 0; q < n && unreachable == -1; ++q) {
    if (q == rank) continue;
    why = probePeer(all[static_cast<size_t>(rank)], all[static_cast<size_t>(q)], q);
    if (!why.empty()) unreachable = q;
  }
  std::vector<int32_t> verdicts(static_cast<size_t>(n));
  exchangeRecords(comm, op, round, &unreachable, verdicts.data(), sizeof(unreachable));
  for (int q = 0; q < n; ++q) {
    const int32_t theirs = verdicts[static_cast<size_t>(q)];
    if (theirs == -1) continue;
    if (theirs == kTurnedOff) {
      result.why = "rank " + std::to_string(q) + " turned it off (RINGREDUCE_CROSS_MEMORY=0)";
      return result;
    }
    result.why = q == rank ? "rank " + std::to_string(rank) + ": " + why
                           : "rank " + std::to_string(q) + " cannot reach rank " +
                                 std::to_string(theirs) + "'s memory";
    return result;
  }
  result.usable = true;
  return result;
}

}  // namespace ringreduce
