// Tunables read from the environment once per process group, and from the
// file RINGREDUCE_CONFIG names (KEY=VALUE lines; a variable set in the
// environment wins over the file's line).
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/plan/allreduce_algorithm.h"
#include "core/config/cuda_choices.h"
#include "core/plan/chunk_layout.h"
#include "core/plan/link_cost.h"

namespace ringreduce {

// The wait spin when ranks outnumber cores (it then yields at every turn):
// long enough for the other ranks on the core to take their turns.
constexpr int kOversubscribedWaitSpinMicroseconds = 200;
// ... for messages up to this size; a wait for a bigger one sleeps at once.
constexpr size_t kYieldSpinMaxBytes = 64 * 1024;

// The host channel's buffer per rank and parity (Config::hostChannelBytes).
constexpr size_t kDefaultHostChannelBytes = size_t{1} << 20;
// Its bound (RINGREDUCE_SHM_BYTES above it is refused).
constexpr size_t kMaxHostChannelBytes = size_t{64} << 20;

// RINGREDUCE_SHM_STORES: how a rank writes into its host channel buffers
// (transport/host/channel_stores.h): timed and chosen per size, always
// memcpy, or always streaming (non-temporal) stores.
enum class ChannelStores : uint8_t { Auto, Cached, Streaming };

template <>
struct NameTable<ChannelStores> {
  static constexpr NamedValue<ChannelStores> entries[] = {
      {ChannelStores::Auto, "auto"},
      {ChannelStores::Cached, "cached"},
      {ChannelStores::Streaming, "streaming"},
  };
};

struct Config {
  // Bytes per pipeline segment: a ring step sends segment k+1 while it reduces
  // segment k. RINGREDUCE_SEGMENT_BYTES.
  size_t segmentBytes = kDefaultSegmentBytes;
  // Messages below this size go eagerly (copied through UCX's queue or
  // socket) instead of by rendezvous (a handshake, then one copy from the
  // peer's memory on shared memory), on shared memory and TCP; RDMA keeps
  // UCX's thresholds. Faster when both ranks are in the collective, costly
  // in CPU when the receiver is busy elsewhere (DDP): off by default
  // (transport/ucx/eager_policy.h). RINGREDUCE_EAGER_BYTES; 0: UCX's.
  size_t eagerBytes = 0;
  // How long the group's worker thread polls before it sleeps on the event
  // fd, after a task and inside one it runs for an asynchronous caller.
  // Short: the caller is computing meanwhile and may need every core. 0 when
  // ranks outnumber cores (see spinYields). RINGREDUCE_SPIN_US.
  int spinMicroseconds = 50;
  // How long a thread polls before it sleeps when its caller is blocked on
  // the result anyway (wait() running the collective, or waiting for it).
  // Long enough to cover the usual skew between ranks: waking a sleeping
  // thread costs 50-200 us on a virtual machine whose idle cores halt.
  // RINGREDUCE_WAIT_SPIN_US.
  int waitSpinMicroseconds = 1000;
  // Whether the two spins above are ceilings that each waiting loop lowers
  // while spinning does not pay (other processes want the cores: the thread
  // is descheduled during its spin, or its spins run out), down to blocking
  // at once, and raises again when spins pay (core/base/spin_budget.h). On
  // unless RINGREDUCE_SPIN_US or RINGREDUCE_WAIT_SPIN_US is set: an explicit
  // spin is spun as given (0: never spin). RINGREDUCE_ADAPTIVE_SPIN=0|1
  // overrides either way (1 with explicit spins: they are the ceilings).
  bool adaptiveSpin = true;
  // Whether a polling thread gives its core away (sched_yield) at every
  // turn. On when this machine's ranks (fromEnvironment) exceed the cores
  // this process may use: a rank that merely spun would hold the core the
  // peer it waits for needs, and one that slept would pay a wake-up (a
  // context switch and the sender's signal) for every message; a yielding
  // one lets the peer run and is back as soon as the core is free. The wait spin is then
  // kOversubscribedWaitSpinMicroseconds and the worker's spin 0 (a worker
  // spinning for work that may come competes with the callers, even
  // yielding: measured slower). RINGREDUCE_SPIN_YIELD=0|1.
  bool spinYields = false;
  // How long a collective that arrives while the worker thread sleeps waits
  // for its caller to run it (wait() does, on the calling thread) before the
  // worker starts it. Saves a synchronous call two thread hand-offs; delays
  // an asynchronous one by at most this. RINGREDUCE_CALLER_GRACE_US.
  int callerGraceMicroseconds = 100;

