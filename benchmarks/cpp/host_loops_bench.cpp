// The host reduction loops alone, every instruction set this CPU runs side
// by side, against memcpy of the same bytes in the same run:
//
//   build/cpp/ringreduce_host_loops_bench [bytes=4194304] [repeats=30]
//
// A ring step reduces dst[i] = dst[i] (op) src[i]: it reads two buffers and
// writes one, so "memory speed" is about the copy rate (one read, one
// write) times 2/3. Figures are GB/s of dst bytes, the best of `repeats`.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "core/base/data_type.h"
#include "core/math/host_loops.h"
#include "core/base/reduce_op.h"

using namespace ringreduce;

namespace {

template <typename Fn>
double bestRate(size_t bytes, int repeats, Fn fn) {
  double best = 1e30;
  for (int r = 0; r < repeats; ++r) {
    const auto start = std::chrono::steady_clock::now();
    fn();
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    best = std::min(best, seconds);
  }
  return static_cast<double>(bytes) / best / 1e9;
}

}  // namespace

int main(int argc, char** argv) {
  const size_t bytes = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : (4u << 20);
  const int repeats = argc > 2 ? std::atoi(argv[2]) : 30;
  const DataType types[] = {DataType::Float32, DataType::Float16, DataType::BFloat16,
                            DataType::Float64, DataType::Int8,    DataType::Int32,
                            DataType::Int64};
  const ReduceOp ops[] = {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Min, ReduceOp::Max,
                          ReduceOp::Product};
  // Small integers, so that products and sums stay ordinary numbers in
  // every type (a NaN or subnormal would time a different path).
  std::vector<uint8_t> dst(bytes), src(bytes), copy(bytes);
  for (size_t i = 0; i < bytes; ++i) src[i] = static_cast<uint8_t>(i % 3);
  const double copyRate =
      bestRate(bytes, repeats, [&] { std::memcpy(copy.data(), src.data(), bytes); });
  std::printf("# host loops, %zu bytes, best of %d; GB/s of dst bytes; memcpy %.1f GB/s\n", bytes,
              repeats, copyRate);
  for (const HostLoops* loops : availableHostLoops()) {
    std::printf("# %-8s %-9s", loops->name, "dtype");
    for (ReduceOp op : ops) std::printf(" %8s", reduceOpName(op));
    std::printf("\n");
    for (DataType type : types) {
      std::printf("  %-8s %-9s", loops->name, dataTypeName(type));
      const size_t count = bytes / elementSize(type);
      for (ReduceOp op : ops) {
        std::memset(dst.data(), 1, bytes);
        // AVG times its last step, the one that divides (by 2: world 2).
        const double rate = bestRate(bytes, repeats, [&] {
          if (op == ReduceOp::Avg) {
            loops->reduceAndAverage(type, dst.data(), src.data(), count, 2);
          } else {
            loops->reduce(type, op, dst.data(), src.data(), count);
          }
        });
        std::printf(" %8.1f", rate);
      }
      std::printf("\n");
    }
  }
  return 0;
}
