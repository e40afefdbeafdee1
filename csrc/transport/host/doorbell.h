// A rank's doorbell: a datagram socket in Linux's abstract namespace (no
// file, gone with the process) that a peer on the same host rings to wake
// this rank from a sleep on it. poll() sees it together with the peers'
// process fds (peer_exits.h), so one sleep ends on whichever comes first: the
// peer's flag (it rings), its death (its process fd), or its departure or
// failure (it rings before it goes). A ring costs the ringer one sendto, and
// only when the sleeper said it sleeps.
#pragma once

#include <string>
#include <vector>

namespace ringreduce {

class Doorbell {
 public:
  // Binds this rank's doorbell under "<prefix>/<rank>" in the abstract
  // namespace. Throws Error when the name is taken or sockets fail.
  Doorbell(const std::string& prefix, int rank, int ranks);
  ~Doorbell();
  Doorbell(const Doorbell&) = delete;
  Doorbell& operator=(const Doorbell&) = delete;

  // The fd to poll for POLLIN.
  int fd() const { return fd_; }
  // Wakes `rank` (best effort: a full queue means it is being woken anyway).
  void ring(int rank) const;
  // Empties this doorbell after a wake-up.
  void drain() const;

 private:
  void close();

  int fd_ = -1;      // bound: what this rank sleeps on
  int sender_ = -1;  // unbound: what it rings the peers with
  std::vector<std::string> addresses_;  // by rank
};

}  // namespace ringreduce
