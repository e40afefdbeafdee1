// ringreduce_emulated_rank: one rank of an emulated cluster
// (benchmarks/emulated_cluster.py starts one per rank, each inside the
// network namespace of its "node"). It meets the others through a FileStore,
// talks UCX (TCP over the namespaces' veth links), optionally adds one-way
// delay between nodes (DelayedTransport: no netem here), measures its links
// (algorithms/tuning/link_probe.h), checks every algorithm of every collective asked
// (allreduce, reduce_scatter, allgather) for exact results, times them, and
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
#include "algorithms/tuning/link_probe.h"
#include "algorithms/scatter_gather.h"
#include "core/base/errors.h"
#include "core/plan/partition.h"
#include "simulator/allreduce_simulation.h"
#include "transport/delayed_transport.h"
#include "transport/rendezvous/file_store.h"
#include "transport/ucx/ucx_transport.h"

using namespace ringreduce;

namespace {

struct Options {
  int rank = -1, size = 0, perNode = 1;
  std::vector<int> nodeSizes;  // --node-sizes: uneven nodes, in blocks (else --ranks-per-node)
  std::string store;
  double delayUs = 0;
  std::vector<size_t> sizes = {4096};
  std::vector<AllreduceAlgorithm> algorithms = {
      AllreduceAlgorithm::Auto, AllreduceAlgorithm::Ring, AllreduceAlgorithm::HalvingDoubling,
      AllreduceAlgorithm::TwoLevel, AllreduceAlgorithm::Direct};
  std::vector<SimulatedCollective> collectives = {SimulatedCollective::Allreduce};
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
    } else if (arg == "--node-sizes") {
      for (size_t at = 0; at <= value.size();) {
        const size_t comma = std::min(value.find(',', at), value.size());
        o.nodeSizes.push_back(std::atoi(value.substr(at, comma - at).c_str()));
        if (o.nodeSizes.back() < 1) throw InvalidArgument("bad --node-sizes " + value);
        at = comma + 1;
      }
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
    } else if (arg == "--collectives") {
      o.collectives.clear();
      for (size_t at = 0; at <= value.size();) {
        const size_t comma = std::min(value.find(',', at), value.size());
        const auto named = collectiveNamed(value.substr(at, comma - at));
        if (!named) throw InvalidArgument("unknown collective in " + value);
        o.collectives.push_back(*named);
        at = comma + 1;
      }
    } else {
      throw InvalidArgument("unknown option " + arg);
    }
  }
  int sized = 0;
  for (int n : o.nodeSizes) sized += n;
  const bool shaped = o.nodeSizes.empty() ? o.perNode > 0 && o.size % o.perNode == 0 : sized == o.size;
  if (o.rank < 0 || o.size < 1 || o.store.empty() || !shaped) {
    throw InvalidArgument(
        "usage: --rank R --size N (--ranks-per-node K | --node-sizes A,B,...) --store DIR "
        "[--delay-us D] "
        "[--sizes B,...] [--algorithms a,...] [--collectives c,...] [--iterations I] "
        "[--cores C]");
  }
  return o;
}

double secondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Rank r's exact input at index i: small, so every int64 sum is exact.
int64_t inputOf(int rank, size_t i) { return static_cast<int64_t>((i * 13 + rank * 7) % 97); }

// Runs `collective` once on int64 inputs whose results are known and says
// whether this rank's result is exact (printing the first mismatch).
bool runsExact(const Comm& comm, const OpContext& op, SimulatedCollective collective, size_t bytes,
               const char* ran) {
  const int rank = comm.rank(), size = comm.size();
  auto sumAt = [size](size_t i) {
    int64_t sum = 0;
    for (int r = 0; r < size; ++r) sum += inputOf(r, i);
    return sum;
  };
  std::vector<int64_t> got, want;
  size_t from = 0;  // the index of got[0] in the whole result
  if (collective == SimulatedCollective::Allgather) {
    const size_t block = std::max<size_t>(bytes / 8 / size, 1);
    std::vector<int64_t> mine(block);
    for (size_t i = 0; i < block; ++i) mine[i] = inputOf(rank, i) + 1000 * rank;
    got.resize(block * size);
    hostAllgather(comm, op, {mine.data(), got.data(), block * sizeof(int64_t)});
    for (int r = 0; r < size; ++r)
      for (size_t i = 0; i < block; ++i) want.push_back(inputOf(r, i) + 1000 * r);
  } else {
    const size_t count = std::max<size_t>(bytes / 8, 1);
    std::vector<int64_t> data(count);
    for (size_t i = 0; i < count; ++i) data[i] = inputOf(rank, i);
    const ReductionArgs args{data.data(), count, DataType::Int64, ReduceOp::Sum};
    if (collective == SimulatedCollective::Allreduce) {
      hostAllreduce(comm, op, args);
      got = data;
    } else {
      hostReduceScatter(comm, op, args);
      const Range mine = chunkOf(count, size, rank);  // the chunk this rank keeps
      from = mine.offset;
      got.assign(data.begin() + mine.offset, data.begin() + mine.offset + mine.count);
    }
    for (size_t i = 0; i < got.size(); ++i) want.push_back(sumAt(from + i));
  }
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i] != want[i]) {
      std::printf("MISMATCH rank %d %s %s %zu B index %zu: %lld != %lld\n", rank,
                  collectiveName(collective), ran, bytes, from + i,
                  static_cast<long long>(got[i]), static_cast<long long>(want[i]));
      return false;
    }
  }
  return true;
}

