// The host reduction loops' choice of instruction set, made once at first use (host_loops.h)
#include "core/math/host_loops.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "core/base/errors.h"

namespace ringreduce {

// One table per instruction set (core/host_loops_<set>.cpp).
namespace isa_baseline {
extern const HostLoops kLoops;
}
#if defined(__x86_64__)
namespace isa_avx2 {
extern const HostLoops kLoops;
}
namespace isa_avx512 {
extern const HostLoops kLoops;
}
#endif

namespace {

bool cpuRuns(HostIsa isa) {
#if defined(__x86_64__)
  switch (isa) {
    case HostIsa::Baseline:
      return true;
    case HostIsa::Avx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c");
    case HostIsa::Avx512:
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
             __builtin_cpu_supports("f16c");
  }
  return false;
#else
  return isa == HostIsa::Baseline;
#endif
}

const HostLoops* tableOf(HostIsa isa) {
  switch (isa) {
    case HostIsa::Baseline:
      return &isa_baseline::kLoops;
#if defined(__x86_64__)
    case HostIsa::Avx2:
      return &isa_avx2::kLoops;
    case HostIsa::Avx512:
      return &isa_avx512::kLoops;
#endif
    default:
      return nullptr;
  }
}

// Whether RINGREDUCE_HOST_ISA names a set.
bool isaNamed() {
  const char* wanted = std::getenv("RINGREDUCE_HOST_ISA");
  return wanted != nullptr && *wanted != '\0';
}

const HostLoops& choose() {
  const HostLoops* best = &isa_baseline::kLoops;
  for (HostIsa isa : {HostIsa::Avx2, HostIsa::Avx512}) {
    if (const HostLoops* loops = hostLoopsFor(isa)) best = loops;
  }
  if (!isaNamed()) return *best;
  const char* wanted = std::getenv("RINGREDUCE_HOST_ISA");
  for (HostIsa isa : {HostIsa::Baseline, HostIsa::Avx2, HostIsa::Avx512}) {
    const HostLoops* table = tableOf(isa);
    if (table == nullptr || std::strcmp(table->name, wanted) != 0) continue;
    if (cpuRuns(isa)) return *table;
    std::fprintf(stderr,
                 "ringreduce: RINGREDUCE_HOST_ISA=%s: this CPU lacks that instruction set; "
                 "using %s\n",
                 wanted, best->name);
    return *best;
  }
  throw InvalidArgument(std::string("ringreduce: RINGREDUCE_HOST_ISA=") + wanted +
                        " is not one of baseline, avx2, avx512");
}

}  // namespace

const HostLoops* hostLoopsFor(HostIsa isa) { return cpuRuns(isa) ? tableOf(isa) : nullptr; }

const HostLoops& hostLoops() {
  static const HostLoops& chosen = choose();
  return chosen;
}

const HostLoops& hostLoopsForBytes(size_t bytes) {
  static const HostLoops& narrow = [] () -> const HostLoops& {
    const HostLoops& chosen = hostLoops();
    const HostLoops* avx2 = hostLoopsFor(HostIsa::Avx2);
    return chosen.isa == HostIsa::Avx512 && !isaNamed() && avx2 != nullptr ? *avx2 : chosen;
  }();
  return bytes < kWideVectorsFromBytes ? narrow : hostLoops();
}

std::vector<const HostLoops*> availableHostLoops() {
  std::vector<const HostLoops*> all;
  for (HostIsa isa : {HostIsa::Baseline, HostIsa::Avx2, HostIsa::Avx512}) {
    if (const HostLoops* loops = hostLoopsFor(isa)) all.push_back(loops);
  }
  return all;
}

}  // namespace ringreduce
