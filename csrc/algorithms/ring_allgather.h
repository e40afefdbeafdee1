// Pipelined ring allgather of equal-sized byte blocks: rank r's block ends up
// at offset r * blockBytes of every rank's output.
#pragma once

#include <cstddef>

#include "core/config.h"
#include "core/op_context.h"
#include "transport/ucx_transport.h"

namespace ringreduce {

// `input` may alias the rank's own block of `output` (in-place allgather).
void ringAllgather(UcxTransport& transport, const OpContext& op, const void* input,
                   void* output, size_t blockBytes, const Config& config);

}  // namespace ringreduce
