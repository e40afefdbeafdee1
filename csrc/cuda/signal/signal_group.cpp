#include "cuda/signal/signal_group.h"

#include <cuda_runtime_api.h>

#include <algorithm>

#include "core/base/errors.h"
#include "cuda/cuda_error.h"
#include "cuda/device_scope.h"
#include "cuda/kernels/reduce_copy.h"
#include "cuda/signal/signal_launch.h"
#include "cuda/signal/stream_memops.h"

namespace ringreduce::cuda {

namespace {

// What every rank tells the others at set-up.
struct SetupRecord {
  ExportedRange region;
};

// A block per this many bytes of the collective (up to the group's most):
// few blocks keep a small collective's barrier cheap, many keep a large
// one at the memory's speed.
constexpr size_t kBytesPerBlock = 64 * 1024;

void* advance(void* base, size_t bytes) { return static_cast<uint8_t*>(base) + bytes; }

const char* failureName(SignalFailure failure) {
  switch (failure) {
    case SignalFailure::Timeout: return "timed out";
    case SignalFailure::Mismatch: return "found another collective";
    case SignalFailure::PeerFailed: return "stopped: a peer's kernel failed";
    case SignalFailure::Stopped: return "stopped by its host";
    default: return "failed";
  }
}

}  // namespace

SignalGroup::SignalGroup(int rank, int size, int device, const SignalGroupOptions& options)
    : rank_(rank), size_(size), device_(device), options_(options), mappings_(device) {}

std::unique_ptr<SignalGroup> SignalGroup::setUp(int rank, int size, int device,
                                                const SignalGroupOptions& options,
                                                const RecordExchange& exchange,
                                                std::string* why) {
  std::unique_ptr<SignalGroup> self;
  std::string failure;
  SetupRecord mine;
  if (size > kSignalRanks) {
    failure = "the device-flags path takes at most " + std::to_string(kSignalRanks) + " ranks";
  } else if (options.bufferBytes % 4096 != 0 || options.bufferBytes == 0) {
    failure = "RINGREDUCE_CUDA_BUFFER_BYTES must be a positive multiple of 4096";
  } else {
    try {
      self.reset(new SignalGroup(rank, size, device, options));
      DeviceScope scope(device);
      const size_t bytes = signalRegionBytes(options.bufferBytes);
      checkCuda(cudaMalloc(&self->region_, bytes), "cudaMalloc (device-flags region)");
      cudaStream_t side;
      checkCuda(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking),
                "cudaStreamCreateWithFlags");
      self->sideStream_ = side;
      checkCuda(cudaMemsetAsync(self->region_, 0, bytes, side), "cudaMemsetAsync");
      checkCuda(cudaStreamSynchronize(side), "cudaStreamSynchronize");
      checkCuda(cudaHostAlloc(reinterpret_cast<void**>(&self->status_),
                              sizeof(SignalStatus) * kSignalBlocks, cudaHostAllocMapped),
                "cudaHostAlloc (device-flags status)");
      std::fill(self->status_, self->status_ + kSignalBlocks, SignalStatus{0, 0});
      checkCuda(cudaHostGetDevicePointer(reinterpret_cast<void**>(&self->statusOnDevice_),
                                         self->status_, 0),
                "cudaHostGetDevicePointer");
      std::string exportWhy;
      mine.region = exportRange(device, self->region_, &exportWhy);
      if (!mine.region.ok) failure = "cannot share the device-flags region: " + exportWhy;
    } catch (const std::exception& e) {
      failure = e.what();
      mine.region.ok = 0;
    }
  }
  // Round 1: the regions, or "failed". Every rank takes part either way.
  std::vector<SetupRecord> all(size);
  exchange(&mine, all.data(), sizeof(SetupRecord));
  for (int q = 0; q < size && failure.empty(); ++q) {
    if (!all[q].region.ok) failure = "rank " + std::to_string(q) + " could not set up";
  }
  if (failure.empty()) {
    try {
      self->regions_.resize(size);
      for (int q = 0; q < size; ++q) {
        self->regions_[q] = q == rank ? self->region_ : self->mappings_.map(all[q].region);
      }
    } catch (const std::exception& e) {
      failure = e.what();
    }
  }
  // Round 2: did every rank map every region?
  const uint8_t opened = failure.empty() ? 1 : 0;
  std::vector<uint8_t> allOpened(size);
  exchange(&opened, allOpened.data(), 1);
  for (int q = 0; q < size && failure.empty(); ++q) {
    if (!allOpened[q]) failure = "rank " + std::to_string(q) + " could not map its peers' regions";
  }
  if (!failure.empty()) {
    if (why) *why = failure;
    // Peers may have mapped this region: it is kept (never freed while
    // mapped), as the destructor of a group that did not close does.
    return nullptr;
  }
  return self;
}

