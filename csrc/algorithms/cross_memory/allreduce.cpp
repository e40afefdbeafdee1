// The cma allreduce: process_vm_readv/writev between ranks on one host (allreduce.h)
#include "algorithms/cross_memory/allreduce.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "algorithms/record_allgather.h"
#include "algorithms/cross_memory/stop_words.h"
#include "core/base/errors.h"
#include "core/math/host_reduce.h"
#include "core/plan/partition.h"
#include "core/observe/phase_recorder.h"
#include "transport/cross_memory.h"
#include "transport/host/host_channel.h"
#include "transport/tag.h"

namespace ringreduce {

namespace {

// Bytes read from a peer and reduced at a time: fewer system calls per byte
// against a scratch, and a reduced segment that its writes read back, that
// leave the core's caches. On a 2-vCPU Xeon 6 VM (2026-12-07) 256 KiB took
// 20-30% less than 1 MiB from 8 MiB up at world 2 and 4, and 512 KiB half
// that (benchmarks/RESULTS.md, cma); on a 2-vCPU AMD EPYC (2026-11-26) 256
// KiB moved 64 MiB at world 2 in 6.9-7.0 ms, 512 KiB and 1 MiB in 6.4-6.8;
// on a 2-vCPU EPYC Zen 3 (2026-12-07) 256 KiB and 1 MiB alike within the
// runs' spread at world 2 and 4 from 8 MiB, 512 KiB 5-15% faster at world 2.
constexpr size_t kSegmentBytes = size_t{256} << 10;

// Tag slots of this algorithm.
constexpr uint32_t kBufferRound = 0;
constexpr uint32_t kStopRound = 1;
// How long a failed rank still waits, past the deadline, for the peers that
// entered the collective to finish the segment they may be copying.
constexpr auto kStopGrace = std::chrono::milliseconds(100);

// What each rank tells the others at the start.
struct BufferRecord {
  uint64_t address = 0;  // where its buffer starts
  uint64_t count = 0;
  uint32_t type = 0;     // DataType
  uint32_t op = 0;       // ReduceOp
};

class CrossMemoryAllreduce {
 public:
  CrossMemoryAllreduce(const Comm& comm, const OpContext& op, const ReductionArgs& args,
                       const PeerProcesses& peers)
      : comm_(comm), op_(op), args_(args), peers_(peers), n_(comm.size()), rank_(comm.rank()),
        esize_(elementSize(args.type)) {}

  void run() {
    StopWords words(comm_.transport, op_, kStopRound);
    try {
      exchangeBuffers();
      reduceMyBlock(words);
      words.finish();
    } catch (const std::exception& e) {
      // Wait for the peers that entered this collective (their buffer came)
      // and so may be copying into mine, before the caller gets it back.
      // Past the deadline still a moment: a peer finishing its segment.
      words.stopAfterFailure(entered_, std::max(op_.deadline, Clock::now() + kStopGrace),
                             e.what());
      throw;
    }
  }

 private:
  // Each rank's buffer. Its arrival also says that the peer has entered
  // this collective, so its buffer holds its input.
  void exchangeBuffers() {
    const BufferRecord mine{reinterpret_cast<uintptr_t>(args_.data), args_.count,
                            static_cast<uint32_t>(args_.type), static_cast<uint32_t>(args_.op)};
    buffers_.resize(static_cast<size_t>(n_));
    exchangeRecords(comm_, op_, kBufferRound, &mine, buffers_.data(), sizeof(mine), &entered_);
    throwUnlessAllAlike();
  }

  // Only this rank touches block r of any buffer: nobody else reads the
  // peers' segments read here, or writes where the result goes.
  void reduceMyBlock(StopWords& words) {
    const Range block = chunkOf(args_.count, n_, rank_);
    const size_t perSegment = std::max<size_t>(1, kSegmentBytes / esize_);
    char* scratch = static_cast<char*>(
        comm_.workspace.get(Workspace::kRecvA, std::min(block.count, perSegment) * esize_));
    const int divisor = args_.op == ReduceOp::Avg ? n_ : 0;
    for (size_t done = 0; done < block.count; done += perSegment) {
      stopIfTheGroupFailed(words);
      const size_t offset = (block.offset + done) * esize_;
      const size_t count = std::min(perSegment, block.count - done);
      char* segment = static_cast<char*>(args_.data) + offset;
      for (int i = 1; i < n_; ++i) {
        const int q = (rank_ + i) % n_;
        copy(q, /*write=*/false, offset, scratch, count * esize_);
        PhaseScope reducing(op_.phases, Phase::Reduce);
        if (i == n_ - 1 && divisor != 0) {
          reduceAndAverage(args_.type, segment, scratch, count, divisor);
        } else {
          reduceInto(args_.type, args_.op, segment, scratch, count);
        }
      }
      for (int i = 1; i < n_; ++i) {
        copy((rank_ + i) % n_, /*write=*/true, offset, segment, count * esize_);
      }
    }
  }

