// The peers' processes as file descriptors, pidfd_open (peer_exits.h)
#include "transport/host/peer_exits.h"

#include <poll.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "core/base/errors.h"

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434  // the same number on every architecture
#endif

namespace ringreduce {

PeerExits::PeerExits(const std::vector<long>& pids, int self) {
  fds_.assign(pids.size(), -1);
  for (size_t r = 0; r < pids.size(); ++r) {
    if (static_cast<int>(r) == self) continue;
    const long fd = syscall(SYS_pidfd_open, static_cast<pid_t>(pids[r]), 0);
    if (fd < 0) {
      const int error = errno;
      close();
      throw Error("ringreduce: pidfd_open(" + std::to_string(pids[r]) + ") for rank " +
                  std::to_string(r) + ": " + std::strerror(error));
    }
    fds_[r] = static_cast<int>(fd);
  }
}

PeerExits::~PeerExits() { close(); }

PeerExits::PeerExits(PeerExits&& other) noexcept : fds_(std::move(other.fds_)) {
  other.fds_.clear();
}

PeerExits& PeerExits::operator=(PeerExits&& other) noexcept {
  if (this != &other) {
    close();
    fds_ = std::move(other.fds_);
    other.fds_.clear();
  }
  return *this;
}

void PeerExits::close() {
  for (int& fd : fds_) {
    if (fd >= 0) ::close(fd);
    fd = -1;
  }
}

bool PeerExits::exited(int rank) const {
  const int fd = fds_[static_cast<size_t>(rank)];
  if (fd < 0) return false;
  pollfd entry{fd, POLLIN, 0};
  return poll(&entry, 1, 0) > 0 && (entry.revents & POLLIN) != 0;
}

}  // namespace ringreduce
