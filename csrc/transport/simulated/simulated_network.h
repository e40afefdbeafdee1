// A virtual-time network that runs the real algorithm code for p ranks in
// one thread: each rank is a fiber (fibers.h) with its own Transport
// (simulated_transport.h), and the ranks advance in order of a virtual clock
// instead of the wall clock.
//
// The model, per message (LogGP with a shared NIC):
// - the sender spends `overhead` of its own time posting it;
// - within a node the message leaves through the sender's own link
//   (messages from one rank go one after another at 1/beta) and arrives
//   alpha after it has left;
// - across nodes it queues for the sending node's NIC, which all ranks of
//   the node share, travels alpha, and queues for the receiving node's NIC;
// - sends complete when posted (eager, like the loopback); receives when the
//   last byte is in. Reductions and copies take no virtual time.
// With a HostCpu (core/plan/host_cpu.h), each message also costs its sender CPU
// time (per message before it leaves, per byte while it streams out) and its
// receiver CPU time once it is in, and with a
// limited number of cores that work runs on cores shared by all ranks. A
// rank takes a core for its first CPU work and keeps it until it sleeps
// (run until blocked: its bursts are microseconds, a scheduler's slices
// milliseconds); a rank that finds none free waits in line (first come,
// first served, in virtual time). A rank that must wait for a message spins
// on its core for HostCpu::spin first (the transport's spin before it
// sleeps) and goes on at once if the message comes meanwhile; one that
// slept pays MessageCpu::wake when a message wakes it. A link class with
// MessageCpu::heldFor (an emulated latency: DelayedTransport) holds each
// message at its sender that long, and the send's CPU is spent at release,
// by a sender that a timer may have to wake for it.
// In payload-free mode messages carry sizes only and the algorithms skip
// their data work (Config::payloadFree), so 1024 ranks x 256 MiB fit in a
// few megabytes.
//
// A schedule that cannot finish is an error, not a hang: when no message is
// in flight and no rank can run, every waiting rank's wait throws, and run()
// reports what each rank waited for. Messages nobody received are errors too.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <list>
#include <memory>
#include <queue>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/config/config.h"
#include "core/plan/host_cpu.h"
#include "core/plan/link_cost.h"
#include "core/plan/topology.h"
#include "transport/simulated/fibers.h"
#include "transport/transport.h"

namespace ringreduce {

class SimulatedTransport;

class SimulatedNetwork {
 public:
  SimulatedNetwork(Topology topology, const LinkCost& intraNode, const LinkCost& interNode,
                   bool payload, const HostCpu& cpu = HostCpu());
  ~SimulatedNetwork();

  // Runs body(transport, rank) on every rank from virtual time 0 and returns
  // the virtual time (seconds) at which each rank's body returned. Throws
  // Error naming the ranks that failed, waited forever, or left messages
  // unreceived. One run per network.
  std::vector<double> run(const Config& config, const std::function<void(Transport&, int)>& body);

  int size() const { return topology_.size(); }
  uint64_t messages() const { return messages_; }

