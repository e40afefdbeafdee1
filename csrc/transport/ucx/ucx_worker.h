// A UCX context with one worker that can sleep on an event fd: what each
// group opens twice (the data path and the peer monitor).
#pragma once

#include <ucp/api/ucp.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace ringreduce {

struct UcxWorker {
  ucp_context_h context = nullptr;
  ucp_worker_h worker = nullptr;
  int eventFd = -1;
  std::vector<uint8_t> address;

  // `transports` overrides UCX_TLS for this context (nullptr: UCX's own
  // configuration). Throws TransportError naming `purpose` on failure, with
  // nothing left open.
  static UcxWorker open(const char* transports, size_t estimatedEndpoints, const char* purpose);
  // Destroys the worker and the context, if open.
  void close();
};

}  // namespace ringreduce
