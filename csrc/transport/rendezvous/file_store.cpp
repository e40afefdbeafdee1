// A KeyValueStore in a directory (file_store.h)
#include "transport/rendezvous/file_store.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <thread>

#include "core/base/errors.h"

namespace ringreduce {

FileStore::FileStore(std::string directory) : directory_(std::move(directory)) {}

// Keys hold '/': each becomes one file name, other bytes kept as they are.
std::string FileStore::pathOf(const std::string& key) const {
  std::string name;
  for (char c : key) name += c == '/' ? std::string("%2F") : std::string(1, c);
  return directory_ + "/" + name;
}

void FileStore::set(const std::string& key, const std::vector<uint8_t>& value) {
  const std::string path = pathOf(key);
  const std::string temporary = path + ".tmp" + std::to_string(getpid());
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(value.data()),
              static_cast<std::streamsize>(value.size()));
    if (!out) throw Error("FileStore: cannot write " + temporary);
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    throw Error("FileStore: cannot rename " + temporary);
  }
}

std::vector<uint8_t> FileStore::get(const std::string& key, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  const std::string path = pathOf(key);
  for (;;) {
    std::ifstream in(path, std::ios::binary);
    if (in) return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
    if (std::chrono::steady_clock::now() >= deadline) {
      throw TimeoutError("FileStore: key '" + key + "' not set within timeout");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

bool FileStore::check(const std::string& key) { return access(pathOf(key).c_str(), F_OK) == 0; }

int64_t FileStore::add(const std::string& key, int64_t delta) {
  const std::string lockPath = directory_ + "/.lock";
  const int lock = ::open(lockPath.c_str(), O_RDWR | O_CREAT, 0600);
  if (lock < 0 || flock(lock, LOCK_EX) != 0) throw Error("FileStore: cannot lock " + lockPath);
  int64_t value = 0;
  {
    std::ifstream in(pathOf(key));
    if (in) in >> value;
  }
  value += delta;
  const std::string text = std::to_string(value);
  set(key, std::vector<uint8_t>(text.begin(), text.end()));
  flock(lock, LOCK_UN);
  ::close(lock);
  return value;
}

}  // namespace ringreduce
