// The fused reduce-copy kernel: every destination gets, element by element,
// the reduction of every source. One kernel serves every device algorithm:
//   one-shot allreduce   N sources (all ranks' buffers) -> 1 destination
//   two-shot allreduce   N sources (one slice of each)  -> N destinations
//   a ring step          2 sources (local, received)    -> 1 or 2 destinations
//   a wire cast          1 source  (float32 <-> float16/bfloat16), AVG fused
// Loads and stores are 16-byte vectors when every pointer allows it; float16
// and bfloat16 accumulate in float32; AVG divides once, in the store.
//
// Plain pointers and a stream handle (cudaStream_t as void*): no CUDA header
// is needed to call it, so the torch glue compiles without the toolkit.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/base/data_type.h"
#include "core/base/reduce_op.h"

namespace ringreduce::cuda {

// Ranks one device-side reduction can read from or write to at once.
constexpr int kMaxFanout = 8;

struct ReduceCopyArgs {
  const void* srcs[kMaxFanout] = {};
  int nsrc = 0;
  void* dsts[kMaxFanout] = {};
  int ndst = 0;
  size_t count = 0;  // elements per source and destination
  DataType srcType = DataType::Float32;
  // Differs from srcType only for a wire cast: float32 <-> float16/bfloat16.
  DataType dstType = DataType::Float32;
  ReduceOp op = ReduceOp::Sum;
  int avgDivisor = 0;  // > 1: divide the result (AVG); integers truncate
  // Device memory: when nonzero as the kernel starts, it does nothing (a
  // group whose host gave up; its peers' memory may be gone).
  const uint32_t* stop = nullptr;
};

// Empty when the kernels reduce `type` with `op`; otherwise why not (the
// caller then takes another path: NCCL or host staging). Complex SUM/AVG are
// reduced by the caller as twice as many reals.
std::string kernelUnsupportedReason(DataType srcType, DataType dstType, ReduceOp op);
// The same verdict as a boolean, from a table built once (on the first
// call) from kernelUnsupportedReason: what the collectives ask per call, so
// a supported one formats no reason; the reason is for the failure's message.
bool kernelSupports(DataType srcType, DataType dstType, ReduceOp op);

// Empty when `args` can be launched; otherwise what is wrong, for the
// caller's error: the fan-in and fan-out, the (source, destination, op)
// combination, and AVG's divisor (only AVG has one, it is at least 1, and
// it fits the destination's integer type: 256 as an int8 is 0, a division
// by zero on the device).
std::string reduceCopyArgsProblem(const ReduceCopyArgs& args);

// Enqueues the kernel on `stream` for device `device` (the caller's current
// device is left as it was). Throws InvalidArgument for anything
// reduceCopyArgsProblem names and Error for a CUDA failure.
void launchReduceCopy(const ReduceCopyArgs& args, int device, void* stream);

// The wire cast alone: `count` values from src (`from`) to dst (`to`),
// float32 <-> float16/bfloat16 or the same type, dividing by avgDivisor
// when it is above 1 (AVG's division, fused into the cast).
inline void launchCast(const void* src, DataType from, void* dst, DataType to, size_t count,
                       int avgDivisor, int device, void* stream) {
  ReduceCopyArgs args;
  args.srcs[0] = src;
  args.nsrc = 1;
  args.dsts[0] = dst;
  args.ndst = 1;
  args.count = count;
  args.srcType = from;
  args.dstType = to;
  args.op = avgDivisor > 1 ? ReduceOp::Avg : ReduceOp::Sum;
  args.avgDivisor = avgDivisor > 1 ? avgDivisor : 0;
  launchReduceCopy(args, device, stream);
}

}  // namespace ringreduce::cuda
