// The RINGREDUCE_* settings: read, checked and described (config.h)
#include "core/config/config.h"

#include <sched.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <utility>

#include "core/base/errors.h"

namespace ringreduce {

namespace {

// One setting's text and where it came from, for error messages:
// "environment variable " or "config file PATH line N: ", then the key.
struct Setting {
  std::string value;
  std::string origin;
};

// Settings given to the group (pg_options), over the environment (when
// `useEnvironment`), over a config file's lines.
class Sources {
 public:
  Sources(bool useEnvironment, const std::vector<ConfigFileLine>& file, const std::string& path,
          const std::map<std::string, std::string>* given = nullptr)
      : useEnvironment_(useEnvironment), file_(file), path_(path), given_(given) {}

  std::optional<Setting> get(const char* name) const {
    if (given_ != nullptr) {
      const auto it = given_->find(name);
      if (it != given_->end() && !it->second.empty()) return Setting{it->second, "pg_options "};
    }
    if (useEnvironment_) {
      const char* value = std::getenv(name);
      if (value != nullptr && *value != '\0') return Setting{value, "environment variable "};
    }
    for (const ConfigFileLine& line : file_) {
      if (line.key == name && !line.value.empty()) {
        return Setting{line.value,
                       "config file " + path_ + " line " + std::to_string(line.line) + ": "};
      }
    }
    return std::nullopt;
  }

