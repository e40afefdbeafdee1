// Notices quickly when a peer process dies (peer_monitor.h)
#include "transport/ucx/peer_monitor.h"

#include <algorithm>
#include <chrono>

#include "core/base/errors.h"
#include "core/observe/log.h"
#include "transport/ucx/ucx_worker.h"

namespace ringreduce {

namespace {
// Messages on the monitor connections are goodbyes and aborts: the low 32
// bits of the tag say which, the high bits who sent it.
constexpr uint64_t kGoodbyeTag = 1;
constexpr uint64_t kAbortTag = 2;
constexpr size_t kMaxAbortReason = 1024;
constexpr uint64_t kKindMask = 0xffffffffull;
constexpr auto kGoodbyeLimit = std::chrono::milliseconds(500);
// A goodbye and the closing of the connection it came on can reach this
// worker in different progress calls (UCP may carry the two directions of a
// pair on two sockets): before a lost connection counts as a death, the
// worker is progressed this long more for a goodbye still on its way.
constexpr auto kLateGoodbyeLimit = std::chrono::milliseconds(5);

void check(ucs_status_t status, const char* what) {
  if (status != UCS_OK) {
    throw TransportError(std::string("ringreduce: peer monitor: UCX ") + what +
                         " failed: " + ucs_status_string(status));
  }
}
}  // namespace

PeerMonitor::PeerMonitor(int rank, int size)
    : rank_(rank),
      size_(size),
      deaths_(static_cast<size_t>(size), UCS_OK),
      losses_(static_cast<size_t>(size), UCS_OK),
      departed_(static_cast<size_t>(size), false) {
  // TCP only, whatever UCX_TLS says for the data path: it is the transport
  // that reports a dead peer within milliseconds.
  UcxWorker ucx = UcxWorker::open("tcp", static_cast<size_t>(size), "peer monitor");
  context_ = ucx.context;
  worker_ = ucx.worker;
  eventFd_ = ucx.eventFd;
  address_ = ucx.address;
}

PeerMonitor::~PeerMonitor() {
  sayGoodbye();
  for (void* pending : {goodbyeReceive_, abortReceive_}) {
    if (pending != nullptr) {
      ucp_request_cancel(worker_, pending);
      ucp_request_free(pending);
    }
  }
  for (void* send : abortSends_) {
    if (ucp_request_check_status(send) == UCS_INPROGRESS) ucp_request_cancel(worker_, send);
    ucp_request_free(send);
  }
  for (void* hello : hellos_) {
    if (hello != nullptr) {
      ucp_request_cancel(worker_, hello);
      ucp_request_free(hello);
    }
  }
  for (ucp_ep_h ep : endpoints_) {
    if (ep == nullptr) continue;
    // PEER-mode endpoints may be closed with FORCE without waiting on peers.
    ucp_request_param_t param{};
    param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    param.flags = UCP_EP_CLOSE_FLAG_FORCE;
    ucs_status_ptr_t closing = ucp_ep_close_nbx(ep, &param);
    if (UCS_PTR_IS_PTR(closing)) {
      for (int i = 0; i < 1000 && ucp_request_check_status(closing) == UCS_INPROGRESS; ++i) {
        ucp_worker_progress(worker_);
      }
      ucp_request_free(closing);
    }
  }
  ucp_worker_destroy(worker_);
  ucp_cleanup(context_);
}

void PeerMonitor::connect(const std::vector<std::vector<uint8_t>>& addresses) {
  endpoints_.assign(static_cast<size_t>(size_), nullptr);
  hellos_.assign(static_cast<size_t>(size_), nullptr);
  for (int peer = 0; peer < size_; ++peer) {
    // A peer with the monitor turned off publishes no address: not watched.
    if (peer == rank_ || addresses[peer].empty()) continue;
    watches_.push_back(std::make_unique<Watch>(Watch{this, peer}));
    ucp_ep_params_t params{};
    params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS |
                        UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER;
    params.address = reinterpret_cast<const ucp_address_t*>(addresses[peer].data());
    params.err_mode = UCP_ERR_HANDLING_MODE_PEER;
    params.err_handler.cb = &PeerMonitor::onPeerError;
    params.err_handler.arg = watches_.back().get();
    check(ucp_ep_create(worker_, &params, &endpoints_[peer]), "endpoint create");
    // A flush completes only once the connection is wired up: it opens the
    // TCP connection now rather than on first use, so a death is seen even
    // if this pair never exchanges anything else.
    ucp_request_param_t flush{};
    ucs_status_ptr_t status = ucp_ep_flush_nbx(endpoints_[peer], &flush);
    if (UCS_PTR_IS_PTR(status)) hellos_[peer] = status;
  }
  postGoodbyeReceive();
  postAbortReceive();
}

int PeerMonitor::awaitConnected(std::chrono::milliseconds limit) {
  const auto until = std::chrono::steady_clock::now() + limit;
  auto pending = [&] {
    return static_cast<int>(std::count_if(hellos_.begin(), hellos_.end(),
                                           [](void* hello) { return hello != nullptr; }));
  };
  while (pending() > 0 && std::chrono::steady_clock::now() < until) progress();
  return pending();
}

void PeerMonitor::postAbortReceive() {
  abortBuffer_.assign(kMaxAbortReason, 0);
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
  ucs_status_ptr_t status = ucp_tag_recv_nbx(worker_, abortBuffer_.data(), abortBuffer_.size(),
                                             kAbortTag, kKindMask, &param);
  abortReceive_ = UCS_PTR_IS_PTR(status) ? status : nullptr;
}

void PeerMonitor::broadcastAbort(const std::string& reason) {
  if (!abortSent_.empty()) return;
  abortSent_ = reason.substr(0, kMaxAbortReason);
  if (abortSent_.empty()) abortSent_ = "unknown reason";
  for (int peer = 0; peer < static_cast<int>(endpoints_.size()); ++peer) {
    if (endpoints_[peer] == nullptr || deaths_[peer] != UCS_OK || departed_[peer]) continue;
    ucp_request_param_t param{};
    ucs_status_ptr_t status =
        ucp_tag_send_nbx(endpoints_[peer], abortSent_.data(), abortSent_.size(),
                         (static_cast<uint64_t>(rank_) << 32) | kAbortTag, &param);
    if (UCS_PTR_IS_PTR(status)) abortSends_.push_back(status);
  }
}

void PeerMonitor::postGoodbyeReceive() {
  static char unused;
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
  ucs_status_ptr_t status =
      ucp_tag_recv_nbx(worker_, &unused, 0, kGoodbyeTag, kKindMask, &param);
  goodbyeReceive_ = UCS_PTR_IS_PTR(status) ? status : nullptr;
}

void PeerMonitor::sayGoodbye() {
  if (saidGoodbye_) return;
  saidGoodbye_ = true;
  // Not to a peer that already left (or whose connection is gone): it needs
  // no goodbye, and its connection may close under the flush below, which
  // UCX then reports as an error ("error during flush: Endpoint timeout")
  // at the end of a run that went well.
  ucp_worker_progress(worker_);
  collectGoodbyes();
  auto gone = [&](int peer) {
    return endpoints_[peer] == nullptr || deaths_[peer] != UCS_OK || departed_[peer] ||
           losses_[peer] != UCS_OK;
  };
  std::vector<void*> sends;
  static const char byte = 0;
  for (int peer = 0; peer < static_cast<int>(endpoints_.size()); ++peer) {
    if (gone(peer)) continue;
    ucp_request_param_t param{};
    ucs_status_ptr_t status = ucp_tag_send_nbx(
        endpoints_[peer], &byte, 0, (static_cast<uint64_t>(rank_) << 32) | kGoodbyeTag, &param);
    if (UCS_PTR_IS_PTR(status)) sends.push_back(status);
  }
  // Flush so the goodbyes leave before the connections close; bounded, a
  // dead peer cannot hold up our exit.
  const auto limit = std::chrono::steady_clock::now() + kGoodbyeLimit;
  for (int peer = 0; peer < static_cast<int>(endpoints_.size()); ++peer) {
    if (gone(peer)) continue;
    ucp_request_param_t param{};
    ucs_status_ptr_t flush = ucp_ep_flush_nbx(endpoints_[peer], &param);
    if (!UCS_PTR_IS_PTR(flush)) continue;
    while (ucp_request_check_status(flush) == UCS_INPROGRESS &&
           std::chrono::steady_clock::now() < limit) {
      ucp_worker_progress(worker_);
    }
    if (ucp_request_check_status(flush) == UCS_INPROGRESS) ucp_request_cancel(worker_, flush);
    ucp_request_free(flush);
  }
  for (void* send : sends) {
    if (ucp_request_check_status(send) == UCS_INPROGRESS) ucp_request_cancel(worker_, send);
    ucp_request_free(send);
  }
}

void PeerMonitor::onPeerError(void* arg, ucp_ep_h, ucs_status_t status) {
  // Judged in progress(), after the goodbyes this progress call received.
  auto* watch = static_cast<Watch*>(arg);
  ucs_status_t& loss = watch->monitor->losses_[static_cast<size_t>(watch->peer)];
  if (loss == UCS_OK) loss = status;
}

void PeerMonitor::collectGoodbyes() {
  while (goodbyeReceive_ != nullptr) {
    ucp_tag_recv_info_t info{};
    if (ucp_tag_recv_request_test(goodbyeReceive_, &info) == UCS_INPROGRESS) break;
    ucp_request_free(goodbyeReceive_);
    const int peer = static_cast<int>(info.sender_tag >> 32);
    if (peer >= 0 && peer < size_) departed_[peer] = true;
    postGoodbyeReceive();
  }
}

void PeerMonitor::judgeLosses() {
  auto unexplained = [&] {
    for (int peer = 0; peer < size_; ++peer) {
      if (losses_[peer] != UCS_OK && deaths_[peer] == UCS_OK && !departed_[peer]) return true;
    }
    return false;
  };
  if (!unexplained()) return;
  const auto until = std::chrono::steady_clock::now() + kLateGoodbyeLimit;
  while (std::chrono::steady_clock::now() < until) {
    ucp_worker_progress(worker_);
    collectGoodbyes();
    if (!unexplained()) return;
  }
  for (int peer = 0; peer < size_; ++peer) {
    if (losses_[peer] == UCS_OK || deaths_[peer] != UCS_OK || departed_[peer]) continue;
    deaths_[peer] = losses_[peer];
    ++deadCount_;
    RR_LOG(Warn, rank_, "lost connection to rank " << peer << " ("
                                                   << ucs_status_string(losses_[peer]) << ")");
  }
}

unsigned PeerMonitor::progress() {
  const unsigned events = ucp_worker_progress(worker_);
  collectGoodbyes();
  while (abortReceive_ != nullptr) {
    ucp_tag_recv_info_t info{};
    const ucs_status_t status = ucp_tag_recv_request_test(abortReceive_, &info);
    if (status == UCS_INPROGRESS) break;
    ucp_request_free(abortReceive_);
    abortReceive_ = nullptr;
    if (abortedBy_ < 0) {
      abortedBy_ = static_cast<int>(info.sender_tag >> 32);
      abortReason_ = status == UCS_OK ? std::string(abortBuffer_.data(), info.length)
                                      : std::string("(reason not readable)");
      RR_LOG(Warn, rank_, "rank " << abortedBy_ << " aborted the group: " << abortReason_);
    }
    postAbortReceive();
  }
  for (void*& hello : hellos_) {
    if (hello != nullptr && ucp_request_check_status(hello) != UCS_INPROGRESS) {
      ucp_request_free(hello);
      hello = nullptr;
    }
  }
  judgeLosses();
  return events;
}

bool PeerMonitor::arm() {
  const ucs_status_t status = ucp_worker_arm(worker_);
  if (status == UCS_ERR_BUSY) return false;
  check(status, "worker arm");
  return true;
}

int PeerMonitor::firstDeadPeer() const {
  for (int peer = 0; peer < size_; ++peer) {
    if (deaths_[peer] != UCS_OK) return peer;
  }
  return -1;
}

std::string PeerMonitor::deathReason(int peer) const {
  return ucs_status_string(deaths_[static_cast<size_t>(peer)]);
}

}  // namespace ringreduce
