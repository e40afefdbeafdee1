#include "transport/ucx_transport.h"

#include <poll.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "core/errors.h"
#include "core/log.h"
#include "transport/address_record.h"
#include "transport/bootstrap.h"
#include "transport/tag.h"
#include "transport/ucx_worker.h"

namespace ringreduce {

namespace {

void checkUcs(ucs_status_t status, const char* what) {
  if (status != UCS_OK) {
    throw TransportError(std::string("ringreduce: UCX ") + what +
                         " failed: " + ucs_status_string(status));
  }
}

// How long the destructor waits for endpoints to flush before forcing them.
constexpr std::chrono::milliseconds kCloseFlushLimit{2000};

std::string peerName(int peer) {
  return peer < 0 ? std::string("any rank") : "rank " + std::to_string(peer);
}

}  // namespace

UcxTransport::UcxTransport(int rank, int size, std::shared_ptr<KeyValueStore> store,
                           std::chrono::milliseconds timeout, const Config& config)
    : rank_(rank), size_(size), config_(config) {
  if (size < 1 || size > kMaxRanks || rank < 0 || rank >= size) {
    throw InvalidArgument("ringreduce: invalid rank " + std::to_string(rank) + " for group of size " +
                          std::to_string(size));
  }
  UcxWorker ucx = UcxWorker::open(nullptr, static_cast<size_t>(size), "data path");
  context_ = ucx.context;
  worker_ = ucx.worker;
  eventFd_ = ucx.eventFd;
  const std::vector<uint8_t>& myAddress = ucx.address;
  try {
    if (config.peerMonitor) monitor_ = std::make_unique<PeerMonitor>(rank, size);
    int64_t generation = 0;
    const auto published = exchangeAddresses(
        *store, rank, size,
        packAddressRecord({myAddress, monitor_ ? monitor_->address() : std::vector<uint8_t>{}}),
        timeout, &generation);
    board_ = std::make_unique<ProgressBoard>(
        store, "ringreduce/gen" + std::to_string(generation) + "/waiting_in/", rank, size);
    std::vector<std::vector<uint8_t>> monitorAddresses(static_cast<size_t>(size));
    peerAddresses_.resize(static_cast<size_t>(size));
    for (int peer = 0; peer < size; ++peer) {
      AddressRecord record = unpackAddressRecord(published[peer].data(), published[peer].size(), peer);
      peerAddresses_[peer] = std::move(record.data);
      monitorAddresses[peer] = std::move(record.monitor);
    }
    if (monitor_) monitor_->connect(monitorAddresses);
    endpoints_.assign(static_cast<size_t>(size), nullptr);
  } catch (...) {
    monitor_.reset();
    ucx.close();
    throw;
  }
}

UcxTransport::~UcxTransport() {
  abandonWhere(true, 0);
  std::vector<void*> closing;
  for (int peer = 0; peer < size_; ++peer) {
    ucp_ep_h ep = endpoints_.empty() ? nullptr : endpoints_[peer];
    if (ep == nullptr) continue;
    ucp_request_param_t param{};
    // Flush what is still going out, except to a dead peer: nothing there
    // will ever acknowledge it.
    if (monitor_ && monitor_->isDead(peer)) {
      param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
      param.flags = UCP_EP_CLOSE_FLAG_FORCE;
    }
    ucs_status_ptr_t status = ucp_ep_close_nbx(ep, &param);
    if (UCS_PTR_IS_PTR(status)) closing.push_back(status);
  }
  const auto limit = Clock::now() + kCloseFlushLimit;
  while (!closing.empty() && Clock::now() < limit) {
    progress();
    closing.erase(std::remove_if(closing.begin(), closing.end(),
                                 [](void* request) {
                                   if (ucp_request_check_status(request) == UCS_INPROGRESS) {
                                     return false;
                                   }
                                   ucp_request_free(request);
                                   return true;
                                 }),
                  closing.end());
  }
  if (!closing.empty()) {
    RR_LOG(Warn, rank_, "closing " << closing.size() << " endpoint(s) did not flush within "
                                   << kCloseFlushLimit.count() << " ms; destroying anyway");
    for (void* request : closing) ucp_request_free(request);
  }
  ucp_worker_destroy(worker_);
  ucp_cleanup(context_);
  monitor_.reset();
}

ucp_ep_h UcxTransport::endpoint(int peer) {
  ucp_ep_h& ep = endpoints_[static_cast<size_t>(peer)];
  if (ep != nullptr) return ep;
  ucp_ep_params_t params{};
  params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
  params.address = reinterpret_cast<const ucp_address_t*>(peerAddresses_[peer].data());
  checkUcs(ucp_ep_create(worker_, &params, &ep), "endpoint create");
  RR_LOG(Info, rank_, "connected to rank " << peer << ": " << describeEndpoint(peer));
  return ep;
}

std::string UcxTransport::describeEndpoint(int peer) {
  ucp_ep_h ep = endpoints_[static_cast<size_t>(peer)];
  if (ep == nullptr) return "not connected";
  char* text = nullptr;
  size_t length = 0;
  FILE* stream = open_memstream(&text, &length);
  if (stream == nullptr) return "unknown";
  ucp_ep_print_info(ep, stream);
  std::fclose(stream);
  std::string description(text, length);
  std::free(text);
  // Keep the lane lines ("lane[0]: ... tcp/lo ...") on one log line.
  std::replace(description.begin(), description.end(), '\n', ' ');
  return description;
}

Request UcxTransport::isend(int peer, uint64_t tag, const void* data, size_t bytes,
                            const OpContext& op) {
  Request request;
  request.peer = peer;
  request.bytes = bytes;
  ucp_request_param_t param{};
  if (!op.pointToPoint) tag |= static_cast<uint64_t>(op.fingerprint) << kTagFingerprintShift;
  ucs_status_ptr_t status = ucp_tag_send_nbx(endpoint(peer), data, bytes, tag, &param);
  if (UCS_PTR_IS_ERR(status)) {
    throw TransportError("ringreduce: " + op.describe() + " on rank " + std::to_string(rank_) +
                         ": send to rank " + std::to_string(peer) +
                         " failed: " + ucs_status_string(UCS_PTR_STATUS(status)));
  }
  if (status == nullptr) {
    request.done = true;
  } else {
    request.handle = status;
    outstanding_.emplace(status, op.owner());
  }
  return request;
}

Request UcxTransport::irecv(int peer, uint64_t tag, void* data, size_t bytes,
                            const OpContext& op, uint64_t mask) {
  Request request;
  request.peer = peer;
  request.bytes = bytes;
  request.isRecv = true;
  if (!op.pointToPoint) {
    // Match whatever fingerprint the sender put there; test() compares it.
    mask &= ~kTagFingerprintMask;
    request.fingerprint = op.fingerprint;
  }
  ucp_tag_recv_info_t info{};
  ucp_request_param_t param{};
  // Always complete through a request: then ucp_tag_recv_request_test()
  // reports the received length in every case.
  param.op_attr_mask = UCP_OP_ATTR_FIELD_RECV_INFO | UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
  param.recv_info.tag_info = &info;
  ucs_status_ptr_t status = ucp_tag_recv_nbx(worker_, data, bytes, tag, mask, &param);
  if (UCS_PTR_IS_ERR(status)) {
    throw TransportError("ringreduce: " + op.describe() + " on rank " + std::to_string(rank_) +
                         ": receive from rank " + std::to_string(peer) +
                         " failed: " + ucs_status_string(UCS_PTR_STATUS(status)));
  }
  if (status == nullptr) {
    if (info.length != bytes) {
      throw TransportError("ringreduce: " + op.describe() + " on rank " + std::to_string(rank_) +
                           ": received " + std::to_string(info.length) + " bytes from rank " +
                           std::to_string(peer) + ", expected " + std::to_string(bytes) +
                           " (do all ranks call the same collective with the same sizes?)");
    }
    request.done = true;
  } else {
    request.handle = status;
    outstanding_.emplace(status, op.owner());
  }
  return request;
}

void UcxTransport::finishRequest(Request& request) {
  outstanding_.erase(request.handle);
  ucp_request_free(request.handle);
  request.handle = nullptr;
  request.done = true;
}

bool UcxTransport::test(Request& request, const OpContext& op) {
  if (request.done) return true;
  ucp_tag_recv_info_t info{};
  const ucs_status_t status = request.isRecv ? ucp_tag_recv_request_test(request.handle, &info)
                                             : ucp_request_check_status(request.handle);
  if (status == UCS_INPROGRESS) return false;
  finishRequest(request);
  if (request.isRecv) request.senderTag = info.sender_tag;
  const std::string where = "ringreduce: " + op.describe() + " on rank " + std::to_string(rank_);
  const std::string direction =
      request.isRecv ? "receive from " + peerName(request.peer)
                     : "send to rank " + std::to_string(request.peer);
  if (status == UCS_ERR_MESSAGE_TRUNCATED) {
    throw TransportError(where + ": " + direction + " brought more than the expected " +
                         std::to_string(request.bytes) +
                         " bytes (do all ranks call the same collective with the same sizes?)");
  }
  if (status != UCS_OK) {
    throw TransportError(where + ": " + direction + " failed: " + ucs_status_string(status));
  }
  if (request.fingerprint >= 0 &&
      ((info.sender_tag & kTagFingerprintMask) >> kTagFingerprintShift) !=
          static_cast<uint64_t>(request.fingerprint)) {
    throw TransportError(where + ": rank " + std::to_string(tagSourceRank(info.sender_tag)) +
                         " is in a different collective (the operation, dtype, size, reduce op "
                         "or root differ); RINGREDUCE_CHECK_COLLECTIVES=1 names the difference");
  }
  if (request.isRecv && info.length != request.bytes) {
    throw TransportError(where + ": received " + std::to_string(info.length) +
                         " bytes from " + peerName(tagSourceRank(info.sender_tag)) +
                         ", expected " + std::to_string(request.bytes) +
                         " (do all ranks call the same collective with the same sizes?)");
  }
  return true;
}

void UcxTransport::announceFailure(const std::string& reason) {
  if (monitor_) monitor_->broadcastAbort(reason);
}

void UcxTransport::checkPeersAlive(int peer, const OpContext& op) const {
  if (!monitor_) return;
  if (monitor_->abortedBy() >= 0 && !op.pointToPoint) {
    throw TransportError("ringreduce: " + op.describe() + " on rank " + std::to_string(rank_) +
                         " failed: rank " + std::to_string(monitor_->abortedBy()) +
                         " gave up on the group: " + monitor_->abortReason());
  }
  if (!monitor_->anyDead()) return;
  const int dead = peer >= 0 ? (monitor_->isDead(peer) ? peer : -1) : monitor_->firstDeadPeer();
  if (dead < 0) return;
  throw TransportError("ringreduce: " + op.describe() + " on rank " + std::to_string(rank_) +
                       " failed: rank " + std::to_string(dead) + " is gone (connection lost: " +
                       monitor_->deathReason(dead) + "); the process died or the network failed");
}

void UcxTransport::wait(Request& request, const OpContext& op) {
  if (!waitUntilDeadline(request, op)) throwTimeout(request, op);
}

bool UcxTransport::waitUntilDeadline(Request& request, const OpContext& op) {
  const auto spin = std::chrono::microseconds(config_.spinMicroseconds);
  auto spinUntil = Clock::now() + spin;
  while (!test(request, op)) {
    if (progress() > 0) continue;
    // Nothing more arrived. A collective cannot finish without every rank,
    // so any death ends it; a send/recv only needs its peer.
    checkPeersAlive(op.pointToPoint ? request.peer : -1, op);
    const auto now = Clock::now();
    if (now >= op.deadline) return false;
    announceIfStalled(op, now);
    if (now < spinUntil) continue;
    const auto remaining =
        std::chrono::duration_cast<std::chrono::milliseconds>(op.deadline - now).count() + 1;
    sleepUntilEvent(-1, static_cast<int>(std::min<long long>(remaining, 100)));
    spinUntil = Clock::now() + spin;
  }
  return true;
}

void UcxTransport::waitAll(std::vector<Request>& requests, const OpContext& op) {
  for (Request& request : requests) wait(request, op);
}

std::string UcxTransport::describeTimeout(const Request& request, const OpContext& op) const {
  const std::string waiting =
      request.isRecv ? "still waiting to receive " + std::to_string(request.bytes) +
                           " bytes from " + peerName(request.peer)
                     : "still waiting to send " + std::to_string(request.bytes) +
                           " bytes to rank " + std::to_string(request.peer);
  return "ringreduce: " + op.describe() + " timed out after " +
         std::to_string(op.timeout.count()) + " ms on rank " + std::to_string(rank_) + ": " +
         waiting + " (is that rank alive and calling the same collective?)";
}

// A collective that waits for a tenth of its timeout (at most 2 s) says so
// on the progress board; healthy collectives never touch the store.
void UcxTransport::announceIfStalled(const OpContext& op, Clock::time_point now) {
  if (!board_ || op.pointToPoint) return;
  const auto threshold = std::min<Clock::duration>(op.timeout / 10, std::chrono::seconds(2));
  if (now - (op.deadline - op.timeout) >= threshold) board_->announce(op.seq);
}

void UcxTransport::throwTimeout(const Request& request, const OpContext& op) {
  std::string message = describeTimeout(request, op);
  if (board_ && !op.pointToPoint) {
    board_->announce(op.seq);
    const auto behind = board_->ranksBehind(op.seq);
    message += behind.empty()
                   ? "; every rank was seen waiting in " + op.describe() +
                         ", so one is stuck inside it or the network stalled"
                   : "; rank(s) not seen in " + op.describe() + ": " +
                         ProgressBoard::describe(behind);
  }
  throw TimeoutError(message);
}

void UcxTransport::abandonOutstanding(const OpContext& op) { abandonWhere(false, op.owner()); }

void UcxTransport::abandonWhere(bool all, uint64_t owner) {
  for (auto it = outstanding_.begin(); it != outstanding_.end();) {
    if (all || it->second == owner) {
      ucp_request_cancel(worker_, it->first);
      ucp_request_free(it->first);
      it = outstanding_.erase(it);
    } else {
      ++it;
    }
  }
}

void UcxTransport::abandon(Request& request) {
  if (request.handle == nullptr) return;
  ucp_request_cancel(worker_, request.handle);
  ucp_request_free(request.handle);
  outstanding_.erase(request.handle);
  request.handle = nullptr;
  request.done = true;
}

unsigned UcxTransport::progress() {
  unsigned events = ucp_worker_progress(worker_);
  if (monitor_) events += monitor_->progress();
  return events;
}

void UcxTransport::sleepUntilEvent(int extraFd, int timeoutMs) {
  const ucs_status_t status = ucp_worker_arm(worker_);
  if (status == UCS_ERR_BUSY) return;  // events already pending: progress again
  checkUcs(status, "worker arm");
  if (monitor_ && !monitor_->arm()) return;
  pollfd fds[3];
  nfds_t count = 0;
  fds[count++] = {eventFd_, POLLIN, 0};
  if (monitor_) fds[count++] = {monitor_->eventFd(), POLLIN, 0};
  if (extraFd >= 0) fds[count++] = {extraFd, POLLIN, 0};
  ::poll(fds, count, timeoutMs);
}

}  // namespace ringreduce
