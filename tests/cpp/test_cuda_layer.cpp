// The parts of the CUDA layer that run without a GPU: argument checks that
// come before any CUDA call, the runtime probe, and NCCL loading. On a
// machine with a GPU the same tests pass too (tests/gpu covers the rest).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <string>
#include <type_traits>
#include <utility>

#include "core/base/errors.h"
#include "cuda/device_info.h"
#include "cuda/kernels/reduce_copy.h"
#include "cuda/nccl/nccl_communicator.h"
#include "cuda/nccl/nccl_library.h"

#if __has_include(<nccl.h>)
#include <nccl.h>
// Our declarations of NCCL's ABI against the real header.
static_assert(sizeof(ringreduce::cuda::NcclUniqueId) == sizeof(ncclUniqueId));
#define RR_SAME(ours, theirs) (static_cast<int>(ringreduce::cuda::ours) == static_cast<int>(theirs))
static_assert(RR_SAME(kNcclInt8, ncclInt8) && RR_SAME(kNcclUint8, ncclUint8) &&
              RR_SAME(kNcclInt32, ncclInt32) && RR_SAME(kNcclUint32, ncclUint32) &&
              RR_SAME(kNcclInt64, ncclInt64) && RR_SAME(kNcclUint64, ncclUint64) &&
              RR_SAME(kNcclFloat16, ncclFloat16) && RR_SAME(kNcclFloat32, ncclFloat32) &&
              RR_SAME(kNcclFloat64, ncclFloat64) && RR_SAME(kNcclBfloat16, ncclBfloat16));
static_assert(RR_SAME(kNcclSum, ncclSum) && RR_SAME(kNcclProd, ncclProd) &&
              RR_SAME(kNcclMax, ncclMax) && RR_SAME(kNcclMin, ncclMin) &&
              RR_SAME(kNcclAvg, ncclAvg));
static_assert(RR_SAME(kNcclSuccess, ncclSuccess) && RR_SAME(kNcclInProgress, ncclInProgress));
#undef RR_SAME
// ncclConfig_t: NCCL only appends fields, so the header's struct is the start
// of ours: each field it declares lies where ours does, with the same size,
// and each it lacks (a header older than ours: torch 2.14.1 pins NCCL 2.30.7,
// without 2.32's last five) lies past its end. A header as new as ours
// declares exactly our fields: one that adds more is a new NCCL to declare
// (install.sh takes the wheel's newest; this is where a new one shows).
#define RR_NCCL_CONFIG_FIELDS(X)                                                              \
  X(size) X(magic) X(version) X(blocking) X(cgaClusterSize) X(minCTAs) X(maxCTAs) X(netName) \
  X(splitShare) X(trafficClass) X(commName) X(collnetEnable) X(CTAPolicy) X(shrinkShare)     \
  X(nvlsCTAs) X(nChannelsPerNetPeer) X(nvlinkCentricSched) X(graphUsageMode) X(numRmaCtx)    \
  X(maxP2pPeers) X(graphStreamOrdering) X(launchOrderImplicit) X(numRmaSig) X(rmaEagerInit)  \
  X(hostCftMode) X(nvlsHostMode)
