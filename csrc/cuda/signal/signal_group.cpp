// The device-flags path of one process group (signal_group.h)
#include "cuda/signal/signal_group.h"

#include "cuda/peer_probe.h"

#include <algorithm>

#include "core/base/errors.h"
#include "cuda/kernels/reduce_copy.h"
#include "cuda/ipc/unmap_with_every_rank.h"
#include "cuda/own_stream.h"
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
      self->region_ =
          std::make_unique<DeviceBuffer>(device, signalRegionBytes(options.bufferBytes));
      self->sideStream_ = createOwnStream(device);
      fillOnStream(device, self->region_->data(), 0, self->region_->bytes(), self->sideStream_);
      synchronizeStream(device, self->sideStream_);
      self->status_ = std::make_unique<PinnedMirror>(device, sizeof(SignalStatus) * kSignalBlocks);
      mine.region = self->region_->exported();
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
        self->regions_[q] = q == rank ? self->region_->data() : self->mappings_.map(all[q].region);
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
  // Round 3 (three exchanges): does every pair really reach the other's
  // region through the mappings? Probed in the first input buffer, which no
  // collective has used yet.
  if (failure.empty()) {
    std::vector<void*> areas(size);
    for (int q = 0; q < size; ++q) {
      areas[q] = signalBuffer<uint8_t>(self->regions_[q], options.bufferBytes, SignalBuffer::In, 0);
    }
    failure = probePeerAccess(PeerProbe{rank, size, device, areas.data(), options.probeLimit},
                              exchange);
  }
  if (!failure.empty()) {
    if (why) *why = failure;
    // Peers may have mapped this region: it is kept (never freed while
    // mapped), as the destructor of a group that did not close does.
    return nullptr;
  }
  self->cacheView();
  return self;
}

// A region that was shared is freed only after close() released it (its
// DeviceBuffer keeps it otherwise): a peer may still map it or a kernel
// still use it. The side stream goes with the process too, unless closed.
SignalGroup::~SignalGroup() = default;

void SignalGroup::cacheView() {
  for (int p = 0; p < size_; ++p) view_.regions[p] = regions_[p];
  view_.status = static_cast<SignalStatus*>(status_->device());
  view_.bufferBytes = options_.bufferBytes;
  view_.rank = rank_;
  view_.nranks = size_;
}

SignalView SignalGroup::view(const Call& call) const {
  SignalView v = view_;
  v.timeoutNs = static_cast<uint64_t>(call.timeout.count()) * 1000 * 1000;
  v.fingerprint = call.fingerprint;
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
  // Nothing to move: no elements, or one rank in place (any reduction of
  // one value, AVG's division by one included, is the value).
  if (count == 0 || (size_ == 1 && input == output)) {
    return twoShot ? DevicePathTaken::FlagsTwoShot : DevicePathTaken::FlagsOneShot;
  }
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

// Writes my fingerprint and arrival into every peer's pad, then waits for
// theirs in mine: the same parity rule as the flags (signal_pad.h), with
// the host's count; a peer's different fingerprint never satisfies the
// wait, so another collective ends at the deadline (failure()), never in a
// wrong result.
void SignalGroup::memOpsBarrier(void* stream, int barrier, uint32_t collective,
                                uint32_t fingerprint) {
  const uint32_t parity = collective & 1;
  for (int p = 0; p < size_; ++p) {
    if (p == rank_) continue;
    auto* pad = static_cast<SignalPad*>(regions_[p]);
    streamWriteValue32(stream, &pad->streamFingerprints[barrier][parity][rank_], fingerprint);
    streamWriteValue32(stream, &pad->streamArrivals[barrier][parity][rank_], collective);
  }
  auto* mine = static_cast<SignalPad*>(region_->data());
  for (int p = 0; p < size_; ++p) {
    if (p == rank_) continue;
    streamWaitValue32(stream, &mine->streamArrivals[barrier][parity][p], collective);
    streamWaitValue32Equal(stream, &mine->streamFingerprints[barrier][parity][p], fingerprint);
  }
}

void SignalGroup::memOpsAllreduce(const void* input, void* output, size_t count, DataType type,
                                  ReduceOp op, bool twoShot, const Call& call) {
  noteStream(call.stream);
  const uint32_t collective = ++hostCollectives_;
  const uint32_t parity = collective & 1;
  const size_t esize = elementSize(type);
  copyOnStream(device_, bufferOf(rank_, SignalBuffer::In, parity), input, count * esize,
               call.stream);
  memOpsBarrier(call.stream, 0, collective, call.fingerprint);
  ReduceCopyArgs args;
  args.srcType = args.dstType = type;
  args.op = op;
  args.avgDivisor = op == ReduceOp::Avg ? size_ : 0;
  args.stop = &static_cast<SignalPad*>(region_->data())->stop;
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
    memOpsBarrier(call.stream, 1, collective, call.fingerprint);
    copyOnStream(device_, output, bufferOf(rank_, SignalBuffer::Out, parity), count * esize,
                 call.stream);
  }
  watchMemOps(call);
}

void SignalGroup::memOpsInPlace(void* const* tensors, size_t count, DataType type, ReduceOp op,
                                const Call& call) {
  noteStream(call.stream);
  const uint32_t collective = ++hostCollectives_;
  const size_t esize = elementSize(type);
  memOpsBarrier(call.stream, 0, collective, call.fingerprint);
  const ElementRange slice = alignedPart(count, size_, rank_, std::max<size_t>(1, 16 / esize));
  ReduceCopyArgs args;
  args.srcType = args.dstType = type;
  args.op = op;
  args.avgDivisor = op == ReduceOp::Avg ? size_ : 0;
  args.stop = &static_cast<SignalPad*>(region_->data())->stop;
  args.count = slice.end - slice.begin;
  for (int p = 0; p < size_; ++p) {
    args.srcs[p] = advance(tensors[p], slice.begin * esize);
    args.dsts[p] = advance(tensors[p], slice.begin * esize);
  }
  args.nsrc = args.ndst = size_;
  launchReduceCopy(args, device_, call.stream);
  memOpsBarrier(call.stream, 1, collective, call.fingerprint);
  watchMemOps(call);
}

