// The Transport over UCX (ucx_transport.h)
#include "transport/ucx/ucx_transport.h"

#include <chrono>
#include <thread>

#include <poll.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "core/base/errors.h"
#include "core/base/host_identity.h"
#include "core/config/settings_agreement.h"
#include "core/observe/log.h"
#include "transport/ucx/address_record.h"
#include "transport/ucx/bootstrap.h"
#include "transport/ucx/held_ucx_errors.h"
#include "transport/ucx/peer_gone_log_filter.h"
#include "transport/ucx/segment_size_check.h"
#include "transport/tag.h"
#include "transport/ucx/ucx_info.h"
#include "transport/ucx/ucx_worker.h"

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
// How long abandoning a message already under way waits for its last
// fragment (cancelInFlight), and how long a send may show no progress at
// all before it is taken for one its receiver never answers.
constexpr std::chrono::milliseconds kAbandonedMessageLimit{1000};
constexpr std::chrono::milliseconds kAbandonedSendQuiet{20};
constexpr std::chrono::microseconds kAbandonedIdlePoll{50};
// How long the constructor waits for the peer monitor's connections.
constexpr std::chrono::milliseconds kMonitorWireLimit{5000};
// progress() looks at the peer monitor at most this often. Its worker is
// TCP: each look is an epoll_wait, and a waiting rank progresses in a tight
// loop (11.7 looks per 4-byte allreduce and rank at world 4, more than all
// the collective's other system calls together). A death is news within
// milliseconds either way; a sleeping worker is woken by the monitor's fd.
constexpr auto kMonitorProgressInterval = std::chrono::microseconds(200);

}  // namespace

UcxTransport::UcxTransport(int rank, int size, std::shared_ptr<KeyValueStore> store,
                           std::chrono::milliseconds timeout, const Config& config,
                           bool collectiveChecks)
    : Transport(rank, size, config), copiesTakenBefore_(copiesFromGonePeersTaken()) {
  refuseUnusableSegmentSize();  // before UCX sees it: it would accept it
  std::vector<UcxWorker::Default> defaults;
  for (const auto& [name, value, variable] : dataPathUcxSettings()) {
    defaults.push_back({name, value, variable});
  }
  UcxWorker ucx = UcxWorker::open(nullptr, static_cast<size_t>(size), "data path", defaults);
  context_ = ucx.context;
  worker_ = ucx.worker;
  eventFd_ = ucx.eventFd;
  // Whether UCX may ever be handed a device pointer: only where its context
  // registers CUDA memory (Debian's UCX does not; RAPIDS' libucx-cu* wheels
  // do where a driver is present).
  std::string memoryTypes;
  for (const std::string& type : ucxMemoryTypes(context_)) {
    memoryTypes += (memoryTypes.empty() ? "" : ", ") + type;
    registersCudaMemory_ |= type == "cuda";
  }
  RR_LOG(Info, rank, "UCX " << ucxVersion() << " (" << ucxLibraryPath()
                            << ") registers memory types: " << memoryTypes);
  const std::vector<uint8_t>& myAddress = ucx.address;
  try {
    if (config.peerMonitor) monitor_ = std::make_unique<PeerMonitor>(rank, size);
    const uint64_t myHost = hostIdentityHash();
    const auto published = exchangeAddresses(
        *store, rank, size,
        packAddressRecord({myAddress, monitor_ ? monitor_->address() : std::vector<uint8_t>{},
                           myHost,
                           agreedSettings(config, config.checkCollectives || collectiveChecks)}),
        timeout, &storeGeneration_);
    storePrefix_ = "ringreduce/gen" + std::to_string(storeGeneration_) + "/";
    setProgressBoard(std::make_unique<ProgressBoard>(store, storePrefix_ + "waiting_in/", rank, size));
    std::vector<std::vector<uint8_t>> monitorAddresses(static_cast<size_t>(size));
    peerAddresses_.resize(static_cast<size_t>(size));
    ranksOnThisHost_ = 0;
    std::vector<std::string> agreed(static_cast<size_t>(size));
    for (int peer = 0; peer < size; ++peer) {
      AddressRecord record = unpackAddressRecord(published[peer].data(), published[peer].size(), peer);
      peerAddresses_[peer] = std::move(record.data);
      monitorAddresses[peer] = std::move(record.monitor);
      agreed[peer] = std::move(record.agreed);
      ranksOnThisHost_ += record.host == myHost;
    }
    // Every rank read the same records, so every rank fails alike, at
    // once, instead of a collective hanging until its timeout.
    const std::string disagreement = settingsDisagreement(agreed);
    if (!disagreement.empty()) {
      throw InvalidArgument("ringreduce: rank " + std::to_string(rank) + ": " + disagreement);
    }
    if (monitor_) {
      monitor_->connect(monitorAddresses);
      // Every rank is here at about the same time (the address exchange
      // above waited for all of them), so the wiring takes milliseconds.
      const int unconnected = monitor_->awaitConnected(std::min(timeout, kMonitorWireLimit));
      if (unconnected > 0) {
        RR_LOG(Warn, rank, unconnected << " peer-monitor connection(s) not wired up within "
                                       << std::min(timeout, kMonitorWireLimit).count()
                                       << " ms; they finish during the first collectives");
      }
    }
    endpoints_.assign(static_cast<size_t>(size), nullptr);
    eagerPays_.assign(static_cast<size_t>(size), 0);
  } catch (...) {
    monitor_.reset();
    ucx.close();
    throw;
  }
}

