// ringreduce's c10d::Backend::Options: what a group is made with beyond its
// store, rank and size. torch hands options around when it makes subgroups
// from a group bound to a device (init_process_group(device_id=...)):
// split_group and DeviceMesh deep-copy the parent backend's `options` and
// pass them to ProcessGroup.split_group, and new_group(pg_options=...) and
// init_process_group(pg_options=...) hand them to the backend's creator.
// A group made with them runs with their timeout (unless torch's own
// timeout argument says otherwise, as for NCCL) and their settings.
#pragma once

#include <torch/csrc/distributed/c10d/Backend.hpp>

#include <map>
#include <string>

namespace ringreduce {

struct RingOptions : c10d::Backend::Options {
  explicit RingOptions(std::chrono::milliseconds timeout = ::kBackendDefaultTimeout)
      : Options("ringreduce", timeout) {}
  RingOptions(const RingOptions&) = default;

  // RINGREDUCE_* settings for the group, over the environment and the
  // RINGREDUCE_CONFIG file (the keys torch_ringreduce.config() lists; any
  // other key fails the group's creation). A group's own `options` carry
  // what it was given, so its subgroups run as it does.
  std::map<std::string, std::string> config;
};

}  // namespace ringreduce
