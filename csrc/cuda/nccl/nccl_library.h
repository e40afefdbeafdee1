// NCCL, loaded with dlopen on first use, so that importing torch_ringreduce
// never needs it. Declares only the C ABI subset we call; the values of
// NCCL's enums have been stable since NCCL 2.0 (bfloat16: 2.10).
#pragma once

#include <climits>
#include <cstddef>
#include <memory>
#include <string>

namespace ringreduce::cuda {

struct NcclUniqueId {
  char internal[128];
};

// ncclDataType_t and ncclRedOp_t values.
enum NcclDataType : int {
  kNcclInt8 = 0,
  kNcclUint8 = 1,
  kNcclInt32 = 2,
  kNcclUint32 = 3,
  kNcclInt64 = 4,
  kNcclUint64 = 5,
  kNcclFloat16 = 6,
  kNcclFloat32 = 7,
  kNcclFloat64 = 8,
  kNcclBfloat16 = 9,
};
enum NcclRedOp : int { kNcclSum = 0, kNcclProd = 1, kNcclMax = 2, kNcclMin = 3, kNcclAvg = 4 };

// ncclResult_t values we act on.
enum NcclResultCode : int { kNcclSuccess = 0, kNcclInProgress = 7 };

// ncclConfig_t as NCCL 2.32.3 declares it, with NCCL_CONFIG_INITIALIZER's
// values (tests/cpp/test_cuda_layer.cpp checks both against the wheel's
// nccl.h: field by field, and where that header is older, such as torch
// 2.14.1's pinned 2.30.7, its fields as the start of ours). NCCL only
// appends fields; it reads the first `size` bytes that it knows and, from
// `version`, which fields the caller set, so an older NCCL (2.14 or newer)
// takes this one too. Only `blocking` is ours to set.
struct NcclConfig {
  static constexpr int kUndef = INT_MIN;  // NCCL_CONFIG_UNDEF_INT
  static constexpr unsigned int kVersion = 23203;  // NCCL_VERSION_CODE of that header
  size_t size = sizeof(NcclConfig);
  unsigned int magic = 0xcafebeef;  // NCCL_API_MAGIC
  unsigned int version = kVersion;
  int blocking = kUndef;
  int cgaClusterSize = kUndef;
  int minCTAs = kUndef;
  int maxCTAs = kUndef;
  const char* netName = nullptr;
  int splitShare = kUndef;
  int trafficClass = kUndef;
  const char* commName = nullptr;
  int collnetEnable = kUndef;
  int CTAPolicy = kUndef;
  int shrinkShare = kUndef;
  int nvlsCTAs = kUndef;
  int nChannelsPerNetPeer = kUndef;
  int nvlinkCentricSched = kUndef;
  int graphUsageMode = kUndef;
  int numRmaCtx = kUndef;
  int maxP2pPeers = kUndef;
  int graphStreamOrdering = kUndef;
  int launchOrderImplicit = kUndef;
  int numRmaSig = kUndef;
  int rmaEagerInit = kUndef;
  int hostCftMode = kUndef;
  int nvlsHostMode = kUndef;
};

struct NcclLibrary {
  using Comm = void*;  // ncclComm_t
  using Result = int;  // ncclResult_t; 0 is ncclSuccess

  int version = 0;  // e.g. 22703 for 2.27.3
  std::string path;

  Result (*getVersion)(int*) = nullptr;
  const char* (*getErrorString)(Result) = nullptr;
  Result (*getUniqueId)(NcclUniqueId*) = nullptr;
  Result (*commInitRank)(Comm*, int, NcclUniqueId, int) = nullptr;
  // NCCL 2.14 and newer (null before): the non-blocking init we bound by
  // the group's deadline.
  Result (*commInitRankConfig)(Comm*, int, NcclUniqueId, int, NcclConfig*) = nullptr;
  // Optional too (null where NCCL lacks it): flushes what was issued and
  // waits, with the peers, until the communicator is quiescent, so that the
  // destroy after it frees without blocking (NcclCommunicator::close).
  Result (*commFinalize)(Comm) = nullptr;
  Result (*commDestroy)(Comm) = nullptr;
  Result (*commAbort)(Comm) = nullptr;
  Result (*commGetAsyncError)(Comm, Result*) = nullptr;
  Result (*allReduce)(const void*, void*, size_t, int, int, Comm, void*) = nullptr;
  Result (*broadcast)(const void*, void*, size_t, int, int, Comm, void*) = nullptr;
  Result (*reduce)(const void*, void*, size_t, int, int, int, Comm, void*) = nullptr;
  Result (*allGather)(const void*, void*, size_t, int, Comm, void*) = nullptr;
  Result (*reduceScatter)(const void*, void*, size_t, int, int, Comm, void*) = nullptr;
  Result (*send)(const void*, size_t, int, int, Comm, void*) = nullptr;
  Result (*recv)(void*, size_t, int, int, Comm, void*) = nullptr;
  Result (*groupStart)() = nullptr;
  Result (*groupEnd)() = nullptr;

  // The process's NCCL, loaded once: RINGREDUCE_NCCL_LIBRARY (a file name or
  // path) or libnccl.so.2 from the loader's search path, which includes the
  // copy torch's CUDA wheels bring. Null, with `why`, when it is missing or
  // lacks a symbol.
  static const NcclLibrary* load(std::string* why);
  // Loads `name` afresh (load() keeps one for the process). Null, with `why`,
  // on failure.
  static std::unique_ptr<NcclLibrary> open(const std::string& name, std::string* why);
};

}  // namespace ringreduce::cuda