 private:
  const bool useEnvironment_;
  const std::vector<ConfigFileLine>& file_;
  const std::string& path_;
  const std::map<std::string, std::string>* given_;
};

// An integer setting of at least `minimum` (and at most `maximum`, where the
// setting is held in a narrower type: refused rather than wrapped, as
// RINGREDUCE_CALLER_GRACE_US of an hour, 3.6e9 us, had become a negative
// grace in an int: every task due at once).
long long readPositive(const Sources& sources, const char* name, long long fallback,
                       long long minimum,
                       long long maximum = std::numeric_limits<long long>::max()) {
  const std::optional<Setting> setting = sources.get(name);
  if (!setting) return fallback;
  const char* value = setting->value.c_str();
  char* end = nullptr;
  errno = 0;
  const long long parsed = std::strtoll(value, &end, 10);
  if (end == value || *end != '\0' || errno == ERANGE || parsed < minimum || parsed > maximum) {
    const std::string range = maximum == std::numeric_limits<long long>::max()
                                  ? ">= " + std::to_string(minimum)
                                  : "from " + std::to_string(minimum) + " to " +
                                        std::to_string(maximum);
    throw InvalidArgument("ringreduce: " + setting->origin + name + "='" + setting->value +
                          "' must be an integer " + range);
  }
  return parsed;
}

int readPositiveInt(const Sources& sources, const char* name, int fallback, int minimum) {
  return static_cast<int>(
      readPositive(sources, name, fallback, minimum, std::numeric_limits<int>::max()));
}

bool readFlag(const Sources& sources, const char* name, bool fallback) {
  return readPositive(sources, name, fallback ? 1 : 0, 0) != 0;
}

// "auto" (or "on", "1") keeps a feature where it works, "off" ("0") turns it off.
bool readAutoOrOff(const Sources& sources, const char* name, bool fallback) {
  const std::optional<Setting> setting = sources.get(name);
  if (!setting) return fallback;
  const std::string& v = setting->value;
  if (v == "auto" || v == "on" || v == "1") return true;
  if (v == "off" || v == "0") return false;
  throw InvalidArgument("ringreduce: " + setting->origin + name + "='" + v +
                        "' must be auto or off");
}

// One of the names in E's table (core/base/name_table.h).
template <typename E>
E readChoice(const Sources& sources, const char* name, E fallback) {
  const std::optional<Setting> setting = sources.get(name);
  if (!setting) return fallback;
  if (const std::optional<E> parsed = parseName<E>(setting->value)) return *parsed;
  throw InvalidArgument("ringreduce: " + setting->origin + name + "='" + setting->value +
                        "' must be one of: " + listNames<E>());
}

// The ranks on this machine (torchrun's LOCAL_WORLD_SIZE, else the group's
// own count, `ranksOnHost`) less the cores this process may run on; nothing
// when neither is known.
std::optional<int> ranksBeyondCores(int ranksOnHost) {
  const char* local = std::getenv("LOCAL_WORLD_SIZE");
  const int ranks = local != nullptr && *local != '\0' ? std::atoi(local) : ranksOnHost;
  if (ranks <= 0) return std::nullopt;
  cpu_set_t cpus;
  if (sched_getaffinity(0, sizeof(cpus), &cpus) != 0) return std::nullopt;
  return ranks - CPU_COUNT(&cpus);
}

// TORCH_NCCL_ENABLE_TIMING as torch reads its boolean settings: NCCL users
// ask for durations so, and get them from this backend too.
bool ncclTimingRequested() {
  const char* value = std::getenv("TORCH_NCCL_ENABLE_TIMING");
  if (value == nullptr) return false;
  std::string text(value);
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return text == "1" || text == "true" || text == "yes" || text == "y" || text == "on";
}

Config readConfig(const Sources& sources, int ranksOnHost = 0) {
  Config config;
  config.segmentBytes = static_cast<size_t>(readPositive(
      sources, "RINGREDUCE_SEGMENT_BYTES", static_cast<long long>(config.segmentBytes), 1024));
  config.eagerBytes = static_cast<size_t>(readPositive(
      sources, "RINGREDUCE_EAGER_BYTES", static_cast<long long>(config.eagerBytes), 0));
  // With more ranks on this machine than cores for them, a rank spinning for
  // its peer holds the core that peer needs, and one that blocks at once
  // pays a context switch per message. Measured with three ranks on two
  // cores, three groups each keeping 16 collectives in flight
  // (benchmarks/concurrent_groups.py): 0.97 s with 50 us spins, 0.37 s with
  // none, 5.3 s with 300 us. A caller's wait that yields the core at every
  // turn beats both for the waits; the worker still does not spin
  // (benchmarks/RESULTS.md, "Oversubscribed ranks yield").
  const std::optional<int> beyondCores = ranksBeyondCores(ranksOnHost);
  if (beyondCores && *beyondCores > 0) {
    config.spinYields = true;
    config.spinMicroseconds = 0;
    config.waitSpinMicroseconds = kOversubscribedWaitSpinMicroseconds;
  }
  config.spinYields = readFlag(sources, "RINGREDUCE_SPIN_YIELD", config.spinYields);
  // One core per rank: each rank's worker stays beside its own caller. Not
  // with more ranks than cores, where the callers themselves move between
  // cores: the three-group load at world 3 on two cores was 0.48-0.49 s
  // following against 0.45-0.49 s not (benchmarks/RESULTS.md, "The worker
  // beside its own rank").
  config.workerFollowsCaller = beyondCores && *beyondCores == 0;
  config.workerFollowsCaller =
      readFlag(sources, "RINGREDUCE_WORKER_FOLLOWS_CALLER", config.workerFollowsCaller);
  config.separateCores = readFlag(sources, "RINGREDUCE_SEPARATE_CORES", config.separateCores);
  config.spinMicroseconds =
      readPositiveInt(sources, "RINGREDUCE_SPIN_US", config.spinMicroseconds, 0);
  config.waitSpinMicroseconds =
      readPositiveInt(sources, "RINGREDUCE_WAIT_SPIN_US", config.waitSpinMicroseconds, 0);
  const bool spinsGiven =
      sources.get("RINGREDUCE_SPIN_US") || sources.get("RINGREDUCE_WAIT_SPIN_US");
  config.adaptiveSpin = readFlag(sources, "RINGREDUCE_ADAPTIVE_SPIN", !spinsGiven);
  config.callerGraceMicroseconds =
      readPositiveInt(sources, "RINGREDUCE_CALLER_GRACE_US", config.callerGraceMicroseconds, 0);
  config.hugePages = readFlag(sources, "RINGREDUCE_HUGE_PAGES", config.hugePages);
  config.crossMemory = readFlag(sources, "RINGREDUCE_CROSS_MEMORY", config.crossMemory);
  config.hostChannelBytes = static_cast<size_t>(readPositive(
      sources, "RINGREDUCE_SHM_BYTES", static_cast<long long>(config.hostChannelBytes), 0));
  config.channelStores = readChoice(sources, "RINGREDUCE_SHM_STORES", config.channelStores);
  config.asyncOnCallerBytes = static_cast<size_t>(readPositive(
      sources, "RINGREDUCE_ASYNC_ON_CALLER_BYTES", static_cast<long long>(config.asyncOnCallerBytes),
      0));
  if (config.hostChannelBytes > kMaxHostChannelBytes) {
    // Each rank maps 2 x world buffers of it: bounded, like the memory.
    throw InvalidArgument("ringreduce: RINGREDUCE_SHM_BYTES='" +
                          std::to_string(config.hostChannelBytes) + "' must be at most " +
                          std::to_string(kMaxHostChannelBytes) + " (64 MiB)");
  }
  config.peerMonitor = readFlag(sources, "RINGREDUCE_PEER_MONITOR", config.peerMonitor);
  config.checkCollectives =
      readFlag(sources, "RINGREDUCE_CHECK_COLLECTIVES", config.checkCollectives);
  config.enableTiming = readFlag(sources, "RINGREDUCE_ENABLE_TIMING", ncclTimingRequested());
  config.cudaAlgorithm = readChoice(sources, "RINGREDUCE_CUDA_ALGO", config.cudaAlgorithm);
  config.cudaOneShotBytes = static_cast<size_t>(
      readPositive(sources, "RINGREDUCE_CUDA_ONESHOT_BYTES",
                   static_cast<long long>(config.cudaOneShotBytes), 0));
  config.cudaScratchBytes = static_cast<size_t>(
      readPositive(sources, "RINGREDUCE_CUDA_SCRATCH_BYTES",
                   static_cast<long long>(config.cudaScratchBytes), 1 << 16));
  config.cudaWireDtype = readChoice(sources, "RINGREDUCE_CUDA_WIRE_DTYPE", config.cudaWireDtype);
  config.cudaPeerAccess = readAutoOrOff(sources, "RINGREDUCE_CUDA_P2P", config.cudaPeerAccess);
  config.cudaAutotune = readFlag(sources, "RINGREDUCE_CUDA_AUTOTUNE", config.cudaAutotune);
  config.cudaSync = readChoice(sources, "RINGREDUCE_CUDA_SYNC", config.cudaSync);
  config.cudaBufferBytes = static_cast<size_t>(
      readPositive(sources, "RINGREDUCE_CUDA_BUFFER_BYTES",
                   static_cast<long long>(config.cudaBufferBytes), 4096));
  if (config.cudaBufferBytes % 4096 != 0) {
    throw InvalidArgument("ringreduce: RINGREDUCE_CUDA_BUFFER_BYTES=" +
                          std::to_string(config.cudaBufferBytes) +
                          " is not a multiple of 4096");
  }
  config.cudaHoldBytes = static_cast<size_t>(
      readPositive(sources, "RINGREDUCE_CUDA_HOLD_BYTES",
                   static_cast<long long>(config.cudaHoldBytes), 0));
  config.cudaBlocks = readPositiveInt(sources, "RINGREDUCE_CUDA_BLOCKS", config.cudaBlocks, 0);
  if (config.cudaBlocks > 64) {
    throw InvalidArgument("ringreduce: RINGREDUCE_CUDA_BLOCKS=" +
                          std::to_string(config.cudaBlocks) + " is above 64");
  }
  config.hostWireDtype = readChoice(sources, "RINGREDUCE_WIRE_DTYPE", config.hostWireDtype);
  config.traceBufferSize = static_cast<size_t>(
      readPositive(sources, "RINGREDUCE_TRACE_BUFFER_SIZE",
                   static_cast<long long>(config.traceBufferSize), 0));
  // The timeline is a path, not a tuning knob: read from the environment only.
  if (const char* timeline = std::getenv("RINGREDUCE_TIMELINE")) config.timelinePath = timeline;
  config.allreduceAlgorithm =
      readChoice(sources, "RINGREDUCE_ALGORITHM", config.allreduceAlgorithm);
  config.measureLinks = readFlag(sources, "RINGREDUCE_LINK_MEASURE", config.measureLinks);
  for (const auto& [name, link] : {std::pair{"RINGREDUCE_LINK_INTRA", &config.intraNode},
                                   std::pair{"RINGREDUCE_LINK_INTER", &config.interNode}}) {
    if (const std::optional<Setting> setting = sources.get(name)) {
      *link = parseLinkCost(setting->value, *link, (setting->origin + name).c_str());
    }
  }
  config.autotune = readFlag(sources, "RINGREDUCE_AUTOTUNE", config.autotune);
  config.autotuneSteps =
      readPositiveInt(sources, "RINGREDUCE_AUTOTUNE_STEPS", config.autotuneSteps, 1);
  config.autotuneLossyWire =
      readFlag(sources, "RINGREDUCE_AUTOTUNE_LOSSY_WIRE", config.autotuneLossyWire);
  return config;
}

std::string trim(const std::string& text) {
  const size_t first = text.find_first_not_of(" \t\r");
  if (first == std::string::npos) return "";
  return text.substr(first, text.find_last_not_of(" \t\r") - first + 1);
}

// "8GB/s,1us,0.2us": what parseLinkCost reads back.
std::string linkCostSetting(const LinkCost& cost) {
  std::ostringstream out;
  out << (cost.beta > 0 ? 1.0 / cost.beta / 1e9 : 0.0) << "GB/s," << cost.alpha * 1e6 << "us,"
      << cost.overhead * 1e6 << "us";
  return out.str();
}

}  // namespace

std::vector<std::pair<std::string, std::string>> Config::describe() const {
  const auto number = [](auto value) { return std::to_string(value); };
  return {
      {"RINGREDUCE_SEGMENT_BYTES", number(segmentBytes)},
      {"RINGREDUCE_EAGER_BYTES", number(eagerBytes)},
      {"RINGREDUCE_SPIN_US", number(spinMicroseconds)},
      {"RINGREDUCE_WAIT_SPIN_US", number(waitSpinMicroseconds)},
      {"RINGREDUCE_ADAPTIVE_SPIN", number(int(adaptiveSpin))},
      {"RINGREDUCE_CALLER_GRACE_US", number(callerGraceMicroseconds)},
      {"RINGREDUCE_SPIN_YIELD", number(int(spinYields))},
      {"RINGREDUCE_WORKER_FOLLOWS_CALLER", number(int(workerFollowsCaller))},
      {"RINGREDUCE_SEPARATE_CORES", number(int(separateCores))},
      {"RINGREDUCE_HUGE_PAGES", number(int(hugePages))},
      {"RINGREDUCE_CROSS_MEMORY", number(int(crossMemory))},
      {"RINGREDUCE_SHM_BYTES", number(hostChannelBytes)},
      {"RINGREDUCE_SHM_STORES", nameOf(channelStores)},
      {"RINGREDUCE_ASYNC_ON_CALLER_BYTES", number(asyncOnCallerBytes)},
      {"RINGREDUCE_PEER_MONITOR", number(int(peerMonitor))},
      {"RINGREDUCE_CHECK_COLLECTIVES", number(int(checkCollectives))},
      {"RINGREDUCE_ENABLE_TIMING", number(int(enableTiming))},
      {"RINGREDUCE_ALGORITHM", nameOf(allreduceAlgorithm)},
      {"RINGREDUCE_LINK_INTRA", linkCostSetting(intraNode)},
      {"RINGREDUCE_LINK_INTER", linkCostSetting(interNode)},
      {"RINGREDUCE_LINK_MEASURE", number(int(measureLinks))},
      {"RINGREDUCE_CUDA_ALGO", nameOf(cudaAlgorithm)},
      {"RINGREDUCE_CUDA_ONESHOT_BYTES", number(cudaOneShotBytes)},
      {"RINGREDUCE_CUDA_SCRATCH_BYTES", number(cudaScratchBytes)},
      {"RINGREDUCE_CUDA_WIRE_DTYPE", nameOf(cudaWireDtype)},
      {"RINGREDUCE_CUDA_P2P", cudaPeerAccess ? "auto" : "off"},
      {"RINGREDUCE_CUDA_AUTOTUNE", number(int(cudaAutotune))},
      {"RINGREDUCE_CUDA_SYNC", nameOf(cudaSync)},
      {"RINGREDUCE_CUDA_BUFFER_BYTES", number(cudaBufferBytes)},
      {"RINGREDUCE_CUDA_BLOCKS", number(cudaBlocks)},
      {"RINGREDUCE_CUDA_HOLD_BYTES", number(cudaHoldBytes)},
      {"RINGREDUCE_WIRE_DTYPE", nameOf(hostWireDtype)},
      {"RINGREDUCE_TRACE_BUFFER_SIZE", number(traceBufferSize)},
      {"RINGREDUCE_AUTOTUNE", number(int(autotune))},
      {"RINGREDUCE_AUTOTUNE_STEPS", number(autotuneSteps)},
      {"RINGREDUCE_AUTOTUNE_LOSSY_WIRE", number(int(autotuneLossyWire))},
  };
}

std::vector<ConfigFileLine> readConfigFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    throw InvalidArgument("ringreduce: RINGREDUCE_CONFIG=" + path + ": cannot read the file");
  }
  std::set<std::string> known;
  for (const auto& [key, value] : Config().describe()) known.insert(key);
  std::vector<ConfigFileLine> lines;
  std::string text;
  for (int number = 1; std::getline(in, text); ++number) {
    text = trim(text);
    if (text.empty() || text[0] == '#') continue;
    const std::string where = "ringreduce: config file " + path + " line " +
                              std::to_string(number) + ": ";
    const size_t equals = text.find('=');
    if (equals == std::string::npos) {
      throw InvalidArgument(where + "'" + text + "' is not KEY=VALUE");
    }
    ConfigFileLine line{trim(text.substr(0, equals)), trim(text.substr(equals + 1)), number};
    if (known.count(line.key) == 0) {
      throw InvalidArgument(where + "unknown key '" + line.key +
                            "': not a group setting (README, Tuning, lists them)");
    }
    for (const ConfigFileLine& earlier : lines) {
      if (earlier.key == line.key) {
        throw InvalidArgument(where + line.key + " repeats line " + std::to_string(earlier.line));
      }
    }
    lines.push_back(std::move(line));
  }
  return lines;
}