void SignalGroup::memOpsAllgather(const void* input, void* output, size_t countPerRank,
                                  DataType type, const Call& call) {
  noteStream(call.stream);
  const uint32_t collective = ++hostCollectives_;
  const uint32_t parity = collective & 1;
  const size_t bytes = countPerRank * elementSize(type);
  copyOnStream(device_, bufferOf(rank_, SignalBuffer::In, parity), input, bytes, call.stream);
  memOpsBarrier(call.stream, 0, collective, call.fingerprint);
  // Through the reduce-copy kernel (one source: a copy), which does nothing
  // once `stop` is set, so a released wait never reads a dead peer.
  ReduceCopyArgs args;
  args.srcType = args.dstType = DataType::UInt8;
  args.stop = &static_cast<SignalPad*>(region_->data())->stop;
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
  noteStream(call.stream);
  const uint32_t collective = ++hostCollectives_;
  const uint32_t parity = collective & 1;
  const size_t bytes = countPerRank * elementSize(type);
  copyOnStream(device_, bufferOf(rank_, SignalBuffer::In, parity), input, bytes * size_,
               call.stream);
  memOpsBarrier(call.stream, 0, collective, call.fingerprint);
  ReduceCopyArgs args;
  args.srcType = args.dstType = type;
  args.op = op;
  args.avgDivisor = op == ReduceOp::Avg ? size_ : 0;
  args.stop = &static_cast<SignalPad*>(region_->data())->stop;
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
  retireReached();
  void* mark = nullptr;
  if (spareMarks_.empty()) {
    mark = recordMark(device_, call.stream);
  } else {
    mark = spareMarks_.back();
    recordMarkAgain(mark, call.stream);
    spareMarks_.pop_back();
  }
  pending_.push_back({mark, std::chrono::steady_clock::now() + call.timeout, hostCollectives_});
  fingerprints_[hostCollectives_ & 1] = call.fingerprint;
}

void SignalGroup::retireReached() {
  size_t reached = 0;
  while (reached < pending_.size() && markReached(pending_[reached].mark)) {
    spareMarks_.push_back(pending_[reached].mark);
    ++reached;
  }
  pending_.erase(pending_.begin(), pending_.begin() + static_cast<std::ptrdiff_t>(reached));
}

std::string SignalGroup::failure() {
  const auto* status = static_cast<volatile SignalStatus*>(status_->host());
  for (int b = 0; b < kSignalBlocks; ++b) {
    const uint64_t word = status[b].word;
    const SignalFailure what = statusFailure(word);
    if (what == SignalFailure::None) continue;
    const uint64_t seen = status[b].seen;
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
  retireReached();
  if (!pending_.empty()) {
    const Pending& oldest = pending_.front();
    if (std::chrono::steady_clock::now() > oldest.deadline) {
      memOpsFailure_ = "rank " + std::to_string(rank_) + "'s device collective #" +
                       std::to_string(oldest.collective) +
                       " (stream memory operations) timed out: a peer did not arrive, or "
                       "ran another collective there (another op, dtype, size or reduce op)";
    }
  }
  return memOpsFailure_;
}

void SignalGroup::stop() {
  std::lock_guard<std::mutex> lock(watchMutex_);
  if (stopped_ || !region_) return;
  stopped_ = true;
  try {
    auto* pad = static_cast<SignalPad*>(region_->data());
    // Nonzero bytes make nonzero words: `stop` ends this rank's waits and
    // kernels, `failed` the peers' waits for this rank.
    fillOnStream(device_, &pad->stop, 1, sizeof(uint32_t), sideStream_);
    fillOnStream(device_, &pad->failed, 1, sizeof(uint32_t), sideStream_);
    if (options_.sync == CudaSync::StreamMemOps) {
      // Release this rank's stuck waits: a count far ahead of any it waits
      // for, in every slot of its own pad (the waits compare cyclically).
      // The kernels behind them see `stop` first (same side stream, in
      // order) and do nothing, so no dead peer's memory is read.
      // The fingerprint waits compare exactly: they get the fingerprints
      // of the last collective of each parity, the only ones that can be
      // waiting (a wait for an older one would have had to pass first).
      const uint32_t ahead = hostCollectives_ + (1u << 30);
      for (int barrier = 0; barrier < kSignalBarriers; ++barrier) {
        for (uint32_t parity = 0; parity < 2; ++parity) {
          for (int p = 0; p < size_; ++p) {
            streamWriteValue32(sideStream_, &pad->streamFingerprints[barrier][parity][p],
                               fingerprints_[parity]);
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
  if (!unmapWithEveryRank(mappings_, streams_, device_, size_, exchange, limit)) return false;
  std::lock_guard<std::mutex> lock(watchMutex_);
  for (const Pending& p : pending_) freeMark(p.mark);
  pending_.clear();
  for (void* mark : spareMarks_) freeMark(mark);
  spareMarks_.clear();
  region_->release();  // no rank maps it any more: freed with the object
  region_.reset();
  destroyOwnStream(device_, sideStream_);
  sideStream_ = nullptr;
  return true;
}

}  // namespace ringreduce::cuda
