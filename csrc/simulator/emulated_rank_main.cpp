// ringreduce_emulated_rank: one rank of an emulated cluster
// (benchmarks/emulated_cluster.py starts one per rank, each inside the
// network namespace of its "node"). It meets the others through a FileStore,
// talks UCX (TCP over the namespaces' veth links), optionally adds one-way
// delay between nodes (DelayedTransport: no netem here), measures its links
// (algorithms/link_probe.h), checks every algorithm for exact results, times them, and
// (rank 0) prints each measurement beside the virtual-time simulation of the
// same schedule on the measured links: once with a core per rank (the model
// without cores), once on the --cores cores the ranks really share, with the
// CPU per message that the ranks measured.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "algorithms/allreduce.h"
#include "algorithms/barrier.h"
#include "algorithms/link_probe.h"
#include "core/errors.h"
#include "simulator/allreduce_simulation.h"
#include "transport/delayed_transport.h"
#include "transport/file_store.h"
#include "transport/ucx/ucx_transport.h"

using namespace ringreduce;

namespace {

struct Options {
  int rank = -1, size = 0, perNode = 1;
  std::string store;
  double delayUs = 0;
  std::vector<size_t> sizes = {4096};
  std::vector<AllreduceAlgorithm> algorithms = {
      AllreduceAlgorithm::Auto, AllreduceAlgorithm::Ring, AllreduceAlgorithm::HalvingDoubling,
      AllreduceAlgorithm::TwoLevel, AllreduceAlgorithm::Direct};
  int iterations = 20;
  int cores = 0;  // the cores all ranks share (0: not given; no core model run)
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string arg = argv[i], value = argv[i + 1];
    if (arg == "--rank") {
      o.rank = std::atoi(value.c_str());
    } else if (arg == "--size") {
      o.size = std::atoi(value.c_str());
    } else if (arg == "--ranks-per-node") {
      o.perNode = std::atoi(value.c_str());
    } else if (arg == "--store") {
      o.store = value;
    } else if (arg == "--delay-us") {
      o.delayUs = std::atof(value.c_str());
    } else if (arg == "--cores") {
      o.cores = std::atoi(value.c_str());
    } else if (arg == "--iterations") {
      o.iterations = std::atoi(value.c_str());
    } else if (arg == "--sizes") {
      o.sizes.clear();
      for (size_t at = 0; at <= value.size();) {
        const size_t comma = std::min(value.find(',', at), value.size());
        o.sizes.push_back(std::strtoull(value.substr(at, comma - at).c_str(), nullptr, 10));
        at = comma + 1;
      }
    } else if (arg == "--algorithms") {
      o.algorithms.clear();
      for (size_t at = 0; at <= value.size();) {
        const size_t comma = std::min(value.find(',', at), value.size());
        const auto a = parseName<AllreduceAlgorithm>(value.substr(at, comma - at));
        if (!a) throw InvalidArgument("unknown algorithm in " + value);
        o.algorithms.push_back(*a);
        at = comma + 1;
      }
    } else {
      throw InvalidArgument("unknown option " + arg);
    }
  }
  if (o.rank < 0 || o.size < 1 || o.store.empty() || o.size % o.perNode != 0) {
    throw InvalidArgument(
        "usage: --rank R --size N --ranks-per-node K --store DIR [--delay-us D] "
        "[--sizes B,...] [--algorithms a,...] [--iterations I] [--cores C]");
  }
  return o;
}

double secondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Options o = parse(argc, argv);
    Config config = Config::fromEnvironment();
    const Topology topology = Topology::blocks(o.size / o.perNode, o.perNode);
    std::unique_ptr<Transport> transport = std::make_unique<UcxTransport>(
        o.rank, o.size, std::make_shared<FileStore>(o.store), std::chrono::seconds(60), config);
    if (o.delayUs > 0) {
      transport = std::make_unique<DelayedTransport>(
          std::move(transport), topology.nodeOf,
          std::chrono::nanoseconds(static_cast<int64_t>(o.delayUs * 1000)));
    }
    Workspace workspace;
    uint64_t seq = 1;
    // The links, measured (the cost model and the simulation use these);
    // 4 MiB messages get past tbf's burst allowance, so the sustained rate shows.
    MessageCpu intraCpu, interCpu;
    {
      const Comm plain{*transport, config, workspace};
      probeLinks(plain, OpContext("probe", seq++, std::chrono::seconds(120)), topology,
                 &config.intraNode, &config.interNode, 4 << 20, &intraCpu, &interCpu);
    }
    AllreduceSelector selector(topology);
    const Comm comm{*transport, config, workspace, &selector};
    const ClusterSpec cluster{topology, config.intraNode, config.interNode};
    const ClusterSpec onCores = clusterOnCores(topology, config.intraNode, config.interNode,
                                               intraCpu, interCpu, o.cores,
                                               config.spinMicroseconds * 1e-6, o.delayUs * 1e-6);
    if (o.rank == 0) {
      std::printf("LINKS intra %s | inter %s\n", describeLinkCost(config.intraNode).c_str(),
                  describeLinkCost(config.interNode).c_str());
      std::printf("CPU cores %d, spin %d us | intra %s | inter %s\n", o.cores,
                  static_cast<int>(config.spinMicroseconds),
                  describeMessageCpu(intraCpu).c_str(), describeMessageCpu(interCpu).c_str());
    }
    bool exact = true;
    for (size_t bytes : o.sizes) {
      for (AllreduceAlgorithm algorithm : o.algorithms) {
        config.allreduceAlgorithm = algorithm;
        const AllreduceAlgorithm ran =
            selector.choose(comm, OpContext("choose", 0, std::chrono::seconds(1)), bytes);
        if (ran == AllreduceAlgorithm::TwoLevel &&
            !selector.model(comm, OpContext()).twoLevelApplies()) {
          continue;
        }
        // Exact: int64 SUM of rank-dependent values.
        const size_t count = std::max<size_t>(bytes / 8, 1);
        std::vector<int64_t> check(count);
        for (size_t i = 0; i < count; ++i)
          check[i] = static_cast<int64_t>((i * 13 + o.rank * 7) % 97);
        hostAllreduce(comm, OpContext("allreduce", seq++, std::chrono::seconds(60)),
                      {check.data(), count, DataType::Int64, ReduceOp::Sum});
        for (size_t i = 0; i < count && exact; ++i) {
          int64_t sum = 0;
          for (int r = 0; r < o.size; ++r) sum += static_cast<int64_t>((i * 13 + r * 7) % 97);
          if (check[i] != sum) {
            std::printf("MISMATCH rank %d %s %zu B index %zu: %lld != %lld\n", o.rank, nameOf(ran),
                        bytes, i, static_cast<long long>(check[i]), static_cast<long long>(sum));
            exact = false;
          }
        }
        // Timed: float32 SUM, back to back after a barrier (nccl-tests' way).
        std::vector<float> data(bytes / 4, 1.0f);
        for (int i = 0; i < 3; ++i) {
          hostAllreduce(comm, OpContext("allreduce", seq++, std::chrono::seconds(60)),
                        {data.data(), data.size(), DataType::Float32, ReduceOp::Sum});
        }
        disseminationBarrier(comm, OpContext("barrier", seq++, std::chrono::seconds(60)));
        const auto start = Clock::now();
        for (int i = 0; i < o.iterations; ++i) {
          hostAllreduce(comm, OpContext("allreduce", seq++, std::chrono::seconds(60)),
                        {data.data(), data.size(), DataType::Float32, ReduceOp::Sum});
        }
        const double measured = secondsSince(start) / o.iterations;
        if (o.rank == 0) {
          const SimulatedAllreduce simulated = simulateAllreduce(cluster, ran, bytes, config);
          const SimulatedAllreduce sharing = simulateAllreduce(onCores, ran, bytes, config);
          std::printf(
              "RESULT asked=%s ran=%s bytes=%zu measured_us=%.1f simulated_us=%.1f "
              "simulated_cores_us=%.1f exact=%d\n",
              nameOf(algorithm), nameOf(ran), bytes, measured * 1e6, simulated.seconds * 1e6,
              sharing.seconds * 1e6, exact ? 1 : 0);
          std::fflush(stdout);
        }
      }
    }
    disseminationBarrier(comm, OpContext("barrier", seq++, std::chrono::seconds(60)));
    return exact ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ringreduce_emulated_rank: %s\n", e.what());
    return 2;
  }
}