SignalGroup::~SignalGroup() {
  // Only a closed group frees its memory (close()); otherwise a peer may
  // still map it or a kernel still use it, and it is left to the process.
}

SignalView SignalGroup::view(const Call& call) const {
  SignalView v;
  for (int p = 0; p < size_; ++p) v.regions[p] = regions_[p];
  v.status = statusOnDevice_;
  v.bufferBytes = options_.bufferBytes;
  v.timeoutNs = static_cast<uint64_t>(call.timeout.count()) * 1000 * 1000;
  v.fingerprint = call.fingerprint;
  v.rank = rank_;
  v.nranks = size_;
  return v;
}

int SignalGroup::blocksFor(size_t bytes) const {
  const size_t wanted = (bytes + kBytesPerBlock - 1) / kBytesPerBlock;
  return static_cast<int>(std::clamp<size_t>(wanted, 1, static_cast<size_t>(options_.maxBlocks)));
}

void* SignalGroup::bufferOf(int rank, SignalBuffer kind, uint32_t parity) const {
  return signalBuffer<uint8_t>(regions_[rank], options_.bufferBytes, kind, parity);
}

void SignalGroup::noteStream(void* stream) { streams_.note(stream); }

void SignalGroup::launch(SignalOp op, DataType type, ReduceOp reduceOp, const Call& call) {
  noteStream(call.stream);
  launchSignalOp(view(call), op, type, reduceOp, device_, call.stream);
}

DevicePathTaken SignalGroup::allreduce(const void* input, void* output, size_t count,
                                       DataType type, ReduceOp op, const Call& call) {
  const size_t bytes = count * elementSize(type);
  if (bytes > options_.bufferBytes) {
    throw InvalidArgument("ringreduce: device-flags allreduce of " + std::to_string(bytes) +
                          " bytes exceeds the " + std::to_string(options_.bufferBytes) +
                          "-byte buffers");
  }
  const bool twoShot = bytes > options_.oneShotBytes && size_ > 1;
  if (count == 0) return twoShot ? DevicePathTaken::FlagsTwoShot : DevicePathTaken::FlagsOneShot;
  if (options_.sync == CudaSync::StreamMemOps) {
    memOpsAllreduce(input, output, count, type, op, twoShot, call);
  } else {
    SignalOp s;
    s.kind = twoShot ? SignalKind::TwoShot : SignalKind::OneShot;
    s.input = input;
    s.output = output;
    s.count = count;
    s.avgDivisor = op == ReduceOp::Avg ? size_ : 0;
    s.nblocks = blocksFor(bytes);
    s.aligned = packAligned(input) && packAligned(output);
    launch(s, type, op, call);
  }
  return twoShot ? DevicePathTaken::FlagsTwoShot : DevicePathTaken::FlagsOneShot;
}

void SignalGroup::allreduceInPlace(void* const* tensors, size_t count, DataType type,
                                   ReduceOp op, bool aligned, const Call& call) {
  if (count == 0) return;
  if (options_.sync == CudaSync::StreamMemOps) {
    memOpsInPlace(tensors, count, type, op, call);
    return;
  }
  SignalOp s;
  s.kind = SignalKind::InPlaceTwoShot;
  s.input = s.output = tensors[rank_];
  for (int p = 0; p < size_; ++p) s.tensors[p] = tensors[p];
  s.count = count;
  s.avgDivisor = op == ReduceOp::Avg ? size_ : 0;
  s.nblocks = blocksFor(count * elementSize(type));
  s.aligned = aligned;
  launch(s, type, op, call);
}

void SignalGroup::allgather(const void* input, void* output, size_t countPerRank, DataType type,
                            const Call& call) {
  const size_t bytes = countPerRank * elementSize(type);
  if (bytes > options_.bufferBytes) {
    throw InvalidArgument("ringreduce: device-flags all_gather of " + std::to_string(bytes) +
                          " bytes per rank exceeds the buffers");
  }
  if (countPerRank == 0) return;
  if (options_.sync == CudaSync::StreamMemOps) {
    memOpsAllgather(input, output, countPerRank, type, call);
    return;
  }
  SignalOp s;
  s.kind = SignalKind::Allgather;
  s.input = input;
  s.output = output;
  s.count = countPerRank;
  s.nblocks = blocksFor(bytes * size_);
  s.aligned = packAligned(input) && packAligned(output) && bytes % 16 == 0;
  launch(s, type, ReduceOp::Sum, call);
}

