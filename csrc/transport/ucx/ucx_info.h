// What the UCX library found on this machine, for `python -m torch_ringreduce.info`.
#pragma once

#include <string>
#include <vector>

namespace ringreduce {

std::string ucxVersion();
// "transport/device" pairs (e.g. "tcp/lo", "posix/memory"), as `ucx_info -d`
// lists them; honours UCX_TLS-independent discovery.
std::vector<std::string> ucxTransports();

}  // namespace ringreduce
