// Which machine (and boot) this process runs on (host_identity.h)
#include "core/base/host_identity.h"

#include <unistd.h>

#include <cstdlib>
#include <fstream>

namespace ringreduce {

std::string hostIdentity() {
  // Set, it names the node instead: ranks of one machine can then be told
  // apart as nodes (the multi-node logic, tested without root or namespaces).
  if (const char* named = std::getenv("RINGREDUCE_HOST_ID"); named != nullptr && *named != '\0') {
    return std::string("named:") + named;
  }
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
