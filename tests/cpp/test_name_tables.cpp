// The enums' name tables (core/base/name_table.h): every value prints as the name
// it parses from, the names are the values the environment variables take
// (and, for the path taken, the strings the trace log printed before), and a
// bad value is refused with the list of choices.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "core/config/config.h"
#include "core/config/cuda_choices.h"
#include "core/base/errors.h"
#include "scoped_env.h"

using namespace ringreduce;

namespace {

template <typename E>
void expectRoundTrip() {
  for (const NamedValue<E>& entry : NameTable<E>::entries) {
    EXPECT_STREQ(nameOf(entry.value), entry.name);
    const std::optional<E> parsed = parseName<E>(entry.name);
    ASSERT_TRUE(parsed.has_value()) << entry.name;
    EXPECT_EQ(*parsed, entry.value) << entry.name;
  }
}

std::string errorOf(const char* name, const char* value) {
  ScopedEnv env(name, value);
  try {
    Config::fromEnvironment();
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(NameTables, EveryValuePrintsAsTheNameItParsesFrom) {
  expectRoundTrip<CudaAlgorithm>();
  expectRoundTrip<WireDtype>();
  expectRoundTrip<DevicePathTaken>();
  expectRoundTrip<CudaSync>();
}

TEST(NameTables, NamesAreTheEnvironmentSpellings) {
  EXPECT_EQ(listNames<CudaAlgorithm>(),
            "auto, oneshot, twoshot, staged, nccl, host, flags, ring");
  EXPECT_EQ(listNames<CudaSync>(), "auto, flags, memops");
  EXPECT_EQ(listNames<WireDtype>(), "none, fp16, bf16");
}

// The device paths keep the names they had as strings ("" meant host staging).
TEST(NameTables, PathsTakenPrintAsTheLogNamesThem) {
  EXPECT_EQ(listNames<DevicePathTaken>(),
            "host staging, one-shot, two-shot, staged two-shot, ipc, nccl, device-flags "
            "one-shot, device-flags two-shot, device-flags in-place two-shot, device-flags, "
            "device ring");
  EXPECT_FALSE(ranOnDevice(DevicePathTaken::HostStaging));
  EXPECT_FALSE(ranOnDevice(DevicePathTaken::DeviceRing));  // the caller runs it
  for (DevicePathTaken path :
       {DevicePathTaken::OneShot, DevicePathTaken::TwoShot, DevicePathTaken::Staged,
        DevicePathTaken::Ipc, DevicePathTaken::Nccl, DevicePathTaken::FlagsOneShot,
        DevicePathTaken::FlagsTwoShot, DevicePathTaken::FlagsInPlace, DevicePathTaken::Flags}) {
    EXPECT_TRUE(ranOnDevice(path)) << nameOf(path);
  }
}

TEST(NameTables, AnythingElseDoesNotParse) {
  for (const char* bad : {"", "AUTO", "one-shot", "auto ", "nccl2"}) {
    EXPECT_FALSE(parseName<CudaAlgorithm>(bad).has_value()) << "'" << bad << "'";
  }
  for (const char* bad : {"", "float16", "fp32", "BF16"}) {
    EXPECT_FALSE(parseName<WireDtype>(bad).has_value()) << "'" << bad << "'";
  }
}

TEST(NameTables, ConfigReadsTheChoices) {
  {
    ScopedEnv algo("RINGREDUCE_CUDA_ALGO", "staged");
    ScopedEnv wire("RINGREDUCE_CUDA_WIRE_DTYPE", "bf16");
    const Config config = Config::fromEnvironment();
    EXPECT_EQ(config.cudaAlgorithm, CudaAlgorithm::Staged);
    EXPECT_EQ(config.cudaWireDtype, WireDtype::Bf16);
  }
  {
    // Empty counts as unset: the defaults.
    ScopedEnv algo("RINGREDUCE_CUDA_ALGO", "");
    ScopedEnv wire("RINGREDUCE_CUDA_WIRE_DTYPE", "");
    const Config config = Config::fromEnvironment();
    EXPECT_EQ(config.cudaAlgorithm, CudaAlgorithm::Auto);
    EXPECT_EQ(config.cudaWireDtype, WireDtype::None);
  }
}

TEST(NameTables, ConfigReadsTheDeviceFlagsSettings) {
  {
    ScopedEnv algo("RINGREDUCE_CUDA_ALGO", "flags");
    ScopedEnv sync("RINGREDUCE_CUDA_SYNC", "memops");
    ScopedEnv buffer("RINGREDUCE_CUDA_BUFFER_BYTES", "65536");
    ScopedEnv blocks("RINGREDUCE_CUDA_BLOCKS", "4");
    const Config config = Config::fromEnvironment();
    EXPECT_EQ(config.cudaAlgorithm, CudaAlgorithm::Flags);
    EXPECT_EQ(config.cudaSync, CudaSync::StreamMemOps);
    EXPECT_EQ(config.cudaBufferBytes, 65536u);
    EXPECT_EQ(config.cudaBlocks, 4);
  }
  const Config defaults = Config::fromEnvironment();
  EXPECT_EQ(defaults.cudaAlgorithm, CudaAlgorithm::Auto);
  EXPECT_FALSE(defaults.cudaDeviceFlags);  // the group decides it (resolveDeviceFlags)
  EXPECT_EQ(defaults.cudaSync, CudaSync::Auto);
  {
    ScopedEnv buffer("RINGREDUCE_CUDA_BUFFER_BYTES", "5000");
    EXPECT_THROW(Config::fromEnvironment(), InvalidArgument);
  }
  {
    ScopedEnv blocks("RINGREDUCE_CUDA_BLOCKS", "65");
    EXPECT_THROW(Config::fromEnvironment(), InvalidArgument);
  }
}

// RINGREDUCE_CUDA_P2P: auto by default, off turns the one-node paths'
// peer access off (and says so on a bad value); the device ring against
// NCCL is measured across nodes unless RINGREDUCE_CUDA_AUTOTUNE=0.
TEST(NameTables, ConfigReadsPeerAccessAndTheCudaAutotune) {
  const Config defaults = Config::fromEnvironment();
  EXPECT_TRUE(defaults.cudaPeerAccess);
  EXPECT_TRUE(defaults.cudaAutotune);
  for (const char* off : {"off", "0"}) {
    ScopedEnv p2p("RINGREDUCE_CUDA_P2P", off);
    EXPECT_FALSE(Config::fromEnvironment().cudaPeerAccess) << off;
  }
  {
    ScopedEnv p2p("RINGREDUCE_CUDA_P2P", "auto");
    ScopedEnv tune("RINGREDUCE_CUDA_AUTOTUNE", "0");
    const Config config = Config::fromEnvironment();
    EXPECT_TRUE(config.cudaPeerAccess);
    EXPECT_FALSE(config.cudaAutotune);
  }
  EXPECT_EQ(errorOf("RINGREDUCE_CUDA_P2P", "no"),
            "ringreduce: environment variable RINGREDUCE_CUDA_P2P='no' must be auto or off");
}

TEST(NameTables, BadValueListsTheChoices) {
  EXPECT_EQ(errorOf("RINGREDUCE_CUDA_ALGO", "fast"),
            "ringreduce: environment variable RINGREDUCE_CUDA_ALGO='fast' must be one of: "
            "auto, oneshot, twoshot, staged, nccl, host, flags, ring");
  EXPECT_EQ(errorOf("RINGREDUCE_CUDA_SYNC", "spin"),
            "ringreduce: environment variable RINGREDUCE_CUDA_SYNC='spin' must be one of: "
            "auto, flags, memops");
  EXPECT_EQ(errorOf("RINGREDUCE_CUDA_WIRE_DTYPE", "fp8"),
            "ringreduce: environment variable RINGREDUCE_CUDA_WIRE_DTYPE='fp8' must be one of: "
            "none, fp16, bf16");
}

// auto takes the device-flags path where every rank of the group runs on
// this host and the kernels serve that many ranks; flags always; the named
// IPC, NCCL, ring and host choices never.
TEST(NameTables, DeviceFlagsAreAutosChoiceOnOneHost) {
  struct Case {
    CudaAlgorithm algo;
    bool oneHost;
    int size;
    bool flags;
  };
  const Case cases[] = {
      {CudaAlgorithm::Auto, true, 1, true},
      {CudaAlgorithm::Auto, true, 2, true},
      {CudaAlgorithm::Auto, true, Config::kDeviceFlagsMaxRanks, true},
      {CudaAlgorithm::Auto, true, Config::kDeviceFlagsMaxRanks + 1, false},
      {CudaAlgorithm::Auto, false, 4, false},
      {CudaAlgorithm::Flags, false, 4, true},
      {CudaAlgorithm::OneShot, true, 2, false},
      {CudaAlgorithm::TwoShot, true, 2, false},
      {CudaAlgorithm::Nccl, true, 2, false},
      {CudaAlgorithm::Ring, true, 2, false},
      {CudaAlgorithm::Host, true, 2, false},
  };
  for (const Case& c : cases) {
    Config config;
    config.cudaAlgorithm = c.algo;
    config.resolveDeviceFlags(c.oneHost, c.size);
    EXPECT_EQ(config.cudaDeviceFlags, c.flags)
        << nameOf(c.algo) << ", one host " << c.oneHost << ", " << c.size << " ranks";
  }
  // A 16-bit wire keeps auto on the IPC kernels that carry it; flags, which
  // carry none, refuses it instead of ignoring it.
  for (WireDtype wire : {WireDtype::Fp16, WireDtype::Bf16}) {
    Config config;
    config.cudaWireDtype = wire;
    config.resolveDeviceFlags(true, 2);
    EXPECT_FALSE(config.cudaDeviceFlags) << nameOf(wire);
    config.cudaAlgorithm = CudaAlgorithm::Flags;
    EXPECT_THROW(config.resolveDeviceFlags(true, 2), InvalidArgument) << nameOf(wire);
  }
}
