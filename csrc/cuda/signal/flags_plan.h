// How the device-flags path of a group would run, decided from what every
// rank reported at set-up, so that every rank decides alike (plain C++:
// tested without a GPU):
//   ranks on several nodes, or more than kSignalRanks    not at all
//   RINGREDUCE_CUDA_SYNC=flags or memops                 as asked (memops only
//                                                        where every driver has it)
//   one GPU per rank                                     flags
//   ranks sharing a GPU, every one an MPS client         flags, each rank's grid
//                                                        at most SMs / ranks on it
//   ranks sharing a GPU without MPS (time-sliced)        stream memory operations:
//                                                        a kernel spinning on a peer's
//                                                        flag could hold the GPU for
//                                                        its time slice, or forever
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "core/config/cuda_choices.h"

namespace ringreduce::cuda {

// What one rank reports.
struct RankDevice {
  uint64_t host = 0;            // hostIdentityHash()
  std::array<uint8_t, 16> gpu{};  // the GPU's UUID
  bool mps = false;             // its contexts are MPS clients
  bool memOps = false;          // its driver has stream memory operations
  int sms = 1;                  // multiprocessors of its GPU
};

struct FlagsPlan {
  CudaSync sync = CudaSync::Auto;  // Auto: the device-flags path cannot run
  int maxBlocks = 1;               // the most blocks of one collective
  std::string reason;              // for the log and the error
  bool sameNode = false;
  bool gpuShared = false;          // some GPU has several ranks
  std::string topology;            // "4 rank(s) on 1 node(s), 1 GPU(s)"
};

// `asked`: RINGREDUCE_CUDA_SYNC; `blocks`: RINGREDUCE_CUDA_BLOCKS (0: from
// the SMs); `mpsHow`: what this rank found of MPS, for the reason.
FlagsPlan planFlags(const std::vector<RankDevice>& ranks, CudaSync asked, int blocks,
                    const std::string& mpsHow);

}  // namespace ringreduce::cuda
