// What must be alike on every rank of a group (settings_agreement.h)
#include "core/config/settings_agreement.h"

#include <algorithm>
#include <set>

#ifndef RINGREDUCE_VERSION
#define RINGREDUCE_VERSION ""
#endif
// RINGREDUCE_COMMIT, written at every build (cmake/write_commit.cmake).
#include "ringreduce_commit.h"

namespace ringreduce {

namespace {

// The settings (Config::describe's names) that decide how a collective's
// messages go, so that ranks which differ in one cannot talk.
const std::set<std::string>& settingsThatMustAgree() {
  // Each one, differing between two ranks across emulated nodes, hung a
  // collective until its timeout or failed it on a size (the CUDA ones:
  // what the device paths choose by, per rank, the same way).
  static const std::set<std::string> names = {
      "RINGREDUCE_ALGORITHM",      // which allreduce runs
      "RINGREDUCE_WIRE_DTYPE",     // 16-bit floats on the wire or not
      "RINGREDUCE_SEGMENT_BYTES",  // the ring's and the chain's pieces
      // The cost model's links choose the allreduce where the algorithm is
      // auto; a measurement is shared, but only where every rank measures.
      "RINGREDUCE_LINK_INTRA",
      "RINGREDUCE_LINK_INTER",
      "RINGREDUCE_LINK_MEASURE",
      // The online tuner runs its candidates in the same order everywhere.
      "RINGREDUCE_AUTOTUNE",
      "RINGREDUCE_AUTOTUNE_STEPS",
      "RINGREDUCE_AUTOTUNE_LOSSY_WIRE",
      "RINGREDUCE_CUDA_ALGO",  // the device path
      "RINGREDUCE_CUDA_WIRE_DTYPE",
      "RINGREDUCE_CUDA_ONESHOT_BYTES",  // one-shot or two-shot, by size
      "RINGREDUCE_CUDA_SYNC",           // how the device-flags path's ranks meet
      "RINGREDUCE_CUDA_BUFFER_BYTES",   // which sizes that path takes
      "RINGREDUCE_CUDA_BLOCKS",         // its blocks meet their peers' blocks
      "RINGREDUCE_CUDA_SCRATCH_BYTES",  // the IPC kernels' pieces
      "RINGREDUCE_CUDA_AUTOTUNE",       // device ring against NCCL, timed alike
  };
  return names;
}

std::vector<std::string> linesOf(const std::string& text) {
  std::vector<std::string> lines;
  size_t start = 0;
  while (start < text.size()) {
    const size_t end = std::min(text.find('\n', start), text.size());
    if (end > start) lines.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return lines;
}

std::string nameOf(const std::string& line) { return line.substr(0, line.find('=')); }

std::string valueOf(const std::string& line) {
  const size_t eq = line.find('=');
  return eq == std::string::npos ? std::string("(unset)") : line.substr(eq + 1);
}

}  // namespace

std::string buildIdentity() {
  const std::string version = RINGREDUCE_VERSION;
  const std::string commit = RINGREDUCE_COMMIT;
  return (version.empty() ? std::string("unversioned") : version) +
         (commit.empty() ? std::string(", commit unknown") : ", commit " + commit);
}

std::string collectiveCheckSetting(bool on) {
  return std::string("the collective check (RINGREDUCE_CHECK_COLLECTIVES, TORCH_DISTRIBUTED_DEBUG)=") +
         (on ? "on" : "off");
}

std::string agreedSettings(const Config& config, bool collectiveChecks) {
  std::string text = "the torch_ringreduce build=" + buildIdentity() + "\n";
  for (const auto& [name, value] : config.describe()) {
    if (settingsThatMustAgree().count(name) != 0) text += name + "=" + value + "\n";
  }
  return text + collectiveCheckSetting(collectiveChecks) + "\n";
}

std::string settingsDisagreement(const std::vector<std::string>& perRank) {
  if (perRank.empty()) return "";
  const std::vector<std::string> first = linesOf(perRank[0]);
  for (size_t r = 1; r < perRank.size(); ++r) {
    const std::vector<std::string> theirs = linesOf(perRank[r]);
    for (size_t i = 0; i < std::max(first.size(), theirs.size()); ++i) {
      const std::string a = i < first.size() ? first[i] : "";
      const std::string b = i < theirs.size() ? theirs[i] : "";
      if (a == b) continue;
      return nameOf(a.empty() ? b : a) + " differs between ranks: rank 0 has " + valueOf(a) +
             ", rank " + std::to_string(r) + " has " + valueOf(b) +
             "; every rank of a group must use the same";
    }
  }
  return "";
}

}  // namespace ringreduce
