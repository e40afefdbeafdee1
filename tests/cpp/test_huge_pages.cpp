// Caller buffers on 2 MiB pages (core/base/huge_pages.h): which buffers the
// advisor collapses and when, what the kernel then holds, and that the host
// collectives hand it their buffers.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "algorithms/allreduce.h"
#include "algorithms/scatter_gather.h"
#include "core/base/huge_pages.h"
#include "rank_threads.h"

#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25
#endif

namespace ringreduce {
namespace {

struct Call {
  const void* data;
  size_t bytes;
};

// An advisor whose collapses are only recorded. Each answers `outcome`;
// by default the first call of a buffer moves it and later ones find it
// huge, as the kernel does for memory that stays.
struct RecordingAdvisor {
  std::vector<Call> calls;
  std::vector<CollapseOutcome> outcomes;  // answers in turn; then AlreadyHuge
  HugePageAdvisor advisor{[this](const void* data, size_t bytes) {
    const bool again = std::any_of(calls.begin(), calls.end(),
                                   [&](const Call& c) { return c.data == data; });
    calls.push_back({data, bytes});
    if (!outcomes.empty()) {
      const CollapseOutcome next = outcomes.front();
      outcomes.erase(outcomes.begin());
      return next;
    }
    return again ? CollapseOutcome::AlreadyHuge : CollapseOutcome::Moved;
  }};
  size_t callsFor(const void* data) const {
    return static_cast<size_t>(std::count_if(
        calls.begin(), calls.end(), [&](const Call& c) { return c.data == data; }));
  }
};

const char* fakeAddress(uintptr_t value) { return reinterpret_cast<const char*>(value); }

TEST(HugePages, InteriorIsTheWholeHugePagesInside) {
  const uintptr_t huge = kHugePageBytes;
  PageRange r = hugePageInterior(fakeAddress(huge + 1), 3 * huge);
  EXPECT_EQ(r.begin, 2 * huge);
  EXPECT_EQ(r.bytes, 2 * huge);  // [2, 4) of [1+, 4+)
  r = hugePageInterior(fakeAddress(2 * huge), 2 * huge);
  EXPECT_EQ(r.begin, 2 * huge);
  EXPECT_EQ(r.bytes, 2 * huge);
  EXPECT_EQ(hugePageInterior(fakeAddress(huge + 1), huge).bytes, 0u);  // no whole page
  EXPECT_EQ(hugePageInterior(nullptr, 8 * huge).bytes, 0u);
}

TEST(HugePages, ABufferIsCollapsedTheSecondTimeItComesAndOnlyThen) {
  RecordingAdvisor r;
  const char* buffer = fakeAddress(64u << 20);
  const size_t bytes = 8u << 20;
  EXPECT_FALSE(r.advisor.noteCallerBuffer(buffer, bytes));
  EXPECT_TRUE(r.calls.empty());
  EXPECT_TRUE(r.advisor.noteCallerBuffer(buffer, bytes));
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].data, buffer);
  EXPECT_EQ(r.calls[0].bytes, bytes);
  // Later sightings only ask whether it is still huge (microseconds).
  for (int i = 0; i < 5; ++i) EXPECT_FALSE(r.advisor.noteCallerBuffer(buffer, bytes));
  EXPECT_EQ(r.calls.size(), 6u);
}

// torch freed the tensor and the next one of its size came back at the same
// address: new memory on 4 KiB pages, moved again; but a buffer that is new
// memory at every sighting is moved at most kMaxMoves more times.
TEST(HugePages, NewMemoryAtAKnownAddressIsMovedAgainButNotEveryTime) {
  RecordingAdvisor r;
  const char* buffer = fakeAddress(64u << 20);
  const size_t bytes = 8u << 20;
  r.advisor.noteCallerBuffer(buffer, bytes);
  EXPECT_TRUE(r.advisor.noteCallerBuffer(buffer, bytes));  // first collapse
  EXPECT_FALSE(r.advisor.noteCallerBuffer(buffer, bytes));  // still huge
  r.outcomes = {CollapseOutcome::Moved};                     // replaced once
  EXPECT_TRUE(r.advisor.noteCallerBuffer(buffer, bytes));
  EXPECT_FALSE(r.advisor.noteCallerBuffer(buffer, bytes));  // huge again
  // From now on new memory at every sighting.
  r.outcomes.assign(10, CollapseOutcome::Moved);
  int moved = 0;
  for (int i = 0; i < 10; ++i) moved += r.advisor.noteCallerBuffer(buffer, bytes) ? 1 : 0;
  EXPECT_EQ(moved, HugePageAdvisor::kMaxMoves - 1);  // one move was spent above
  EXPECT_EQ(r.callsFor(buffer), 1u + 1u + 1u + 1u + (HugePageAdvisor::kMaxMoves - 1));
}

