// A KeyValueStore shared by threads of one process, for unit tests.
#pragma once

#include <condition_variable>
#include <map>
#include <mutex>

#include "core/base/errors.h"
#include "transport/rendezvous/key_value_store.h"

namespace ringreduce {

class InMemoryStore : public KeyValueStore {
 public:
  void set(const std::string& key, const std::vector<uint8_t>& value) override {
    std::lock_guard<std::mutex> lock(mutex_);
    values_[key] = value;
    changed_.notify_all();
  }

  std::vector<uint8_t> get(const std::string& key, std::chrono::milliseconds timeout) override {
    std::unique_lock<std::mutex> lock(mutex_);
    if (!changed_.wait_for(lock, timeout, [&] { return values_.count(key) > 0; })) {
      throw TimeoutError("InMemoryStore: key '" + key + "' not set within timeout");
    }
    return values_[key];
  }

  bool check(const std::string& key) override {
    std::lock_guard<std::mutex> lock(mutex_);
    return values_.count(key) > 0;
  }

  int64_t add(const std::string& key, int64_t delta) override {
    std::lock_guard<std::mutex> lock(mutex_);
    counters_[key] += delta;
    return counters_[key];
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::string, std::vector<uint8_t>> values_;
  std::map<std::string, int64_t> counters_;
};

}  // namespace ringreduce