#define RR_FIELD(f)                                                                          \
  template <typename T, typename = void>                                                     \
  struct RrHas_##f : std::false_type {};                                                     \
  template <typename T>                                                                      \
  struct RrHas_##f<T, std::void_t<decltype(std::declval<T&>().f)>> : std::true_type {};      \
  template <typename T>                                                                      \
  constexpr bool rrSameField_##f() {                                                         \
    using Ours = ringreduce::cuda::NcclConfig;                                               \
    if constexpr (RrHas_##f<T>::value) {                                                     \
      return offsetof(Ours, f) == offsetof(T, f) && sizeof(Ours::f) == sizeof(T::f);         \
    } else {                                                                                 \
      return offsetof(Ours, f) >= sizeof(T);                                                 \
    }                                                                                        \
  }                                                                                          \
  template <typename T>                                                                      \
  constexpr size_t rrFieldEnd_##f() {                                                        \
    if constexpr (RrHas_##f<T>::value) {                                                     \
      return offsetof(T, f) + sizeof(T::f);                                                  \
    } else {                                                                                 \
      return 0;                                                                              \
    }                                                                                        \
  }                                                                                          \
  static_assert(rrSameField_##f<ncclConfig_t>(), "ncclConfig_t." #f);
RR_NCCL_CONFIG_FIELDS(RR_FIELD)
#undef RR_FIELD
// Where the header's last field ends (its tail padding is nobody's).
#define RR_END(f) rrFieldEnd_##f<ncclConfig_t>(),
constexpr size_t kTheirFieldsEnd = std::max({RR_NCCL_CONFIG_FIELDS(RR_END) size_t{0}});
#undef RR_END
constexpr bool kHeaderOlderThanOurs = NCCL_VERSION_CODE < ringreduce::cuda::NcclConfig::kVersion;
static_assert(kHeaderOlderThanOurs ? sizeof(ringreduce::cuda::NcclConfig) >= sizeof(ncclConfig_t)
                                   : sizeof(ringreduce::cuda::NcclConfig) == sizeof(ncclConfig_t));
static_assert(ringreduce::cuda::NcclConfig::kUndef == NCCL_CONFIG_UNDEF_INT);

// Our defaults are NCCL_CONFIG_INITIALIZER's, byte for byte over the
// header's fields, but for `version`: that is the NCCL_VERSION_CODE of the
// header a caller was built against (ours: the one NcclConfig declares,
// 2.32.3), which tells NCCL which fields the caller knows; a later header
// with the same fields (the wheel's 2.32.6 from 2026-12) says its own. Ours
// may not be newer than a header whose fields are all ours; an older header
// (an older NCCL) has a smaller `size`, and reads ours as far as it knows.
TEST(CudaLayer, NcclConfigMatchesTheInitializer) {
  const ncclConfig_t theirs = NCCL_CONFIG_INITIALIZER;
  const ringreduce::cuda::NcclConfig ours;
  EXPECT_EQ(ours.magic, theirs.magic);
  if (kHeaderOlderThanOurs) {
    EXPECT_GT(ours.size, theirs.size);
    EXPECT_GT(ours.version, theirs.version);
  } else {
    EXPECT_EQ(ours.size, theirs.size);
    EXPECT_LE(ours.version, theirs.version);
  }
  const size_t afterVersion = offsetof(ncclConfig_t, version) + sizeof(theirs.version);
  EXPECT_EQ(0, std::memcmp(reinterpret_cast<const char*>(&theirs) + afterVersion,
                           reinterpret_cast<const char*>(&ours) + afterVersion,
                           kTheirFieldsEnd - afterVersion));
}
#endif

using namespace ringreduce;
using namespace ringreduce::cuda;

TEST(CudaLayer, KernelCoverageNamesWhatIsMissing) {
  for (DataType t : {DataType::Float32, DataType::Float64, DataType::Float16, DataType::BFloat16,
                     DataType::Int8, DataType::UInt8, DataType::Int16, DataType::Int32,
                     DataType::Int64}) {
    for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Product, ReduceOp::Min,
                        ReduceOp::Max}) {
      EXPECT_EQ(kernelUnsupportedReason(t, t, op), "") << dataTypeName(t) << reduceOpName(op);
    }
  }
  EXPECT_EQ(kernelUnsupportedReason(DataType::Bool, DataType::Bool, ReduceOp::Max), "");
  EXPECT_EQ(kernelUnsupportedReason(DataType::Complex64, DataType::Complex64, ReduceOp::Sum), "");
  EXPECT_NE(kernelUnsupportedReason(DataType::Complex64, DataType::Complex64, ReduceOp::Max)
                .find("complex64"),
            std::string::npos);
  EXPECT_EQ(kernelUnsupportedReason(DataType::Float32, DataType::BFloat16, ReduceOp::Avg), "");
  EXPECT_NE(kernelUnsupportedReason(DataType::Float32, DataType::BFloat16, ReduceOp::Max), "");
  EXPECT_NE(kernelUnsupportedReason(DataType::Int32, DataType::Float16, ReduceOp::Sum), "");
}

TEST(CudaLayer, BadLaunchArgumentsFailBeforeAnyCudaCall) {
  ReduceCopyArgs args;
  args.nsrc = 0;
  EXPECT_THROW(launchReduceCopy(args, 0, nullptr), InvalidArgument);
  args.nsrc = kMaxFanout + 1;
  EXPECT_THROW(launchReduceCopy(args, 0, nullptr), InvalidArgument);
  args.nsrc = 1;
  args.srcType = DataType::Complex128;
  args.dstType = DataType::Complex128;
  args.op = ReduceOp::Min;
  EXPECT_THROW(launchReduceCopy(args, 0, nullptr), InvalidArgument);
  // Nothing to do: returns without touching the device.
  args.op = ReduceOp::Sum;
  args.count = 0;
  EXPECT_NO_THROW(launchReduceCopy(args, 0, nullptr));
}

