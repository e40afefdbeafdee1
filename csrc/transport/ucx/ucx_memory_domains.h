// Every memory domain UCX lists on this machine, opened one after the other
// with UCX's own configuration (its environment and the ucx.conf files it
// reads), for what asks UCX about its transports without a context of its
// own: `torch_ringreduce.info`'s list (ucx_info.h) and the segment-size
// refusal (segment_size_check.h).
#pragma once

#include <uct/api/uct.h>

#include <functional>

namespace ringreduce {

// Calls visit(component name, md) for each memory domain of each component
// UCX has whose name `wanted` accepts, closing each after its visit. A
// component or domain UCX cannot query or open is passed over.
void forEachUcxMemoryDomain(const std::function<bool(const char* component)>& wanted,
                            const std::function<void(const char* component, uct_md_h)>& visit);

}  // namespace ringreduce
