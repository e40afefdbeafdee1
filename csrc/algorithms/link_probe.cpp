#include "algorithms/link_probe.h"

#include <algorithm>
#include <vector>

#include "transport/tag.h"

namespace ringreduce {

namespace {

constexpr int kTrips = 9;   // the first two warm up (endpoints, caches)
constexpr int kBurst = 32;  // messages in a burst

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

double secondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// One measured pair: a times, b answers.
class Probe {
 public:
  Probe(const Comm& comm, const OpContext& op, int a, int b)
      : t_(comm.transport), op_(op), me_(comm.rank()), peer_(me_ == a ? b : a), timing_(me_ == a) {}

  // Half the median round trip of `bytes` each way.
  double oneWay(size_t bytes, uint32_t slot) {
    std::vector<uint8_t> buffer(bytes);
    std::vector<double> trips;
    for (int i = 0; i < kTrips; ++i) {
      const auto start = Clock::now();
      const uint32_t out = slot + 2 * i + (timing_ ? 0 : 1);
      const uint32_t in = slot + 2 * i + (timing_ ? 1 : 0);
      if (timing_) send(out, buffer.data(), bytes);
      receive(in, buffer.data(), bytes);
      if (!timing_) send(out, buffer.data(), bytes);
      if (i >= 2) trips.push_back(secondsSince(start));
    }
    return median(trips) / 2;
  }

  // (burst of kBurst small messages and one answer - a round trip) / (kBurst - 1).
  double perMessage(double latency, uint32_t slot) {
    std::vector<uint64_t> words(kBurst);
    std::vector<double> costs;
    for (int i = 0; i < kTrips; ++i) {
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
    }
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

}  // namespace

LinkCost probeLink(const Comm& comm, const OpContext& op, int a, int b, const LinkCost& fallback,
                   uint32_t slotBase, size_t largeBytes) {
  Transport& t = comm.transport;
  const int me = comm.rank();
  double figures[3] = {0, 0, 0};  // alpha, beta, overhead
  if (me == a || me == b) {
    Probe probe(comm, op, a, b);
    const double small = probe.oneWay(8, slotBase);
    const double large = probe.oneWay(largeBytes, slotBase + 64);
    figures[0] = small;
    figures[1] = std::max(large - small, 0.0) / static_cast<double>(largeBytes);
    figures[2] = probe.perMessage(small, slotBase + 128);
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
  return cost;
}

void probeLinks(const Comm& comm, const OpContext& op, const Topology& topology, LinkCost* intra,
                LinkCost* inter, size_t largeBytes) {
  const auto byNode = topology.ranksByNode();
  const uint32_t top = kMaxSlot - 1;  // kMaxSlot itself: the host-identity exchange
  if (byNode[topology.nodeOf[0]].size() > 1) {
    *intra = probeLink(comm, op, 0, byNode[topology.nodeOf[0]][1], *intra, top - 4096, largeBytes);
  }
  if (byNode.size() > 1) {
    const int other = byNode[topology.nodeOf[0] == 0 ? 1 : 0][0];
    *inter = probeLink(comm, op, 0, other, *inter, top - 2048, largeBytes);
  }
}

}  // namespace ringreduce
