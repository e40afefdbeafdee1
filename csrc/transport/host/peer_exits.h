// The peers' processes as file descriptors (pidfd_open): each becomes
// readable when its process exits, so a rank that sleeps waiting for a peer
// learns of its death from the kernel at once, with nothing polled on a
// timer. Only for peers in this process's pid namespace (host_channel.cpp
// checks before it asks).
#pragma once

#include <cstddef>
#include <vector>

namespace ringreduce {

class PeerExits {
 public:
  PeerExits() = default;
  // Opens a process fd for each pid but `self`'s. Throws Error when the
  // kernel refuses one (no pidfd_open before Linux 5.3, or a seccomp filter).
  PeerExits(const std::vector<long>& pids, int self);
  ~PeerExits();
  PeerExits(PeerExits&&) noexcept;
  PeerExits& operator=(PeerExits&&) noexcept;

  // -1 for this rank.
  int fd(int rank) const { return fds_[static_cast<size_t>(rank)]; }
  // Whether `rank`'s process has exited (a poll of its fd that does not wait).
  bool exited(int rank) const;

 private:
  void close();
  std::vector<int> fds_;
};

}  // namespace ringreduce
