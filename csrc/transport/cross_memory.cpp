// Cross-memory attach: copies to and from another process on this host (cross_memory.h)
#include "transport/cross_memory.h"

#include <sys/uio.h>

#include <cerrno>
#include <random>

namespace ringreduce {

namespace {

// One of process_vm_readv / process_vm_writev, repeated until every byte
// moved: each call may stop early (a page boundary the kernel could not
// pin in one go), returning what it did move.
template <typename Call>
int copyAll(Call call, char* local, uint64_t remote, size_t bytes) {
  while (bytes > 0) {
    iovec here{local, bytes};
    iovec there{reinterpret_cast<void*>(static_cast<uintptr_t>(remote)), bytes};
    const ssize_t moved = call(&here, &there);
    if (moved < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (moved == 0) return EFAULT;  // nothing moved and no error: never loop forever
    local += moved;
    remote += static_cast<uint64_t>(moved);
    bytes -= static_cast<size_t>(moved);
  }
  return 0;
}

}  // namespace

int crossMemoryRead(int pid, uint64_t remote, void* local, size_t bytes) {
  return copyAll(
      [pid](iovec* here, iovec* there) { return process_vm_readv(pid, here, 1, there, 1, 0); },
      static_cast<char*>(local), remote, bytes);
}

int crossMemoryWrite(int pid, uint64_t remote, const void* local, size_t bytes) {
  return copyAll(
      [pid](iovec* here, iovec* there) { return process_vm_writev(pid, here, 1, there, 1, 0); },
      static_cast<char*>(const_cast<void*>(local)), remote, bytes);
}

const uint64_t* crossMemoryProbeWord() {
  // Static storage: the address stays valid for the process's lifetime.
  static const uint64_t word = [] {
    std::random_device entropy;
    return (static_cast<uint64_t>(entropy()) << 32) ^ entropy() ^ 1;  // never 0
  }();
  return &word;
}

}  // namespace ringreduce