// Memory the kernel will not move (pinned, an old kernel) costs no further calls.
TEST(HugePages, ABufferTheKernelRefusedIsNotAskedAgain) {
  RecordingAdvisor r;
  const char* buffer = fakeAddress(64u << 20);
  const size_t bytes = 8u << 20;
  r.outcomes = {CollapseOutcome::Refused};
  r.advisor.noteCallerBuffer(buffer, bytes);
  EXPECT_TRUE(r.advisor.noteCallerBuffer(buffer, bytes));  // asked, refused
  for (int i = 0; i < 5; ++i) EXPECT_FALSE(r.advisor.noteCallerBuffer(buffer, bytes));
  EXPECT_EQ(r.calls.size(), 1u);
}

TEST(HugePages, SmallBuffersAndNewSizesAreNotCollapsed) {
  RecordingAdvisor r;
  const char* buffer = fakeAddress(64u << 20);
  const size_t small = HugePageAdvisor::kMinBytes - 1;
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(r.advisor.noteCallerBuffer(buffer, small));
  EXPECT_EQ(r.advisor.buffersSeen(), 0u);
  // The same address with another length is another buffer: seen once each.
  EXPECT_FALSE(r.advisor.noteCallerBuffer(buffer, 8u << 20));
  EXPECT_FALSE(r.advisor.noteCallerBuffer(buffer, 16u << 20));
  EXPECT_FALSE(r.advisor.noteCallerBuffer(nullptr, 16u << 20));  // payload-free runs
  EXPECT_TRUE(r.calls.empty());
}

TEST(HugePages, AtMostMaxBuffersAreEverCollapsed) {
  RecordingAdvisor r;
  const size_t bytes = HugePageAdvisor::kMinBytes;
  const auto address = [&](size_t i) { return fakeAddress((i + 1) * (bytes << 1)); };
  const size_t tried = HugePageAdvisor::kMaxBuffers + 10;
  for (int pass = 0; pass < 3; ++pass) {
    for (size_t i = 0; i < tried; ++i) r.advisor.noteCallerBuffer(address(i), bytes);
  }
  EXPECT_EQ(r.advisor.buffersSeen(), tried);  // the last 10 wait as candidates
  EXPECT_EQ(r.advisor.buffersCollapsed(), HugePageAdvisor::kMaxBuffers);
  // Pass 2 collapsed the first kMaxBuffers, pass 3 asked them again; the
  // rest were never asked.
  ASSERT_EQ(r.calls.size(), 2 * HugePageAdvisor::kMaxBuffers);
  for (size_t i = 0; i < tried; ++i) {
    EXPECT_EQ(r.callsFor(address(i)), i < HugePageAdvisor::kMaxBuffers ? 2u : 0u) << i;
  }
}

