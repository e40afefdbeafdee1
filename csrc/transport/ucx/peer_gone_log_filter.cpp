// Keeps UCX from aborting on a gone peer's copy (peer_gone_log_filter.h)
#include "transport/ucx/peer_gone_log_filter.h"

#include <ucs/debug/log_def.h>

#include <atomic>
#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <mutex>

#include "core/observe/log.h"

namespace ringreduce {

namespace {

std::atomic<unsigned long> copiesTaken{0};

ucs_log_func_rc_t takeCopyFromAGonePeer(const char* file, unsigned /*line*/,
                                        const char* /*function*/, ucs_log_level_t level,
                                        const ucs_log_component_config_t* /*component*/,
                                        const char* format, va_list ap) {
  if (level != UCS_LOG_LEVEL_FATAL) return UCS_LOG_FUNC_RC_CONTINUE;  // the cheap test first
  char message[512];
  va_list copy;
  va_copy(copy, ap);
  std::vsnprintf(message, sizeof(message), format, copy);
  va_end(copy);
  if (!isCopyFromAGonePeer(file, level, message)) return UCS_LOG_FUNC_RC_CONTINUE;
  RR_LOG(Warn, -1, "UCX: " << message << " (a peer's process is gone, or it gave up on the "
                               "collective and freed its buffer: the transfer fails, the "
                               "collective reports it)");
  copiesTaken.fetch_add(1, std::memory_order_relaxed);
  return UCS_LOG_FUNC_RC_STOP;  // UCX's own handler would abort the process
}

}  // namespace

bool isCopyFromAGonePeer(const char* file, int level, const char* message) {
  if (level != UCS_LOG_LEVEL_FATAL || file == nullptr || message == nullptr) return false;
  const char* slash = std::strrchr(file, '/');
  const char* name = slash != nullptr ? slash + 1 : file;
  if (std::strcmp(name, "cma_ep.c") != 0) return false;
  const bool copy = std::strncmp(message, "process_vm_readv(", 17) == 0 ||
                    std::strncmp(message, "process_vm_writev(", 18) == 0;
  // UCX words the errno with strerror, in this process's locale as ours is.
  return copy && (std::strstr(message, std::strerror(ESRCH)) != nullptr ||
                  std::strstr(message, std::strerror(EFAULT)) != nullptr);
}

unsigned long copiesFromGonePeersTaken() { return copiesTaken.load(std::memory_order_relaxed); }

void keepUcxFromAbortingOnAGonePeer() {
  static std::once_flag installed;
  std::call_once(installed, [] { ucs_log_push_handler(takeCopyFromAGonePeer); });
}

}  // namespace ringreduce
