// Lets the torch-free bootstrap use the c10d::Store torch hands the backend
// (already prefixed per group and per restart).
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>

#include "transport/rendezvous/key_value_store.h"

namespace ringreduce {

class C10dStoreAdapter : public KeyValueStore {
 public:
  explicit C10dStoreAdapter(c10::intrusive_ptr<c10d::Store> store) : store_(std::move(store)) {}
  void set(const std::string& key, const std::vector<uint8_t>& value) override;
  std::vector<uint8_t> get(const std::string& key, std::chrono::milliseconds timeout) override;
  bool check(const std::string& key) override;
  int64_t add(const std::string& key, int64_t delta) override;

 private:
  c10::intrusive_ptr<c10d::Store> store_;
};

}  // namespace ringreduce
