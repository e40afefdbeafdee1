#include "core/base/host_identity.h"

#include <unistd.h>

#include <fstream>

namespace ringreduce {

std::string hostIdentity() {
  char name[256] = {};
  gethostname(name, sizeof(name) - 1);
  std::string boot;
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::getline(in, boot);
  return std::string(name) + "/" + boot;
}

uint64_t hostIdentityHash() {
  uint64_t hash = 14695981039346656037ull;  // FNV-1a
  for (unsigned char c : hostIdentity()) {
    hash ^= c;
    hash *= 1099511628211ull;
  }
  return hash;
}

}  // namespace ringreduce
