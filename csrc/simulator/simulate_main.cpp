// ringreduce_simulate: the host allreduce (or reduce-scatter, allgather)
// algorithms on a simulated cluster, per size: virtual time, bus bandwidth,
// and what the selection picks.
// `python -m torch_ringreduce.simulate` runs this program.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <string>
#include <vector>

#include "core/base/errors.h"
#include "core/plan/allreduce_cost.h"
#include "core/base/name_table.h"
#include "core/plan/two_level_plan.h"
#include "simulator/allreduce_simulation.h"

using namespace ringreduce;

namespace {

const char* kUsage =
    "usage: simulate [--nodes N] [--ranks-per-node K] [--inter BW,LAT[,OVH]] [--intra "
    "BW,LAT[,OVH]]\n"
    "                [--sizes 4K-256M|4K,1M,...] [--factor F] [--algorithms "
    "ring,halving_doubling,...]\n"
    "                [--node-sizes 3,1,2] [--collective allreduce|reduce_scatter|allgather]\n"
    "  --node-sizes: nodes of these many ranks, in blocks (instead of --nodes/--ranks-per-node)\n"
    "  --collective: what runs (default allreduce); for reduce_scatter and allgather the sizes\n"
    "                are the whole buffer (all p chunks or blocks)\n"
    "  --inter/--intra: a node's NIC and a rank's link within its node, e.g. 100Gbit/s,5us and\n"
    "                   150GB/s,1us; OVH is the sender's time per message (defaults: 1us, 0.2us)\n"
    "  --sizes: a range (each size --factor times the last, default 4) or a list; K/M/G are "
    "1024^n\n"
    "  --algorithms: default all; direct only up to 256 ranks (p(p-1) messages a round)\n"
    "  --cores C: all ranks share C cores (default: a core each); each message's CPU (the\n"
    "             links' OVH, and --cpu-intra/--cpu-inter) runs on them, a rank waits for one\n"
    "  --cpu-intra/--cpu-inter SEND,RECEIVE[,PERBYTE[,WAKE]]: CPU per message at the sender and\n"
    "             the receiver (us), per byte at each end (ns), per wake from sleep (us)\n"
    "  --spin US: a waiting rank spins this long on its core before it sleeps (default 0)\n"
    "Runs the real algorithm code for every rank in virtual time, without data, and prints the\n"
    "time, the bus bandwidth and the cost model's prediction divided by the simulated time; the\n"
    "last columns are what the selection (RINGREDUCE_ALGORITHM=auto) picks with these links.\n";

[[noreturn]] void usage(const std::string& why) {
  std::fprintf(stderr, "simulate: %s\n%s", why.c_str(), kUsage);
  std::exit(2);
}

size_t parseSize(const std::string& text) {
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || value < 0) usage("bad size '" + text + "'");
  std::string unit(end);
  if (!unit.empty() && (unit.back() == 'B' || unit.back() == 'b')) unit.pop_back();
  if (unit.size() == 2 && unit[1] == 'i') unit.pop_back();
  double factor = 1;
  if (unit == "K" || unit == "k") {
    factor = 1024.0;
  } else if (unit == "M") {
    factor = 1024.0 * 1024;
  } else if (unit == "G") {
    factor = 1024.0 * 1024 * 1024;
  } else if (!unit.empty()) {
    usage("bad size unit in '" + text + "'");
  }
  return static_cast<size_t>(value * factor);
}

std::vector<std::string> split(const std::string& text, char by) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (;;) {
    const size_t at = text.find(by, start);
    parts.push_back(text.substr(start, at == std::string::npos ? std::string::npos : at - start));
    if (at == std::string::npos) return parts;
    start = at + 1;
  }
}

MessageCpu parseMessageCpu(const std::string& text, const std::string& what) {
  double v[4] = {0, 0, 0, 0};
  const auto parts = split(text, ',');
  if (parts.size() < 2 || parts.size() > 4) usage("bad " + what + " '" + text + "'");
  for (size_t i = 0; i < parts.size(); ++i) {
    char* end = nullptr;
    v[i] = std::strtod(parts[i].c_str(), &end);
    if (end == parts[i].c_str() || *end != '\0' || v[i] < 0) {
      usage("bad " + what + " '" + text + "'");
    }
  }
  MessageCpu cpu;
  cpu.send = v[0] * 1e-6;
  cpu.receive = v[1] * 1e-6;
  cpu.sendPerByte = cpu.receivePerByte = v[2] * 1e-9;
  cpu.wake = v[3] * 1e-6;
  return cpu;
}

