// Notices quickly when a peer process dies.
//
// The fast data endpoints run without UCX error handling: in UCX 1.13 the
// shared-memory transports (posix, sysv) have no peer-failure handler, and
// asking for PEER error handling silently moves same-host endpoints onto TCP
// over loopback (measured: 1 MiB bandwidth ~15.7 -> ~5.8 GiB/s).
// So each group also keeps a second, small UCX worker restricted to TCP with
// PEER error handling and one endpoint per peer. When a peer dies its kernel
// closes the sockets, UCX calls the endpoint's error handler, and every wait
// of the group fails at once, naming the dead rank. A rank that leaves on
// purpose (its group is destroyed) first says goodbye on these connections,
// so that its departure is not mistaken for a death.
#pragma once

#include <ucp/api/ucp.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace ringreduce {

class PeerMonitor {
 public:
  PeerMonitor(int rank, int size);
  ~PeerMonitor();
  PeerMonitor(const PeerMonitor&) = delete;
  PeerMonitor& operator=(const PeerMonitor&) = delete;

  const std::vector<uint8_t>& address() const { return address_; }
  // Opens the watched connections to every other rank.
  void connect(const std::vector<std::vector<uint8_t>>& addresses);
  // Progresses until every connection is wired up, or until `limit`; returns
  // how many are not. A connection must be up before its peer can leave:
  // a goodbye cannot travel on one that is still being wired, and the
  // survivor would then see only the closed connection, a "death".
  int awaitConnected(std::chrono::milliseconds limit);

  unsigned progress();
  // Arms the worker for events; false when events are already pending.
  bool arm();
  int eventFd() const { return eventFd_; }

  // Tells every live peer that this rank gave up on the group (a timeout, a
  // mismatch, a death it saw), so they fail at once instead of waiting for
  // their own timeouts. Sent once; best effort.
  void broadcastAbort(const std::string& reason);
  // The first abort heard from a peer: its rank (or -1) and reason.
  int abortedBy() const { return abortedBy_; }
  const std::string& abortReason() const { return abortReason_; }

  bool anyDead() const { return deadCount_ > 0; }
  bool isDead(int peer) const { return deaths_[static_cast<size_t>(peer)] != UCS_OK; }
  bool hasDeparted(int peer) const { return departed_[static_cast<size_t>(peer)]; }
  // Tells every peer still here that this rank leaves on purpose (once; the
  // destructor does it too). A group says it once its data endpoints are
  // flushed and before its data worker goes, so that a peer closing later
  // can close its endpoint to this rank without a flush that would fail.
  void sayGoodbye();
  // The lowest rank seen dead, or -1.
  int firstDeadPeer() const;
  std::string deathReason(int peer) const;

 private:
  struct Watch {
    PeerMonitor* monitor;
    int peer;
  };
  static void onPeerError(void* arg, ucp_ep_h ep, ucs_status_t status);
  void collectGoodbyes();
  // Turns lost connections into deaths, unless their peer said goodbye.
  void judgeLosses();
  void postGoodbyeReceive();
  void postAbortReceive();

  const int rank_;
  const int size_;
  ucp_context_h context_ = nullptr;
  ucp_worker_h worker_ = nullptr;
  int eventFd_ = -1;
  std::vector<uint8_t> address_;
  std::vector<ucp_ep_h> endpoints_;
  std::vector<std::unique_ptr<Watch>> watches_;
  std::vector<void*> hellos_;  // the flush that opens each connection, until done
  std::vector<ucs_status_t> deaths_;  // UCS_OK while alive
  std::vector<ucs_status_t> losses_;  // connection errors not yet judged
  std::vector<bool> departed_;        // said goodbye: a lost connection is expected
  void* goodbyeReceive_ = nullptr;
  void* abortReceive_ = nullptr;
  std::vector<char> abortBuffer_;
  std::vector<void*> abortSends_;
  std::string abortSent_;  // keeps the payload alive while it is sent
  int abortedBy_ = -1;
  std::string abortReason_;
  int deadCount_ = 0;
  bool saidGoodbye_ = false;
};

}  // namespace ringreduce
