#include "core/config.h"

#include <sched.h>

#include <cstdlib>
#include <optional>
#include <string>
#include <utility>

#include "core/errors.h"

namespace ringreduce {

namespace {
long long readPositive(const char* name, long long fallback, long long minimum) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return fallback;
  char* end = nullptr;
  const long long parsed = std::strtoll(value, &end, 10);
  if (end == value || *end != '\0' || parsed < minimum) {
    throw InvalidArgument(std::string("ringreduce: environment variable ") + name + "='" +
                          value + "' must be an integer >= " + std::to_string(minimum));
  }
  return parsed;
}

// One of the names in E's table (core/name_table.h).
template <typename E>
E readChoice(const char* name, E fallback) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return fallback;
  if (const std::optional<E> parsed = parseName<E>(value)) return *parsed;
  throw InvalidArgument(std::string("ringreduce: environment variable ") + name + "='" + value +
                        "' must be one of: " + listNames<E>());
}
// torchrun's LOCAL_WORLD_SIZE against the cores this process may run on.
bool ranksOutnumberCores() {
  const char* local = std::getenv("LOCAL_WORLD_SIZE");
  if (local == nullptr) return false;
  cpu_set_t cpus;
  if (sched_getaffinity(0, sizeof(cpus), &cpus) != 0) return false;
  return std::atoi(local) > CPU_COUNT(&cpus);
}
}  // namespace

Config Config::fromEnvironment() {
  Config config;
  config.segmentBytes = static_cast<size_t>(
      readPositive("RINGREDUCE_SEGMENT_BYTES", static_cast<long long>(config.segmentBytes), 1024));
  config.spinMicroseconds =
      static_cast<int>(readPositive("RINGREDUCE_SPIN_US", config.spinMicroseconds, 0));
  // With more ranks on this machine than cores for them, a rank spinning for
  // its peer may hold the core that peer needs: wait as briefly as the worker.
  if (ranksOutnumberCores()) config.waitSpinMicroseconds = config.spinMicroseconds;
  config.waitSpinMicroseconds =
      static_cast<int>(readPositive("RINGREDUCE_WAIT_SPIN_US", config.waitSpinMicroseconds, 0));
  config.callerGraceMicroseconds = static_cast<int>(
      readPositive("RINGREDUCE_CALLER_GRACE_US", config.callerGraceMicroseconds, 0));
  config.peerMonitor = readPositive("RINGREDUCE_PEER_MONITOR", 1, 0) != 0;
  config.checkCollectives = readPositive("RINGREDUCE_CHECK_COLLECTIVES", 0, 0) != 0;
  config.cudaAlgorithm = readChoice("RINGREDUCE_CUDA_ALGO", config.cudaAlgorithm);
  config.cudaOneShotBytes = static_cast<size_t>(readPositive(
      "RINGREDUCE_CUDA_ONESHOT_BYTES", static_cast<long long>(config.cudaOneShotBytes), 0));
  config.cudaScratchBytes = static_cast<size_t>(readPositive(
      "RINGREDUCE_CUDA_SCRATCH_BYTES", static_cast<long long>(config.cudaScratchBytes), 1 << 16));
  config.cudaWireDtype = readChoice("RINGREDUCE_CUDA_WIRE_DTYPE", config.cudaWireDtype);
  config.hostWireDtype = readChoice("RINGREDUCE_WIRE_DTYPE", config.hostWireDtype);
  config.traceBufferSize = static_cast<size_t>(readPositive(
      "RINGREDUCE_TRACE_BUFFER_SIZE", static_cast<long long>(config.traceBufferSize), 0));
  if (const char* timeline = std::getenv("RINGREDUCE_TIMELINE")) config.timelinePath = timeline;
  config.allreduceAlgorithm = readChoice("RINGREDUCE_ALGORITHM", config.allreduceAlgorithm);
  config.measureLinks = readPositive("RINGREDUCE_LINK_MEASURE", 0, 0) != 0;
  for (const auto& [name, link] : {std::pair{"RINGREDUCE_LINK_INTRA", &config.intraNode},
                                   std::pair{"RINGREDUCE_LINK_INTER", &config.interNode}}) {
    const char* value = std::getenv(name);
    if (value != nullptr && *value != '\0') *link = parseLinkCost(value, *link, name);
  }
  return config;
}

}  // namespace ringreduce