// Seconds per `collective` of `bytes` float32 SUM, back to back after a
// barrier (nccl-tests' way); allgather: bytes / p from each rank.
double timed(const Comm& comm, uint64_t& seq, SimulatedCollective collective, size_t bytes,
             int iterations) {
  std::vector<float> data(bytes / 4, 1.0f), gathered;
  const size_t block = data.size() / comm.size();
  if (collective == SimulatedCollective::Allgather) gathered.resize(block * comm.size());
  auto once = [&] {
    const OpContext op(collectiveName(collective), seq++, std::chrono::seconds(60));
    const ReductionArgs args{data.data(), data.size(), DataType::Float32, ReduceOp::Sum};
    if (collective == SimulatedCollective::Allreduce) {
      hostAllreduce(comm, op, args);
    } else if (collective == SimulatedCollective::ReduceScatter) {
      hostReduceScatter(comm, op, args);
    } else {
      hostAllgather(comm, op, {data.data(), gathered.data(), block * sizeof(float)});
    }
  };
  for (int i = 0; i < 3; ++i) once();
  disseminationBarrier(comm, OpContext("barrier", seq++, std::chrono::seconds(60)));
  const auto start = Clock::now();
  for (int i = 0; i < iterations; ++i) once();
  return secondsSince(start) / iterations;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Options o = parse(argc, argv);
    Config config = Config::fromEnvironment();
    std::vector<int> labels;  // each rank's node, in blocks
    if (o.nodeSizes.empty()) {
      for (int r = 0; r < o.size; ++r) labels.push_back(r / o.perNode);
    } else {
      for (size_t node = 0; node < o.nodeSizes.size(); ++node)
        labels.insert(labels.end(), o.nodeSizes[node], static_cast<int>(node));
    }
    const Topology topology = Topology::fromLabels(labels);
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
    const bool twoLevelApplies = selector.model(comm, OpContext()).twoLevelApplies();
    for (SimulatedCollective collective : o.collectives) {
      for (size_t bytes : o.sizes) {
        for (AllreduceAlgorithm algorithm : o.algorithms) {
          // two_level where it does not apply runs halving/doubling: measured already.
          if (algorithm == AllreduceAlgorithm::TwoLevel && !twoLevelApplies) continue;
          config.allreduceAlgorithm = algorithm;
          // What ran, as the simulation of this cluster resolves it (the
          // ranks' selector sees the same measured links).
          const SimulatedAllreduce simulated =
              simulateCollective(cluster, collective, algorithm, bytes, config);
          const char* ran = nameOf(simulated.algorithm);
          exact = runsExact(comm, OpContext(collectiveName(collective), seq++,
                                            std::chrono::seconds(60)),
                            collective, bytes, ran) &&
                  exact;
          const double measured = timed(comm, seq, collective, bytes, o.iterations);
          if (o.rank == 0) {
            const SimulatedAllreduce sharing =
                simulateCollective(onCores, collective, algorithm, bytes, config);
            std::printf(
                "RESULT collective=%s asked=%s ran=%s bytes=%zu measured_us=%.1f "
                "simulated_us=%.1f simulated_cores_us=%.1f exact=%d\n",
                collectiveName(collective), nameOf(algorithm), ran, bytes, measured * 1e6,
                simulated.seconds * 1e6, sharing.seconds * 1e6, exact ? 1 : 0);
            std::fflush(stdout);
          }
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
