// The memory a group's ranks on one host share: one anonymous shared-memory
// file (memfd), created by rank 0, opened by the others through rank 0's fd
// (/proc/PID/fd/N) and mapped once by every rank, every page of it in the
// rank's page tables from the start (no fault inside a collective); rank 0 closes its fd as
// soon as every rank has mapped it. It never has a name in /dev/shm (so
// nothing can be left there, whenever a rank is killed, and Docker's
// --shm-size does not bound it), and it goes with the last mapping. Its layout: a header, then per
// rank a few cache lines only that rank writes (its flags, where it is, its
// state), then per rank two data buffers (consecutive small collectives
// alternate between them, so no rank waits for its peers to finish reading
// the previous one: see algorithms/host_channel/allreduce.h).
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
// reads them), and when it announced it (the steady clock's nanoseconds:
// CLOCK_MONOTONIC, one clock for every process on the host). `seq` is
// written last (release) and read first (acquire).
struct alignas(kCacheLine) PositionLine {
  std::atomic<uint64_t> seq{0};
  std::atomic<uint32_t> word{0};
  std::atomic<uint32_t> detailBytes{0};
  static constexpr size_t kDetailBytes = 40;
  std::atomic<uint64_t> detail[kDetailBytes / 8]{};
  std::atomic<int64_t> announcedAt{0};
};
static_assert(sizeof(PositionLine) == kCacheLine, "a position is one cache line");

// A rank's sequence-numbered flag, alone on its cache line: the peers poll
// it. `words[turn & 1]` is the fingerprint of the collective whose data the
// flag announces for that turn, written before `value` (release), so that a
// peer can tell that the data it is about to read is of the same collective
// as its own. One word per parity: a reader that took `value` at turn k
// reads word k's slot, which the writer fills again only for turn k + 2,
// after the reader has published turn k + 1 (so a reader never pairs turn
// k's value with turn k + 1's word).
struct alignas(kCacheLine) FlagLine {
  std::atomic<uint64_t> value{0};
  std::atomic<uint32_t> words[2]{};
  // The CPU the rank ran on when it last set the flag (sched_getcpu; -1:
  // never): a peer waiting for the next turn reads whether they share a
  // core (HostChannel::awaitPeers).
  std::atomic<int32_t> cpu{-1};
  // Two words a rank gives with its flag for a turn, per parity as `words`
  // (so with the same lifetime): what a collective says beside its data
  // without taking a buffer's bytes (the large broadcast's root: how its
  // message goes, and where its tensor lies). Written before `value`.
  std::atomic<uint64_t> notes[2][2]{};
};
static_assert(sizeof(FlagLine) == kCacheLine, "a flag is one cache line");

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
  // Bumped whenever the lines' layout or meaning changes, so that ranks of
  // two builds that lay it out differently fail at open (the header
  // differs) instead of reading each other's words wrong. 002: two notes
  // per flag and parity (FlagLine::notes, the large broadcast's form).
  static constexpr uint64_t kMagic = 0x7272736867303032ull;  // "rrshg002"

  // The most a buffer may hold (RINGREDUCE_SHM_BYTES is checked against it).
  static constexpr size_t kMaxBufferBytes = size_t{1} << 30;

  // Rank 0: creates and maps a new object of the size that `ranks` ranks
  // with `bufferBytes` per buffer need, under a fresh random name. Throws
  // Error naming the call that failed (memfd_create, ftruncate,
  // posix_fallocate — which fails here, not with a SIGBUS at first touch,
  // when memory is short — or mmap).
  static HostSegment create(int ranks, size_t bufferBytes);
  // The other ranks: maps the object rank 0 created, through `path` (its
  // path()). Throws Error.
  static HostSegment open(const std::string& name, const std::string& path, int ranks,
                          size_t bufferBytes);
  HostSegment() = default;
  HostSegment(HostSegment&& other) noexcept;
  HostSegment& operator=(HostSegment&& other) noexcept;
  ~HostSegment();

  // Closes the door (rank 0, once every rank has mapped or given up): its
  // fd, through which the others opened it. The mappings stay valid until
  // each rank unmaps.
  void unlink();
  // Unique to this segment ("ringreduce-PID-RANDOM"; the doorbells' names
  // derive from it).
  const std::string& name() const { return name_; }
  // Where the others open it, until unlink(): "/proc/PID/fd/N".
  const std::string& path() const { return path_; }
  bool mapped() const { return base_ != nullptr; }

  RankLines& lines(int rank) const;
  // Buffer `parity` (0 or 1) of `rank`, bufferBytes() long, page aligned.
  char* buffer(int rank, int parity) const;
  size_t bufferBytes() const { return bufferBytes_; }
  int ranks() const { return ranks_; }

  // Throws Error for a buffer above kMaxBufferBytes.
  static size_t bytesFor(int ranks, size_t bufferBytes);

 private:
  static HostSegment map(int fd, const std::string& name, int ranks, size_t bufferBytes);
  void release();

  std::string name_;
  std::string path_;
  int fd_ = -1;  // rank 0's, until unlink()
  char* base_ = nullptr;
  size_t bytes_ = 0;
  size_t bufferBytes_ = 0;
  int ranks_ = 0;
};

}  // namespace ringreduce
