// What must be alike on every rank of a group, and the first rank that
// differs.
//
// Some settings decide how a collective's messages go: the allreduce's
// algorithm and the link costs and tuning that choose it, the wire dtype,
// the ring's segment, whether every collective first compares its
// fingerprint, the CUDA path and its layout. A rank that differs in one
// of them sends what its peers do not expect: a hang until the timeout, or
// "received 65536 bytes, expected 262144", which names sizes, not the
// cause. A different build of torch_ringreduce is the same risk. So every
// rank publishes these with its address when the group is made, and every
// rank compares them there (transport/ucx/ucx_transport.cpp): the group's
// creation fails on every rank alike, naming the setting and both values.
// Settings that are a rank's own (spins, timing, its trace) are not here.
// No torch, no UCX.
#pragma once

#include <string>
#include <vector>

#include "core/config/config.h"

namespace ringreduce {

// This build: the package's version and the source commit it was built
// from, where CMake could read one ("0.1.0, commit 08e56eb1f2a3").
std::string buildIdentity();

// The line that says whether every collective first compares its
// fingerprint across ranks (RINGREDUCE_CHECK_COLLECTIVES or
// TORCH_DISTRIBUTED_DEBUG=DETAIL): that adds an exchange to each one.
std::string collectiveCheckSetting(bool on);

// "NAME=value" lines of what must agree: the build, then the settings.
std::string agreedSettings(const Config& config, bool collectiveChecks);

// The first line in which a rank's text differs from rank 0's, said with
// both values ("RINGREDUCE_ALGORITHM differs between ranks: rank 0 has ring,
// rank 1 has halving_doubling; every rank of a group must use the same");
// "" when every rank agrees. Every rank that reads the same texts says the
// same.
std::string settingsDisagreement(const std::vector<std::string>& perRank);

}  // namespace ringreduce
