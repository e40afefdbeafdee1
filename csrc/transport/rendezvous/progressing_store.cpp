// ProgressingStore: a store's wait that keeps the group's transport moving.
#include "transport/rendezvous/progressing_store.h"

#include "core/base/op_context.h"
#include "core/base/errors.h"
#include "transport/transport.h"

namespace ringreduce {

std::vector<uint8_t> ProgressingStore::get(const std::string& key,
                                           std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (!inner_.check(key)) {
    if (driven_.progress() > 0) continue;  // it moved: look again at once
    if (watch_) watch_();
    if (Clock::now() >= deadline) {
      throw TimeoutError("ringreduce: timed out after " + std::to_string(timeout.count()) +
                         " ms waiting for store key '" + key + "'");
    }
    driven_.sleepUntilEvent(-1, 1);
  }
  return inner_.get(key, timeout);
}

}  // namespace ringreduce
