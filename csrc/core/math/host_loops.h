// The host reduction loops, compiled once per instruction set and chosen
// once, at first use, for the CPU the process runs on:
//   baseline  any x86-64 (SSE2) or any other CPU: what the build targets
//   avx2      AVX2 + F16C: 8 floats per instruction, 16-bit conversion in registers
//   avx512    AVX-512 F/BW/VL/DQ: 16 floats per instruction
// One source (core/math/host_loops_body.h) is compiled three times, each time
// under its own `#pragma GCC target` and in its own namespace, so the build
// still runs on any CPU and no vector instruction leaks into code the
// baseline CPU runs. RINGREDUCE_HOST_ISA=baseline|avx2|avx512 lowers the
// choice (a set this CPU lacks is refused with a warning).
//
// Every set gives the same bits: the same element math (core/math/element_math.h,
// which also fixes which NaN a float sum or product keeps: the first
// operand's), no fused multiply-add, and float16/bfloat16 rounded to nearest
// even exactly as the scalar conversions do (a 16-bit NaN stays a NaN of its
// sign; its payload may differ). float16/bfloat16 combine in float32 and round once per call,
// so they travel as 16 bits: a SUM over n ranks rounds its running partial
// sum n-1 times, an error of at most (n-1) * u * sum(|x_i|) (u = 2^-11 for
// float16, 2^-8 for bfloat16); AVG divides before the last rounding.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/base/data_type.h"
#include "core/base/reduce_op.h"

namespace ringreduce {

enum class HostIsa { Baseline, Avx2, Avx512 };

struct HostLoops {
  HostIsa isa;
  const char* name;
  // dst[i] = dst[i] (op) src[i]; AVG combines as SUM. The caller has checked
  // that `op` is defined for `type` (core/math/host_reduce.h does).
  void (*reduce)(DataType type, ReduceOp op, void* dst, const void* src, size_t count);
  // dst[i] = (dst[i] + src[i]) / divisor in one pass.
  void (*reduceAndAverage)(DataType type, void* dst, const void* src, size_t count, int divisor);
  // data[i] /= divisor.
  void (*finishAverage)(DataType type, void* data, size_t count, int divisor);
  // float16 (half) / bfloat16 buffers to float32 and back.
  void (*widen)(bool half, const uint16_t* in, float* out, size_t count);
  void (*narrow)(bool half, const float* in, uint16_t* out, size_t count);
};

// The loops the process uses: the widest set, or the one RINGREDUCE_HOST_ISA names.
const HostLoops& hostLoops();

// What a call over `bytes` of data uses: hostLoops(), except that below
// kWideVectorsFromBytes the AVX2 set stands in for AVX-512 where AVX-512 was
// chosen by default (not named in RINGREDUCE_HOST_ISA). Both give the same
// bits. Why: on the 2-vCPU Xeon (AVX-512 with AMX) of 2026-12-02, with
// other work between the collectives (gloo's sleeping calls in the
// benchmark's rounds), a 64 B-4 KiB allreduce took 1.4-1.7 us more at p50
// with 512-bit loops than with 256-bit ones (64 B 5.7 against 4.0 us, 4 KiB
// 6.6 against 5.2; Open MPI's own AVX-512 SUM at 4 KiB alike, 5.1-5.5
// against 3.8-3.9 without that work); with no other work between them, and
// from 64 KiB to 16 MiB either way, the two sets ran alike
// (benchmarks/RESULTS.md, "Small collectives").
constexpr size_t kWideVectorsFromBytes = size_t{256} << 10;
const HostLoops& hostLoopsForBytes(size_t bytes);
// The loops of one instruction set, or null when this CPU or build lacks it.
const HostLoops* hostLoopsFor(HostIsa isa);
// Every set this CPU can run, baseline first (for tests and benchmarks).
std::vector<const HostLoops*> availableHostLoops();

}  // namespace ringreduce