void SignalGroup::reduceScatter(const void* input, void* output, size_t countPerRank,
                                DataType type, ReduceOp op, const Call& call) {
  const size_t bytes = countPerRank * elementSize(type);
  if (bytes * size_ > options_.bufferBytes) {
    throw InvalidArgument("ringreduce: device-flags reduce_scatter of " +
                          std::to_string(bytes * size_) + " bytes exceeds the buffers");
  }
  if (countPerRank == 0) return;
  if (options_.sync == CudaSync::StreamMemOps) {
    memOpsReduceScatter(input, output, countPerRank, type, op, call);
    return;
  }
  SignalOp s;
  s.kind = SignalKind::ReduceScatter;
  s.input = input;
  s.output = output;
  s.count = countPerRank;
  s.avgDivisor = op == ReduceOp::Avg ? size_ : 0;
  s.nblocks = blocksFor(bytes * size_);
  s.aligned = packAligned(input) && packAligned(output) && bytes % 16 == 0;
  launch(s, type, op, call);
}

// --- stream memory operations (ranks time-sliced on one GPU) -------------

// Writes my arrival into every peer's pad, then waits for theirs in mine:
// the same parity rule as the flags (signal_pad.h), with the host's count.
void SignalGroup::memOpsBarrier(void* stream, int barrier, uint32_t collective) {
  const uint32_t parity = collective & 1;
  for (int p = 0; p < size_; ++p) {
    if (p == rank_) continue;
    auto* pad = static_cast<SignalPad*>(regions_[p]);
    streamWriteValue32(stream, &pad->streamArrivals[barrier][parity][rank_], collective);
  }
  auto* mine = static_cast<SignalPad*>(region_);
  for (int p = 0; p < size_; ++p) {
    if (p != rank_) streamWaitValue32(stream, &mine->streamArrivals[barrier][parity][p], collective);
  }
}

void SignalGroup::memOpsAllreduce(const void* input, void* output, size_t count, DataType type,
                                  ReduceOp op, bool twoShot, const Call& call) {
  DeviceScope scope(device_);
  noteStream(call.stream);
  const uint32_t collective = ++hostCollectives_;
  const uint32_t parity = collective & 1;
  const size_t esize = elementSize(type);
  copyOnStream(device_, bufferOf(rank_, SignalBuffer::In, parity), input, count * esize,
               call.stream);
  memOpsBarrier(call.stream, 0, collective);
  ReduceCopyArgs args;
  args.srcType = args.dstType = type;
  args.op = op;
  args.avgDivisor = op == ReduceOp::Avg ? size_ : 0;
  args.stop = &static_cast<SignalPad*>(region_)->stop;
  args.nsrc = size_;
  if (!twoShot) {
    for (int p = 0; p < size_; ++p) args.srcs[p] = bufferOf(p, SignalBuffer::In, parity);
    args.dsts[0] = output;
    args.ndst = 1;
    args.count = count;
    launchReduceCopy(args, device_, call.stream);
  } else {
    const ElementRange slice = alignedPart(count, size_, rank_, std::max<size_t>(1, 16 / esize));
    args.count = slice.end - slice.begin;
    for (int p = 0; p < size_; ++p) {
      args.srcs[p] = advance(bufferOf(p, SignalBuffer::In, parity), slice.begin * esize);
      args.dsts[p] = advance(bufferOf(p, SignalBuffer::Out, parity), slice.begin * esize);
    }
    args.ndst = size_;
    launchReduceCopy(args, device_, call.stream);
    memOpsBarrier(call.stream, 1, collective);
    copyOnStream(device_, output, bufferOf(rank_, SignalBuffer::Out, parity), count * esize,
                 call.stream);
  }
  watchMemOps(call);
}

void SignalGroup::memOpsInPlace(void* const* tensors, size_t count, DataType type, ReduceOp op,
                                const Call& call) {
  DeviceScope scope(device_);
  noteStream(call.stream);
  const uint32_t collective = ++hostCollectives_;
  const size_t esize = elementSize(type);
  memOpsBarrier(call.stream, 0, collective);
  const ElementRange slice = alignedPart(count, size_, rank_, std::max<size_t>(1, 16 / esize));
  ReduceCopyArgs args;
  args.srcType = args.dstType = type;
  args.op = op;
  args.avgDivisor = op == ReduceOp::Avg ? size_ : 0;
  args.stop = &static_cast<SignalPad*>(region_)->stop;
  args.count = slice.end - slice.begin;
  for (int p = 0; p < size_; ++p) {
    args.srcs[p] = advance(tensors[p], slice.begin * esize);
    args.dsts[p] = advance(tensors[p], slice.begin * esize);
  }
  args.nsrc = args.ndst = size_;
  launchReduceCopy(args, device_, call.stream);
  memOpsBarrier(call.stream, 1, collective);
  watchMemOps(call);
}

