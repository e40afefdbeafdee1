// A store whose waits keep a transport moving: for a rendezvous that runs
// on the thread that drives the group's transport (the host channel opened
// at the group's first host collective, engine/engine.h). While this rank
// waits for a key a peer sets only once it gets there, the peer may be
// waiting for a message of an earlier operation of this rank (an isend's
// rendezvous) that moves only when this thread progresses.
#pragma once

#include <functional>

#include "transport/rendezvous/key_value_store.h"

namespace ringreduce {

class Transport;

class ProgressingStore : public KeyValueStore {
 public:
  // `watch`, called on every pass of a wait, may throw to end it (a peer
  // that left or died will never set its key).
  ProgressingStore(KeyValueStore& inner, Transport& driven, std::function<void()> watch = nullptr)
      : inner_(inner), driven_(driven), watch_(std::move(watch)) {}
  void set(const std::string& key, const std::vector<uint8_t>& value) override {
    inner_.set(key, value);
  }
  // Looks for the key every millisecond or on the transport's event, and
  // progresses the transport in between; TimeoutError after `timeout`.
  std::vector<uint8_t> get(const std::string& key, std::chrono::milliseconds timeout) override;
  bool check(const std::string& key) override { return inner_.check(key); }
  int64_t add(const std::string& key, int64_t delta) override { return inner_.add(key, delta); }

 private:
  KeyValueStore& inner_;
  Transport& driven_;
  std::function<void()> watch_;
};

}  // namespace ringreduce