 private:
  friend class SimulatedTransport;
  struct Message {
    int source;
    uint64_t tag;
    size_t bytes;
    std::vector<uint8_t> data;  // empty without payload
    uint64_t order;             // delivery order, for any-source matching
    Message* next = nullptr;    // in its Queue
  };
  struct Receive {
    int rank;
    uint64_t tag, mask;
    void* data;
    size_t bytes;
    uint64_t order;  // post order: the oldest matching receive wins
    Completion completion;
    double cpu = 0;           // the receiver's CPU for the message it got
    bool charged = false;     // that CPU already spent
    Receive* next = nullptr;  // in its Queue
  };
  // A FIFO threaded through its elements: a ring posts p-1 receives per
  // rank at once, each with its own tag, so a queue per tag must cost
  // nothing beyond its two pointers.
  template <typename T>
  struct Queue {
    T* head = nullptr;
    T* tail = nullptr;
    void push(T* x) {
      x->next = nullptr;
      (tail ? tail->next : head) = x;
      tail = x;
    }
    T* pop() {
      T* x = head;
      head = x->next;
      if (head == nullptr) tail = nullptr;
      return x;
    }
    // Unlinks x if present.
    bool remove(T* x) {
      T* prev = nullptr;
      for (T* at = head; at != nullptr; prev = at, at = at->next) {
        if (at != x) continue;
        (prev ? prev->next : head) = at->next;
        if (tail == at) tail = prev;
        return true;
      }
      return false;
    }
  };
  struct Event {
    double time;
    uint64_t order;
    enum Kind {
      Release,
      AtReceiverNic,
      Deliver,
      Resume,
      ReleaseCore,
      GrantIdleCores,
      SpinEnd
    } kind;
    int rank;           // Resume: whom; otherwise the destination
    Message* message;   // Release, AtReceiverNic, Deliver
    double leftSender;  // AtReceiverNic: when the last byte left the sender's NIC;
                        // SpinEnd: which spin (Rank::spins)
    bool operator>(const Event& o) const {
      return time != o.time ? time > o.time : order > o.order;
    }
  };
  // Waiting for a core, in the order they asked: a rank, or (rank -1) the
  // release of held messages whose sender sleeps: it wakes, then sends each.
  struct HeldSend {
    int to;
    Message* message;
    double post;  // it leaves after this much of the sender's work
    double work;  // of this much in all
  };
  struct CoreWaiter {
    int rank;
    int sender;
    double wake;
    std::vector<HeldSend> sends;
  };
  enum class State { Runnable, Running, Waiting, Yielded, WaitingForCore, Finished };
  struct Rank {
    State state = State::Runnable;
    double clock = 0;
    bool deadlocked = false;
    uint64_t arrivals = 0, seenArrivals = 0;
    // Receives posted and messages that came first, keyed by the tag without
    // its fingerprint (what a collective receive matches on); receives with
    // other masks (any source) are few and scanned.
    std::unordered_map<uint64_t, Queue<Receive>> posted;
    std::list<Receive*> postedOther;
    std::unordered_map<uint64_t, Queue<Message>> unexpected;
    const Receive* awaited = nullptr;  // what the rank last polled, for deadlock reports
    std::exception_ptr error;
    double finishedAt = 0;
    bool hasCore = false;   // from its first CPU work until it sleeps or ends
    bool spinning = false;  // waiting, but on its core (HostCpu::spin)
    uint64_t spins = 0;     // which spin a SpinEnd event ends
    double wakeCpu = 0;     // woken from sleep: the CPU that costs (MessageCpu::wake)
    double releasingUntil = -1;  // woken to release held sends: busy until then
    CoreWaiter* pendingRelease = nullptr;  // such a release waiting for a core
  };

  // From the transports (inside a rank's fiber).
  void send(int from, int to, uint64_t tag, const void* data, size_t bytes);
  Receive* postReceive(int rank, uint64_t tag, uint64_t mask, void* data, size_t bytes);
  Completion poll(int rank, Receive* receive);
  void cancel(int rank, Receive* receive);
  unsigned progress(int rank);
  void wait(int rank);

  void push(double time, Event::Kind kind, int rank, Message* message, double leftSender = 0);
  // `seconds` of the rank's CPU work from its clock on, on a core when cores
  // are limited; the rank's clock moves to its end.
  void compute(int rank, double seconds);
  // With limited cores: a core for the rank, which it holds until it sleeps
  // or ends; it waits for its turn in virtual time, then in line for one.
  void takeCore(int rank);
  // The rank's core is free from its clock on; grantCore() gives a free core
  // to the first rank in line.
  void releaseCore(int rank);
  void grantCore();
  // The message leaves its sender at `at`: through the sender's own link
  // within a node, else through the nodes' NICs.
  void transmit(int to, Message* message, double at);
  // A held message's time has come (MessageCpu::heldFor): its sender does
  // the send's work now, on its core, or woken on one it waits for.
  void release(int to, Message* message);
  const MessageCpu& cpuOf(int from, int to) const;
  void deliver(int to, Message* message);
  void fill(Receive& receive, const Message& message);
  Message* takeUnexpected(Rank& rank, const Receive& receive);
  void handle(const Event& event);
  void runRanks();
  std::string describeWait(int rank) const;
  std::string report() const;

  const Topology topology_;
  const LinkCost intra_, inter_;
  const bool payload_;
  const HostCpu cpu_;
  int idleCores_ = 0;           // with limited cores
  std::deque<CoreWaiter> coreQueue_;
  std::vector<Rank> ranks_;
  std::vector<double> linkFree_;                // per rank: when its own link is free
  std::vector<double> nicOutFree_, nicInFree_;  // per node
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> events_;
  std::deque<int> runnable_;
  uint64_t order_ = 0;
  uint64_t messages_ = 0;
  double now_ = 0;
  Fibers fibers_;
  std::vector<std::unique_ptr<SimulatedTransport>> transports_;
};

}  // namespace ringreduce
