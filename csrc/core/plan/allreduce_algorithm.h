// The host allreduce algorithms, with their one name table
// (core/base/name_table.h): RINGREDUCE_ALGORITHM takes these names, and logs and
// the simulator print them.
#pragma once

#include <cstdint>

#include "core/base/name_table.h"

namespace ringreduce {

// Auto: the cheapest by the cost model (core/plan/allreduce_cost.h), the same on
// every rank, or CrossMemory where the group allows it. The others force
// that algorithm (tests, benchmarks). CrossMemory: every rank on one host,
// reading and writing the others' memory (algorithms/cross_memory/allreduce.h).
// HostChannel: every rank on one host, through the group's shared segment
// (algorithms/host_channel/allreduce.h), for what fits its buffers.
enum class AllreduceAlgorithm : uint8_t {
  Auto,
  Ring,
  HalvingDoubling,
  TwoLevel,
  Direct,
  CrossMemory,
  HostChannel
};

template <>
struct NameTable<AllreduceAlgorithm> {
  static constexpr NamedValue<AllreduceAlgorithm> entries[] = {
      {AllreduceAlgorithm::Auto, "auto"},
      {AllreduceAlgorithm::Ring, "ring"},
      {AllreduceAlgorithm::HalvingDoubling, "halving_doubling"},
      {AllreduceAlgorithm::TwoLevel, "two_level"},
      {AllreduceAlgorithm::Direct, "direct"},
      {AllreduceAlgorithm::CrossMemory, "cma"},
      {AllreduceAlgorithm::HostChannel, "shm"},
  };
};

}  // namespace ringreduce
