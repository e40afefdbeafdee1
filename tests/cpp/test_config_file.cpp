// RINGREDUCE_CONFIG: a KEY=VALUE file read with the environment, the
// environment winning; bad files are refused naming the file, line and key.
// And RINGREDUCE_AUTOTUNE's tuner: correct sums while it tries candidates,
// and the same choice on every rank.
#include <gtest/gtest.h>

#include <sched.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <mutex>
#include <string>
#include <vector>

#include "algorithms/allreduce.h"
#include "algorithms/tuning/autotune.h"
#include "core/config/config.h"
#include "core/base/errors.h"
#include "rank_threads.h"
#include "scoped_env.h"

using namespace ringreduce;
using ringreduce::testing::runComms;
using ringreduce::testing::TransportKind;

namespace {

// A config file in the temporary folder, removed with the object.
class TempConfig {
 public:
  explicit TempConfig(const std::string& text)
      : path_(std::string(::testing::TempDir()) + "ringreduce_" + std::to_string(getpid()) + "_" +
              ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".conf") {
    std::ofstream(path_) << text;
  }
  ~TempConfig() { std::remove(path_.c_str()); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// The message of the InvalidArgument that Config::fromEnvironment throws.
std::string errorReading(const TempConfig& file) {
  ScopedEnv config("RINGREDUCE_CONFIG", file.path().c_str());
  try {
    Config::fromEnvironment();
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected an error from " << file.path();
  return "";
}

std::string valueOf(const Config& config, const std::string& key) {
  for (const auto& [name, value] : config.describe()) {
    if (name == key) return value;
  }
  return "(missing)";
}

}  // namespace

TEST(ConfigFile, GoodFileSetsTheGroupSettings) {
  const TempConfig file(
      "# tuned by python -m torch_ringreduce.tune\n"
      "\n"
      "RINGREDUCE_SEGMENT_BYTES=65536\n"
      "  RINGREDUCE_ALGORITHM = direct  \n"
      "RINGREDUCE_WAIT_SPIN_US=200\n"
      "RINGREDUCE_WIRE_DTYPE=bf16\n"
      "RINGREDUCE_LINK_INTER=1Gbit/s,500us\n");
  ScopedEnv config("RINGREDUCE_CONFIG", file.path().c_str());
  const Config read = Config::fromEnvironment();
  EXPECT_EQ(read.segmentBytes, 65536u);
  EXPECT_EQ(read.allreduceAlgorithm, AllreduceAlgorithm::Direct);
  EXPECT_EQ(read.waitSpinMicroseconds, 200);
  EXPECT_EQ(read.hostWireDtype, WireDtype::Bf16);
  EXPECT_DOUBLE_EQ(read.interNode.alpha, 500e-6);
  EXPECT_EQ(read.spinMicroseconds, Config().spinMicroseconds);  // not in the file
  EXPECT_EQ(valueOf(read, "RINGREDUCE_ALGORITHM"), "direct");
  EXPECT_EQ(valueOf(read, "RINGREDUCE_SEGMENT_BYTES"), "65536");
}

TEST(ConfigFile, EnvironmentWinsOverTheFile) {
  const TempConfig file("RINGREDUCE_SEGMENT_BYTES=65536\nRINGREDUCE_ALGORITHM=direct\n");
  ScopedEnv config("RINGREDUCE_CONFIG", file.path().c_str());
  ScopedEnv segment("RINGREDUCE_SEGMENT_BYTES", "131072");
  const Config read = Config::fromEnvironment();
  EXPECT_EQ(read.segmentBytes, 131072u);
  EXPECT_EQ(read.allreduceAlgorithm, AllreduceAlgorithm::Direct);
}

TEST(ConfigFile, UnknownKeyNamesFileLineAndKey) {
  const TempConfig file("RINGREDUCE_SEGMENT_BYTES=65536\n# comment\nRINGREDUCE_SEGMENT_SIZE=4\n");
  const std::string message = errorReading(file);
  EXPECT_NE(message.find(file.path() + " line 3"), std::string::npos) << message;
  EXPECT_NE(message.find("unknown key 'RINGREDUCE_SEGMENT_SIZE'"), std::string::npos) << message;
}

TEST(ConfigFile, BadValueNamesFileLineAndKey) {
  const TempConfig number("RINGREDUCE_SPIN_US=10\nRINGREDUCE_SEGMENT_BYTES=lots\n");
  std::string message = errorReading(number);
  EXPECT_NE(message.find(number.path() + " line 2: RINGREDUCE_SEGMENT_BYTES='lots'"),
            std::string::npos)
      << message;
  const TempConfig choice("RINGREDUCE_ALGORITHM=tree\n");
  message = errorReading(choice);
  EXPECT_NE(message.find(choice.path() + " line 1: RINGREDUCE_ALGORITHM='tree'"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("ring, halving_doubling"), std::string::npos) << message;
}

// A setting held in an int refuses what an int cannot hold, naming the
// range, instead of wrapping it (an hour of caller grace, 3.6e9 us, had
// become a negative grace).
TEST(ConfigFile, AnIntSettingBeyondItsRangeIsRefusedNotWrapped) {
  const TempConfig grace("RINGREDUCE_CALLER_GRACE_US=3600000000\n");
  const std::string message = errorReading(grace);
  EXPECT_NE(message.find(grace.path() + " line 1: RINGREDUCE_CALLER_GRACE_US='3600000000' must "
                                        "be an integer from 0 to 2147483647"),
            std::string::npos)
      << message;
  const TempConfig largest("RINGREDUCE_CALLER_GRACE_US=2147483647\n");
  ScopedEnv config("RINGREDUCE_CONFIG", largest.path().c_str());
  EXPECT_EQ(Config::fromEnvironment().callerGraceMicroseconds, 2147483647);
}

TEST(ConfigFile, BadValueIsAnErrorEvenWhenTheEnvironmentOverridesIt) {
  const TempConfig file("RINGREDUCE_SEGMENT_BYTES=12\n");  // below the 1024 minimum
  ScopedEnv segment("RINGREDUCE_SEGMENT_BYTES", "65536");
  const std::string message = errorReading(file);
  EXPECT_NE(message.find("line 1: RINGREDUCE_SEGMENT_BYTES='12'"), std::string::npos) << message;
}

TEST(ConfigFile, LinesWithoutEqualsRepeatsAndMissingFilesAreErrors) {
  const TempConfig noEquals("RINGREDUCE_SPIN_US 10\n");
  EXPECT_NE(errorReading(noEquals).find("line 1: 'RINGREDUCE_SPIN_US 10' is not KEY=VALUE"),
            std::string::npos);
  const TempConfig repeated("RINGREDUCE_SPIN_US=10\nRINGREDUCE_SPIN_US=20\n");
  EXPECT_NE(errorReading(repeated).find("line 2: RINGREDUCE_SPIN_US repeats line 1"),
            std::string::npos);
  ScopedEnv config("RINGREDUCE_CONFIG", "/nonexistent/ringreduce.conf");
  EXPECT_THROW(Config::fromEnvironment(), InvalidArgument);
}

TEST(ConfigFile, EverySettingDescribedReadsBackFromAFile) {
  Config changed;
  changed.segmentBytes = 4096;
  changed.allreduceAlgorithm = AllreduceAlgorithm::HalvingDoubling;
  changed.intraNode = {2e-6, 1.0 / 4e9, 0.5e-6};
  changed.autotune = true;
  std::string text;
  for (const auto& [key, value] : changed.describe()) text += key + "=" + value + "\n";
  const TempConfig file(text);
  ScopedEnv config("RINGREDUCE_CONFIG", file.path().c_str());
  EXPECT_EQ(Config::fromEnvironment().describe(), changed.describe());
}

// Settings a group is given (its pg_options' config) win over the
// environment and the file, and are checked as strictly.
TEST(ConfigFile, GivenSettingsWinOverEnvironmentAndFile) {
  const TempConfig file("RINGREDUCE_SEGMENT_BYTES=65536\nRINGREDUCE_ALGORITHM=direct\n");
  ScopedEnv config("RINGREDUCE_CONFIG", file.path().c_str());
  ScopedEnv segment("RINGREDUCE_SEGMENT_BYTES", "131072");
  const Config read = Config::fromEnvironment(
      0, {{"RINGREDUCE_SEGMENT_BYTES", "8192"}, {"RINGREDUCE_ENABLE_TIMING", "1"}});
  EXPECT_EQ(read.segmentBytes, 8192u);
  EXPECT_TRUE(read.enableTiming);
  EXPECT_EQ(read.allreduceAlgorithm, AllreduceAlgorithm::Direct);  // the file's, not given
}

TEST(ConfigFile, GivenUnknownKeysAndBadValuesAreErrorsNamingThem) {
  const auto errorGiven = [](const char* key, const char* value) -> std::string {
    try {
      Config::fromEnvironment(0, {{key, value}});
    } catch (const InvalidArgument& e) {
      return e.what();
    }
    return "(accepted)";
  };
  std::string message = errorGiven("RINGREDUCE_SEGMENT_SIZE", "4");
  EXPECT_NE(message.find("'RINGREDUCE_SEGMENT_SIZE' is not a setting"), std::string::npos)
      << message;
  message = errorGiven("RINGREDUCE_SEGMENT_BYTES", "lots");
  EXPECT_NE(message.find("pg_options RINGREDUCE_SEGMENT_BYTES='lots'"), std::string::npos)
      << message;
}

// NCCL's switch for durations turns ours on too, unless ours says otherwise.
TEST(ConfigFile, TimingFollowsNcclsSettingByDefault) {
  ScopedEnv unset("TORCH_NCCL_ENABLE_TIMING", nullptr);
  ScopedEnv unsetOurs("RINGREDUCE_ENABLE_TIMING", nullptr);
  EXPECT_FALSE(Config::fromEnvironment().enableTiming);
  ScopedEnv nccl("TORCH_NCCL_ENABLE_TIMING", "true");
  EXPECT_TRUE(Config::fromEnvironment().enableTiming);
  ScopedEnv ours("RINGREDUCE_ENABLE_TIMING", "0");
  EXPECT_FALSE(Config::fromEnvironment().enableTiming);
}

TEST(Autotune, SumsStayRightAndEveryRankChoosesAlike) {
  Config config;
  config.autotune = true;
  config.autotuneSteps = 2;
  config.autotuneLossyWire = false;
  const int n = 3;
  std::mutex mutex;
  std::vector<std::vector<AllreduceTuner::Choice>> choices(n);
  runComms(
      n, TransportKind::Loopback,
      [&](const Comm& base, int rank) {
        AllreduceSelector selector;
        AllreduceTuner tuner(config);
        Comm comm = base;
        comm.selector = &selector;
        comm.tuner = &tuner;
        uint64_t seq = 1;
        for (const size_t count : {size_t{1000}, size_t{300000}}) {
          size_t classBytes = 1;
          while (classBytes < count * sizeof(float)) classBytes <<= 1;
          const size_t trials = AllreduceTuner::candidates(config, classBytes).size() * 2;
          for (size_t step = 0; step < trials + 3; ++step) {  // the trials, then the choice
            std::vector<float> data(count, static_cast<float>(rank + 1 + step));
            hostAllreduce(comm, OpContext("allreduce", seq++, std::chrono::seconds(30)),
                          {data.data(), count, DataType::Float32, ReduceOp::Sum});
            const float expected = static_cast<float>(n * (n + 1) / 2 + n * step);
            for (const float x : data) ASSERT_EQ(x, expected) << "step " << step;
          }
        }
        std::lock_guard<std::mutex> lock(mutex);
        choices[static_cast<size_t>(rank)] = tuner.choices();
      },
      config);
  ASSERT_EQ(choices[0].size(), 2u);
  for (int rank = 1; rank < n; ++rank) {
    ASSERT_EQ(choices[rank].size(), choices[0].size());
    for (size_t c = 0; c < choices[0].size(); ++c) {
      EXPECT_EQ(choices[rank][c].classBytes, choices[0][c].classBytes);
      EXPECT_EQ(choices[rank][c].settings, choices[0][c].settings);
    }
  }
}

// The CUDA paths across nodes: the device ring and NCCL in turn while a
// size class is on trial (onTrial says so, for the caller to wait for its
// device work), then every rank runs the one they all chose.
TEST(Autotune, CudaPathsTryTheRingAndNcclThenEveryRankKeepsTheSameOne) {
  Config config;
  config.autotuneSteps = 3;
  const int n = 3;
  std::mutex mutex;
  std::vector<std::vector<CudaAlgorithm>> ran(n);
  std::vector<std::vector<AllreduceTuner::Choice>> choices(n);
  runComms(
      n, TransportKind::Loopback,
      [&](const Comm& comm, int rank) {
        AllreduceTuner tuner(config, AllreduceTuner::cudaPaths());
        std::vector<CudaAlgorithm> mine;
        for (uint64_t seq = 1; seq <= 2 * 3 + 4; ++seq) {
          EXPECT_EQ(tuner.onTrial(1 << 20), seq <= 2 * 3) << "collective " << seq;
          tuner.allreduce(comm, OpContext("allreduce", seq, std::chrono::seconds(30)), 1 << 20,
                          [&](const Comm& settings) {
                            mine.push_back(settings.config.cudaAlgorithm);
                          });
        }
        std::lock_guard<std::mutex> lock(mutex);
        ran[static_cast<size_t>(rank)] = mine;
        choices[static_cast<size_t>(rank)] = tuner.choices();
      },
      config);
  for (int rank = 0; rank < n; ++rank) {
    const auto& mine = ran[static_cast<size_t>(rank)];
    ASSERT_EQ(mine.size(), 10u);
    for (size_t i = 0; i < 6; ++i) {
      EXPECT_EQ(mine[i], i % 2 == 0 ? CudaAlgorithm::Ring : CudaAlgorithm::Nccl) << i;
    }
    for (size_t i = 6; i < 10; ++i) EXPECT_EQ(mine[i], ran[0][6]) << "rank " << rank;
    ASSERT_EQ(choices[static_cast<size_t>(rank)].size(), 1u);
    EXPECT_EQ(choices[static_cast<size_t>(rank)][0].settings,
              std::string("RINGREDUCE_CUDA_ALGO=") + nameOf(ran[0][6]));
  }
}

TEST(Autotune, CandidatesStartWithTheGroupsOwnAndAddLossyWireOnlyWhenAllowed) {
  Config config;
  for (const size_t bytes : {size_t{4096}, size_t{64} << 20}) {
    const std::vector<Config> list = AllreduceTuner::candidates(config, bytes);
    ASSERT_GE(list.size(), 3u);
    EXPECT_EQ(AllreduceTuner::describe(list[0]), AllreduceTuner::describe(config));
    for (const Config& c : list) EXPECT_EQ(c.hostWireDtype, WireDtype::None);
  }
  EXPECT_GT(AllreduceTuner::candidates(config, size_t{64} << 20).size(),
            AllreduceTuner::candidates(config, 4096).size());  // segment sizes matter there
  config.autotuneLossyWire = true;
  bool lossy = false;
  for (const Config& c : AllreduceTuner::candidates(config, 4096)) {
    lossy = lossy || c.hostWireDtype != WireDtype::None;
  }
  EXPECT_TRUE(lossy);
}

// More ranks on this machine than cores: the caller's wait polls, yielding
// its core at every turn, and the worker does not spin; fewer: the defaults.
// RINGREDUCE_SPIN_YIELD overrides either way.
TEST(ConfigSpins, OversubscribedRanksYieldWhileTheyWait) {
  {
    ScopedEnv ranks("LOCAL_WORLD_SIZE", "100000");
    const Config read = Config::fromEnvironment();
    EXPECT_TRUE(read.spinYields);
    EXPECT_EQ(read.spinMicroseconds, 0);
    EXPECT_EQ(read.waitSpinMicroseconds, kOversubscribedWaitSpinMicroseconds);
    ScopedEnv off("RINGREDUCE_SPIN_YIELD", "0");
    EXPECT_FALSE(Config::fromEnvironment().spinYields);
  }
  {
    ScopedEnv ranks("LOCAL_WORLD_SIZE", "1");
    const Config read = Config::fromEnvironment();
    EXPECT_FALSE(read.spinYields);
    EXPECT_EQ(read.spinMicroseconds, Config().spinMicroseconds);
    EXPECT_EQ(read.waitSpinMicroseconds, Config().waitSpinMicroseconds);
    ScopedEnv on("RINGREDUCE_SPIN_YIELD", "1");
    EXPECT_TRUE(Config::fromEnvironment().spinYields);
  }
}

// Spins adapt to the load (core/base/spin_budget.h) unless one is set
// explicitly: then it is spun as given. RINGREDUCE_ADAPTIVE_SPIN overrides.
TEST(ConfigSpins, ExplicitSpinsAreFixedUnlessAdaptiveSpinSaysOtherwise) {
  EXPECT_TRUE(Config::fromEnvironment().adaptiveSpin);
  for (const char* name : {"RINGREDUCE_SPIN_US", "RINGREDUCE_WAIT_SPIN_US"}) {
    ScopedEnv spin(name, "0");
    EXPECT_FALSE(Config::fromEnvironment().adaptiveSpin) << name;
    ScopedEnv adaptive("RINGREDUCE_ADAPTIVE_SPIN", "1");
    EXPECT_TRUE(Config::fromEnvironment().adaptiveSpin) << name;
  }
  ScopedEnv off("RINGREDUCE_ADAPTIVE_SPIN", "0");
  EXPECT_FALSE(Config::fromEnvironment().adaptiveSpin);
}

// Where this machine's ranks have one core each (torchrun's LOCAL_WORLD_SIZE
// equal to the cores this process may use) each group's worker follows its
// caller's core; with cores to spare or short, or outside torchrun, it does
// not.
// RINGREDUCE_WORKER_FOLLOWS_CALLER overrides either way.
TEST(ConfigSpins, WorkersFollowTheirCallersWhereRanksFillTheCores) {
  cpu_set_t set;
  ASSERT_EQ(sched_getaffinity(0, sizeof(set), &set), 0);
  const int cores = CPU_COUNT(&set);
  {
    ScopedEnv ranks("LOCAL_WORLD_SIZE", std::to_string(cores).c_str());
    EXPECT_TRUE(Config::fromEnvironment().workerFollowsCaller);
    ScopedEnv off("RINGREDUCE_WORKER_FOLLOWS_CALLER", "0");
    EXPECT_FALSE(Config::fromEnvironment().workerFollowsCaller);
  }
  {
    ScopedEnv ranks("LOCAL_WORLD_SIZE", std::to_string(cores + 1).c_str());
    EXPECT_FALSE(Config::fromEnvironment().workerFollowsCaller);
  }
  if (cores > 1) {
    ScopedEnv ranks("LOCAL_WORLD_SIZE", std::to_string(cores - 1).c_str());
    EXPECT_FALSE(Config::fromEnvironment().workerFollowsCaller);
    ScopedEnv on("RINGREDUCE_WORKER_FOLLOWS_CALLER", "1");
    EXPECT_TRUE(Config::fromEnvironment().workerFollowsCaller);
  }
  {
    ScopedEnv outside("LOCAL_WORLD_SIZE", nullptr);
    EXPECT_FALSE(Config::fromEnvironment().workerFollowsCaller);
  }
}

// Outside torchrun (Lightning's launcher, mp.spawn, srun) the group's own
// count of the ranks on this machine stands in for LOCAL_WORLD_SIZE; where
// torchrun set it, LOCAL_WORLD_SIZE wins.
TEST(ConfigSpins, TheGroupsOwnCountOfRanksHereStandsInForLocalWorldSize) {
  cpu_set_t set;
  ASSERT_EQ(sched_getaffinity(0, sizeof(set), &set), 0);
  const int cores = CPU_COUNT(&set);
  ScopedEnv outside("LOCAL_WORLD_SIZE", nullptr);
  EXPECT_TRUE(Config::fromEnvironment(cores).workerFollowsCaller);
  EXPECT_FALSE(Config::fromEnvironment(cores).spinYields);
  const Config crowded = Config::fromEnvironment(cores + 1);
  EXPECT_TRUE(crowded.spinYields);
  EXPECT_EQ(crowded.spinMicroseconds, 0);
  EXPECT_EQ(crowded.waitSpinMicroseconds, kOversubscribedWaitSpinMicroseconds);
  EXPECT_FALSE(crowded.workerFollowsCaller);
  {
    ScopedEnv off("RINGREDUCE_SPIN_YIELD", "0");
    EXPECT_FALSE(Config::fromEnvironment(cores + 1).spinYields);
  }
  {
    ScopedEnv torchrun("LOCAL_WORLD_SIZE", std::to_string(cores + 1).c_str());
    EXPECT_FALSE(Config::fromEnvironment(cores).workerFollowsCaller);
    EXPECT_TRUE(Config::fromEnvironment(cores).spinYields);
  }
}

// RINGREDUCE_EAGER_BYTES is off (UCX's thresholds) unless set
// (transport/ucx/eager_policy.h), from the environment or the file.
TEST(ConfigFile, EagerLimitIsOffUnlessSet) {
  EXPECT_EQ(Config::fromEnvironment().eagerBytes, 0u);
  {
    ScopedEnv eager("RINGREDUCE_EAGER_BYTES", "262144");
    EXPECT_EQ(Config::fromEnvironment().eagerBytes, 262144u);
  }
  const TempConfig file("RINGREDUCE_EAGER_BYTES=1048576\n");
  ScopedEnv config("RINGREDUCE_CONFIG", file.path().c_str());
  EXPECT_EQ(valueOf(Config::fromEnvironment(), "RINGREDUCE_EAGER_BYTES"), "1048576");
}
