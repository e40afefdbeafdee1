// Whether other work wants this machine's cores (cpu_contention.h)
#include "core/base/cpu_contention.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

namespace ringreduce {

CpuContention::CpuContention()
    : fd_(open("/proc/loadavg", O_RDONLY | O_CLOEXEC)),
      cores_(static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN))) {}

CpuContention::~CpuContention() {
  if (fd_ >= 0) close(fd_);
}

int CpuContention::runnableIn(const char* line) {
  // The fourth field, "running/total".
  const char* p = line;
  for (int field = 0; field < 3; ++field) {
    p = std::strchr(p, ' ');
    if (p == nullptr) return -1;
    ++p;
  }
  char* end = nullptr;
  const long running = std::strtol(p, &end, 10);
  if (end == p || *end != '/') return -1;
  return static_cast<int>(running);
}

int CpuContention::runnable() const {
  if (fd_ < 0 || cores_ <= 0) return -1;
  char line[128];
  const ssize_t got = pread(fd_, line, sizeof(line) - 1, 0);
  if (got <= 0) return -1;
  line[got] = '\0';
  return runnableIn(line);
}

bool CpuContention::contended(int spare) const {
  return levelOf(runnable(), cores_, spare) > 0;
}

int CpuContention::level(int spare) const { return levelOf(runnable(), cores_, spare); }

int CpuContention::levelOf(int runnable, int cores, int spare) {
  if (runnable < 0 || cores <= 0 || runnable <= cores + spare) return 0;
  int level = 1;
  for (int perCore = runnable / cores; perCore >= 4 && level < kTopLevel; perCore /= 2) ++level;
  return level;
}

}  // namespace ringreduce
