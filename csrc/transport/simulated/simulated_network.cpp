// A virtual-time network that runs the real algorithms for p ranks (simulated_network.h)
#include "transport/simulated/simulated_network.h"

#include <algorithm>
#include <cstring>
#include <sstream>

#include "core/base/errors.h"
#include "transport/simulated/simulated_transport.h"
#include "transport/tag.h"

namespace ringreduce {

namespace {
// Collective receives match on everything but the fingerprint (transport.h).
constexpr uint64_t kKeyMask = ~kTagFingerprintMask;
// How far (virtual seconds) a rank may run ahead of events still due.
constexpr double kRunAhead = 1e-6;
}  // namespace

SimulatedNetwork::SimulatedNetwork(Topology topology, const LinkCost& intraNode,
                                   const LinkCost& interNode, bool payload, const HostCpu& cpu)
    : topology_(std::move(topology)),
      intra_(intraNode),
      inter_(interNode),
      payload_(payload),
      cpu_(cpu) {}

SimulatedNetwork::~SimulatedNetwork() {
  transports_.clear();  // their receives go back through cancel() first
  for (Rank& r : ranks_) {
    for (auto& [key, messages] : r.unexpected) {
      while (messages.head != nullptr) delete messages.pop();
    }
  }
}

void SimulatedNetwork::push(double time, Event::Kind kind, int rank, Message* message,
                            double leftSender) {
  events_.push(Event{time, order_++, kind, rank, message, leftSender});
}

const MessageCpu& SimulatedNetwork::cpuOf(int from, int to) const {
  return topology_.nodeOf[from] == topology_.nodeOf[to] ? cpu_.intraNode : cpu_.interNode;
}

void SimulatedNetwork::takeCore(int rank) {
  Rank& r = ranks_[rank];
  if (r.hasCore) return;
  // Cores go to ranks in virtual-time order: a rank ahead of an event still
  // due, or of ranks about to run, lets them ask first.
  if (r.clock > now_ &&
      (!runnable_.empty() || (!events_.empty() && events_.top().time < r.clock))) {
    push(r.clock, Event::Resume, rank, nullptr);
    r.state = State::Yielded;
    fibers_.suspend();
  }
  if (idleCores_ > 0) {
    --idleCores_;
    r.hasCore = true;
    return;
  }
  r.state = State::WaitingForCore;  // grantCore() resumes it with one
  coreQueue_.push_back(CoreWaiter{rank, rank, 0, {}});
  fibers_.suspend();
}

void SimulatedNetwork::releaseCore(int rank) {
  Rank& r = ranks_[rank];
  r.hasCore = false;
  if (r.clock > now_) {
    push(r.clock, Event::ReleaseCore, rank, nullptr);  // busy until then
  } else {
    grantCore();
  }
}

void SimulatedNetwork::grantCore() {
  if (coreQueue_.empty()) {
    ++idleCores_;
    return;
  }
  const CoreWaiter next = std::move(coreQueue_.front());
  coreQueue_.pop_front();
  if (next.rank < 0) {  // held sends' release, for a sleeping sender
    Rank& sender = ranks_[next.sender];
    sender.pendingRelease = nullptr;
    double at = now_ + next.wake;
    for (const HeldSend& send : next.sends) {
      transmit(send.to, send.message, at + send.post);
      at += send.work;
    }
    sender.releasingUntil = at;
    push(at, Event::ReleaseCore, -1, nullptr);
    return;
  }
  Rank& r = ranks_[next.rank];
  r.hasCore = true;
  r.state = State::Runnable;
  runnable_.push_back(next.rank);
}

void SimulatedNetwork::compute(int rank, double seconds) {
  Rank& r = ranks_[rank];
  if (cpu_.cores > 0 && seconds > 0) takeCore(rank);
  r.clock += seconds;  // without limited cores exactly the model before them
}

void SimulatedNetwork::send(int from, int to, uint64_t tag, const void* data, size_t bytes) {
  Rank& sender = ranks_[from];
  const bool sameNode = topology_.nodeOf[from] == topology_.nodeOf[to];
  const LinkCost& link = sameNode ? intra_ : inter_;
  const MessageCpu& cpu = cpuOf(from, to);
  auto* message = new Message{from, tag, bytes, {}, 0};
  if (payload_ && bytes > 0) {
    const auto* in = static_cast<const uint8_t*>(data);
    message->data.assign(in, in + bytes);
  }
  ++messages_;
  if (cpu.heldFor > 0) {
    // Held (an emulated delay): the send's work comes at its release.
    compute(from, link.overhead);
    push(sender.clock + cpu.heldFor, Event::Release, to, message);
  } else {
    // It leaves once posted; the sender goes on copying it as it streams out.
    compute(from, link.overhead + cpu.send);
    const double leaves = sender.clock;
    compute(from, cpu.sendPerByte * static_cast<double>(bytes));
    transmit(to, message, leaves);
  }
  // Posting overheads moved this rank past events still due: let them
  // happen first, so that links see their messages nearly in time order
  // (within kRunAhead: a switch per message would double the simulator's work).
  if (!events_.empty() && events_.top().time + kRunAhead < sender.clock) {
    push(sender.clock, Event::Resume, from, nullptr);
    sender.state = State::Yielded;
    fibers_.suspend();
  }
}

void SimulatedNetwork::transmit(int to, Message* message, double at) {
  const int from = message->source;
  const double size = static_cast<double>(message->bytes);
  if (topology_.nodeOf[from] == topology_.nodeOf[to]) {
    const double start = std::max(at, linkFree_[from]);
    linkFree_[from] = start + size * intra_.beta;
    push(linkFree_[from] + intra_.alpha, Event::Deliver, to, message);
  } else {
    double& nic = nicOutFree_[topology_.nodeOf[from]];
    const double start = std::max(at, nic);
    nic = start + size * inter_.beta;
    push(start + inter_.alpha, Event::AtReceiverNic, to, message, nic);
  }
}

void SimulatedNetwork::release(int to, Message* message) {
  const int from = message->source;
  Rank& sender = ranks_[from];
  const MessageCpu& cpu = cpuOf(from, to);
  // The message leaves after the send's per-message work; the sender goes
  // on copying it as it streams out (`work` in all).
  const double post = cpu.send, work = cpu.sending(message->bytes);
  const bool asleep = (sender.state == State::Waiting && !sender.spinning) ||
                      sender.state == State::WaitingForCore || sender.state == State::Finished;
  if (!asleep) {
    // Running or spinning: its own loop sends it, on its core, right away.
    sender.clock = std::max(sender.clock, now_) + work;
    transmit(to, message, now_ + post);
    return;
  }
  // Asleep: a timer wakes it, and it sends what is due one after another
  // (one thread), on a core it may have to wait for.
  if (sender.releasingUntil >= now_) {  // already awake for earlier releases
    transmit(to, message, sender.releasingUntil + post);
    sender.releasingUntil += work;
    return;
  }
  if (sender.pendingRelease != nullptr) {  // waiting for a core: one more to send
    sender.pendingRelease->sends.push_back({to, message, post, work});
    return;
  }
  if (cpu_.cores <= 0) {
    transmit(to, message, now_ + cpu.wake + post);
    sender.releasingUntil = now_ + cpu.wake + work;
    return;
  }
  coreQueue_.push_back(CoreWaiter{-1, from, cpu.wake, {{to, message, post, work}}});
  sender.pendingRelease = &coreQueue_.back();  // deque: stays put while queued
  // Granted once every release due now has joined it.
  push(now_, Event::GrantIdleCores, -1, nullptr);
}

void SimulatedNetwork::fill(Receive& receive, const Message& message) {
  if (payload_ && receive.data != nullptr && !message.data.empty()) {
    std::memcpy(receive.data, message.data.data(), std::min(message.bytes, receive.bytes));
  }
  receive.cpu = cpuOf(message.source, receive.rank).receiving(message.bytes);
  receive.completion.length = message.bytes;
  receive.completion.senderTag = message.tag;
  receive.completion.state =
      message.bytes > receive.bytes ? Completion::State::Truncated : Completion::State::Done;
}

SimulatedNetwork::Message* SimulatedNetwork::takeUnexpected(Rank& rank, const Receive& receive) {
  auto take = [&](std::unordered_map<uint64_t, Queue<Message>>::iterator bucket, Message* m) {
    bucket->second.remove(m);
    if (bucket->second.head == nullptr) rank.unexpected.erase(bucket);
    return m;
  };
  if (receive.mask == kKeyMask) {
    const auto bucket = rank.unexpected.find(receive.tag & kKeyMask);
    if (bucket == rank.unexpected.end()) return nullptr;
    return take(bucket, bucket->second.head);
  }
  // Any source: the oldest message that matches, over every bucket.
  auto bestBucket = rank.unexpected.end();
  Message* best = nullptr;
  for (auto bucket = rank.unexpected.begin(); bucket != rank.unexpected.end(); ++bucket) {
    for (Message* m = bucket->second.head; m != nullptr; m = m->next) {
      if ((m->tag ^ receive.tag) & receive.mask) continue;
      if (best == nullptr || m->order < best->order) {
        bestBucket = bucket;
        best = m;
      }
      break;  // later ones in this bucket are younger
    }
  }
  return best == nullptr ? nullptr : take(bestBucket, best);
}

SimulatedNetwork::Receive* SimulatedNetwork::postReceive(int rank, uint64_t tag, uint64_t mask,
                                                         void* data, size_t bytes) {
  Rank& r = ranks_[rank];
  auto* receive = new Receive{rank, tag, mask, data, bytes, order_++, {}};
  if (Message* early = takeUnexpected(r, *receive)) {
    fill(*receive, *early);
    delete early;
  } else if (mask == kKeyMask) {
    r.posted[tag & kKeyMask].push(receive);
  } else {
    r.postedOther.push_back(receive);
  }
  return receive;
}

void SimulatedNetwork::deliver(int to, Message* message) {
  Rank& r = ranks_[to];
  const int source = message->source;  // message may be gone below
  message->order = order_++;
  const uint64_t key = message->tag & kKeyMask;
  // The oldest matching receive, of the keyed ones and the others.
  Receive* best = nullptr;
  auto keyed = r.posted.find(key);
  if (keyed != r.posted.end()) best = keyed->second.head;
  auto other = std::find_if(r.postedOther.begin(), r.postedOther.end(), [&](const Receive* x) {
    return ((message->tag ^ x->tag) & x->mask) == 0;
  });
  if (other != r.postedOther.end() && (best == nullptr || (*other)->order < best->order)) {
    best = *other;
    r.postedOther.erase(other);
  } else if (best != nullptr) {
    keyed->second.pop();
    if (keyed->second.head == nullptr) r.posted.erase(keyed);
  }
  if (best != nullptr) {
    fill(*best, *message);
    delete message;
  } else {
    r.unexpected[key].push(message);
  }
  ++r.arrivals;
  if (r.state == State::Waiting) {
    // Asleep, it pays for waking; spinning, it goes on at once on its core.
    if (!r.spinning) r.wakeCpu = cpuOf(source, to).wake;
    r.spinning = false;
    r.state = State::Runnable;
    runnable_.push_back(to);
  }
}

Completion SimulatedNetwork::poll(int rank, Receive* receive) {
  Rank& r = ranks_[rank];
  if (receive->completion.state == Completion::State::InProgress) {
    r.awaited = receive;
    return receive->completion;
  }
  // Taking the message in costs the receiver CPU (TCP: the copy out of the
  // kernel) once, when it first sees it has arrived.
  if (!receive->charged && receive->cpu > 0) {
    receive->charged = true;
    compute(rank, receive->cpu);
  }
  const Completion done = receive->completion;
  if (r.awaited == receive) r.awaited = nullptr;
  delete receive;
  return done;
}

void SimulatedNetwork::cancel(int rank, Receive* receive) {
  Rank& r = ranks_[rank];
  const auto keyed = r.posted.find(receive->tag & kKeyMask);
  if (keyed != r.posted.end()) {
    keyed->second.remove(receive);
    if (keyed->second.head == nullptr) r.posted.erase(keyed);
  }
  r.postedOther.remove(receive);
  if (r.awaited == receive) r.awaited = nullptr;
  delete receive;
}

unsigned SimulatedNetwork::progress(int rank) {
  Rank& r = ranks_[rank];
  const auto moved = static_cast<unsigned>(r.arrivals - r.seenArrivals);
  r.seenArrivals = r.arrivals;
  return moved;
}

void SimulatedNetwork::wait(int rank) {
  Rank& r = ranks_[rank];
  if (r.arrivals != r.seenArrivals) return;  // something came: look first
  if (!r.deadlocked) {
    if (cpu_.spin > 0 && (r.hasCore || cpu_.cores <= 0)) {
      // It spins on its core first: a message in time finds it running
      // (deliver()), else it sleeps and gives the core up (SpinEnd).
      r.spinning = true;
      push(r.clock + cpu_.spin, Event::SpinEnd, rank, nullptr, static_cast<double>(++r.spins));
    } else if (r.hasCore) {
      releaseCore(rank);
    }
    r.state = State::Waiting;
    fibers_.suspend();
    if (r.wakeCpu > 0) {
      const double wake = r.wakeCpu;
      r.wakeCpu = 0;
      compute(rank, wake);
    }
  }
  if (r.deadlocked) {
    throw TransportError("ringreduce: simulated deadlock at t=" + std::to_string(now_) + " s: " +
                         describeWait(rank) + ", and no message is in flight and no rank can run");
  }
}

std::string SimulatedNetwork::describeWait(int rank) const {
  const Receive* w = ranks_[rank].awaited;
  std::ostringstream out;
  out << "rank " << rank;
  if (w == nullptr) return out.str() + " waits";
  const bool anySource = (w->mask & ~kTagAnySourceMask) == 0;
  out << " waits to receive " << w->bytes << " bytes from "
      << (anySource ? std::string("any rank") : "rank " + std::to_string(tagSourceRank(w->tag)))
      << " (slot " << (w->tag & kMaxSlot) << ")";
  return out.str();
}

void SimulatedNetwork::handle(const Event& event) {
  switch (event.kind) {
    case Event::AtReceiverNic: {
      // The receiving NIC takes one message at a time; the last byte cannot
      // arrive before it left the sender plus the latency.
      double& nic = nicInFree_[topology_.nodeOf[event.rank]];
      const double start = std::max(event.time, nic);
      nic = start + static_cast<double>(event.message->bytes) * inter_.beta;
      push(std::max(nic, event.leftSender + inter_.alpha), Event::Deliver, event.rank,
           event.message);
      break;
    }
    case Event::Deliver:
      deliver(event.rank, event.message);
      break;
    case Event::Release:
      release(event.rank, event.message);
      break;
    case Event::ReleaseCore:
      grantCore();
      break;
    case Event::GrantIdleCores:
      while (idleCores_ > 0 && !coreQueue_.empty()) {
        --idleCores_;
        grantCore();
      }
      break;
    case Event::SpinEnd: {
      Rank& r = ranks_[event.rank];
      if (r.state == State::Waiting && r.spinning &&
          event.leftSender == static_cast<double>(r.spins)) {
        r.spinning = false;
        r.clock = event.time;
        if (r.hasCore) releaseCore(event.rank);
      }
      break;
    }
    case Event::Resume: {
      Rank& r = ranks_[event.rank];
      if (r.state == State::Yielded) {
        r.state = State::Runnable;
        runnable_.push_back(event.rank);
      }
      break;
    }
  }
}

void SimulatedNetwork::runRanks() {
  while (!runnable_.empty()) {
    const int id = runnable_.front();
    runnable_.pop_front();
    Rank& r = ranks_[id];
    if (r.state != State::Runnable) continue;
    r.state = State::Running;
    r.clock = std::max(r.clock, now_);
    fibers_.resume(id);
  }
}

std::vector<double> SimulatedNetwork::run(const Config& config,
                                          const std::function<void(Transport&, int)>& body) {
  if (!ranks_.empty()) throw Error("ringreduce: a SimulatedNetwork runs once");
  const int p = size();
  ranks_.resize(static_cast<size_t>(p));
  linkFree_.assign(static_cast<size_t>(p), 0.0);
  nicOutFree_.assign(static_cast<size_t>(topology_.nodes()), 0.0);
  nicInFree_.assign(static_cast<size_t>(topology_.nodes()), 0.0);
  idleCores_ = std::max(cpu_.cores, 0);
  for (int rank = 0; rank < p; ++rank) {
    transports_.push_back(std::make_unique<SimulatedTransport>(*this, rank, config));
    fibers_.add([this, rank, &body] {
      Rank& r = ranks_[rank];
      try {
        body(*transports_[rank], rank);
      } catch (...) {
        r.error = std::current_exception();
      }
      r.finishedAt = r.clock;
      if (r.hasCore) releaseCore(rank);
      r.state = State::Finished;
    });
    runnable_.push_back(rank);
  }
  std::string deadlock;
  for (;;) {
    runRanks();
    if (!events_.empty()) {
      const Event event = events_.top();
      events_.pop();
      now_ = event.time;
      handle(event);
      continue;
    }
    // Nothing in flight: every rank still waiting waits forever.
    bool stuck = false;
    for (int rank = 0; rank < p; ++rank) {
      Rank& r = ranks_[rank];
      if (r.state != State::Waiting) continue;
      if (!stuck && deadlock.empty())
        deadlock = "simulated deadlock at t=" + std::to_string(now_) + " s:";
      if (!r.deadlocked && deadlock.size() < 2000) deadlock += " " + describeWait(rank) + ";";
      stuck = true;
      r.deadlocked = true;
      r.state = State::Runnable;
      runnable_.push_back(rank);
    }
    if (!stuck) break;
  }
  if (!deadlock.empty()) throw Error("ringreduce: " + deadlock + " no message in flight");
  for (int rank = 0; rank < p; ++rank) {
    if (!ranks_[rank].error) continue;
    try {
      std::rethrow_exception(ranks_[rank].error);
    } catch (const std::exception& e) {
      throw Error("ringreduce: simulated rank " + std::to_string(rank) + " failed: " + e.what());
    }
  }
  for (int rank = 0; rank < p; ++rank) {
    for (const auto& [key, messages] : ranks_[rank].unexpected) {
      const Message& m = *messages.head;
      throw Error("ringreduce: simulated rank " + std::to_string(rank) + " never received " +
                  std::to_string(m.bytes) + " bytes from rank " + std::to_string(m.source) +
                  " (slot " + std::to_string(m.tag & kMaxSlot) + ")");
    }
  }
  std::vector<double> finished;
  for (const Rank& r : ranks_) finished.push_back(r.finishedAt);
  return finished;
}

}  // namespace ringreduce