// A model's broadcast at start or an evaluation pass hands over many large
// buffers once; the training loop's buffers that come later and come back
// must still be collapsed.
TEST(HugePages, OneOffBuffersDoNotKeepLaterRecurringOnesFromCollapsing) {
  RecordingAdvisor r;
  const size_t bytes = HugePageAdvisor::kMinBytes;
  const auto address = [&](size_t i) { return fakeAddress((i + 1) * (bytes << 1)); };
  const size_t oneOff = HugePageAdvisor::kMaxCandidates + 100;
  for (size_t i = 0; i < oneOff; ++i) EXPECT_FALSE(r.advisor.noteCallerBuffer(address(i), bytes));
  EXPECT_EQ(r.advisor.buffersSeen(), HugePageAdvisor::kMaxCandidates);
  const char* bucket = address(oneOff);
  EXPECT_FALSE(r.advisor.noteCallerBuffer(bucket, bytes));
  EXPECT_TRUE(r.advisor.noteCallerBuffer(bucket, bytes));
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].data, bucket);
  // The least recently seen candidates made room, a recent one is still known.
  EXPECT_TRUE(r.advisor.noteCallerBuffer(address(oneOff - 1), bytes));
  EXPECT_FALSE(r.advisor.noteCallerBuffer(address(0), bytes));
  EXPECT_EQ(r.calls.size(), 2u);
  EXPECT_EQ(r.advisor.buffersSeen(), HugePageAdvisor::kMaxCandidates + 1);  // address(0) again
}

// AnonHugePages (kB) of the mapping that holds `address`, from /proc/self/smaps.
size_t anonHugeKilobytes(const void* address) {
  std::ifstream smaps("/proc/self/smaps");
  const uintptr_t at = reinterpret_cast<uintptr_t>(address);
  std::string line;
  bool inside = false;
  while (std::getline(smaps, line)) {
    uintptr_t begin = 0, end = 0;
    char dash = 0;
    std::istringstream head(line);
    if (head >> std::hex >> begin >> dash >> end && dash == '-') {
      inside = begin <= at && at < end;
    } else if (inside && line.rfind("AnonHugePages:", 0) == 0) {
      return std::stoul(line.substr(std::strlen("AnonHugePages:")));
    }
  }
  return 0;
}