  // Before each segment: the copies need no peer, so nothing else would
  // notice a peer that died, failed or gave up, or the op's deadline, until
  // the last words. A peer that failed before this rank even started (it
  // came late) has its "failed" waiting here.
  void stopIfTheGroupFailed(StopWords& words) {
    Transport& t = comm_.transport;
    words.throwIfAPeerFailed();  // progresses the transport too
    t.checkPeersAlive(-1, op_);
    if (t.aborted()) throw TransportError("ringreduce: " + op_.describe() + ": " + t.abortReason());
    if (Clock::now() >= op_.deadline) {
      throw TimeoutError("ringreduce: " + op_.describe() + " timed out on rank " +
                         std::to_string(rank_) + " while reducing its block");
    }
  }

  // A rank that called with another size would have this one read and
  // write past the end of its buffer: every rank checks every record, so all
  // of them raise the same error before any copy (the tag's 8-bit
  // fingerprint of the collective could collide).
  void throwUnlessAllAlike() const {
    const BufferRecord& first = buffers_[0];  // every rank compares with rank 0: one message
    for (int q = 1; q < n_; ++q) {
      const BufferRecord& theirs = buffers_[static_cast<size_t>(q)];
      if (theirs.count == first.count && theirs.type == first.type && theirs.op == first.op) {
        continue;
      }
      const auto describe = [](const BufferRecord& r) {
        return std::to_string(r.count) + " elements of " +
               dataTypeName(static_cast<DataType>(r.type)) + " (" +
               reduceOpName(static_cast<ReduceOp>(r.op)) + ")";
      };
      throw InvalidArgument("ringreduce: " + op_.describe() + ": the ranks' tensors differ: rank 0 has " +
                            describe(first) + ", rank " + std::to_string(q) + " " +
                            describe(theirs));
    }
  }

  void copy(int q, bool write, size_t offset, void* local, size_t bytes) {
    const int pid = peers_.pids[static_cast<size_t>(q)];
    const uint64_t remote = buffers_[static_cast<size_t>(q)].address + offset;
    const int error = write ? crossMemoryWrite(pid, remote, local, bytes)
                            : crossMemoryRead(pid, remote, local, bytes);
    if (error == 0) return;
    comm_.transport.checkPeersAlive(q, op_);  // a peer known dead: its own message
    // A peer that gave up (another rank died) and freed its buffer: its
    // reason, where the host channel tells it before the UCX announcement.
    if (comm_.channel != nullptr) comm_.channel->throwIfGaveUp(q, op_);
    const std::string what = std::string(write ? "writing into" : "reading") + " its buffer (pid " +
                             std::to_string(pid) + ") failed: " + std::strerror(error);
    throw TransportError("ringreduce: " + op_.describe() + " on rank " + std::to_string(rank_) +
                         " failed: rank " + std::to_string(q) +
                         (error == ESRCH ? " is gone (its process no longer exists; " + what + ")"
                                         : ": " + what));
  }

  const Comm& comm_;
  const OpContext& op_;
  const ReductionArgs& args_;
  const PeerProcesses& peers_;
  const int n_;
  const int rank_;
  const size_t esize_;
  std::vector<BufferRecord> buffers_;  // by rank
  std::vector<bool> entered_ = std::vector<bool>(static_cast<size_t>(n_), false);  // buffer came
};

}  // namespace

void crossMemoryAllreduce(const Comm& comm, const OpContext& op, const ReductionArgs& args,
                          const PeerProcesses& peers) {
  if (!peers.usable) {
    throw InvalidArgument(std::string("ringreduce: ") + op.opName +
                          ": the cma algorithm needs every rank's memory within reach: " +
                          (peers.why.empty() ? "not learnt for this group" : peers.why));
  }
  if (comm.size() == 1 || args.count == 0) return;
  CrossMemoryAllreduce(comm, op, args, peers).run();
}

}  // namespace ringreduce