void SignalGroup::memOpsAllgather(const void* input, void* output, size_t countPerRank,
                                  DataType type, const Call& call) {
  DeviceScope scope(device_);
  noteStream(call.stream);
  const uint32_t collective = ++hostCollectives_;
  const uint32_t parity = collective & 1;
  const size_t bytes = countPerRank * elementSize(type);
  copyOnStream(device_, bufferOf(rank_, SignalBuffer::In, parity), input, bytes, call.stream);
  memOpsBarrier(call.stream, 0, collective);
  // Through the reduce-copy kernel (one source: a copy), which does nothing
  // once `stop` is set, so a released wait never reads a dead peer.
  ReduceCopyArgs args;
  args.srcType = args.dstType = DataType::UInt8;
  args.stop = &static_cast<SignalPad*>(region_)->stop;
  args.count = bytes;
  args.nsrc = args.ndst = 1;
  for (int p = 0; p < size_; ++p) {
    args.srcs[0] = bufferOf(p, SignalBuffer::In, parity);
    args.dsts[0] = advance(output, p * bytes);
    launchReduceCopy(args, device_, call.stream);
  }
  watchMemOps(call);
}

void SignalGroup::memOpsReduceScatter(const void* input, void* output, size_t countPerRank,
                                      DataType type, ReduceOp op, const Call& call) {
  DeviceScope scope(device_);
  noteStream(call.stream);
  const uint32_t collective = ++hostCollectives_;
  const uint32_t parity = collective & 1;
  const size_t bytes = countPerRank * elementSize(type);
  copyOnStream(device_, bufferOf(rank_, SignalBuffer::In, parity), input, bytes * size_,
               call.stream);
  memOpsBarrier(call.stream, 0, collective);
  ReduceCopyArgs args;
  args.srcType = args.dstType = type;
  args.op = op;
  args.avgDivisor = op == ReduceOp::Avg ? size_ : 0;
  args.stop = &static_cast<SignalPad*>(region_)->stop;
  args.count = countPerRank;
  for (int p = 0; p < size_; ++p) {
    args.srcs[p] = advance(bufferOf(p, SignalBuffer::In, parity), rank_ * bytes);
  }
  args.nsrc = size_;
  args.dsts[0] = output;
  args.ndst = 1;
  launchReduceCopy(args, device_, call.stream);
  watchMemOps(call);
}

// An event after the collective, and its deadline: a stream-memops wait has
// no deadline of its own, so failure() reports one that is overdue.
void SignalGroup::watchMemOps(const Call& call) {
  std::lock_guard<std::mutex> lock(watchMutex_);
  while (!pending_.empty() && cudaEventQuery(static_cast<cudaEvent_t>(pending_.front().event)) ==
                                  cudaSuccess) {
    freeEvents_.push_back(pending_.front().event);
    pending_.pop_front();
  }
  (void)cudaGetLastError();  // cudaErrorNotReady is not an error
  void* event = nullptr;
  if (!freeEvents_.empty()) {
    event = freeEvents_.back();
    freeEvents_.pop_back();
  } else {
    cudaEvent_t created;
    checkCuda(cudaEventCreateWithFlags(&created, cudaEventDisableTiming), "cudaEventCreate");
    event = created;
  }
  checkCuda(cudaEventRecord(static_cast<cudaEvent_t>(event), static_cast<cudaStream_t>(call.stream)),
            "cudaEventRecord");
  pending_.push_back({event, std::chrono::steady_clock::now() + call.timeout, hostCollectives_});
}

