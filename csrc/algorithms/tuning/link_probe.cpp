// Measuring the links the cost model prices (link_probe.h)
#include "algorithms/tuning/link_probe.h"

#include <time.h>

#include <algorithm>
#include <vector>

#include "transport/tag.h"

namespace ringreduce {

namespace {

// The first two warm up (endpoints, caches). Enough for medians that hold
// still on a machine shared with other work (9 let the CPU figures vary 2x).
constexpr int kTrips = 25;
constexpr int kBurst = 32;  // messages in a burst

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

double secondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// CPU seconds of the whole process, user and kernel, every thread: a TCP
// send's copy and protocol work happen in the kernel, and a transport may
// progress on a thread of its own.
double processCpu() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

// One end's CPU per measured exchange (b sends its figures to a).
struct CpuFigures {
  double perTripSmall = 0;  // a round trip of 8 bytes: one send, one receive
  double perTripLarge = 0;  // of largeBytes
  double perBurst = 0;      // a: kBurst sends + 1 receive; b: kBurst receives + 1 send
};

// One measured pair: a times, b answers.
class Probe {
 public:
  Probe(const Comm& comm, const OpContext& op, int a, int b)
      : t_(comm.transport), op_(op), me_(comm.rank()), peer_(me_ == a ? b : a), timing_(me_ == a) {}

  // Half the median round trip of `bytes` each way; *cpu: this end's median
  // CPU per round trip.
  double oneWay(size_t bytes, uint32_t slot, double* cpu) {
    std::vector<uint8_t> buffer(bytes);
    std::vector<double> trips, cpus;
    for (int i = 0; i < kTrips; ++i) {
      const double cpuStart = processCpu();
      const auto start = Clock::now();
      const uint32_t out = slot + 2 * i + (timing_ ? 0 : 1);
      const uint32_t in = slot + 2 * i + (timing_ ? 1 : 0);
      if (timing_) send(out, buffer.data(), bytes);
      receive(in, buffer.data(), bytes);
      if (!timing_) send(out, buffer.data(), bytes);
      if (i >= 2) trips.push_back(secondsSince(start));
      if (i >= 2) cpus.push_back(processCpu() - cpuStart);
    }
    *cpu = median(cpus);
    return median(trips) / 2;
  }

  // (burst of kBurst small messages and one answer - a round trip) / (kBurst - 1);
  // *cpu: this end's median CPU per burst and answer.
  double perMessage(double latency, uint32_t slot, double* cpu) {
    std::vector<uint64_t> words(kBurst);
    std::vector<double> costs, cpus;
    for (int i = 0; i < kTrips; ++i) {
      const double cpuStart = processCpu();
      const uint32_t base = slot + static_cast<uint32_t>(i * (kBurst + 1));
      const auto start = Clock::now();
      std::vector<Request> requests;
      for (int m = 0; m < kBurst; ++m) {
        requests.push_back(
            timing_ ? t_.isend(peer_, makeTag(me_, op_.seq, base + m), &words[m], 8, op_)
                    : t_.irecv(peer_, makeTag(peer_, op_.seq, base + m), &words[m], 8, op_));
      }
      t_.waitAll(requests, op_);
      if (timing_) {
        receive(base + kBurst, words.data(), 8);
      } else {
        send(base + kBurst, words.data(), 8);
      }
      if (i >= 2) costs.push_back((secondsSince(start) - 2 * latency) / (kBurst - 1));
      if (i >= 2) cpus.push_back(processCpu() - cpuStart);
    }
    *cpu = median(cpus);
    return std::max(median(costs), 0.0);
  }

 private:
  void send(uint32_t slot, void* data, size_t bytes) {
    Request r = t_.isend(peer_, makeTag(me_, op_.seq, slot), data, bytes, op_);
    t_.wait(r, op_);
  }
  void receive(uint32_t slot, void* data, size_t bytes) {
    Request r = t_.irecv(peer_, makeTag(peer_, op_.seq, slot), data, bytes, op_);
    t_.wait(r, op_);
  }