UcxTransport::~UcxTransport() {
  abandonAll();
  // Goodbyes that arrived while this rank was busy: peers that have left.
  if (monitor_) monitor_->progress();
  std::vector<void*> closing;
  for (int peer = 0; peer < size(); ++peer) {
    ucp_ep_h ep = endpoints_.empty() ? nullptr : endpoints_[peer];
    if (ep == nullptr) continue;
    ucp_request_param_t param{};
    // Flush what is still going out, except to a dead peer (nothing there
    // will ever acknowledge it) and to one that has left: it finished its
    // collectives, so it needs nothing more from us, and its worker may be
    // gone, which fails the flush with an error UCX prints ("error during
    // flush: Endpoint timeout") at the end of a run that went well.
    if (monitor_ && (monitor_->isDead(peer) || monitor_->hasDeparted(peer))) {
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
    RR_LOG(Warn, rank(), "closing " << closing.size() << " endpoint(s) did not flush within "
                                   << kCloseFlushLimit.count() << " ms; destroying anyway");
    for (void* request : closing) ucp_request_free(request);
  }
  // Our endpoints are flushed: peers may now close theirs to us by force.
  if (monitor_) monitor_->sayGoodbye();
  monitor_.reset();
  if (copiesFromGonePeersTaken() != copiesTakenBefore_) {
    // A copy from a gone peer's memory failed in this process while this
    // worker lived, and may still be queued on its cma endpoint: destroying
    // it would abort the process (peer_gone_log_filter.h). Its memory stays
    // until the process exits.
    RR_LOG(Warn, rank(), "a copy from a gone peer failed while this group lived: its UCX worker "
                         "is left in place, not destroyed (UCX 1.13 would abort on it)");
    return;
  }
  ucp_worker_destroy(worker_);
  ucp_cleanup(context_);
}

ucp_ep_h UcxTransport::endpoint(int peer) {
  ucp_ep_h& ep = endpoints_[static_cast<size_t>(peer)];
  if (ep != nullptr) return ep;
  ucp_ep_params_t params{};
  params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
  params.address = reinterpret_cast<const ucp_address_t*>(peerAddresses_[peer].data());
  // UCX's errors from the tries are held: a passing failure prints nothing,
  // a lasting one goes into the error below (held_ucx_errors.h).
  HeldUcxErrors held;
  const auto create = [&] {
    HeldUcxErrors::Scope holding(held);
    return ucp_ep_create(worker_, &params, &ep);
  };
  ucs_status_t status = create();
  // Attaching a live peer's shared memory now and then fails for a moment
  // (seen with several groups per process): try again for up to 50 ms. A
  // peer that really left fails every time, and the caller then names it.
  int tries = 1;
  for (; status == UCS_ERR_SHMEM_SEGMENT && tries <= 50; ++tries) {
    ucp_worker_progress(worker_);
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    status = create();
  }
  if (status != UCS_OK) {
    const std::string after = tries > 1 ? ", " + std::to_string(tries) + " tries" : "";
    throw TransportError(std::string("could not connect (UCX endpoint create: ") +
                         ucs_status_string(status) + after +
                         (held.count() > 0 ? "; UCX: " + held.text() : "") + ")");
  }
  if (held.count() > 0) {
    RR_LOG(Info, rank(), "connecting to rank " << peer << " took " << tries
                                               << " tries; UCX: " << held.text());
  }
  const std::string description = describeEndpoint(peer);
  eagerPays_[static_cast<size_t>(peer)] = eagerCanPay(description);
  RR_LOG(Info, rank(), "connected to rank " << peer << " (RINGREDUCE_EAGER_BYTES "
                                             << (eagerPays_[peer] ? "applies" : "does not apply")
                                             << "): " << description);
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

void* UcxTransport::postSend(int peer, uint64_t tag, const void* data, size_t bytes,
                             std::string* error) {
  ucp_ep_h ep = nullptr;
  try {
    ep = endpoint(peer);  // connects on first use
  } catch (const TransportError& connectError) {
    *error = connectError.what();
    return nullptr;
  }
  ucp_request_param_t param{};
  if (sendsEagerly(eagerPays_[static_cast<size_t>(peer)] != 0, bytes, config().eagerBytes)) {
    param.op_attr_mask = UCP_OP_ATTR_FLAG_FAST_CMPL;
  }
  ucs_status_ptr_t status = ucp_tag_send_nbx(ep, data, bytes, tag, &param);
  if (UCS_PTR_IS_ERR(status)) {
    *error = ucs_status_string(UCS_PTR_STATUS(status));
    return nullptr;
  }
  return status;  // null: sent at once
}

void* UcxTransport::postRecv(uint64_t tag, uint64_t mask, void* data, size_t bytes,
                             std::string* error) {
  ucp_tag_recv_info_t info{};
  ucp_request_param_t param{};
  // Always complete through a request: then ucp_tag_recv_request_test()
  // reports the received length and the sender's tag in every case.
  param.op_attr_mask = UCP_OP_ATTR_FIELD_RECV_INFO | UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
  param.recv_info.tag_info = &info;
  ucs_status_ptr_t status = ucp_tag_recv_nbx(worker_, data, bytes, tag, mask, &param);
  if (UCS_PTR_IS_ERR(status) || status == nullptr) {
    *error = ucs_status_string(UCS_PTR_STATUS(status));
    return nullptr;
  }
  return status;
}

Completion UcxTransport::poll(void* handle, bool isRecv) {
  ucp_tag_recv_info_t info{};
  const ucs_status_t status =
      isRecv ? ucp_tag_recv_request_test(handle, &info) : ucp_request_check_status(handle);
  Completion completion;
  if (status == UCS_INPROGRESS) return completion;
  ucp_request_free(handle);
  completion.length = info.length;
  completion.senderTag = info.sender_tag;
  if (status == UCS_OK) {
    completion.state = Completion::State::Done;
  } else if (status == UCS_ERR_MESSAGE_TRUNCATED) {
    completion.state = Completion::State::Truncated;
  } else {
    completion.state = Completion::State::Failed;
    completion.error = ucs_status_string(status);
  }
  return completion;
}

void UcxTransport::cancel(void* handle) {
  ucp_request_cancel(worker_, handle);
  ucp_request_free(handle);
}

void UcxTransport::cancelInFlight(void* handle, int peer, bool isRecv) {
  ucp_request_cancel(worker_, handle);
  // UCX cancels only a receive it has not matched yet, and no send. A
  // message already under way goes on moving through its buffer, which the
  // caller frees once the abandon returns: a receive's later fragments
  // wrote freed memory (a survivor of a killed rank crashed so at its
  // shutdown; test AnAbandonedReceiveWritesNothingOnceAbandonReturned), a
  // send's read it (over shared memory without cma:
  // AnAbandonedSendReadsNothingOnceAbandonReturned). So it runs to its end
  // here: the peer, alive, takes part, or its connection fails. Not past
  // what a dead peer left; a send with nothing moving at all is one whose
  // receiver gave up before it matched (it never asks for the data); and
  // bounded.
  const auto start = Clock::now();
  auto lastEvent = start;
  while (ucp_request_check_status(handle) == UCS_INPROGRESS) {
    const unsigned events = progress();
    const auto now = Clock::now();
    if (events > 0) lastEvent = now;
    if (events == 0 && peer >= 0 && monitor_ && monitor_->isDead(peer)) break;
    if (!isRecv && now - lastEvent >= kAbandonedSendQuiet) break;
    // Nothing moved: the peer is not taking part just now. A short sleep
    // leaves it the core (two ranks may share two) instead of spinning.
    if (events == 0) std::this_thread::sleep_for(kAbandonedIdlePoll);
    if (now - start >= kAbandonedMessageLimit) {
      RR_LOG(Warn, rank(), "a " << (isRecv ? "receive" : "send")
                                << " abandoned while its message was under way did not end "
                                   "within "
                                << kAbandonedMessageLimit.count()
                                << " ms; its buffer may still be used");
      break;
    }
  }
  ucp_request_free(handle);
}

void UcxTransport::announceFailure(const std::string& reason) {
  if (monitor_) monitor_->broadcastAbort(reason);
}

void UcxTransport::checkPeersAlive(int peer, const OpContext& op) const {
  if (!monitor_) return;
  if (monitor_->abortedBy() >= 0 && op.groupWide()) {
    throw TransportError("ringreduce: " + op.describe() + " on rank " + std::to_string(rank()) +
                         " failed: rank " + std::to_string(monitor_->abortedBy()) +
                         " gave up on the group: " + monitor_->abortReason());
  }
  if (!monitor_->anyDead()) return;
  const int dead = peer >= 0 ? (monitor_->isDead(peer) ? peer : -1) : monitor_->firstDeadPeer();
  if (dead < 0) return;
  throw TransportError("ringreduce: " + op.describe() + " on rank " + std::to_string(rank()) +
                       " failed: rank " + std::to_string(dead) + " is gone (connection lost: " +
                       monitor_->deathReason(dead) + "); the process died or the network failed");
}

bool UcxTransport::peerLeft(int peer) const { return monitor_ && monitor_->hasDeparted(peer); }

unsigned UcxTransport::progress() {
  unsigned events = ucp_worker_progress(worker_);
  if (monitor_) {
    const auto now = Clock::now();
    if (now >= nextMonitorProgress_) {
      nextMonitorProgress_ = now + kMonitorProgressInterval;
      events += monitor_->progress();
    }
  }
  return events;
}

bool UcxTransport::armForSleep() {
  const ucs_status_t status = ucp_worker_arm(worker_);
  if (status == UCS_ERR_BUSY) return false;  // events already pending: progress again
  checkUcs(status, "worker arm");
  if (!monitor_ || monitor_->arm()) return true;
  // The monitor has news: take it now, whatever the interval says, or the
  // caller would loop until the interval ends.
  nextMonitorProgress_ = Clock::time_point{};
  return false;
}

size_t UcxTransport::eventFds(int* fds, size_t room) const {
  size_t count = 0;
  if (count < room) fds[count++] = eventFd_;
  if (monitor_ && count < room) fds[count++] = monitor_->eventFd();
  return count;
}

void UcxTransport::sleepArmed(int extraFd, int timeoutMs) {
  pollfd fds[3];
  nfds_t count = 0;
  fds[count++] = {eventFd_, POLLIN, 0};
  if (monitor_) fds[count++] = {monitor_->eventFd(), POLLIN, 0};
  if (extraFd >= 0) fds[count++] = {extraFd, POLLIN, 0};
  ::poll(fds, count, timeoutMs);
}

}  // namespace ringreduce
