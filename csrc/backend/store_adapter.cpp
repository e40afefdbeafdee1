// torch's c10d::Store as the bootstrap's KeyValueStore (store_adapter.h)
#include "backend/store_adapter.h"

namespace ringreduce {

void C10dStoreAdapter::set(const std::string& key, const std::vector<uint8_t>& value) {
  store_->set(key, value);
}

std::vector<uint8_t> C10dStoreAdapter::get(const std::string& key,
                                           std::chrono::milliseconds timeout) {
  store_->wait({key}, timeout);  // throws after `timeout`, not the store's own
  return store_->get(key);
}

bool C10dStoreAdapter::check(const std::string& key) { return store_->check({key}); }

int64_t C10dStoreAdapter::add(const std::string& key, int64_t delta) {
  return store_->add(key, delta);
}

}  // namespace ringreduce
