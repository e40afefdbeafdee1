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

  static Config fromEnvironment();
};

}  // namespace ringreduce
