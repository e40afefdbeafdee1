// RINGREDUCE_AUTOTUNE: the online tuner's trials and choices per size class (autotune.h)
#include "algorithms/tuning/autotune.h"

#include <algorithm>
#include <chrono>
#include <sstream>

#include "algorithms/record_allgather.h"
#include "core/observe/log.h"
#include "transport/tag.h"

namespace ringreduce {

namespace {

size_t sizeClassOf(size_t bytes) {
  size_t power = 1;
  while (power < bytes) power <<= 1;
  return power;
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

}  // namespace

std::vector<Config> AllreduceTuner::candidates(const Config& base, size_t classBytes) {
  std::vector<Config> list{base};
  const auto with = [&](AllreduceAlgorithm algorithm, size_t segment, WireDtype wire) {
    Config candidate = base;
    candidate.allreduceAlgorithm = algorithm;
    candidate.segmentBytes = segment;
    candidate.hostWireDtype = wire;
    list.push_back(candidate);
  };
  // Segments matter most to the ring, and only when a chunk holds several
  // (direct segments its first round too, tried here at the base size).
  for (const size_t segment : {size_t{64} << 10, size_t{256} << 10, size_t{1} << 20,
                               size_t{4} << 20}) {
    if (segment < classBytes / 2 || segment == base.segmentBytes) {
      with(AllreduceAlgorithm::Ring, segment, base.hostWireDtype);
    }
  }
  with(AllreduceAlgorithm::HalvingDoubling, base.segmentBytes, base.hostWireDtype);
  with(AllreduceAlgorithm::Direct, base.segmentBytes, base.hostWireDtype);
  if (base.autotuneLossyWire) {
    for (const WireDtype wire : {WireDtype::Fp16, WireDtype::Bf16}) {
      if (wire != base.hostWireDtype) with(base.allreduceAlgorithm, base.segmentBytes, wire);
    }
  }
  return list;
}

AllreduceTuner::Trials AllreduceTuner::hostAllreduce() {
  return {&AllreduceTuner::candidates, &AllreduceTuner::describe, "allreduce"};
}

AllreduceTuner::Trials AllreduceTuner::cudaPaths() {
  Trials trials;
  trials.candidates = [](const Config& base, size_t) {
    std::vector<Config> list;
    for (const CudaAlgorithm algorithm : {CudaAlgorithm::Ring, CudaAlgorithm::Nccl}) {
      Config candidate = base;
      candidate.cudaAlgorithm = algorithm;
      list.push_back(candidate);
    }
    return list;
  };
  trials.describe = [](const Config& candidate) {
    return std::string("RINGREDUCE_CUDA_ALGO=") + nameOf(candidate.cudaAlgorithm);
  };
  trials.what = "CUDA allreduce across nodes";
  return trials;
}

bool AllreduceTuner::onTrial(size_t bytes) const {
  const auto found = classes_.find(sizeClassOf(bytes));
  return found == classes_.end() || found->second.chosen < 0;
}

std::string AllreduceTuner::describe(const Config& candidate) {
  std::ostringstream text;
  text << "RINGREDUCE_ALGORITHM=" << nameOf(candidate.allreduceAlgorithm)
       << " RINGREDUCE_SEGMENT_BYTES=" << candidate.segmentBytes
       << " RINGREDUCE_WIRE_DTYPE=" << nameOf(candidate.hostWireDtype);
  return text.str();
}

void AllreduceTuner::allreduce(const Comm& comm, const OpContext& op, size_t bytes,
                               const std::function<void(const Comm&)>& run, TrialClock* clock) {
  const size_t classBytes = sizeClassOf(bytes);
  SizeClass& sizeClass = classes_[classBytes];
  if (sizeClass.candidates.empty()) {
    sizeClass.candidates = trials_.candidates(base_, classBytes);
    sizeClass.seconds.resize(sizeClass.candidates.size());
  }
  const auto runWith = [&](const Config& config) {
    run(Comm{comm.transport, config, comm.workspace, comm.selector});
  };
  if (sizeClass.chosen >= 0) {
    return runWith(sizeClass.candidates[static_cast<size_t>(sizeClass.chosen)]);
  }
  const size_t count = sizeClass.candidates.size();
  const size_t candidate = static_cast<size_t>(sizeClass.trials) % count;
  double seconds = 0;
  if (clock != nullptr) {
    clock->start();
    runWith(sizeClass.candidates[candidate]);
    seconds = clock->stop();
  } else {
    const auto start = std::chrono::steady_clock::now();
    runWith(sizeClass.candidates[candidate]);
    seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  sizeClass.seconds[candidate].push_back(seconds);
  if (++sizeClass.trials == static_cast<int>(count) * base_.autotuneSteps) {
    decide(comm, op, classBytes, sizeClass);
  }
}

void AllreduceTuner::decide(const Comm& comm, const OpContext& op, size_t classBytes,
                            SizeClass& sizeClass) {
  const size_t count = sizeClass.candidates.size();
  std::vector<double> mine(count);
  for (size_t c = 0; c < count; ++c) mine[c] = median(sizeClass.seconds[c]);
  std::vector<double> all(count * static_cast<size_t>(comm.size()));
  // The last slot of this operation, after the algorithm's messages: the
  // same on every rank, and matched in order behind any of the algorithm's.
  exchangeRecords(comm, op, kMaxSlot, mine.data(), all.data(), count * sizeof(double));
  std::vector<double> slowest(count, 0.0);
  for (size_t r = 0; r < static_cast<size_t>(comm.size()); ++r) {
    for (size_t c = 0; c < count; ++c) slowest[c] = std::max(slowest[c], all[r * count + c]);
  }
  const size_t best = static_cast<size_t>(
      std::min_element(slowest.begin(), slowest.end()) - slowest.begin());
  sizeClass.chosen = static_cast<int>(best);
  Choice choice{classBytes, trials_.describe(sizeClass.candidates[best]), slowest[best],
                slowest[0]};
  if (comm.rank() == 0) {
    std::ostringstream line;
    line << "autotune: " << trials_.what << " up to " << classBytes << " B: " << choice.settings
         << " ("
         << choice.seconds * 1e6 << " us median on the slowest rank; the group's settings "
         << choice.baselineSeconds * 1e6 << " us; " << count << " candidates x "
         << base_.autotuneSteps << ")";
    logLine(LogLevel::Info, 0, line.str());
  }
  std::lock_guard<std::mutex> lock(choicesMutex_);
  choices_.push_back(std::move(choice));
}

std::vector<AllreduceTuner::Choice> AllreduceTuner::choices() const {
  std::lock_guard<std::mutex> lock(choicesMutex_);
  return choices_;
}

}  // namespace ringreduce