  Transport& t_;
  const OpContext& op_;
  const int me_, peer_;
  const bool timing_;
};

// Both ends' CPU per message, per byte, and per sleep. Each end's CPU, less
// the spin of each of its waits (`spin`: the transport's spin, or the round
// trip if shorter; the simulation spins on its own, HostCpu::spin), is
//   8-byte ping-pong, per round trip:  P = send + receive + wake
//   a in the burst:                    A = k send + receive + wake
//   b in the burst:                    B = k receive + send + wake
// (one wait each: a sleep, and on a delayed link the timer that releases
// the sends), so send = (A - P) / (k - 1), receive = (B - P) / (k - 1),
// wake = P - send - receive. Per byte from the large ping-pong, half to each
// end (both copy every byte).
MessageCpu messageCpu(const CpuFigures& a, const CpuFigures& b, size_t largeBytes, double spin) {
  const double k = kBurst;
  const double ping = (a.perTripSmall + b.perTripSmall) / 2 - spin;
  MessageCpu cpu;
  cpu.send = std::max((a.perBurst - spin - ping) / (k - 1), 0.0);
  cpu.receive = std::max((b.perBurst - spin - ping) / (k - 1), 0.0);
  cpu.wake = std::max(ping - cpu.send - cpu.receive, 0.0);
  const double perByte = std::max((a.perTripLarge + b.perTripLarge) / 2 - spin - ping, 0.0) /
                         static_cast<double>(largeBytes);
  cpu.sendPerByte = cpu.receivePerByte = perByte / 2;
  return cpu;
}

}  // namespace

LinkCost probeLink(const Comm& comm, const OpContext& op, int a, int b, const LinkCost& fallback,
                   uint32_t slotBase, size_t largeBytes, MessageCpu* cpu) {
  Transport& t = comm.transport;
  const int me = comm.rank();
  // alpha, beta, overhead, then MessageCpu's send, sendPerByte, receive, receivePerByte, wake
  double figures[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  if (me == a || me == b) {
    Probe probe(comm, op, a, b);
    CpuFigures mine, theirs;
    const double small = probe.oneWay(8, slotBase, &mine.perTripSmall);
    const double large = probe.oneWay(largeBytes, slotBase + 64, &mine.perTripLarge);
    figures[0] = small;
    figures[1] = std::max(large - small, 0.0) / static_cast<double>(largeBytes);
    figures[2] = probe.perMessage(small, slotBase + 128, &mine.perBurst);
    // b's CPU figures to a, which combines both ends'.
    const uint32_t cpuSlot = slotBase + 1000;
    Request r = me == b ? t.isend(a, makeTag(b, op.seq, cpuSlot), &mine, sizeof(mine), op)
                        : t.irecv(b, makeTag(b, op.seq, cpuSlot), &theirs, sizeof(theirs), op);
    t.wait(r, op);
    const double spin = std::min(comm.config.spinMicroseconds * 1e-6, 2 * small);
    const MessageCpu both = messageCpu(mine, theirs, largeBytes, spin);
    figures[3] = both.send;
    figures[4] = both.sendPerByte;
    figures[5] = both.receive;
    figures[6] = both.receivePerByte;
    figures[7] = both.wake;
  }
  // Rank a's figures to everyone.
  const uint32_t share = slotBase + 1024;
  if (me == a) {
    std::vector<Request> sends;
    for (int q = 0; q < comm.size(); ++q) {
      if (q != a)
        sends.push_back(t.isend(q, makeTag(a, op.seq, share), figures, sizeof(figures), op));
    }
    t.waitAll(sends, op);
  } else {
    Request r = t.irecv(a, makeTag(a, op.seq, share), figures, sizeof(figures), op);
    t.wait(r, op);
  }
  LinkCost cost = fallback;
  cost.alpha = figures[0];
  cost.beta = figures[1];
  cost.overhead = figures[2];
  if (cpu != nullptr) *cpu = MessageCpu{figures[3], figures[4], figures[5], figures[6], figures[7]};
  return cost;
}

void probeLinks(const Comm& comm, const OpContext& op, const Topology& topology, LinkCost* intra,
                LinkCost* inter, size_t largeBytes, MessageCpu* intraCpu,
                MessageCpu* interCpu) {
  const auto byNode = topology.ranksByNode();
  // kMaxSlot and kMaxSlot - 1: the host identities and the cross-memory
  // verdicts (AllreduceSelector::topology), possibly in the same operation.
  const uint32_t top = kMaxSlot - 2;
  if (byNode[topology.nodeOf[0]].size() > 1) {
    *intra = probeLink(comm, op, 0, byNode[topology.nodeOf[0]][1], *intra, top - 4096, largeBytes,
                       intraCpu);
  }
  if (byNode.size() > 1) {
    const int other = byNode[topology.nodeOf[0] == 0 ? 1 : 0][0];
    *inter = probeLink(comm, op, 0, other, *inter, top - 2048, largeBytes, interCpu);
  }
}

}  // namespace ringreduce