std::string humanSize(size_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB"};
  int u = 0;
  size_t v = bytes;
  while (v >= 1024 && v % 1024 == 0 && u < 3) {
    v /= 1024;
    ++u;
  }
  return std::to_string(v) + " " + units[u];
}

}  // namespace

int main(int argc, char** argv) {
  int nodes = 64;
  int perNode = 8;
  std::vector<int> nodeSizes;
  SimulatedCollective collective = SimulatedCollective::Allreduce;
  ClusterSpec cluster;
  std::string sizes = "4K-256M";
  double factor = 4;
  std::vector<AllreduceAlgorithm> algorithms;
  try {
    for (int i = 1; i < argc; ++i) {
      const std::string arg = argv[i];
      if (arg == "-h" || arg == "--help") {
        std::fputs(kUsage, stdout);
        return 0;
      }
      if (i + 1 >= argc) usage(arg + " needs a value");
      const std::string value = argv[++i];
      if (arg == "--nodes") {
        nodes = std::atoi(value.c_str());
      } else if (arg == "--ranks-per-node") {
        perNode = std::atoi(value.c_str());
      } else if (arg == "--node-sizes") {
        nodeSizes.clear();
        for (const std::string& size : split(value, ',')) {
          nodeSizes.push_back(std::atoi(size.c_str()));
          if (nodeSizes.back() < 1) usage("bad --node-sizes '" + value + "'");
        }
      } else if (arg == "--collective") {
        const auto named = collectiveNamed(value);
        if (!named) usage("unknown collective '" + value + "'");
        collective = *named;
      } else if (arg == "--inter") {
        cluster.interNode = parseLinkCost(value, cluster.interNode, "--inter");
      } else if (arg == "--intra") {
        cluster.intraNode = parseLinkCost(value, cluster.intraNode, "--intra");
      } else if (arg == "--cores") {
        cluster.cpu.cores = std::atoi(value.c_str());
        if (cluster.cpu.cores < 1) usage("--cores must be at least 1");
      } else if (arg == "--cpu-intra") {
        cluster.cpu.intraNode = parseMessageCpu(value, arg);
      } else if (arg == "--cpu-inter") {
        cluster.cpu.interNode = parseMessageCpu(value, arg);
      } else if (arg == "--spin") {
        cluster.cpu.spin = std::atof(value.c_str()) * 1e-6;
      } else if (arg == "--sizes") {
        sizes = value;
      } else if (arg == "--factor") {
        factor = std::atof(value.c_str());
      } else if (arg == "--algorithms") {
        algorithms.clear();
        for (const std::string& name : split(value, ',')) {
          const auto parsed = parseName<AllreduceAlgorithm>(name);
          if (!parsed || *parsed == AllreduceAlgorithm::Auto) {
            usage("unknown algorithm '" + name + "'");
          }
          algorithms.push_back(*parsed);
        }
      } else {
        usage("unknown option " + arg);
      }
    }
  } catch (const InvalidArgument& e) {
    usage(e.what());
  }
  if (nodeSizes.empty()) nodeSizes.assign(nodes < 1 ? 0 : nodes, perNode);
  std::vector<int> labels;
  for (size_t node = 0; node < nodeSizes.size(); ++node) {
    labels.insert(labels.end(), std::max(nodeSizes[node], 0), static_cast<int>(node));
  }
  if (labels.size() < 2) usage("need at least 2 ranks");
  if (factor <= 1) usage("--factor must be > 1");
  std::vector<size_t> list;
  const auto range = split(sizes, '-');
  if (range.size() == 2) {
    for (double s = static_cast<double>(parseSize(range[0])); s <= parseSize(range[1]) * 1.0001;
         s *= factor) {
      list.push_back(static_cast<size_t>(s));
    }
  } else {
    for (const std::string& s : split(sizes, ',')) list.push_back(parseSize(s));
  }
  cluster.topology = Topology::fromLabels(labels);
  const int p = cluster.topology.size();
  const bool allreduce = collective == SimulatedCollective::Allreduce;
  if (algorithms.empty()) {
    algorithms = {AllreduceAlgorithm::Ring, AllreduceAlgorithm::HalvingDoubling,
                  AllreduceAlgorithm::TwoLevel};
    if (p <= 256) algorithms.push_back(AllreduceAlgorithm::Direct);
  }
  const AllreduceCostModel model(cluster.topology, cluster.intraNode, cluster.interNode);
  // Where a form does not apply: two_level needs more than one node and a
  // node of two or more ranks (of any sizes).
  auto applies = [&](AllreduceAlgorithm a) {
    if (a == AllreduceAlgorithm::TwoLevel) {
      return allreduce ? model.twoLevelApplies() : TwoLevelPlan::applies(cluster.topology);
    }
    return true;
  };

  std::string shape;
  for (size_t node = 0; node < nodeSizes.size(); ++node) {
    shape += (node == 0 ? "" : "+") + std::to_string(nodeSizes[node]);
  }
  if (!allreduce) std::printf("# %s\n", collectiveName(collective));
  if (cluster.topology.regular()) {
    std::printf("# %d nodes x %d ranks = %d ranks, payload-free, virtual time\n",
                cluster.topology.nodes(), nodeSizes[0], p);
  } else {
    std::printf("# %d nodes of %s ranks = %d ranks, payload-free, virtual time\n",
                cluster.topology.nodes(), shape.c_str(), p);
  }
  std::printf("# inter-node (a node's NIC, shared by its ranks): %s\n",
              describeLinkCost(cluster.interNode).c_str());
  std::printf("# intra-node (each rank's own link):              %s\n",
              describeLinkCost(cluster.intraNode).c_str());
  if (cluster.cpu.cores > 0) {
    std::printf("# CPU: %d cores shared by all ranks, spin %.1f us; intra %s; inter %s\n",
                cluster.cpu.cores, cluster.cpu.spin * 1e6,
                describeMessageCpu(cluster.cpu.intraNode).c_str(),
                describeMessageCpu(cluster.cpu.interNode).c_str());
  } else if (cluster.cpu.intraNode.any() || cluster.cpu.interNode.any()) {
    std::printf("# CPU: a core per rank; intra %s; inter %s\n",
                describeMessageCpu(cluster.cpu.intraNode).c_str(),
                describeMessageCpu(cluster.cpu.interNode).c_str());
  }
  std::printf(
      "# time: simulated us; busbw: GB/s (bytes/time x %s/p); model: the cost model's\n"
      "# prediction / simulated time; '-': does not apply (two_level needs >1 node, %s)\n",
      allreduce ? "2(p-1)" : "(p-1)", allreduce ? ">1 rank each" : "a node with >1 rank");
  std::printf("%10s", "size");
  for (AllreduceAlgorithm a : algorithms) std::printf(" %28s", nameOf(a));
  std::printf("   %-17s %12s\n", "selected", "its time");
  std::printf("%10s", "");
  for (size_t i = 0; i < algorithms.size(); ++i)
    std::printf(" %12s %8s %6s", "time", "busbw", "model");
  std::printf("\n");
  const auto started = std::chrono::steady_clock::now();
  for (size_t bytes : list) {
    std::printf("%10s", humanSize(bytes).c_str());
    std::fflush(stdout);
    const AllreduceAlgorithm selected =
        allreduce ? model.cheapest(bytes) : model.cheapestScatterGather(bytes);
    double selectedTime = -1;
    auto simulate = [&](AllreduceAlgorithm a) {
      try {
        return simulateCollective(cluster, collective, a, bytes);
      } catch (const Error& e) {
        std::printf("\nsimulate: %s failed: %s\n", nameOf(a), e.what());
        std::exit(1);
      }
    };
    for (AllreduceAlgorithm a : algorithms) {
      if (!applies(a)) {
        std::printf(" %12s %8s %6s", "-", "-", "-");
        continue;
      }
      const SimulatedAllreduce r = simulate(a);
      if (a == selected) selectedTime = r.seconds;
      const double busbw = allreduce ? allreduceBusBandwidth(bytes, r.seconds, p)
                                     : scatterGatherBusBandwidth(bytes, r.seconds, p);
      std::printf(" %12.1f %8.2f %6.2f", r.seconds * 1e6, busbw / 1e9, r.predicted / r.seconds);
      std::fflush(stdout);
    }
    if (selectedTime < 0) selectedTime = simulate(selected).seconds;
    std::printf("   %-17s %12.1f\n", nameOf(selected), selectedTime * 1e6);
  }
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  std::printf("# simulated in %.1f s of wall time\n", wall);
  return 0;
}