  // Whether each group's worker thread runs on the CPU of the thread that
  // last handed it a collective (engine/caller_core.h). On when this
  // machine's ranks (fromEnvironment) have one core each: as many as the
  // cores this process may use (world 2 on two cores). There a worker
  // the scheduler puts beside another rank's training thread slows that
  // rank, and every step waits for the slowest rank.
  // RINGREDUCE_WORKER_FOLLOWS_CALLER=0|1.
  bool workerFollowsCaller = false;

  // Whether a rank's waiting thread that keeps finding the peer it waits
  // for on its own core, while other work wants the cores, moves off that
  // core (core/base/core_separation.h): its affinity set without that CPU,
  // then back to what it was. RINGREDUCE_SEPARATE_CORES=0|1. Off by
  // default: it makes most small calls under load 4-8x faster but the
  // slow ones slower, and the mean per call came out alike or up to 1.3x
  // higher with 8 busy processes (benchmarks/RESULTS.md, "Busy cores").
  bool separateCores = false;

  // Put caller buffers of 4 MiB and up that come back collective after
  // collective on 2 MiB pages, so peers on this machine copying from them
  // pin 512x fewer pages (core/base/huge_pages.h). RINGREDUCE_HUGE_PAGES=0 turns
  // it off.
  bool hugePages = true;

  // Allreduces from 32 KiB on one machine read and write the peers' memory
  // (algorithms/cross_memory/allreduce.h) where the kernel allows it, and the
  // host channel's all-gathers and all-to-alls of large blocks read them
  // (algorithms/host_channel/cross_memory_gather.h).
  // RINGREDUCE_CROSS_MEMORY=0 turns it off on this rank, and so for every
  // group it is in (the ranks agree).
  bool crossMemory = true;

  // Small allreduces on one machine go through a shared-memory segment the
  // group maps once (transport/host/host_channel.h,
  // algorithms/host_channel/allreduce.h): up to this many bytes, each rank
  // holding two buffers of this size (rank 0's size serves the group; at
  // most kMaxHostChannelBytes). RINGREDUCE_SHM_BYTES; 0 on any rank turns
  // the channel off for every group that rank is in (the ranks agree when
  // the group opens it, at its first host collective).
  size_t hostChannelBytes = kDefaultHostChannelBytes;
  // How each rank writes into its channel buffers. RINGREDUCE_SHM_STORES.
  ChannelStores channelStores = ChannelStores::Auto;
  // An asynchronous host collective (async_op=True, a functional one) of at
  // most this many bytes that the channel carries runs on the caller's
  // thread at once and returns a completed Work, where every peer is in it
  // already (it waits for no one then): a thread hand-off costs more than
  // it. 0: every asynchronous one is queued. RINGREDUCE_ASYNC_ON_CALLER_BYTES.
  // One channel buffer (larger ones, up to 4 MiB, take the channel queued): queued, a 1 MiB
  // async allreduce + wait() took 183 us against 86-128 us here (the
  // worker, hot after the previous one, takes it and the caller waits for
  // the hand-off).
  size_t asyncOnCallerBytes = size_t{1} << 20;

  // Watch peers over a TCP side channel so a dead rank is reported at once
  // instead of at the timeout. RINGREDUCE_PEER_MONITOR=0 turns it off.
  bool peerMonitor = true;

  // Compare every collective's fingerprint across ranks before running it
  // (also on with TORCH_DISTRIBUTED_DEBUG=DETAIL). RINGREDUCE_CHECK_COLLECTIVES=1.
  bool checkCollectives = false;

  // Time every collective (Work.get_duration()) from the start: CUDA events
  // around the device work, a second clock read on the caller's thread for
  // host collectives run there. Off, those are timed only once
  // ProcessGroup._enable_collectives_timing() is called, as with NCCL (host
  // collectives queued on the executor are timed either way).
  // RINGREDUCE_ENABLE_TIMING=1; by default NCCL's TORCH_NCCL_ENABLE_TIMING.
  bool enableTiming = false;

