// float32 SUM/AVG sent as 16-bit floats (RINGREDUCE_WIRE_DTYPE=fp16|bf16):
// Horovod's Compression.fp16, on the host. Each rank rounds its buffer to
// the wire type once, the 16-bit reduction combines every step in float32
// and rounds once per step (core/math/host_loops.h), and every rank widens the
// same 16-bit result back, so all ranks end with identical float32 values.
// Half the bytes cross the link; the price is float16's or bfloat16's
// precision in the result (and float16's range: sums beyond 65504 become
// infinity).
#pragma once

#include <functional>

#include "algorithms/comm.h"
#include "algorithms/ring_allreduce.h"

namespace ringreduce {

// Whether `args` travel as `comm.config.hostWireDtype`: float32 with SUM or
// AVG, more than one rank, and a wire type chosen.
bool usesWireDtype(const Comm& comm, const ReductionArgs& args);

// Runs `reduce` on the arguments as they travel: a 16-bit copy of `args`
// (in the workspace) when usesWireDtype, then widens the result back into
// args.data; otherwise `args` themselves.
void withWireDtype(const Comm& comm, const ReductionArgs& args,
                   const std::function<void(const ReductionArgs&)>& reduce);

}  // namespace ringreduce