// What _reduce_copy and every internal launch are refused for, before the
// device sees them: AVG's divisor (a 0 returns the sum; a divisor on MAX
// divides it; 256 in an int8 divides by zero on the device).
TEST(CudaLayer, ReduceCopyArgumentsAreCheckedBeforeTheLaunch) {
  ReduceCopyArgs args;
  args.nsrc = 2;
  args.ndst = 1;
  args.count = 16;
  EXPECT_EQ(reduceCopyArgsProblem(args), "");
  args.op = ReduceOp::Max;
  args.avgDivisor = 4;
  EXPECT_NE(reduceCopyArgsProblem(args).find("for AVG only"), std::string::npos);
  args.op = ReduceOp::Avg;
  args.avgDivisor = 0;
  EXPECT_NE(reduceCopyArgsProblem(args).find("avg_divisor >= 1"), std::string::npos);
  args.avgDivisor = 1;
  EXPECT_EQ(reduceCopyArgsProblem(args), "");
  args.srcType = args.dstType = DataType::Int8;
  args.avgDivisor = 256;
  EXPECT_NE(reduceCopyArgsProblem(args).find("does not fit int8"), std::string::npos);
  args.avgDivisor = 127;
  EXPECT_EQ(reduceCopyArgsProblem(args), "");
  args.srcType = args.dstType = DataType::UInt8;
  args.avgDivisor = 255;
  EXPECT_EQ(reduceCopyArgsProblem(args), "");
  args.avgDivisor = 8;
  args.ndst = kMaxFanout + 1;
  EXPECT_NE(reduceCopyArgsProblem(args).find("destinations"), std::string::npos);
  // Every problem is an InvalidArgument from the launcher, before any CUDA call.
  EXPECT_THROW(launchReduceCopy(args, 0, nullptr), InvalidArgument);
}

TEST(CudaLayer, RuntimeProbeNeverThrows) {
  std::string why;
  const int count = visibleDeviceCount(&why);
  EXPECT_GE(count, 0);
  if (count == 0) {
    EXPECT_FALSE(why.empty());
  }
  const std::string text = runtimeDescription();
  EXPECT_NE(text.find("linked statically"), std::string::npos) << text;
}

TEST(CudaLayer, NcclCoverage) {
  EXPECT_EQ(NcclCommunicator::unsupportedReason(DataType::BFloat16, ReduceOp::Avg), "");
  EXPECT_EQ(NcclCommunicator::unsupportedReason(DataType::Bool, ReduceOp::Sum), "");
  EXPECT_NE(NcclCommunicator::unsupportedReason(DataType::Int16, ReduceOp::Sum), "");
  EXPECT_NE(NcclCommunicator::unsupportedReason(DataType::Int32, ReduceOp::BXor), "");
  EXPECT_NE(NcclCommunicator::unsupportedReason(DataType::Complex64, ReduceOp::Product), "");
}

TEST(CudaLayer, MissingNcclIsAClearError) {
  std::string why;
  EXPECT_EQ(NcclLibrary::open("/nonexistent/libnccl.so.2", &why), nullptr);
  EXPECT_NE(why.find("/nonexistent/libnccl.so.2"), std::string::npos) << why;
  EXPECT_NE(why.find("RINGREDUCE_NCCL_LIBRARY"), std::string::npos) << why;
}

#ifdef RINGREDUCE_TEST_NCCL_LIBRARY
// NCCL from the nvidia-nccl-cu13 wheel: loads, has every symbol we call, and
// makes a unique id (no GPU needed for that).
TEST(CudaLayer, NcclLoadsWithEverySymbol) {
  std::string why;
  auto nccl = NcclLibrary::open(RINGREDUCE_TEST_NCCL_LIBRARY, &why);
  ASSERT_NE(nccl, nullptr) << why;
  EXPECT_GE(nccl->version, 21000);
  NcclUniqueId id{};
  EXPECT_EQ(nccl->getUniqueId(&id), 0);
  EXPECT_STRNE(nccl->getErrorString(0), "");
  EXPECT_NE(nccl->commInitRankConfig, nullptr);  // 2.14 and newer: the bounded init
  EXPECT_NE(nccl->commFinalize, nullptr);        // and the close that flushes first
}
#endif
