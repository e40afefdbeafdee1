// A UCX context with one worker that can sleep on an event fd (ucx_worker.h)
#include "transport/ucx/ucx_worker.h"

#include <cstdlib>
#include <string>

#include "core/base/errors.h"
#include "transport/ucx/peer_gone_log_filter.h"

namespace ringreduce {

namespace {
void check(ucs_status_t status, const char* purpose, const char* what) {
  if (status != UCS_OK) {
    throw TransportError(std::string("ringreduce: ") + purpose + ": UCX " + what +
                         " failed: " + ucs_status_string(status));
  }
}
}  // namespace

UcxWorker UcxWorker::open(const char* transports, size_t estimatedEndpoints,
                          const char* purpose, const std::vector<Default>& defaults) {
  UcxWorker w;
  keepUcxFromAbortingOnAGonePeer();
  try {
    ucp_config_t* config = nullptr;
    check(ucp_config_read(nullptr, nullptr, &config), purpose, "config read");
    ucs_status_t status =
        transports != nullptr ? ucp_config_modify(config, "TLS", transports) : UCS_OK;
    for (const Default& d : defaults) {
      if (status != UCS_OK || std::getenv(d.userVariable.c_str()) != nullptr) continue;
      (void)ucp_config_modify(config, d.name.c_str(), d.value.c_str());  // unknown: UCX's own
    }
    if (status == UCS_OK) {
      ucp_params_t params{};
      params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_ESTIMATED_NUM_EPS;
      params.features = UCP_FEATURE_TAG | UCP_FEATURE_WAKEUP;
      params.estimated_num_eps = estimatedEndpoints;
      status = ucp_init(&params, config, &w.context);
    }
    ucp_config_release(config);
    check(status, purpose, "context init");

    // SERIALIZED: created on the constructing thread, then driven by the
    // group's executor thread alone.
    ucp_worker_params_t workerParams{};
    workerParams.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    workerParams.thread_mode = UCS_THREAD_MODE_SERIALIZED;
    check(ucp_worker_create(w.context, &workerParams, &w.worker), purpose, "worker create");
    check(ucp_worker_get_efd(w.worker, &w.eventFd), purpose, "worker event fd");

    ucp_address_t* address = nullptr;
    size_t length = 0;
    check(ucp_worker_get_address(w.worker, &address, &length), purpose, "worker address");
    const auto* bytes = reinterpret_cast<const uint8_t*>(address);
    w.address.assign(bytes, bytes + length);
    ucp_worker_release_address(w.worker, address);
  } catch (...) {
    w.close();
    throw;
  }
  return w;
}

void UcxWorker::close() {
  if (worker != nullptr) ucp_worker_destroy(worker);
  if (context != nullptr) ucp_cleanup(context);
  worker = nullptr;
  context = nullptr;
}

}  // namespace ringreduce
