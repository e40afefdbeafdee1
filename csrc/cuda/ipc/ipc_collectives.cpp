// Collectives among one node's ranks on buffers shared through CUDA IPC (ipc_collectives.h)
#include "cuda/ipc/ipc_collectives.h"

#include <algorithm>

#include "core/base/errors.h"
#include "core/plan/partition.h"
#include "cuda/ipc/unmap_with_every_rank.h"
#include "cuda/peer_probe.h"

namespace ringreduce::cuda {

namespace {

// What every rank tells the others once, at setup.
struct SetupRecord {
  ExportedRange scratch;
  IpcHandle before{};
  IpcHandle after{};
};

// Elements per 16 bytes: slice boundaries on these keep vector loads aligned.
size_t vectorElements(DataType type) {
  return std::max<size_t>(1, 16 / elementSize(type));
}

void* advance(void* base, size_t bytes) { return static_cast<uint8_t*>(base) + bytes; }

// A reduction of `count` elements over the group's `size` ranks (AVG divides
// by the group size in the store); the caller fills in the pointers.
ReduceCopyArgs reductionOf(DataType type, ReduceOp op, size_t count, int size) {
  ReduceCopyArgs args;
  args.count = count;
  args.srcType = args.dstType = type;
  args.op = op;
  args.avgDivisor = op == ReduceOp::Avg ? size : 0;
  return args;
}

}  // namespace

IpcCollectives::IpcCollectives(int rank, int size, int device, size_t scratchBytes)
    : rank_(rank),
      size_(size),
      device_(device),
      scratch_(device, scratchBytes),
      before_(device),
      after_(device),
      mappings_(device) {}

std::unique_ptr<IpcCollectives> IpcCollectives::setUp(int rank, int size, int device,
                                                  size_t scratchBytes,
                                                  const RecordExchange& exchange,
                                                  std::string* why) {
  std::unique_ptr<IpcCollectives> self;
  std::string failure;
  SetupRecord mine;
  if (size > kMaxFanout) {
    failure = "the CUDA IPC path takes at most " + std::to_string(kMaxFanout) + " ranks";
  } else {
    try {
      self.reset(new IpcCollectives(rank, size, device, scratchBytes));
      mine.scratch = self->scratch_.exported();
      mine.before = self->before_.handle();
      mine.after = self->after_.handle();
    } catch (const std::exception& e) {
      failure = e.what();
      mine.scratch.ok = 0;
    }
  }
  // Round 1: handles, or "failed" (ok = 0). Every rank takes part either way.
  std::vector<SetupRecord> all(size);
  exchange(&mine, all.data(), sizeof(SetupRecord));
  for (int q = 0; q < size && failure.empty(); ++q) {
    if (!all[q].scratch.ok) failure = "rank " + std::to_string(q) + " could not set up CUDA IPC";
  }
  if (failure.empty()) {
    try {
      self->openPeers(all.data());
    } catch (const std::exception& e) {
      failure = e.what();
    }
  }
  // Round 2: did every rank open every peer's buffer and events?
  const uint8_t opened = failure.empty() ? 1 : 0;
  std::vector<uint8_t> allOpened(size);
  exchange(&opened, allOpened.data(), 1);
  for (int q = 0; q < size && failure.empty(); ++q) {
    if (!allOpened[q]) failure = "rank " + std::to_string(q) + " could not open its peers' CUDA IPC handles";
  }
  // Does every pair really reach the other's scratch through the mappings?
  if (failure.empty()) {
    failure = probePeerAccess(
        PeerProbe{rank, size, device, self->peerScratch_.data(), std::chrono::seconds(30)},
        exchange);
  }
  if (!failure.empty()) {
    if (why) *why = failure;
    return nullptr;
  }
  return self;
}

void IpcCollectives::openPeers(const void* records) {
  const auto* all = static_cast<const SetupRecord*>(records);
  peerScratch_.resize(size_);
  peersBefore_.resize(size_);
  peersAfter_.resize(size_);
  for (int q = 0; q < size_; ++q) {
    if (q == rank_) {
      peerScratch_[q] = scratch_.data();
      continue;
    }
    peerScratch_[q] = mappings_.map(all[q].scratch);
    peersBefore_[q] = std::make_unique<PeerEvent>(device_, all[q].before);
    peersAfter_[q] = std::make_unique<PeerEvent>(device_, all[q].after);
  }
}

IpcCollectives::~IpcCollectives() = default;

size_t IpcCollectives::stagedCapacity(DataType wire) const {
  const size_t unit = vectorElements(wire) * static_cast<size_t>(size_);
  const size_t elems = scratch_.bytes() / 2 / elementSize(wire);
  return elems / unit * unit;
}

void IpcCollectives::barrier(SharedEvent& mine, std::vector<std::unique_ptr<PeerEvent>>& theirs,
                           void* stream, const RecordExchange& exchange, const void* record,
                           void* all, size_t bytes) {
  mine.record(stream);  // before the message: a peer's wait must see this record
  exchange(record, all, bytes);
  for (int q = 0; q < size_; ++q) {
    if (q != rank_) theirs[q]->waitOn(stream);
  }
}

void IpcCollectives::copyCast(const void* src, DataType from, void* dst, DataType to,
                            size_t count, int avgDivisor, void* stream) {
  if (from == to && avgDivisor <= 1) {
    copyOnStream(device_, dst, src, count * elementSize(from), stream);
    return;
  }
  launchCast(src, from, dst, to, count, avgDivisor, device_, stream);
}

DevicePathTaken IpcCollectives::allreduce(void* data, size_t count, DataType type, ReduceOp op,
                                          DataType wire, DevicePathTaken wanted, void* stream,
                                          const RecordExchange& exchange) {
  if (count == 0) return wanted;
  if (!kernelSupports(type, type, op)) {
    throw InvalidArgument("ringreduce: " + kernelUnsupportedReason(type, type, op));
  }
  if (wire != type && !kernelSupports(type, wire, op)) wire = type;
  // Every input here is the same on all ranks (count, types, algorithm), so
  // every rank takes the same branch; only the two-shot's "can every tensor
  // be shared" is learned in the exchange, and all ranks learn it alike.
  if (wanted == DevicePathTaken::OneShot && count <= stagedCapacity(wire)) {
    oneShot(data, count, type, op, wire, stream, exchange);
    return DevicePathTaken::OneShot;
  }
  if (wanted == DevicePathTaken::TwoShot && wire == type &&
      twoShotInPlace(data, count, type, op, stream, exchange)) {
    return DevicePathTaken::TwoShot;
  }
  staged(data, count, type, op, wire, stream, exchange);
  return DevicePathTaken::Staged;
}

void IpcCollectives::oneShot(void* data, size_t count, DataType type, ReduceOp op, DataType wire,
                           void* stream, const RecordExchange& exchange) {
  streams_.note(stream);
  copyCast(data, type, scratch_.data(), wire, count, 0, stream);
  ExportedRange token, all[kMaxFanout];
  barrier(before_, peersBefore_, stream, exchange, &token, all, sizeof(token));
  ReduceCopyArgs args = reductionOf(wire, op, count, size_);
  args.dstType = type;  // widened back from the wire dtype in the store
  for (int q = 0; q < size_; ++q) args.srcs[q] = peerScratch_[q];
  args.nsrc = size_;
  args.dsts[0] = data;
  args.ndst = 1;
  launchReduceCopy(args, device_, stream);
  // No rank may overwrite its scratch (next call) while a peer still reads it.
  barrier(after_, peersAfter_, stream, exchange, &token, all, sizeof(token));
}

bool IpcCollectives::shareBefore(const void* ptr, void* stream, const RecordExchange& exchange,
                                std::vector<void*>& peers) {
  streams_.note(stream);
  std::string why;
  ExportedRange mine = exportRange(device_, ptr, &why);
  if (mine.ok && exportGuard_ && !exportGuard_(ptr)) mine.ok = 0;
  before_.record(stream);
  peers.assign(size_, nullptr);
  // Nobody waits on this round's events when the sharing fails (on every
  // rank alike), so skipping them is safe.
  if (!sharing_.share(const_cast<void*>(ptr), mine, 1, exchange, peers.data())) return false;
  for (int q = 0; q < size_; ++q) {
    if (q != rank_) peersBefore_[q]->waitOn(stream);
  }
  return true;
}

void IpcCollectives::afterBarrier(void* stream, const RecordExchange& exchange) {
  ExportedRange token, all[kMaxFanout];
  barrier(after_, peersAfter_, stream, exchange, &token, all, sizeof(token));
}

bool IpcCollectives::twoShotInPlace(void* data, size_t count, DataType type, ReduceOp op,
                                    void* stream, const RecordExchange& exchange) {
  std::vector<void*> tensors;
  if (!shareBefore(data, stream, exchange, tensors)) return false;
  // Rank r owns slice r: it alone reads that slice of every tensor and then
  // writes the result back to all of them, so in place is safe.
  const size_t esize = elementSize(type);
  const Range slice = alignedChunkOf(count, size_, rank_, vectorElements(type));
  ReduceCopyArgs args = reductionOf(type, op, slice.count, size_);
  for (int q = 0; q < size_; ++q) {
    args.srcs[q] = advance(tensors[q], slice.offset * esize);
    args.dsts[q] = advance(tensors[q], slice.offset * esize);
  }
  args.nsrc = args.ndst = size_;
  launchReduceCopy(args, device_, stream);
  // No rank may use its tensor before every slice has been written into it.
  afterBarrier(stream, exchange);
  return true;
}

bool IpcCollectives::reduceScatter(const void* input, void* output, size_t countPerRank,
                                   DataType type, ReduceOp op, void* stream,
                                   const RecordExchange& exchange) {
  if (!kernelSupports(type, type, op)) {
    throw InvalidArgument("ringreduce: " + kernelUnsupportedReason(type, type, op));
  }
  std::vector<void*> inputs;
  if (!shareBefore(input, stream, exchange, inputs)) return false;
  ReduceCopyArgs args = reductionOf(type, op, countPerRank, size_);
  const size_t blockBytes = countPerRank * elementSize(type);
  for (int q = 0; q < size_; ++q) {
    args.srcs[q] = advance(inputs[q], static_cast<size_t>(rank_) * blockBytes);
  }
  args.nsrc = size_;
  args.dsts[0] = output;
  args.ndst = 1;
  launchReduceCopy(args, device_, stream);
  // The peers may not change their inputs before every rank has read its block.
  afterBarrier(stream, exchange);
  return true;
}

bool IpcCollectives::allgather(const void* input, void* output, size_t countPerRank,
                               DataType type, void* stream, const RecordExchange& exchange) {
  std::vector<void*> inputs;
  if (!shareBefore(input, stream, exchange, inputs)) return false;
  const size_t blockBytes = countPerRank * elementSize(type);
  for (int q = 0; q < size_; ++q) {
    void* block = advance(output, static_cast<size_t>(q) * blockBytes);
    if (block == inputs[q] || blockBytes == 0) continue;  // in place: already there
    copyOnStream(device_, block, inputs[q], blockBytes, stream);
  }
  afterBarrier(stream, exchange);
  return true;
}

bool IpcCollectives::broadcast(void* data, size_t count, DataType type, int root, void* stream,
                               const RecordExchange& exchange) {
  std::vector<void*> tensors;
  if (!shareBefore(data, stream, exchange, tensors)) return false;
  const size_t bytes = count * elementSize(type);
  if (rank_ != root && bytes > 0) {
    copyOnStream(device_, data, tensors[root], bytes, stream);
  }
  // The root may not change its tensor before every rank has copied it.
  afterBarrier(stream, exchange);
  return true;
}

void IpcCollectives::staged(void* data, size_t count, DataType type, ReduceOp op, DataType wire,
                          void* stream, const RecordExchange& exchange) {
  streams_.note(stream);
  const size_t capacity = stagedCapacity(wire);
  if (capacity == 0) throw Error("ringreduce: the CUDA scratch buffer is too small");
  const size_t esize = elementSize(type);
  const size_t wsize = elementSize(wire);
  const size_t outputHalf = scratch_.bytes() / 2;
  ExportedRange token, all[kMaxFanout];
  for (size_t done = 0; done < count; done += capacity) {
    const size_t n = std::min(capacity, count - done);
    copyCast(advance(data, done * esize), type, scratch_.data(), wire, n, 0, stream);
    barrier(before_, peersBefore_, stream, exchange, &token, all, sizeof(token));
    const Range slice = alignedChunkOf(n, size_, rank_, vectorElements(wire));
    ReduceCopyArgs args = reductionOf(wire, op, slice.count, size_);
    for (int q = 0; q < size_; ++q) {
      args.srcs[q] = advance(peerScratch_[q], slice.offset * wsize);
      args.dsts[q] = advance(peerScratch_[q], outputHalf + slice.offset * wsize);
    }
    args.nsrc = args.ndst = size_;
    launchReduceCopy(args, device_, stream);
    barrier(after_, peersAfter_, stream, exchange, &token, all, sizeof(token));
    copyCast(advance(scratch_.data(), outputHalf), wire, advance(data, done * esize), type, n, 0,
             stream);
  }
}

}  // namespace ringreduce::cuda

namespace ringreduce::cuda {

bool IpcCollectives::close(const RecordExchange& exchange, std::chrono::milliseconds limit) {
  if (!unmapWithEveryRank(mappings_, streams_, device_, size_, exchange, limit)) return false;
  scratch_.release();  // freed with this object
  return true;
}

}  // namespace ringreduce::cuda
