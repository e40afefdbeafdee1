// A shared-memory segment size UCX cannot carry is refused before UCX sees it
// (transport/ucx/segment_size_check.h): the reading of UCX's memory units,
// which variables are looked at, and the refusal by the real transport.
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "core/base/errors.h"
#include "core/config/config.h"
#include "scoped_env.h"
#include "transport/rendezvous/in_memory_store.h"
#include "transport/ucx/segment_size_check.h"
#include "transport/ucx/ucx_transport.h"

using namespace ringreduce;

TEST(SegmentSizeCheck, ReadsUcxMemoryUnitsAsUcxDoes) {
  EXPECT_EQ(parseUcxMemoryUnits("8256"), 8256u);
  EXPECT_EQ(parseUcxMemoryUnits("65535b"), 65535u);
  EXPECT_EQ(parseUcxMemoryUnits("64k"), 65536u);
  EXPECT_EQ(parseUcxMemoryUnits("64KB"), 65536u);
  EXPECT_EQ(parseUcxMemoryUnits(" 1M "), 1u << 20);
  EXPECT_EQ(parseUcxMemoryUnits("2gb"), uint64_t{2} << 30);
  EXPECT_EQ(parseUcxMemoryUnits("inf"), UINT64_MAX);
  // Left to UCX, which picks its own or refuses the value itself.
  EXPECT_FALSE(parseUcxMemoryUnits("auto").has_value());
  EXPECT_FALSE(parseUcxMemoryUnits("").has_value());
  EXPECT_FALSE(parseUcxMemoryUnits("64x").has_value());
  EXPECT_FALSE(parseUcxMemoryUnits("k").has_value());
}

TEST(SegmentSizeCheck, RefusesEachSegmentVariableFrom64KiBNamingIt) {
  for (const char* variable :
       {"UCX_MM_SEG_SIZE", "UCX_POSIX_SEG_SIZE", "UCX_SYSV_SEG_SIZE", "UCX_XPMEM_SEG_SIZE"}) {
    for (const char* value : {"64k", "65536", "70000", "1m", "inf"}) {
      const std::map<std::string, std::string> env{{variable, value}};
      const std::string reason = unusableSegmentSize([&](const char* name) -> const char* {
        auto it = env.find(name);
        return it == env.end() ? nullptr : it->second.c_str();
      });
      EXPECT_NE(reason.find(std::string(variable) + "=" + value), std::string::npos) << reason;
      EXPECT_NE(reason.find("at most 65535"), std::string::npos) << reason;
    }
  }
}

TEST(SegmentSizeCheck, AcceptsWhatFitsAndWhatUcxDecides) {
  for (const char* value : {"8256", "65535", "32k", "auto", "nonsense"}) {
    const std::string reason = unusableSegmentSize(
        [&](const char* name) -> const char* {
          return std::string(name) == "UCX_MM_SEG_SIZE" ? value : nullptr;
        });
    EXPECT_EQ(reason, "") << value;
  }
  EXPECT_EQ(unusableSegmentSize([](const char*) -> const char* { return nullptr; }), "");
  // Another transport's segment (TCP's) is no concern of this check.
  EXPECT_EQ(unusableSegmentSize([](const char* name) -> const char* {
              return std::string(name) == "UCX_TCP_TX_SEG_SIZE" ? "1m" : nullptr;
            }),
            "");
}

TEST(SegmentSizeCheck, TheTransportRefusesItBeforeOpeningUcx) {
  ScopedEnv segment("UCX_SYSV_SEG_SIZE", "64k");
  auto store = std::make_shared<InMemoryStore>();
  Config config;
  try {
    UcxTransport transport(0, 1, store, std::chrono::milliseconds(5000), config);
    FAIL() << "a 64 KiB segment was accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("UCX_SYSV_SEG_SIZE=64k"), std::string::npos)
        << e.what();
  }
}

TEST(SegmentSizeCheck, AConfiguredSegmentUcxCannotCarryNamesItsTransportAndTheFiles) {
  const std::string reason =
      unusableConfiguredSegmentSize({{"sysv", "8256"}, {"posix", "64K"}});
  for (const char* part : {"posix shared-memory transport segments of 64K", "UCX_MM_SEG_SIZE",
                           "UCX_POSIX_SEG_SIZE", "ucx.conf", "at most 65535"}) {
    EXPECT_NE(reason.find(part), std::string::npos) << part << " in: " << reason;
  }
  EXPECT_EQ(unusableConfiguredSegmentSize({{"posix", "8256"}, {"sysv", "65535"}}), "");
  EXPECT_EQ(unusableConfiguredSegmentSize({{"posix", "auto"}}), "");
  EXPECT_EQ(unusableConfiguredSegmentSize({}), "");
}

TEST(SegmentSizeCheck, ReadsWhatUcxWillUseForEachSharedMemoryTransport) {
  // A transport's own variable over the common one, as UCX applies them.
  ScopedEnv common("UCX_MM_SEG_SIZE", "16k");
  ScopedEnv own("UCX_POSIX_SEG_SIZE", "70000");
  std::map<std::string, std::optional<uint64_t>> bytes;
  for (const auto& [transport, value] : ucxSharedMemorySegmentSizes()) {
    bytes[transport] = parseUcxMemoryUnits(value);
  }
  ASSERT_EQ(bytes.count("posix"), 1u) << "UCX lists no posix transport here";
  EXPECT_EQ(bytes["posix"], std::optional<uint64_t>(70000));
  if (bytes.count("sysv")) {
    EXPECT_EQ(bytes["sysv"], std::optional<uint64_t>(16384));
  }
}
