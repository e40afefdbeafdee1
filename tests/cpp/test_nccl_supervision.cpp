// NCCL under the same supervision as our own kernels (issue 43, item 4), on
// a stub NCCL (stub_nccl.h) whose behaviour each test chooses per rank, with
// ranks as threads over the loopback transport: a bounded init whose
// verdict every rank learns, bounded by the collective that needs NCCL
// first, a watchdog that fails the group on NCCL's asynchronous error and
// aborts the communicator, an abort that releases the stream NCCL's kernels
// held, a clean close that finalizes before it destroys (bounded, else an
// abort), and no rank on a device it does not use.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "core/base/errors.h"
#include "cuda/nccl/nccl_communicator.h"
#include "cuda/nccl/nccl_library.h"
#include "cuda/nccl/nccl_watchdog.h"
#include "cuda/path_selection.h"
#include "fake_device_context.h"
#include "rank_threads.h"
#include "scoped_env.h"
#include "stub_nccl.h"

using namespace ringreduce;
using namespace ringreduce::cuda;
using namespace ringreduce::testing;
using Clock = std::chrono::steady_clock;

namespace {

// Generous against two busy cores, and far below the record exchange's own
// deadline (20 s, exchangeFor): an error that comes before it comes from
// the bound under test.
constexpr std::chrono::milliseconds kInitLimit(1000);
constexpr std::chrono::seconds kWithinDeadline(15);

const NcclLibrary& load(const char* path) {
  std::string why;
  static std::mutex mutex;
  static std::vector<std::unique_ptr<NcclLibrary>> loaded;
  std::lock_guard<std::mutex> lock(mutex);
  for (const auto& lib : loaded) {
    if (lib->path == path) return *lib;
  }
  auto lib = NcclLibrary::open(path, &why);
  if (!lib) throw std::runtime_error(why);
  loaded.push_back(std::move(lib));
  return *loaded.back();
}

const NcclLibrary& stubNccl() { return load(RINGREDUCE_STUB_NCCL); }

// Waits (bounded, sleeping) until `done` holds; says whether it did.
template <typename Done>
bool eventually(Done done, std::chrono::seconds limit = std::chrono::seconds(20)) {
  const auto deadline = Clock::now() + limit;
  while (!done()) {
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return true;
}

// What was done to rank `rank`'s communicators ("init finalize quiescent
// destroy"), from the stub whose stubNcclCalls is `calls`.
std::string callsOf(int rank, int (*calls)(int, char*, int) = stubNcclCalls) {
  char text[512];
  calls(rank, text, sizeof(text));
  return text;
}

// The devices of a mask (bit k: device k), "0, 2".
std::string devicesIn(unsigned long long mask) {
  std::string text;
  for (int device = 0; device < 64; ++device) {
    if ((mask >> device & 1) == 0) continue;
    text += (text.empty() ? "" : ", ") + std::to_string(device);
  }
  return text;
}

// What each rank of a test saw.
struct RankResult {
  std::string error;        // what the constructor or a collective threw
  std::string failure;      // what the watchdog reported
  bool released = false;    // the stream was let go
  bool aborted = false;
  std::chrono::milliseconds took{0};
};

void runGroup(int n, const std::function<void(Transport&, int, RankResult&)>& body,
              std::vector<RankResult>& results) {
  results.assign(n, RankResult{});
  runRanks(
      n,
      [&](Transport& t, int rank) {
        fakeProcess(rank);
        body(t, rank, results[rank]);
      },
      Config(), TransportKind::Loopback);
}

// One small allreduce through `comm` on `stream`.
void allreduceOnce(NcclCommunicator& comm, StubNcclStream& stream) {
  float data[4] = {1, 2, 3, 4};
  comm.allreduce(data, data, 4, DataType::Float32, ReduceOp::Sum, &stream);
}

// World 1: a communicator's allreduce on a stream, then `last` (the
// communicator's last act); whether the stream is free once it is gone.
template <typename Last>
bool releasedAfter(Transport& t, Last last) {
  StubNcclStream stream;
  {
    NcclCommunicator comm(stubNccl(), 0, 1, 0, exchangeFor(t, 1), kInitLimit);
    allreduceOnce(comm, stream);
    last(comm);
  }
  return stream.heldBy.load() == 0;
}

// Runs `body` on a rank, keeping what it threw and how long it took.
template <typename Body>
void timed(RankResult& r, Body body) {
  const auto start = Clock::now();
  try {
    body();
  } catch (const Error& e) {
    r.error = e.what();
  }
  r.took = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
}

// Every rank failed, well before the exchanges' deadline, naming rank
// `hung`'s init, given up after `limit`.
void expectHungInitNamed(const std::vector<RankResult>& results, int hung, const char* limit) {
  for (size_t rank = 0; rank < results.size(); ++rank) {
    const std::string& error = results[rank].error;
    EXPECT_NE(error.find("NCCL init failed on rank " + std::to_string(hung) + ": "),
              std::string::npos) << "rank " << rank << ": " << error;
    EXPECT_NE(error.find(std::string("did not finish within ") + limit), std::string::npos)
        << error;
    EXPECT_LT(results[rank].took, kWithinDeadline) << "rank " << rank;
  }
}

class NcclSupervision : public ::testing::Test {
 protected:
  void SetUp() override {
    stubNcclReset();
    resetFakeDevices(4);
  }
  void TearDown() override { EXPECT_EQ(stubNcclLiveComms(), 0) << "a communicator leaked"; }
};

}  // namespace

TEST_F(NcclSupervision, AnInitThatHangsOnOneRankIsAnErrorNamingItOnEveryRank) {
  stubNcclSetBehaviour(2, kStubNcclInitHangs);
  std::vector<RankResult> results;
  runGroup(3, [](Transport& t, int rank, RankResult& r) {
    timed(r, [&] {
      NcclCommunicator comm(stubNccl(), rank, 3, rank, exchangeFor(t, 1), kInitLimit);
    });
  }, results);
  expectHungInitNamed(results, 2, "1000 ms");
  for (const RankResult& r : results) {
    EXPECT_EQ(r.error.find("rank 0: "), std::string::npos) << r.error;
    EXPECT_EQ(r.error.find("rank 1: "), std::string::npos) << r.error;
  }
  EXPECT_EQ(stubNcclAborts(2), 1);  // the hung init is aborted, not left running
  EXPECT_EQ(stubNcclAborts(0), 1);  // and so is every communicator that did come up
}

TEST_F(NcclSupervision, AnInitThatFailsOnOneRankIsAnErrorNamingItAndWhy) {
  stubNcclSetBehaviour(1, kStubNcclInitFails);
  std::vector<RankResult> results;
  runGroup(2, [](Transport& t, int rank, RankResult& r) {
    try {
      NcclCommunicator comm(stubNccl(), rank, 2, rank, exchangeFor(t, 1), kInitLimit);
    } catch (const Error& e) {
      r.error = e.what();
    }
  }, results);
  for (int rank = 0; rank < 2; ++rank) {
    const std::string& error = results[rank].error;
    EXPECT_NE(error.find("NCCL init failed on rank 1: "), std::string::npos) << error;
    EXPECT_NE(error.find("unhandled system error (stub)"), std::string::npos) << error;
  }
}

TEST_F(NcclSupervision, AnAsyncErrorMidOpFailsTheGroupAndAbortsTheCommunicator) {
  stubNcclSetBehaviour(1, kStubNcclAsyncErrorInOp);
  std::vector<RankResult> results;
  runGroup(2, [](Transport& t, int rank, RankResult& r) {
    NcclCommunicator comm(stubNccl(), rank, 2, rank, exchangeFor(t, 1), kInitLimit);
    std::mutex mutex;
    NcclWatchdog watchdog(
        comm,
        [&](const std::string& reason) {
          std::lock_guard<std::mutex> lock(mutex);
          r.failure = reason;
        },
        [] { return false; }, std::chrono::milliseconds(5));
    StubNcclStream stream;
    allreduceOnce(comm, stream);
    if (rank == 1) {
      EXPECT_TRUE(eventually([&] { return stream.heldBy.load() == 0; }))
          << "NCCL's kernels still hold the stream";
      EXPECT_TRUE(eventually([&] {
        std::lock_guard<std::mutex> lock(mutex);
        return !r.failure.empty();
      }));
      try {
        allreduceOnce(comm, stream);
      } catch (const Error& e) {
        r.error = e.what();
      }
    }
    r.released = stream.heldBy.load() == 0;
    r.aborted = comm.aborted();
  }, results);
  const RankResult& failed = results[1];
  EXPECT_NE(failed.failure.find("remote process exited or there was a network error (stub)"),
            std::string::npos) << failed.failure;
  EXPECT_NE(failed.failure.find("allreduce of 4 float32"), std::string::npos) << failed.failure;
  EXPECT_NE(failed.failure.find("rank 1"), std::string::npos) << failed.failure;
  EXPECT_TRUE(failed.aborted);
  EXPECT_TRUE(failed.released);
  EXPECT_NE(failed.error.find("was aborted"), std::string::npos) << failed.error;
  EXPECT_EQ(stubNcclAborts(1), 1);
  EXPECT_EQ(stubNcclDestroysWhileHeld(1), 0);
  // The healthy rank: no report, destroyed normally.
  EXPECT_EQ(results[0].failure, "");
  EXPECT_FALSE(results[0].aborted);
  EXPECT_EQ(stubNcclAborts(0), 0);
}

TEST_F(NcclSupervision, AGroupThatGaveUpAbortsTheCommunicatorWhichReleasesTheStream) {
  stubNcclSetBehaviour(0, kStubNcclOpHangs);
  std::vector<RankResult> results;
  runGroup(2, [](Transport& t, int rank, RankResult& r) {
    NcclCommunicator comm(stubNccl(), rank, 2, rank, exchangeFor(t, 1), kInitLimit);
    std::atomic<bool> givenUp{false};
    NcclWatchdog watchdog(
        comm, [&](const std::string& reason) { r.failure = reason; },
        [&] { return givenUp.load(); }, std::chrono::milliseconds(5));
    StubNcclStream stream;
    allreduceOnce(comm, stream);
    if (rank == 0) {
      EXPECT_EQ(stream.heldBy.load(), 1);  // NCCL's kernels wait on a peer
      givenUp = true;                      // the host found a dead peer
      EXPECT_TRUE(eventually([&] { return stream.heldBy.load() == 0; }));
    }
    r.released = stream.heldBy.load() == 0;
    r.aborted = comm.aborted();
  }, results);
  EXPECT_TRUE(results[0].released);
  EXPECT_TRUE(results[0].aborted);
  EXPECT_EQ(results[0].failure, "");  // the group failed elsewhere: nothing new to report
  EXPECT_EQ(stubNcclAborts(0), 1);
  EXPECT_EQ(stubNcclDestroysWhileHeld(0), 0);
}

TEST_F(NcclSupervision, AFailedCommunicatorIsAbortedNotDestroyed) {
  stubNcclSetBehaviour(0, kStubNcclAsyncErrorInOp);
  std::vector<RankResult> results;
  runGroup(1, [](Transport& t, int, RankResult& r) {
    // No watchdog aborts it: the destructor must.
    r.released = releasedAfter(t, [&](NcclCommunicator& comm) {
      r.failure = comm.asyncError();  // what a watchdog's look finds
    });
  }, results);
  EXPECT_NE(results[0].failure, "");
  EXPECT_TRUE(results[0].released);
  EXPECT_EQ(stubNcclAborts(0), 1);
  EXPECT_EQ(stubNcclDestroysWhileHeld(0), 0) << "a destroy would wait for the kernels";
}

// A non-blocking communicator may finish an enqueue in the background
// (ncclInProgress): the collective waits for it, bounded by the limit.
TEST_F(NcclSupervision, AnEnqueueInProgressIsWaitedForAndAStuckOneAborted) {
  stubNcclSetBehaviour(0, kStubNcclOpInProgress);
  stubNcclSetBehaviour(1, kStubNcclOpStuck);
  std::vector<RankResult> results;
  runGroup(2, [](Transport& t, int rank, RankResult& r) {
    NcclCommunicator comm(stubNccl(), rank, 2, rank, exchangeFor(t, 1), kInitLimit);
    StubNcclStream stream;
    timed(r, [&] { allreduceOnce(comm, stream); });
    r.aborted = comm.aborted();
  }, results);
  EXPECT_EQ(results[0].error, "");
  EXPECT_FALSE(results[0].aborted);
  EXPECT_NE(results[1].error.find("did not enqueue it within 1000 ms"), std::string::npos)
      << results[1].error;
  EXPECT_NE(results[1].error.find("rank 1"), std::string::npos) << results[1].error;
  EXPECT_TRUE(results[1].aborted);
  EXPECT_LT(results[1].took, kWithinDeadline);
  EXPECT_EQ(stubNcclAborts(1), 1);
}

TEST_F(NcclSupervision, AnNcclWithoutTheConfigInitFallsBackToTheBlockingOne) {
  const NcclLibrary& old = load(RINGREDUCE_STUB_NCCL_OLD);
  ASSERT_EQ(old.commInitRankConfig, nullptr);
  void* handle = dlopen(RINGREDUCE_STUB_NCCL_OLD, RTLD_NOW | RTLD_NOLOAD);
  ASSERT_NE(handle, nullptr);
  auto blockingInits = reinterpret_cast<int (*)()>(dlsym(handle, "stubNcclBlockingInits"));
  auto liveComms = reinterpret_cast<int (*)()>(dlsym(handle, "stubNcclLiveComms"));
  ASSERT_NE(blockingInits, nullptr);
  const int before = blockingInits();
  std::vector<RankResult> results;
  runGroup(2, [&](Transport& t, int rank, RankResult& r) {
    NcclCommunicator comm(old, rank, 2, rank, exchangeFor(t, 1), kInitLimit);
    StubNcclStream stream;
    allreduceOnce(comm, stream);
    r.aborted = comm.aborted();
  }, results);
  EXPECT_EQ(blockingInits() - before, 2);
  EXPECT_FALSE(results[0].aborted);
  EXPECT_EQ(liveComms(), 0);
  dlclose(handle);
}

// Rank k on device k: neither its own thread (which never chose a device,
// as torch's executor) nor the watchdog it starts touches another device,
// and its process holds a context on device k alone. Every call into NCCL
// is seen with the device current on the calling thread (the stub asks the
// fake device), whichever thread the product made it from: a thread that
// never chose a device calls on device 0, as the runtime has it.
TEST_F(NcclSupervision, RankKNeverTouchesAnotherDevice) {
  stubNcclSetDeviceProbe(&fakeCurrentDevice);
  std::vector<RankResult> results;
  runGroup(3, [](Transport& t, int rank, RankResult& r) {
    NcclCommunicator comm(stubNccl(), rank, 3, rank, exchangeFor(t, 1), kInitLimit);
    NcclWatchdog watchdog(comm, nullptr, [] { return false; }, std::chrono::milliseconds(5));
    StubNcclStream stream;
    allreduceOnce(comm, stream);
    float data[4] = {1, 2, 3, 4};
    comm.broadcast(data, 4, DataType::Float32, 0, &stream);
    // Until the watchdog has looked at the communicator from its thread
    // (the rank's own is the other caller).
    if (!eventually([&] { return stubNcclThreadsOf(rank) >= 2; })) {
      r.error = "the watchdog did not call NCCL within 20 s";
    }
    r.aborted = comm.aborted();
  }, results);
  stubNcclSetDeviceProbe(nullptr);
  for (int rank = 0; rank < 3; ++rank) {
    EXPECT_EQ(results[rank].error, "") << "rank " << rank;
    EXPECT_GE(stubNcclThreadsOf(rank), 2) << "rank " << rank << ": its own thread and the watchdog";
    EXPECT_EQ(devicesIn(stubNcclDevicesUsedBy(rank)), std::to_string(rank))
        << "rank " << rank << "'s communicator was called from threads on these devices";
  }
  for (const auto& [thread, devices] : fakeDevicesByThread()) {
    EXPECT_EQ(devices.size(), 1u) << "thread " << thread << " touched " << devices.size()
                                  << " devices, device 0 among them: " << devices.count(0);
  }
  for (int rank = 0; rank < 3; ++rank) {
    std::set<int> contexts = fakeContexts(rank);
    // Rank 0's thread already says 0 (a fresh thread's answer): nothing to switch.
    EXPECT_EQ(contexts.count(rank), rank == 0 ? 0u : 1u) << "rank " << rank;
    contexts.erase(rank);
    EXPECT_TRUE(contexts.empty()) << "rank " << rank << " made a context on device "
                                  << *contexts.begin();
  }
}

// A clean close flushes NCCL's work before it frees the communicator:
// ncclCommFinalize, polled until quiescent, then ncclCommDestroy; whether
// the close is asked for (rank 0) or left to the destructor (rank 1).
TEST_F(NcclSupervision, ACleanCloseFinalizesThenDestroys) {
  std::vector<RankResult> results;
  runGroup(2, [](Transport& t, int rank, RankResult& r) {
    StubNcclStream stream;
    NcclCommunicator comm(stubNccl(), rank, 2, rank, exchangeFor(t, 1), kInitLimit);
    allreduceOnce(comm, stream);
    if (rank == 0) {
      comm.close(kInitLimit);
      r.aborted = comm.aborted();
      try {
        allreduceOnce(comm, stream);
      } catch (const Error& e) {
        r.error = e.what();
      }
    }
  }, results);
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_EQ(callsOf(rank), "init finalize quiescent destroy") << "rank " << rank;
    EXPECT_EQ(stubNcclAborts(rank), 0) << "rank " << rank;
  }
  EXPECT_TRUE(results[0].aborted);  // gone: later collectives say so
  EXPECT_NE(results[0].error.find("was closed"), std::string::npos) << results[0].error;
}

