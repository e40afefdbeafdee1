// The host's side of one on-caller device-flags allreduce (issue 44): ns per
// PathSelection::allreduceOnCaller on the fake device (tests/cpp/fake_device.h),
// world 2 (ranks as threads), 1 KiB float32 SUM. The fake's kernels are
// only counted here, not run, so what is timed is our code from the call to
// the launch and back: the part a GPU run adds to the kernel. Not a test
// (no figure is asserted); run it by hand:
//   cmake --build build/cpp --target ringreduce_on_caller_bench
//   build/cpp/ringreduce_on_caller_bench [ops]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "on_caller_rank.h"
#include "fake_device.h"

using namespace ringreduce;
using ringreduce::testing::OnCallerRank;
using ringreduce::testing::kOnCallerCount;

int main(int argc, char** argv) {
  const int ops = argc > 1 ? std::max(100, std::atoi(argv[1])) : 20000;
  constexpr int kWorld = 2;
  ringreduce::testing::resetFakeDevices(kWorld);
  std::vector<std::vector<double>> perOp(kWorld);
  std::vector<double> backToBack(kWorld);
  ringreduce::testing::runRanks(
      kWorld,
      [&](Transport& t, int rank) {
        OnCallerRank self(t, rank, kWorld);
        ringreduce::testing::setFakeKernelsRun(false);
        std::vector<float> data(kOnCallerCount, 1.f);
        auto once = [&] { self.allreduce(data.data(), data.data(), ReduceOp::Sum, 2); };
        for (int k = 0; k < 1000; ++k) once();  // warm
        std::vector<double>& times = perOp[rank];
        times.reserve(ops);
        for (int k = 0; k < ops; ++k) {
          const auto start = std::chrono::steady_clock::now();
          once();
          times.push_back(
              std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start)
                  .count());
        }
        // Back to back in 20 rounds, the median round's mean: a round the
        // busy machine preempted does not move it.
        constexpr int kRounds = 20;
        std::vector<double> rounds;
        for (int r = 0; r < kRounds; ++r) {
          const auto start = std::chrono::steady_clock::now();
          for (int k = 0; k < ops / kRounds; ++k) once();
          rounds.push_back(
              std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start)
                  .count() /
              (ops / kRounds));
        }
        std::sort(rounds.begin(), rounds.end());
        backToBack[rank] = rounds[kRounds / 2];
        ringreduce::testing::setFakeKernelsRun(true);
      },
      ringreduce::testing::smallSegments(), ringreduce::testing::TransportKind::Loopback);
  std::printf("on-caller allreduce, fake device, world %d, %zu floats, %d ops per rank\n", kWorld,
              kOnCallerCount, ops);
  std::printf("(host only: our code from the call to the launch; one timer read per op adds "
              "its own ~20-40 ns to p50/p90)\n");
  for (int rank = 0; rank < kWorld; ++rank) {
    std::vector<double>& times = perOp[rank];
    if (times.empty()) continue;
    std::sort(times.begin(), times.end());
    std::printf("rank %d: back-to-back %.0f ns (median round mean); per call p50 %.0f ns, "
                "p90 %.0f ns\n",
                rank, backToBack[rank], times[times.size() / 2], times[times.size() * 9 / 10]);
  }
  return 0;
}
