// The rendezvous interface: what bootstrap needs from torch's c10d::Store,
// without torch. csrc/backend adapts the real store; tests use InMemoryStore.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace ringreduce {

class KeyValueStore {
 public:
  virtual ~KeyValueStore() = default;
  virtual void set(const std::string& key, const std::vector<uint8_t>& value) = 0;
  // Blocks until the key exists; throws TimeoutError after `timeout`.
  virtual std::vector<uint8_t> get(const std::string& key, std::chrono::milliseconds timeout) = 0;
  // True if the key exists (does not wait).
  virtual bool check(const std::string& key) = 0;
  // Atomically adds `delta` and returns the new value (0 for a new key + delta).
  virtual int64_t add(const std::string& key, int64_t delta) = 0;
};

}  // namespace ringreduce