// A finalize that never gets quiescent (a peer that never closes, or
// kernels waiting on a dead one) costs the close its limit, then the
// communicator is aborted: the shutdown ends, and nothing is destroyed
// under NCCL's feet.
TEST_F(NcclSupervision, AFinalizeThatHangsIsBoundedAndEndsInAnAbort) {
  stubNcclSetBehaviour(1, kStubNcclFinalizeHangs);
  std::vector<RankResult> results;
  runGroup(2, [](Transport& t, int rank, RankResult& r) {
    NcclCommunicator comm(stubNccl(), rank, 2, rank, exchangeFor(t, 1), kInitLimit);
    timed(r, [&] { comm.close(kInitLimit); });
    r.aborted = comm.aborted();
  }, results);
  EXPECT_EQ(callsOf(1), "init finalize abort");
  EXPECT_EQ(stubNcclAborts(1), 1);
  EXPECT_TRUE(results[1].aborted);
  EXPECT_LT(results[1].took, kWithinDeadline);
  EXPECT_EQ(callsOf(0), "init finalize quiescent destroy");
}

// Work still held by NCCL's kernels (they wait on a peer) never lets a
// finalize finish: the close is bounded the same way.
TEST_F(NcclSupervision, AFinalizeBehindKernelsThatWaitOnAPeerEndsInAnAbort) {
  stubNcclSetBehaviour(0, kStubNcclOpHangs);
  std::vector<RankResult> results;
  runGroup(1, [](Transport& t, int, RankResult& r) {
    r.released = releasedAfter(t, [](NcclCommunicator& comm) { comm.close(kInitLimit); });
  }, results);
  EXPECT_EQ(callsOf(0), "init finalize abort");
  EXPECT_TRUE(results[0].released);
  EXPECT_EQ(stubNcclDestroysWhileHeld(0), 0);
}

