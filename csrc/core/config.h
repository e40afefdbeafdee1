// Tunables read from the environment once per process group.
#pragma once

#include <cstddef>

namespace ringreduce {

struct Config {
  // Bytes per pipeline segment: a ring step sends segment k+1 while it reduces
  // segment k. RINGREDUCE_SEGMENT_BYTES.
  size_t segmentBytes = 256 * 1024;
  // How long a waiting thread polls UCX before it sleeps on the event fd.
  // Short, because ranks often outnumber cores. RINGREDUCE_SPIN_US.
  int spinMicroseconds = 50;

  // Watch peers over a TCP side channel so a dead rank is reported at once
  // instead of at the timeout. RINGREDUCE_PEER_MONITOR=0 turns it off.
  bool peerMonitor = true;

  // Compare every collective's fingerprint across ranks before running it
  // (also on with TORCH_DISTRIBUTED_DEBUG=DETAIL). RINGREDUCE_CHECK_COLLECTIVES=1.
  bool checkCollectives = false;

  static Config fromEnvironment();
};

}  // namespace ringreduce