std::string SignalGroup::failure() {
  for (int b = 0; b < kSignalBlocks; ++b) {
    const uint64_t word = reinterpret_cast<volatile SignalStatus*>(status_)[b].word;
    const SignalFailure what = statusFailure(word);
    if (what == SignalFailure::None) continue;
    const uint64_t seen = reinterpret_cast<volatile SignalStatus*>(status_)[b].seen;
    std::string text = "rank " + std::to_string(rank_) + "'s device collective #" +
                       std::to_string(statusCollective(word)) + " " + failureName(what);
    switch (what) {
      case SignalFailure::Timeout:
        text += " waiting for rank " + std::to_string(statusPeer(word)) + " (barrier " +
                std::to_string(statusBarrier(word)) + ", block " +
                std::to_string(statusBlock(word)) + ")";
        break;
      case SignalFailure::Mismatch:
        text += ": rank " + std::to_string(statusPeer(word)) +
                " ran a different collective as the same one (fingerprint " +
                std::to_string(static_cast<uint32_t>(seen)) + " there, here another)";
        break;
      case SignalFailure::PeerFailed:
        text += " (rank " + std::to_string(statusPeer(word)) + ")";
        break;
      default:
        break;
    }
    return text;
  }
  std::lock_guard<std::mutex> lock(watchMutex_);
  if (!memOpsFailure_.empty()) return memOpsFailure_;
  while (!pending_.empty()) {
    const Pending& oldest = pending_.front();
    const cudaError_t state = cudaEventQuery(static_cast<cudaEvent_t>(oldest.event));
    if (state == cudaSuccess) {
      freeEvents_.push_back(oldest.event);
      pending_.pop_front();
      continue;
    }
    (void)cudaGetLastError();
    if (std::chrono::steady_clock::now() > oldest.deadline) {
      memOpsFailure_ = "rank " + std::to_string(rank_) + "'s device collective #" +
                       std::to_string(oldest.collective) +
                       " (stream memory operations) timed out: a peer did not arrive";
    }
    break;
  }
  return memOpsFailure_;
}

void SignalGroup::stop() {
  std::lock_guard<std::mutex> lock(watchMutex_);
  if (stopped_ || region_ == nullptr) return;
  stopped_ = true;
  try {
    DeviceScope scope(device_);
    auto* pad = static_cast<SignalPad*>(region_);
    // Nonzero bytes make nonzero words: `stop` ends this rank's waits and
    // kernels, `failed` the peers' waits for this rank.
    const auto side = static_cast<cudaStream_t>(sideStream_);
    checkCuda(cudaMemsetAsync(&pad->stop, 1, sizeof(uint32_t), side), "cudaMemsetAsync (stop)");
    checkCuda(cudaMemsetAsync(&pad->failed, 1, sizeof(uint32_t), side),
              "cudaMemsetAsync (failed)");
    if (options_.sync == CudaSync::StreamMemOps && streamMemOpsAvailable(nullptr)) {
      // Release this rank's stuck waits: a count far ahead of any it waits
      // for, in every slot of its own pad (the waits compare cyclically).
      // The kernels behind them see `stop` first (same side stream, in
      // order) and do nothing, so no dead peer's memory is read.
      const uint32_t ahead = hostCollectives_ + (1u << 30);
      for (int barrier = 0; barrier < kSignalBarriers; ++barrier) {
        for (uint32_t parity = 0; parity < 2; ++parity) {
          for (int p = 0; p < size_; ++p) {
            streamWriteValue32(sideStream_, &pad->streamArrivals[barrier][parity][p], ahead);
          }
        }
      }
    }
  } catch (const std::exception&) {
    // The group is failing already; the kernels still end at their deadline.
  }
}

bool SignalGroup::close(const RecordExchange& exchange, std::chrono::milliseconds limit) {
  bool ok = false;
  try {
    DeviceScope scope(device_);
    ok = streams_.waitAll(limit);
    if (ok) mappings_.closeAll();
  } catch (const std::exception&) {
    ok = false;
  }
  // Every rank takes part, whatever happened here: a peer frees its region
  // only once every rank has said it no longer maps it.
  const uint8_t closedHere = ok ? 1 : 0;
  std::vector<uint8_t> all(size_);
  try {
    exchange(&closedHere, all.data(), 1);
  } catch (const std::exception&) {
    return false;
  }
  for (uint8_t closed : all) {
    if (!closed) return false;
  }
  DeviceScope scope(device_);
  std::lock_guard<std::mutex> lock(watchMutex_);
  for (const Pending& p : pending_) (void)cudaEventDestroy(static_cast<cudaEvent_t>(p.event));
  for (void* e : freeEvents_) (void)cudaEventDestroy(static_cast<cudaEvent_t>(e));
  pending_.clear();
  freeEvents_.clear();
  (void)cudaFree(region_);
  (void)cudaFreeHost(status_);
  (void)cudaStreamDestroy(static_cast<cudaStream_t>(sideStream_));
  region_ = nullptr;
  closed_ = true;
  return true;
}

}  // namespace ringreduce::cuda