// NCCL before 2.14 has no ncclCommFinalize: the close destroys, as before.
TEST_F(NcclSupervision, AnNcclWithoutFinalizeClosesWithADestroy) {
  const NcclLibrary& old = load(RINGREDUCE_STUB_NCCL_OLD);
  ASSERT_EQ(old.commFinalize, nullptr);
  ASSERT_NE(stubNccl().commFinalize, nullptr);
  void* handle = dlopen(RINGREDUCE_STUB_NCCL_OLD, RTLD_NOW | RTLD_NOLOAD);
  ASSERT_NE(handle, nullptr);
  auto calls = reinterpret_cast<int (*)(int, char*, int)>(dlsym(handle, "stubNcclCalls"));
  auto reset = reinterpret_cast<void (*)()>(dlsym(handle, "stubNcclReset"));
  ASSERT_NE(calls, nullptr);
  ASSERT_NE(reset, nullptr);
  reset();
  std::vector<RankResult> results;
  runGroup(2, [&](Transport& t, int rank, RankResult& r) {
    NcclCommunicator comm(old, rank, 2, rank, exchangeFor(t, 1), kInitLimit);
    comm.close(kInitLimit);
    r.aborted = comm.aborted();
  }, results);
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_EQ(callsOf(rank, calls), "init destroy") << "rank " << rank;
    EXPECT_TRUE(results[rank].aborted) << "rank " << rank;  // gone
  }
  dlclose(handle);
}

