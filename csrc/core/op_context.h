// What one collective call carries down to every wait: its name and sequence
// number (for error messages) and the deadline that bounds it.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace ringreduce {

using Clock = std::chrono::steady_clock;

struct OpContext {
  const char* opName = "collective";
  uint64_t seq = 0;
  std::chrono::milliseconds timeout{30 * 60 * 1000};
  Clock::time_point deadline = Clock::time_point::max();

  OpContext() = default;
  OpContext(const char* name, uint64_t sequence, std::chrono::milliseconds limit)
      : opName(name), seq(sequence), timeout(limit), deadline(Clock::now() + limit) {}

  // "allreduce #12"
  std::string describe() const { return std::string(opName) + " #" + std::to_string(seq); }
};

}  // namespace ringreduce
