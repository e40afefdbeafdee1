// A UCX context with one worker that can sleep on an event fd: what each
// group opens twice (the data path and the peer monitor).
#pragma once

#include <ucp/api/ucp.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace ringreduce {

struct UcxWorker {
  ucp_context_h context = nullptr;
  ucp_worker_h worker = nullptr;
  int eventFd = -1;
  std::vector<uint8_t> address;

  // `transports` overrides UCX_TLS for this context (nullptr: UCX's own
  // configuration); each of `defaults` (name as ucp_config_modify takes it,
  // value) applies unless the user set the `userVariable` it names, and one
  // this UCX does not know is skipped. Throws TransportError naming
  // `purpose` on failure, with nothing left open.
  struct Default {
    std::string name, value, userVariable;
  };
  static UcxWorker open(const char* transports, size_t estimatedEndpoints, const char* purpose,
                        const std::vector<Default>& defaults = {});
  // Destroys the worker and the context, if open.
  void close();
};

}  // namespace ringreduce
