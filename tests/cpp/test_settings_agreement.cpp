// What must be alike on every rank of a group (core/config/settings_agreement.h),
// and the group's creation that compares it (transport/ucx/ucx_transport.cpp).
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/base/errors.h"
#include "core/config/settings_agreement.h"
#include "transport/rendezvous/in_memory_store.h"
#include "transport/ucx/ucx_transport.h"

namespace ringreduce {
namespace {

TEST(SettingsAgreement, NamesTheBuildAndTheSettingsThatDecideHowMessagesGo) {
  const std::string text = agreedSettings(Config{}, false);
  EXPECT_EQ(text.rfind("the torch_ringreduce build=" + buildIdentity() + "\n", 0), 0u) << text;
  for (const char* name : {"RINGREDUCE_ALGORITHM=auto", "RINGREDUCE_WIRE_DTYPE=none",
                           "RINGREDUCE_SEGMENT_BYTES=", "RINGREDUCE_CUDA_ALGO=auto",
                           "RINGREDUCE_CUDA_WIRE_DTYPE=none", "RINGREDUCE_CUDA_ONESHOT_BYTES=",
                           "RINGREDUCE_LINK_INTRA=", "RINGREDUCE_LINK_INTER=",
                           "RINGREDUCE_LINK_MEASURE=0", "RINGREDUCE_AUTOTUNE=0",
                           "RINGREDUCE_CUDA_BLOCKS=0", "RINGREDUCE_CUDA_SYNC="}) {
    EXPECT_NE(text.find(name), std::string::npos) << name << " in " << text;
  }
  EXPECT_NE(text.find(collectiveCheckSetting(false)), std::string::npos) << text;
  // A rank's own settings may differ: its spins, its trace, its timing.
  for (const char* name : {"RINGREDUCE_SPIN_US", "RINGREDUCE_TRACE_BUFFER_SIZE",
                           "RINGREDUCE_ENABLE_TIMING", "RINGREDUCE_SHM_STORES",
                           "RINGREDUCE_EAGER_BYTES", "RINGREDUCE_CUDA_HOLD_BYTES"}) {
    EXPECT_EQ(text.find(name), std::string::npos) << name << " in " << text;
  }
  EXPECT_NE(agreedSettings(Config{}, true), text);
}

TEST(SettingsAgreement, TheFirstDifferenceIsNamedWithBothValuesAndTheRank) {
  Config ring;
  ring.allreduceAlgorithm = AllreduceAlgorithm::Ring;
  Config smallSegments;
  smallSegments.segmentBytes = 65536;
  const std::string plain = agreedSettings(Config{}, false);
  EXPECT_EQ(settingsDisagreement({plain, plain, plain}), "");
  EXPECT_EQ(settingsDisagreement({}), "");
  EXPECT_EQ(settingsDisagreement({plain, plain, agreedSettings(ring, false)}),
            "RINGREDUCE_ALGORITHM differs between ranks: rank 0 has auto, rank 2 has ring; "
            "every rank of a group must use the same");
  const std::string segments = settingsDisagreement({plain, agreedSettings(smallSegments, false)});
  EXPECT_EQ(segments.rfind("RINGREDUCE_SEGMENT_BYTES differs between ranks: rank 0 has ", 0), 0u)
      << segments;
  EXPECT_NE(segments.find("rank 1 has 65536"), std::string::npos) << segments;
  // A line one rank lacks (another build's list) is named as unset there.
  EXPECT_EQ(settingsDisagreement({"A=1\nB=2\n", "A=1\n"}),
            "B differs between ranks: rank 0 has 2, rank 1 has (unset); every rank of a group "
            "must use the same");
}

// Two ranks whose configs differ in `change`: both fail the group's creation
// with InvalidArgument naming the setting, at once (the store holds both
// records), not at a collective's timeout.
std::vector<std::string> creationErrors(const Config& zero, const Config& one,
                                        bool oneChecks = false) {
  auto store = std::make_shared<InMemoryStore>();
  std::vector<std::string> errors(2);
  const auto create = [&](int rank, const Config& config, bool checks) {
    try {
      UcxTransport transport(rank, 2, store, std::chrono::seconds(20), config, checks);
      errors[rank] = "created";
    } catch (const InvalidArgument& e) {
      errors[rank] = e.what();
    } catch (const std::exception& e) {
      errors[rank] = std::string("another error: ") + e.what();
    }
  };
  std::thread other([&] { create(1, one, oneChecks); });
  create(0, zero, false);
  other.join();
  return errors;
}

TEST(SettingsAgreement, AGroupWhoseRanksDifferIsRefusedOnEveryRankAtCreation) {
  Config fp16;
  fp16.hostWireDtype = WireDtype::Fp16;
  const auto errors = creationErrors(Config{}, fp16);
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_NE(errors[rank].find("ringreduce: rank " + std::to_string(rank) +
                                ": RINGREDUCE_WIRE_DTYPE differs between ranks: rank 0 has none, "
                                "rank 1 has fp16"),
              std::string::npos)
        << errors[rank];
  }
  const auto checks = creationErrors(Config{}, Config{}, true);
  for (const std::string& error : checks) {
    EXPECT_NE(error.find("the collective check (RINGREDUCE_CHECK_COLLECTIVES, "
                         "TORCH_DISTRIBUTED_DEBUG) differs between ranks: rank 0 has off, "
                         "rank 1 has on"),
              std::string::npos)
        << error;
  }
}

TEST(SettingsAgreement, RanksThatDifferOnlyInTheirOwnSettingsMakeTheGroup) {
  Config own;
  own.spinMicroseconds = 7;
  own.traceBufferSize = 3;
  own.enableTiming = true;
  const auto errors = creationErrors(Config{}, own);
  EXPECT_EQ(errors[0], "created");
  EXPECT_EQ(errors[1], "created");
}

}  // namespace
}  // namespace ringreduce
