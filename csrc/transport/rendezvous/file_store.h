// A KeyValueStore in a directory, for processes that share a filesystem but
// not torch: the emulated-cluster benchmark's ranks run in separate network
// namespaces of one machine (benchmarks/emulated_cluster.py) and meet here.
// Not for production: torch's c10d store is the backend's rendezvous.
#pragma once

#include <string>

#include "transport/rendezvous/key_value_store.h"

namespace ringreduce {

class FileStore : public KeyValueStore {
 public:
  // `directory` must exist and be empty of other stores' keys.
  explicit FileStore(std::string directory);

  // Written to a temporary name and renamed: readers see all of it or nothing.
  void set(const std::string& key, const std::vector<uint8_t>& value) override;
  // Polls every millisecond.
  std::vector<uint8_t> get(const std::string& key, std::chrono::milliseconds timeout) override;
  bool check(const std::string& key) override;
  // Under an flock of the directory's lock file.
  int64_t add(const std::string& key, int64_t delta) override;

 private:
  std::string pathOf(const std::string& key) const;

  std::string directory_;
};

}  // namespace ringreduce
