// What the info command reports of UCX: the library loaded, and whether it
// registers CUDA memory (ucp_context_query's memory types).
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "transport/ucx/ucx_info.h"

using namespace ringreduce;

TEST(UcxInfo, EveryUcxRegistersHostMemory) {
  const UcxDeviceMemory memory = ucxDeviceMemory();
  ASSERT_EQ(memory.error, "");
  EXPECT_NE(std::find(memory.memoryTypes.begin(), memory.memoryTypes.end(), "host"),
            memory.memoryTypes.end());
  // CUDA memory needs UCX's CUDA module (Debian's UCX has none).
  if (!memory.cudaModule) EXPECT_FALSE(memory.cuda);
}

TEST(UcxInfo, NamesTheLoadedLibraryAndTheVersionBuiltAgainst) {
  EXPECT_NE(ucxLibraryPath().find("libucp.so"), std::string::npos) << ucxLibraryPath();
  // The runtime's release starts with the API version the build compiled against.
  EXPECT_EQ(ucxVersion().rfind(ucxBuiltVersion() + ".", 0), 0u)
      << ucxVersion() << " vs " << ucxBuiltVersion();
}
