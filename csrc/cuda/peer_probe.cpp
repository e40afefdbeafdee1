// The set-up proof that every pair of ranks reaches the other's memory (peer_probe.h)
#include "cuda/peer_probe.h"

#include <cstdio>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "cuda/device_info.h"
#include "cuda/ipc/ipc_memory.h"
#include "cuda/kernels/reduce_copy.h"
#include "cuda/own_stream.h"
#include "cuda/stream_tracker.h"

namespace ringreduce::cuda {

namespace {

constexpr const char* kFailurePrefix = "peer access between ";

// What each rank says in the probe's rounds.
struct Greeting {
  std::array<uint8_t, 16> gpu{};
  uint8_t ready = 0;  // its area is cleared and its own pattern written
};
struct Verdicts {
  uint8_t of[kPeerProbeRanks] = {};  // PeerReach of each peer, as this rank found it
};

// The byte `writer` puts at `i` of the slot it writes for `reader`: it
// differs by writer, reader and position, so a copy that lands in the wrong
// slot, at the wrong offset or from the wrong rank does not pass.
uint8_t patternByte(int writer, int reader, size_t i) {
  return static_cast<uint8_t>(0x5b + writer * 37 + reader * 101 + i * 13 + (i >> 8));
}

void fillPattern(uint8_t* slot, int writer, int reader) {
  for (size_t i = 0; i < kPeerProbeSlotBytes; ++i) slot[i] = patternByte(writer, reader, i);
}

bool holdsPattern(const uint8_t* slot, int writer, int reader) {
  for (size_t i = 0; i < kPeerProbeSlotBytes; ++i) {
    if (slot[i] != patternByte(writer, reader, i)) return false;
  }
  return true;
}

void* slotOf(void* area, int slot) {
  return static_cast<uint8_t*>(area) + static_cast<size_t>(slot) * kPeerProbeSlotBytes;
}

// A device copy through a kernel: the loads and stores a collective makes
// through a mapping, not the copy engine's.
void kernelCopy(void* dst, const void* src, size_t bytes, int device, void* stream) {
  launchCast(src, DataType::UInt8, dst, DataType::UInt8, bytes, 0, device, stream);
}

// Whether the work queued on `stream` finished before `deadline`; polled,
// since a copy through a broken mapping may never finish.
bool finishedBy(int device, void* stream, std::chrono::steady_clock::time_point deadline) {
  void* mark = recordMark(device, stream);
  while (!markReached(mark)) {
    if (std::chrono::steady_clock::now() > deadline) return false;  // mark left to the process
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  freeMark(mark);
  return true;
}

std::string describe(int observer, int peer, PeerReach reach, const Greeting* greetings) {
  auto gpu = [&](int q) {
    char hex[9];
    std::snprintf(hex, sizeof(hex), "%02x%02x%02x%02x", greetings[q].gpu[0], greetings[q].gpu[1],
                  greetings[q].gpu[2], greetings[q].gpu[3]);
    return "rank " + std::to_string(q) + " (GPU " + hex + ")";
  };
  std::string text = std::string(kFailurePrefix) + gpu(observer) + " and " + gpu(peer) + ": ";
  switch (reach) {
    case PeerReach::NoPeerAccess: return text + "the CUDA runtime reports no peer access";
    case PeerReach::WritesLost:
      return text + "writes from rank " + std::to_string(peer) +
             " through its mapping did not arrive intact (peer traffic broken: IOMMU/ACS?)";
    case PeerReach::ReadsWrong:
      return text + "reads through the mapping returned wrong data (peer traffic broken: "
                    "IOMMU/ACS?)";
    case PeerReach::TimedOut: return text + "the probe's copies did not finish in time";
    default: return text + "failed";
  }
}

}  // namespace

bool isPeerAccessFailure(const std::string& why) { return why.rfind(kFailurePrefix, 0) == 0; }

std::string probePeerAccess(const PeerProbe& probe, const RecordExchange& exchange) {
  const int rank = probe.rank, size = probe.size, device = probe.device;
  const auto deadline = std::chrono::steady_clock::now() + probe.limit;
  Verdicts mine;
  Greeting hello;
  void* stream = nullptr;
  // Sources of the writes (one slot per reader) and landing place of the
  // reads (one slot per peer), in pinned memory the host fills and checks.
  std::unique_ptr<PinnedMirror> sources, received, landed;
  bool local = true;  // this rank's own steps finished in time
  try {
    hello.gpu = deviceUuid(device);
    stream = createOwnStream(device);
    sources = std::make_unique<PinnedMirror>(device, kPeerProbeAreaBytes);
    received = std::make_unique<PinnedMirror>(device, kPeerProbeAreaBytes);
    landed = std::make_unique<PinnedMirror>(device, kPeerProbeAreaBytes);
    for (int q = 0; q < size; ++q) {
      fillPattern(static_cast<uint8_t*>(slotOf(sources->host(), q)), rank, q);
    }
    // My area: cleared, then my own pattern in my slot for the peers to read.
    fillOnStream(device, probe.areas[rank], 0, kPeerProbeAreaBytes, stream);
    kernelCopy(slotOf(probe.areas[rank], rank), slotOf(sources->device(), rank),
               kPeerProbeSlotBytes, device, stream);
    local = finishedBy(device, stream, deadline);
    hello.ready = local ? 1 : 0;
  } catch (const std::exception&) {
    local = false;
  }
  // Round 1: every area is ready (and which GPU each rank drives).
  std::vector<Greeting> greetings(size);
  exchange(&hello, greetings.data(), sizeof(Greeting));
  bool allReady = true;
  for (const Greeting& g : greetings) allReady = allReady && g.ready;
  if (allReady) {
    try {
      for (int q = 0; q < size; ++q) {
        if (q == rank) continue;
        if (peerAccessTo(device, greetings[q].gpu) == PeerAccess::No) {
          mine.of[q] = static_cast<uint8_t>(PeerReach::NoPeerAccess);
          continue;  // not written through: the verdict is in already
        }
        kernelCopy(slotOf(probe.areas[q], rank), slotOf(sources->device(), q), kPeerProbeSlotBytes,
                   device, stream);
      }
      local = finishedBy(device, stream, deadline);
    } catch (const std::exception&) {
      local = false;
    }
  }
  // Round 2: every rank's writes are done (or given up on).
  const uint8_t written = allReady && local ? 1 : 0;
  std::vector<uint8_t> allWritten(size);
  exchange(&written, allWritten.data(), 1);
  if (allReady) {
    try {
      // What the peers wrote into my area, copied to host memory of mine
      // (no mapping involved), and the peers' own patterns read through
      // the mappings.
      kernelCopy(received->device(), probe.areas[rank], kPeerProbeAreaBytes, device, stream);
      for (int q = 0; q < size; ++q) {
        if (q == rank || mine.of[q] != 0) continue;
        kernelCopy(slotOf(landed->device(), q), slotOf(probe.areas[q], q), kPeerProbeSlotBytes,
                   device, stream);
      }
      local = finishedBy(device, stream, deadline) && local;
    } catch (const std::exception&) {
      local = false;
    }
    const auto* wrote = static_cast<const uint8_t*>(received->host());
    const auto* read = static_cast<const uint8_t*>(landed->host());
    for (int q = 0; q < size; ++q) {
      if (q == rank || mine.of[q] != 0) continue;
      PeerReach reach = PeerReach::Ok;
      if (!local || !allWritten[q]) {
        reach = PeerReach::TimedOut;
      } else if (!holdsPattern(wrote + q * kPeerProbeSlotBytes, q, rank)) {
        reach = PeerReach::WritesLost;
      } else if (!holdsPattern(read + q * kPeerProbeSlotBytes, q, q)) {
        reach = PeerReach::ReadsWrong;
      }
      mine.of[q] = static_cast<uint8_t>(reach);
    }
  }
  // Round 3: every rank's verdicts, so that all decide alike.
  std::vector<Verdicts> all(size);
  exchange(&mine, all.data(), sizeof(Verdicts));
  if (local) {
    if (stream != nullptr) destroyOwnStream(device, stream);
  } else {
    // A copy may still be in flight through a broken mapping: its stream
    // and host memory stay with the process.
    (void)sources.release();
    (void)received.release();
    (void)landed.release();
  }
  if (!allReady) {
    for (int q = 0; q < size; ++q) {
      if (!greetings[q].ready) {
        return "rank " + std::to_string(q) + " could not prepare the peer-access probe";
      }
    }
  }
  // The runtime's "no peer access" first: it explains the lost writes its
  // peer then sees (nothing was written through).
  for (const bool declared : {true, false}) {
    for (int observer = 0; observer < size; ++observer) {
      for (int peer = 0; peer < size; ++peer) {
        const auto reach = static_cast<PeerReach>(all[observer].of[peer]);
        if (peer == observer || reach == PeerReach::Ok) continue;
        if (declared == (reach == PeerReach::NoPeerAccess)) {
          return describe(observer, peer, reach, greetings.data());
        }
      }
    }
  }
  return "";
}

}  // namespace ringreduce::cuda
