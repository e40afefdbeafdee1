// The memory a group's ranks on one host share (host_segment.h)
#include "transport/host/host_segment.h"

#include <fcntl.h>
#include <limits.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <new>
#include <random>

#include "core/base/errors.h"

namespace ringreduce {

namespace {

static_assert(std::atomic<uint64_t>::is_always_lock_free, "shared words must be lock-free");
static_assert(std::atomic<uint32_t>::is_always_lock_free, "shared words must be lock-free");

constexpr size_t kPage = 4096;

struct alignas(kCacheLine) Header {
  uint64_t magic;
  uint64_t ranks;
  uint64_t bufferBytes;
};

size_t roundUp(size_t value, size_t to) { return (value + to - 1) / to * to; }

size_t linesOffset() { return sizeof(Header); }
size_t buffersOffset(int ranks) {
  return roundUp(linesOffset() + sizeof(RankLines) * static_cast<size_t>(ranks), kPage);
}

std::string freshName() {
  std::random_device random;
  const uint64_t word = (static_cast<uint64_t>(random()) << 32) ^ random();
  char name[64];
  std::snprintf(name, sizeof(name), "ringreduce-%d-%016llx", static_cast<int>(getpid()),
                static_cast<unsigned long long>(word));
  return name;
}

[[noreturn]] void fail(const std::string& what, int error) {
  throw Error("ringreduce: host shared memory: " + what + " failed: " + std::strerror(error));
}

}  // namespace

size_t HostSegment::bytesFor(int ranks, size_t bufferBytes) {
  if (ranks <= 0 || bufferBytes > kMaxBufferBytes) {
    throw Error("ringreduce: host shared memory: " + std::to_string(bufferBytes) +
                " bytes per buffer is more than the " + std::to_string(kMaxBufferBytes) +
                " allowed");
  }
  // Bounded operands: at most 2^30 per buffer, 2^16 ranks, so no overflow.
  return buffersOffset(ranks) + roundUp(bufferBytes, kPage) * 2 * static_cast<size_t>(ranks);
}

HostSegment HostSegment::create(int ranks, size_t bufferBytes) {
  const std::string name = freshName();
  const size_t bytes = bytesFor(ranks, bufferBytes);
  // An anonymous file: it has no name in /dev/shm or anywhere, and goes
  // with the last process that maps it or holds its fd, however that
  // process ends (SIGKILL in the middle of the set-up included).
  const int fd = memfd_create(name.c_str(), MFD_CLOEXEC);
  if (fd < 0) fail("memfd_create(" + name + ")", errno);
  // Reserved now: shared memory pages are otherwise allocated at first
  // touch, and a memory limit too small for them would kill the process
  // with SIGBUS in the middle of a collective.
  int error = ftruncate(fd, static_cast<off_t>(bytes)) == 0 ? 0 : errno;
  if (error == 0) error = posix_fallocate(fd, 0, static_cast<off_t>(bytes));
  if (error != 0) {
    ::close(fd);
    fail("reserving " + std::to_string(bytes) + " bytes of shared memory for " + name, error);
  }
  HostSegment segment = map(fd, name, ranks, bufferBytes);
  // The others open it through this process's fd until unlink() closes it.
  segment.fd_ = fd;
  segment.path_ = "/proc/" + std::to_string(getpid()) + "/fd/" + std::to_string(fd);
  auto* header = new (segment.base_) Header{kMagic, static_cast<uint64_t>(ranks), bufferBytes};
  (void)header;
  for (int r = 0; r < ranks; ++r) {
    new (segment.base_ + linesOffset() + sizeof(RankLines) * static_cast<size_t>(r)) RankLines();
  }
  return segment;
}

HostSegment HostSegment::open(const std::string& name, const std::string& path, int ranks,
                              size_t bufferBytes) {
  const int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) fail("opening rank 0's " + name + " through " + path, errno);
  struct stat info {};
  if (fstat(fd, &info) != 0 || static_cast<size_t>(info.st_size) != bytesFor(ranks, bufferBytes)) {
    ::close(fd);
    throw Error("ringreduce: host shared memory: " + name + " has " +
                std::to_string(info.st_size) + " bytes, expected " +
                std::to_string(bytesFor(ranks, bufferBytes)));
  }
  HostSegment segment = map(fd, name, ranks, bufferBytes);
  ::close(fd);  // the mapping keeps the memory
  const auto* header = reinterpret_cast<const Header*>(segment.base_);
  if (header->magic != kMagic || header->ranks != static_cast<uint64_t>(ranks) ||
      header->bufferBytes != bufferBytes) {
    throw Error("ringreduce: host shared memory: " + name +
                " is not this group's segment (its header differs)");
  }
  return segment;
}

HostSegment HostSegment::map(int fd, const std::string& name, int ranks, size_t bufferBytes) {
  const size_t bytes = bytesFor(ranks, bufferBytes);
  // MAP_POPULATE: every page is in this rank's page tables before the first
  // collective. The pages exist already (posix_fallocate), but each mapping
  // takes a minor fault at its first touch of each one, and the turns move
  // round the buffers (HostChannel::takeTurn), so without it a 4 KiB
  // allreduce touched two fresh pages per call for the first 512 calls and
  // smaller ones now and then for thousands: 2 faults a call took a 4 KiB
  // allreduce from 6 to 27-50 us on the 2-vCPU EPYC VM (2026-12-04), both
  // ranks in the call together. Populating 4 MiB (world 2, the default
  // buffers) is one pass in the kernel at the group's first collective.
  void* base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  if (base == MAP_FAILED) {
    const int error = errno;
    ::close(fd);
    fail("mmap of " + std::to_string(bytes) + " bytes of " + name, error);
  }
  HostSegment segment;
  segment.name_ = name;
  segment.base_ = static_cast<char*>(base);
  segment.bytes_ = bytes;
  segment.bufferBytes_ = bufferBytes;
  segment.ranks_ = ranks;
  return segment;
}

HostSegment::HostSegment(HostSegment&& other) noexcept { *this = std::move(other); }

HostSegment& HostSegment::operator=(HostSegment&& other) noexcept {
  if (this != &other) {
    release();
    name_ = std::move(other.name_);
    path_ = std::move(other.path_);
    fd_ = other.fd_;
    base_ = other.base_;
    bytes_ = other.bytes_;
    bufferBytes_ = other.bufferBytes_;
    ranks_ = other.ranks_;
    other.fd_ = -1;
    other.base_ = nullptr;
  }
  return *this;
}

HostSegment::~HostSegment() { release(); }

void HostSegment::release() {
  unlink();
  if (base_ != nullptr) munmap(base_, bytes_);
  base_ = nullptr;
}

void HostSegment::unlink() {
  if (fd_ < 0) return;
  ::close(fd_);
  fd_ = -1;
  path_.clear();
}

RankLines& HostSegment::lines(int rank) const {
  return *reinterpret_cast<RankLines*>(base_ + linesOffset() +
                                       sizeof(RankLines) * static_cast<size_t>(rank));
}

char* HostSegment::buffer(int rank, int parity) const {
  const size_t stride = roundUp(bufferBytes_, kPage);
  return base_ + buffersOffset(ranks_) + (static_cast<size_t>(rank) * 2 + parity) * stride;
}

}  // namespace ringreduce
