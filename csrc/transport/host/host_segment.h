// The memory a group's ranks on one host share: one POSIX shared-memory
// object, created by rank 0, mapped once by every rank when the group is
// made, and unlinked as soon as every rank has mapped it (so nothing is
// left in /dev/shm, even after a crash). Its layout: a header, then per
// rank a few cache lines only that rank writes (its flags, where it is, its
// state), then per rank two data buffers (consecutive small collectives
// alternate between them, so no rank waits for its peers to finish reading
// the previous one: see algorithms/shared_memory_allreduce.h).
//
// No torch, no UCX: plain memory and the words the ranks synchronise on.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>

namespace ringreduce {

constexpr size_t kCacheLine = 64;

// What a rank announces at the start of every collective, whichever way it
// runs: its sequence number, its fingerprint word and the fingerprint's
// fields (opaque here: the engine writes them, a peer's mismatch message
// reads them). `seq` is written last (release) and read first (acquire).
struct alignas(kCacheLine) PositionLine {
  std::atomic<uint64_t> seq{0};
  std::atomic<uint32_t> word{0};
  std::atomic<uint32_t> detailBytes{0};
  static constexpr size_t kDetailBytes = 40;
  std::atomic<uint64_t> detail[kDetailBytes / 8]{};
};

// A rank's sequence-numbered flag, alone on its cache line: the peers poll
// it. `word` is the fingerprint of the collective whose data the flag
// announces, written before `value` (release), so that a peer can tell
// that the data it is about to read is of the same collective as its own.
struct alignas(kCacheLine) FlagLine {
  std::atomic<uint64_t> value{0};
  std::atomic<uint32_t> word{0};
};

enum class RankState : uint32_t { Active = 0, Left = 1, Failed = 2 };

// What a rank says about itself apart from its flags.
struct alignas(kCacheLine) ControlLine {
  // Nonzero while the rank sleeps on its doorbell: a peer that sets a flag
  // then rings it (host_channel.h's protocol).
  std::atomic<uint32_t> asleep{0};
  std::atomic<uint32_t> state{static_cast<uint32_t>(RankState::Active)};
  // Failed: the collective it was in (its position) when it gave up; a
  // peer's collective before that one still completes with its data.
  std::atomic<uint64_t> failedAt{0};
  std::atomic<uint64_t> pid{0};
  std::atomic<uint64_t> pidNamespace{0};  // inode of /proc/self/ns/pid
  std::atomic<uint64_t> netNamespace{0};  // inode of /proc/self/ns/net (abstract sockets)
};

// Why a rank failed, written before its state says Failed.
struct alignas(kCacheLine) ReasonLines {
  static constexpr size_t kBytes = 448;
  char text[kBytes];
};

// Per rank; its flags indexed by FlagKind (host_channel.h).
struct RankLines {
  static constexpr int kFlags = 2;
  FlagLine flags[kFlags];
  PositionLine position;
  ControlLine control;
  ReasonLines reason;
};

class HostSegment {
 public:
  static constexpr uint64_t kMagic = 0x7272736867303031ull;  // "rrshg001"

  // Rank 0: creates and maps a new object of the size that `ranks` ranks
  // with `bufferBytes` per buffer need, under a fresh random name. Throws
  // Error naming the call that failed (shm_open, ftruncate, posix_fallocate
  // — which fails here, not with a SIGBUS at first touch, when /dev/shm is
  // too small — or mmap).
  static HostSegment create(int ranks, size_t bufferBytes);
  // The other ranks: maps the object rank 0 created. Throws Error.
  static HostSegment open(const std::string& name, int ranks, size_t bufferBytes);
  HostSegment() = default;
  HostSegment(HostSegment&& other) noexcept;
  HostSegment& operator=(HostSegment&& other) noexcept;
  ~HostSegment();

  // Removes the name (rank 0, once every rank has mapped or given up). The
  // mappings stay valid until each rank unmaps.
  void unlink();
  const std::string& name() const { return name_; }
  bool mapped() const { return base_ != nullptr; }

  RankLines& lines(int rank) const;
  // Buffer `parity` (0 or 1) of `rank`, bufferBytes() long, page aligned.
  char* buffer(int rank, int parity) const;
  size_t bufferBytes() const { return bufferBytes_; }
  int ranks() const { return ranks_; }

  static size_t bytesFor(int ranks, size_t bufferBytes);

 private:
  static HostSegment map(int fd, const std::string& name, int ranks, size_t bufferBytes,
                         bool created);
  void release();

  std::string name_;
  bool linked_ = false;
  char* base_ = nullptr;
  size_t bytes_ = 0;
  size_t bufferBytes_ = 0;
  int ranks_ = 0;
};

}  // namespace ringreduce
