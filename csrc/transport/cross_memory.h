// Cross-memory attach: copies between this process and another process on
// the same host (Linux process_vm_readv / process_vm_writev), with no help
// from the other process's threads. The kernel copies straight between the
// two address spaces, so a rank can read a peer's buffer, or write into it,
// while that peer is busy with work of its own.
//
// Permission is the kernel's ptrace-attach check: same user, and neither a
// Yama ptrace_scope above 0 nor a container's seccomp profile in the way.
// Whether it holds is learnt at run time (crossMemoryProbeWord), never
// assumed.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ringreduce {

// Copies `bytes` from `remote` in process `pid` to `local`. Returns 0, or
// the errno of the call that failed (ESRCH: no such process; EPERM: not
// permitted; EFAULT: an address outside the other's mappings). Copies all
// the bytes: the kernel may move fewer per call.
int crossMemoryRead(int pid, uint64_t remote, void* local, size_t bytes);
// The same from `local` to `remote` in process `pid`.
int crossMemoryWrite(int pid, uint64_t remote, const void* local, size_t bytes);

// A word of this process, at an address fixed for its lifetime, holding a
// random value drawn once per process. A peer told the pid, the address and
// the value that reads the same value through crossMemoryRead knows it
// reached this very process (not a namesake pid in another pid namespace).
const uint64_t* crossMemoryProbeWord();

}  // namespace ringreduce