// Whether the kernel backs every anonymous mapping with huge pages where it
// can ("always"), rather than only those that ask ("madvise", the usual).
bool hugePagesForAll() {
  std::ifstream enabled("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string modes;
  std::getline(enabled, modes);
  return modes.find("[always]") != std::string::npos;
}

// Why this kernel cannot collapse memory onto huge pages at all, decided
// from the kernel alone: MADV_COLLAPSE came with Linux 6.1, and a kernel
// built without transparent huge pages has no sysfs folder for them. Empty
// where it can: then a buffer left on small pages is the advisor's fault.
std::string whyTheKernelCannotCollapse() {
  utsname name{};
  if (uname(&name) != 0) return "uname failed";
  int major = 0, minor = 0;
  if (std::sscanf(name.release, "%d.%d", &major, &minor) != 2) {
    return std::string("unreadable kernel release ") + name.release;
  }
  if (major < 6 || (major == 6 && minor < 1)) {
    return std::string("Linux ") + name.release + " has no MADV_COLLAPSE (6.1 and later)";
  }
  if (access("/sys/kernel/mm/transparent_hugepage", F_OK) != 0) {
    return "this kernel has no transparent huge pages";
  }
  return {};
}

// The real kernel's collapse, remembering why the advisor's own last attempt
// was refused. The kernel answers EAGAIN or ENOMEM when it has no free huge
// page at that moment (fragmented memory, the other tests' allocations), no
// fault of the code under test: shortage() says so, else empty. Asking the
// kernel again after the advisor cannot tell: memory freed meanwhile lets a
// second attempt succeed where the advisor's failed (CI, under ctest -j2).
struct RecordedCollapse {
  int attempts = 0;
  int refusal = 0;  // errno of the last refused attempt; 0: it was not refused
  HugePageAdvisor::Collapse function() {
    return [this](const void* data, size_t bytes) {
      ++attempts;
      errno = 0;
      const CollapseOutcome outcome = collapseIntoHugePages(data, bytes);
      refusal = outcome == CollapseOutcome::Refused ? errno : 0;
      return outcome;
    };
  }
  std::string shortage() const {
    return refusal == EAGAIN || refusal == ENOMEM ? std::strerror(refusal) : std::string();
  }
};

// 8 MiB of memory at a 2 MiB boundary, first touched as 4 KiB pages. It is
// a mapping of its own (smaps counts huge pages per mapping): inaccessible
// memory on both sides keeps the kernel from merging it with a neighbour.
struct SmallPagedBuffer {
  static constexpr size_t kBytes = 8u << 20;
  static constexpr size_t kRegionBytes = kBytes + 2 * kHugePageBytes;
  char* region = nullptr;
  char* data = nullptr;
  SmallPagedBuffer() {
    region = static_cast<char*>(
        mmap(nullptr, kRegionBytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    if (region == MAP_FAILED) throw std::bad_alloc();
    data = reinterpret_cast<char*>(hugePageInterior(region + 4096, kRegionBytes - 4096).begin);
    if (mprotect(data, kBytes, PROT_READ | PROT_WRITE) != 0) throw std::bad_alloc();
    // Under "madvise" a plain first touch takes 4 KiB pages, and the
    // mapping, like any buffer torch hands us, is none of khugepaged's
    // business. Marking it MADV_HUGEPAGE (as this test once did) let
    // khugepaged collapse part of it before the test looked (it failed so
    // once in CI). Under "always" it must refuse huge pages for the touch,
    // then allow them again; khugepaged scans it then, as it scans all.
    const bool always = hugePagesForAll();
    if (always) madvise(data, kBytes, MADV_NOHUGEPAGE);
    for (size_t i = 0; i < kBytes; ++i) data[i] = static_cast<char>(i * 7 + 3);
    if (always) madvise(data, kBytes, MADV_HUGEPAGE);
  }
  ~SmallPagedBuffer() { munmap(region, kRegionBytes); }
  bool unchanged() const {
    for (size_t i = 0; i < kBytes; ++i) {
      if (data[i] != static_cast<char>(i * 7 + 3)) return false;
    }
    return true;
  }
};

TEST(HugePages, TheKernelMovesABufferThatCameBackOntoHugePagesAndKeepsItsBytes) {
  SmallPagedBuffer buffer;
  const size_t before = anonHugeKilobytes(buffer.data);
  ASSERT_EQ(before, 0u) << "the buffer started on huge pages";
  bool moved = false;
  RecordedCollapse kernel;
  HugePageAdvisor advisor([&, collapse = kernel.function()](const void* data, size_t bytes) {
    const CollapseOutcome outcome = collapse(data, bytes);
    moved = outcome != CollapseOutcome::Refused;
    return outcome;
  });
  advisor.noteCallerBuffer(buffer.data, SmallPagedBuffer::kBytes);
  EXPECT_EQ(anonHugeKilobytes(buffer.data), 0u) << "collapsed on its first sight";
  EXPECT_TRUE(advisor.noteCallerBuffer(buffer.data, SmallPagedBuffer::kBytes));
  EXPECT_TRUE(buffer.unchanged());
  // Whether the pages must now be huge is the kernel's capability, never
  // what the advisor did: where the kernel cannot, they stay as they were.
  const std::string cannot = whyTheKernelCannotCollapse();
  if (!cannot.empty()) {
    EXPECT_FALSE(moved);
    EXPECT_EQ(anonHugeKilobytes(buffer.data), 0u);
    GTEST_SKIP() << "the collapse itself is not checked: " << cannot;
  }
  if (anonHugeKilobytes(buffer.data) != SmallPagedBuffer::kBytes / 1024) {
    const std::string shortage = kernel.shortage();
    if (!shortage.empty()) GTEST_SKIP() << "no free huge page in the kernel then: " << shortage;
    FAIL() << "the kernel collapses this buffer, but the advisor left it on small pages ("
           << kernel.attempts << " attempts, errno " << kernel.refusal << ")";
  }
  EXPECT_TRUE(moved);
  EXPECT_TRUE(buffer.unchanged());
}

// The scenario the re-asking is for: the buffer is collapsed, then its
// memory is replaced by new memory at the same address (torch freed the
// tensor; the next of its size came back there), which starts on 4 KiB pages.
TEST(HugePages, NewMemoryAtTheSameAddressGoesOntoHugePagesToo) {
  SmallPagedBuffer buffer;
  RecordedCollapse kernel;
  HugePageAdvisor advisor(kernel.function());  // the real kernel
  advisor.noteCallerBuffer(buffer.data, SmallPagedBuffer::kBytes);
  advisor.noteCallerBuffer(buffer.data, SmallPagedBuffer::kBytes);
  const std::string cannot = whyTheKernelCannotCollapse();
  if (!cannot.empty()) GTEST_SKIP() << cannot;
  if (anonHugeKilobytes(buffer.data) != SmallPagedBuffer::kBytes / 1024) {
    const std::string shortage = kernel.shortage();
    if (!shortage.empty()) GTEST_SKIP() << "no free huge page in the kernel then: " << shortage;
    FAIL() << "the kernel collapses this buffer, but the advisor left it on small pages ("
           << kernel.attempts << " attempts, errno " << kernel.refusal << ")";
  }
  // New memory in place: a fresh mapping at the same address, touched.
  void* fresh = mmap(buffer.data, SmallPagedBuffer::kBytes, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
  ASSERT_EQ(fresh, static_cast<void*>(buffer.data));
  const bool always = hugePagesForAll();
  if (always) madvise(buffer.data, SmallPagedBuffer::kBytes, MADV_NOHUGEPAGE);
  for (size_t i = 0; i < SmallPagedBuffer::kBytes; ++i) {
    buffer.data[i] = static_cast<char>(i * 7 + 3);
  }
  if (always) madvise(buffer.data, SmallPagedBuffer::kBytes, MADV_HUGEPAGE);
  ASSERT_EQ(anonHugeKilobytes(buffer.data), 0u) << "the new memory started on huge pages";
  const bool movedAgain = advisor.noteCallerBuffer(buffer.data, SmallPagedBuffer::kBytes);
  if (!movedAgain && !kernel.shortage().empty()) {
    GTEST_SKIP() << "no free huge page in the kernel for the new memory: " << kernel.shortage();
  }
  EXPECT_TRUE(movedAgain);
  EXPECT_EQ(anonHugeKilobytes(buffer.data), SmallPagedBuffer::kBytes / 1024);
  EXPECT_TRUE(buffer.unchanged());
  // Now huge: later sightings find it so. Whether a call counts as a move
  // is the clock's (kMovedAfterMicros; a busy machine stretches the
  // microseconds of an idle call past it: seen with load 20 on 2 cores), so
  // what is asked holds whatever the clock: the pages stay huge, the bytes
  // unchanged, and the sightings report at most the moves left.
  int reported = 0;
  for (int i = 0; i < 2 * HugePageAdvisor::kMaxMoves; ++i) {
    reported += advisor.noteCallerBuffer(buffer.data, SmallPagedBuffer::kBytes) ? 1 : 0;
  }
  EXPECT_LE(reported, HugePageAdvisor::kMaxMoves - 1);  // one move was spent above
  EXPECT_EQ(anonHugeKilobytes(buffer.data), SmallPagedBuffer::kBytes / 1024);
  EXPECT_TRUE(buffer.unchanged());
}

// The host collectives hand the advisor their caller buffers, and
// RINGREDUCE_HUGE_PAGES=0 (config.hugePages) keeps them out.
TEST(HugePages, HostCollectivesNoteTheirCallerBuffers) {
  for (bool enabled : {true, false}) {
    Config config;
    config.hugePages = enabled;
    testing::runRanks(
        2,
        [&](Transport& transport, int rank) {
          Workspace workspace;
          const Comm comm{transport, config, workspace};
          const size_t count = HugePageAdvisor::kMinBytes / sizeof(float);
          std::vector<float> data(count, 1.0f + rank), gathered(2 * count);
          const std::chrono::seconds limit(20);
          hostAllreduce(comm, OpContext("allreduce", 1, limit), {data.data(), count, DataType::Float32, ReduceOp::Sum});
          EXPECT_EQ(data[count - 1], 3.0f);
          hostReduceScatter(comm, OpContext("reduce_scatter", 2, limit),
                            {data.data(), count, DataType::Float32, ReduceOp::Sum});
          hostAllgather(comm, OpContext("allgather", 3, limit),
                        {data.data(), gathered.data(), count * sizeof(float)});
          // The allreduce's and reduce-scatter's buffer once (the same
          // range), the allgather's output once.
          EXPECT_EQ(workspace.callerBuffers().buffersSeen(), enabled ? 2u : 0u);
        },
        config, testing::TransportKind::Loopback);
  }
}

}  // namespace
}  // namespace ringreduce
