// NCCL_DEBUG-style logging, RINGREDUCE_DEBUG (log.h)
#include "core/observe/log.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <strings.h>

namespace ringreduce {

namespace {
LogLevel parseLevel() {
  const char* value = std::getenv("RINGREDUCE_DEBUG");
  if (value == nullptr || *value == '\0') return LogLevel::None;
  if (strcasecmp(value, "WARN") == 0) return LogLevel::Warn;
  if (strcasecmp(value, "INFO") == 0) return LogLevel::Info;
  if (strcasecmp(value, "TRACE") == 0) return LogLevel::Trace;
  return LogLevel::None;
}

const char* levelName(LogLevel level) {
  switch (level) {
    case LogLevel::Warn: return "WARN";
    case LogLevel::Info: return "INFO";
    case LogLevel::Trace: return "TRACE";
    default: return "";
  }
}
}  // namespace

LogLevel logLevel() {
  static const LogLevel level = parseLevel();
  return level;
}

void logLine(LogLevel level, int rank, const std::string& message) {
  char host[64] = {0};
  gethostname(host, sizeof(host) - 1);
  // One fprintf per line so lines of concurrent threads do not interleave.
  std::fprintf(stderr, "%s:%d:%ld [%d] RINGREDUCE %s %s\n", host, static_cast<int>(getpid()),
               static_cast<long>(syscall(SYS_gettid)), rank, levelName(level),
               message.c_str());
}

}  // namespace ringreduce