// The group's path selection makes NCCL on the first collective that needs
// it, and that collective's timeout bounds the init (half of it,
// NcclCommunicator::initLimit): a hung init on one rank is an error naming
// it on every rank well before the exchanges' own deadline (20 s here).
TEST_F(NcclSupervision, TheCollectiveThatFirstNeedsNcclBoundsItsInit) {
  ScopedEnv library("RINGREDUCE_NCCL_LIBRARY", RINGREDUCE_STUB_NCCL);
  std::string why;
  const NcclLibrary* process = NcclLibrary::load(&why);  // once per process
  ASSERT_NE(process, nullptr) << why;
  ASSERT_EQ(process->path, RINGREDUCE_STUB_NCCL) << "another NCCL was loaded first";
  stubNcclSetBehaviour(1, kStubNcclInitHangs);
  constexpr std::chrono::milliseconds kOpTimeout(2400);
  std::vector<RankResult> results;
  runGroup(2, [&](Transport& t, int rank, RankResult& r) {
    Config config;
    config.cudaAlgorithm = CudaAlgorithm::Nccl;  // every collective needs NCCL
    config.cudaDeviceFlags = false;
    PathSelection paths(rank, 2, rank, config, exchangeFor(t, 1));
    StubNcclStream stream;
    float data[4] = {1, 2, 3, 4};
    CollectiveCall call;
    call.timeout = kOpTimeout;
    timed(r, [&] {
      paths.allreduce(data, 4, DataType::Float32, ReduceOp::Sum, &stream, exchangeFor(t, 2),
                      call);
    });
  }, results);
  expectHungInitNamed(results, 1, "1200 ms");
  EXPECT_EQ(stubNcclAborts(1), 1);
}