  // Host allreduce algorithm: auto (the cost model's cheapest for the size
  // and the nodes, core/plan/allreduce_cost.h), ring, halving_doubling, two_level
  // or direct. RINGREDUCE_ALGORITHM; like the link costs below it must be
  // the same on every rank.
  AllreduceAlgorithm allreduceAlgorithm = AllreduceAlgorithm::Auto;
  // The cost model's links ("10GB/s,1us[,0.2us]": bandwidth, latency,
  // per-message overhead). RINGREDUCE_LINK_INTRA, RINGREDUCE_LINK_INTER.
  LinkCost intraNode = defaultIntraNode();
  LinkCost interNode = defaultInterNode();
  // Measure both links inside the group's first allreduce instead
  // (algorithms/tuning/link_probe.h: a few ms; rank 0's figures, shared).
  // RINGREDUCE_LINK_MEASURE=1.
  bool measureLinks = false;
  // Set only by the simulator (transport/simulated/): messages carry sizes
  // and no data, and the algorithms skip every copy and reduction.
  bool payloadFree = false;

  // CUDA tensors. RINGREDUCE_CUDA_ALGO picks the allreduce path:
  //   auto     every rank on one node (at most kDeviceFlagsMaxRanks): the
  //            device-flags path below for allreduce, all_gather_into_tensor
  //            and reduce_scatter_tensor, our IPC kernels for the rest and
  //            where the flags cannot be set up; across nodes the device
  //            ring where UCX moves device memory, else NCCL, else host
  //            staging over UCX
  //   oneshot, twoshot, staged   that IPC algorithm (cuda/ipc/ipc_collectives.h)
  //   nccl     NCCL (an error if it cannot run: missing, or two ranks on one GPU)
  //   host     pinned host staging over UCX
  //   flags    the device-flags path (cuda/signal/): every rank on one node,
  //            collectives synchronised on the device, launched from the
  //            caller's thread on its stream when nothing is queued ahead,
  //            capturable in CUDA graphs; an error where it cannot run.
  //            auto's choice on one node since an H200 measured it
  //            (benchmarks/RESULTS.md, "The device-flags path on an H200").
  CudaAlgorithm cudaAlgorithm = CudaAlgorithm::Auto;
  // Whether CUDA allreduce, all_gather_into_tensor and reduce_scatter_tensor
  // take the device-flags path: decided by the group at its creation, alike
  // on every rank (resolveDeviceFlags), not read from the environment.
  bool cudaDeviceFlags = false;
  // flags: how ranks meet on the device. auto: kernels spinning on flags
  // where the ranks' kernels run at once (one GPU per rank, or MPS), stream
  // memory operations where ranks share a GPU time-sliced. RINGREDUCE_CUDA_SYNC.
  CudaSync cudaSync = CudaSync::Auto;
  // flags: each of a rank's four buffers (in and out, two parities);
  // larger allreduces run in place on the ranks' tensors.
  // RINGREDUCE_CUDA_BUFFER_BYTES (a multiple of 4096).
  size_t cudaBufferBytes = 8u << 20;
  // flags: the most blocks one collective launches (0: from the GPU's SMs
  // and the ranks sharing it). RINGREDUCE_CUDA_BLOCKS.
  int cudaBlocks = 0;
  // CUDA tensors whose memory peers map (the in-place two-shot forms) are
  // held by the group until it closes, so torch cannot free memory a peer
  // still maps; past this many bytes, collectives on new tensors are staged
  // through the group's buffers instead. RINGREDUCE_CUDA_HOLD_BYTES.
  size_t cudaHoldBytes = size_t{4} << 30;
  size_t cudaOneShotBytes = 256 * 1024;  // RINGREDUCE_CUDA_ONESHOT_BYTES
  // Per-rank IPC scratch buffer (half input, half output). RINGREDUCE_CUDA_SCRATCH_BYTES.
  size_t cudaScratchBytes = 32u << 20;
  // Whether the one-node paths (device flags, IPC kernels) may use peer
  // access between the ranks' GPUs at all: set-up probes every pair
  // (cuda/peer_probe.h); off sends CUDA collectives to NCCL or host staging,
  // as a failed probe does. Off on any rank is off for the group.
  // RINGREDUCE_CUDA_P2P=auto|off.
  bool cudaPeerAccess = true;
  // Across nodes under RINGREDUCE_CUDA_ALGO=auto, where both the device ring
  // and NCCL can run an allreduce: time both on the first allreduces of each
  // size class and keep the faster, the same on every rank
  // (algorithms/tuning/autotune.h, AllreduceTuner::cudaPaths). Off: the device ring.
  // RINGREDUCE_CUDA_AUTOTUNE (default 1).
  bool cudaAutotune = true;
  // fp16 or bf16: float32 SUM/AVG travel as 16-bit floats through the
  // IPC scratch buffers (one-shot and staged forms; Horovod's compression),
  // accumulated in float32. RINGREDUCE_CUDA_WIRE_DTYPE.
  WireDtype cudaWireDtype = WireDtype::None;
  // The same for host (CPU) allreduces over the ring: float32 SUM/AVG travel
  // as 16-bit floats (algorithms/wire_dtype.h). RINGREDUCE_WIRE_DTYPE.
  WireDtype hostWireDtype = WireDtype::None;
  // What the device ring's allreduce travels as: the CUDA wire if set, else
  // the host one (which host staging across nodes, the path before the
  // device ring, carried).
  WireDtype deviceRingWire() const {
    return cudaWireDtype != WireDtype::None ? cudaWireDtype : hostWireDtype;
  }