void Config::resolveDeviceFlags(bool allRanksOnThisHost, int size) {
  // The flags kernels move full-width values: a 16-bit wire asked for
  // keeps auto on the IPC kernels that carry it, and is an error with flags.
  const bool wire = cudaWireDtype != WireDtype::None;
  if (cudaAlgorithm == CudaAlgorithm::Flags && wire) {
    throw InvalidArgument(std::string("ringreduce: RINGREDUCE_CUDA_ALGO=flags does not carry "
                                      "RINGREDUCE_CUDA_WIRE_DTYPE=") +
                          nameOf(cudaWireDtype) +
                          " (the oneshot and staged IPC kernels do; auto takes them when a "
                          "wire dtype is set)");
  }
  cudaDeviceFlags = cudaAlgorithm == CudaAlgorithm::Flags ||
                    (cudaAlgorithm == CudaAlgorithm::Auto && !wire && allRanksOnThisHost &&
                     size <= kDeviceFlagsMaxRanks);
}

Config Config::fromEnvironment(int ranksOnHost, const std::map<std::string, std::string>& given) {
  if (!given.empty()) {
    std::set<std::string> known;
    for (const auto& [key, value] : Config().describe()) known.insert(key);
    for (const auto& [key, value] : given) {
      if (known.count(key) == 0) {
        throw InvalidArgument("ringreduce: pg_options config: '" + key +
                              "' is not a setting (the keys are those "
                              "torch_ringreduce.config() lists)");
      }
    }
  }
  const char* path = std::getenv("RINGREDUCE_CONFIG");
  const std::string file = path == nullptr ? "" : path;
  const std::vector<ConfigFileLine> lines =
      file.empty() ? std::vector<ConfigFileLine>{} : readConfigFile(file);
  // Every value in the file must be good, also those the environment overrides.
  if (!lines.empty()) readConfig(Sources(false, lines, file));
  return readConfig(Sources(true, lines, file, &given), ranksOnHost);
}

}  // namespace ringreduce
