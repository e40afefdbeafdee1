// RINGREDUCE_AUTOTUNE=1: online tuning of the host allreduce, like Horovod's
// autotune for our knobs. Allreduces are grouped in size classes (the next
// power of two of their bytes); the first `autotuneSteps x candidates` of a
// class run the candidate settings in turn (the group's own settings first,
// then ring with other segment sizes, halving/doubling, direct, and with
// RINGREDUCE_AUTOTUNE_LOSSY_WIRE=1 the 16-bit wire dtypes). The last trial's
// operation then exchanges every rank's median time per candidate
// (algorithms/record_allgather.h), and every rank keeps the candidate whose
// slowest rank was fastest: the same data everywhere, so the same choice,
// taken at the same collective on every rank. Rank 0 logs one line per choice.
//
// Every rank sees the same allreduces in the same order with the same sizes,
// so every rank runs the same candidate in each one: settings that change
// the wire protocol (algorithm, segments, wire dtype) change together.
// Spin times belong to the transport and are not tuned here (tune.py does).
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "algorithms/comm.h"
#include "core/config/config.h"
#include "core/base/op_context.h"

namespace ringreduce {

// How a trial is timed, when not by the host's clock around the run: the
// CUDA candidates across nodes are timed by the device's own clock on the
// group's stream (backend/device_trial_clock.h), where both end up: the
// device ring's host-driven schedule and NCCL's kernels. Timed alike, the
// faster one wins whichever it is; the host cannot time NCCL's queued work
// without waiting for it, and any wait of its own would be added to one
// candidate only.
class TrialClock {
 public:
  virtual ~TrialClock() = default;
  // Just before the candidate runs.
  virtual void start() = 0;
  // Just after it returned: the seconds its work took, once it is done
  // (waits for it, bounded by the operation's deadline).
  virtual double stop() = 0;
};

class AllreduceTuner {
 public:
  // What a tuner tries: the candidates of a size class (the group's own
  // settings first) and how its log names one. hostAllreduce() tunes the
  // host allreduce (the default); cudaPaths() the path of CUDA allreduces
  // across nodes.
  struct Trials {
    std::function<std::vector<Config>(const Config&, size_t)> candidates;
    std::function<std::string(const Config&)> describe;
    std::string what;
  };
  static Trials hostAllreduce();
  // CUDA allreduces across nodes where both can run: the device ring
  // (RINGREDUCE_CUDA_ALGO=ring, first) and NCCL, timed alike by a
  // TrialClock on the device (the caller passes it).
  static Trials cudaPaths();

  explicit AllreduceTuner(const Config& base) : AllreduceTuner(base, hostAllreduce()) {}
  AllreduceTuner(const Config& base, Trials trials) : base_(base), trials_(std::move(trials)) {}

  // Whether an allreduce of `bytes` would be a trial (its class not yet
  // decided): a caller whose work is asynchronous then waits for it, so
  // that the time covers it. Executor thread only.
  bool onTrial(size_t bytes) const;

  // Runs `run` once on `comm` with the settings for an allreduce of `bytes`:
  // a candidate while its class is on trial, then the chosen one. A trial
  // is timed by `clock` when given (it may wait for the run's work to be
  // done), else by the host's clock around `run`. Executor thread only.
  void allreduce(const Comm& comm, const OpContext& op, size_t bytes,
                 const std::function<void(const Comm&)>& run, TrialClock* clock = nullptr);

  struct Choice {
    size_t classBytes = 0;  // allreduces of (classBytes/2, classBytes] bytes
    std::string settings;   // "RINGREDUCE_ALGORITHM=ring RINGREDUCE_SEGMENT_BYTES=65536 ..."
    double seconds = 0;     // the chosen candidate's median, slowest rank
    double baselineSeconds = 0;  // the group's own settings', likewise
  };
  // The choices made so far, by class (any thread).
  std::vector<Choice> choices() const;

  // The candidates for a class, the group's own settings first.
  static std::vector<Config> candidates(const Config& base, size_t classBytes);
  // The settings a candidate changes, as RINGREDUCE_* assignments.
  static std::string describe(const Config& candidate);

 private:
  struct SizeClass {
    std::vector<Config> candidates;
    std::vector<std::vector<double>> seconds;  // per candidate, this rank's trials
    int trials = 0;
    int chosen = -1;
  };

  void decide(const Comm& comm, const OpContext& op, size_t classBytes, SizeClass& sizeClass);

  const Config base_;
  const Trials trials_;
  std::map<size_t, SizeClass> classes_;  // executor thread
  mutable std::mutex choicesMutex_;
  std::vector<Choice> choices_;
};

}  // namespace ringreduce