  // Operations the flight recorder keeps per group (engine/op_trace.h); 0
  // turns it off. RINGREDUCE_TRACE_BUFFER_SIZE.
  size_t traceBufferSize = 2000;
  // Chrome trace of every collective and its phases, one file per process
  // ({rank} becomes its global rank; core/observe/timeline.h); empty: off.
  // RINGREDUCE_TIMELINE.
  std::string timelinePath;

  // Try candidate host allreduce settings (algorithm, segment size) on the
  // first allreduces of each size class and keep the fastest, the same on
  // every rank (algorithms/tuning/autotune.h). RINGREDUCE_AUTOTUNE=1.
  bool autotune = false;
  // Allreduces per candidate and size class. RINGREDUCE_AUTOTUNE_STEPS.
  int autotuneSteps = 3;
  // Let the autotuner also try 16-bit wire dtypes for float32 SUM/AVG (lossy).
  // RINGREDUCE_AUTOTUNE_LOSSY_WIRE=1.
  bool autotuneLossyWire = false;

  // The environment, over the file named by RINGREDUCE_CONFIG when set. A bad
  // value throws InvalidArgument naming the variable, or the file, line and key.
  // `ranksOnHost`: how many of the group's ranks run on this machine, as its
  // creation found out (0: not known). The defaults that depend on ranks per
  // core (spinYields, workerFollowsCaller) count torchrun's LOCAL_WORLD_SIZE
  // where it is set, else these: launchers other than torchrun (Lightning's,
  // mp.spawn, srun) set no such variable.
  // `given`: settings the group was made with (its pg_options' config),
  // over the environment and the file; a key that is no setting throws.
  static Config fromEnvironment(int ranksOnHost = 0,
                                const std::map<std::string, std::string>& given = {});

  // The most ranks the device-flags kernels serve (cuda/signal/signal_pad.h).
  static constexpr int kDeviceFlagsMaxRanks = 8;
  // Sets cudaDeviceFlags: RINGREDUCE_CUDA_ALGO=flags, or auto where every
  // one of the group's `size` ranks runs on this host, they are at most
  // kDeviceFlagsMaxRanks and no RINGREDUCE_CUDA_WIRE_DTYPE is set (the flags
  // kernels carry none). Both facts are the same on every rank (the
  // transport's address exchange), so every rank decides alike. Throws
  // InvalidArgument for flags with a wire dtype.
  void resolveDeviceFlags(bool allRanksOnThisHost, int size);

  // The settings as RINGREDUCE_* names and values, in the form the
  // environment and the config file take (the group's effective config).
  std::vector<std::pair<std::string, std::string>> describe() const;
};

// The KEY=VALUE lines of a config file: blank lines and lines starting with
// '#' skipped, spaces around key and value trimmed. Throws InvalidArgument
// naming the file and line for a line without '=', an unknown key (every key
// must be a RINGREDUCE_* name Config reads) or a repeated one.
struct ConfigFileLine {
  std::string key;
  std::string value;
  int line = 0;
};
std::vector<ConfigFileLine> readConfigFile(const std::string& path);

}  // namespace ringreduce
