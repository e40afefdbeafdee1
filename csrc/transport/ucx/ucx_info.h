// What the UCX library found on this machine, for `python -m torch_ringreduce.info`
// and the group's log.
#pragma once

#include <ucp/api/ucp.h>

#include <string>
#include <vector>

namespace ringreduce {

std::string ucxVersion();
// The UCX API version the build compiled against ("1.13").
std::string ucxBuiltVersion();
// The libucp this process loaded ("" when the loader cannot tell).
std::string ucxLibraryPath();
// "transport/device" pairs (e.g. "tcp/lo", "posix/memory"), as `ucx_info -d`
// lists them; honours UCX_TLS-independent discovery.
std::vector<std::string> ucxTransports();

// The memory types a context registers, by UCX's names ("host", "cuda",
// "cuda-managed", ...): only with "cuda" among them may a device pointer go
// to UCX; otherwise GPU data moves by our own CUDA path or host staging.
std::vector<std::string> ucxMemoryTypes(ucp_context_h context);

struct UcxDeviceMemory {
  bool cuda = false;                     // UCS_MEMORY_TYPE_CUDA registered
  std::vector<std::string> memoryTypes;  // as ucxMemoryTypes
  bool cudaModule = false;               // UCX's folder holds its CUDA transports' module
  std::string error;                     // why UCX could not be asked, else ""
};
// Asks a context of its own (UCX's configuration, UCX_TLS included).
UcxDeviceMemory ucxDeviceMemory();

}  // namespace ringreduce
