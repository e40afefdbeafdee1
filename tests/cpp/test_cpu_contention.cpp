// How CpuContention reads /proc/loadavg (core/base/cpu_contention.h): the
// runnable count is the fourth field's numerator; anything else is "cannot
// tell" (-1), which never says the cores are contended.
#include <gtest/gtest.h>

#include <cstdio>

#include "core/base/cpu_contention.h"

namespace ringreduce {
namespace {

TEST(CpuContention, ReadsTheRunnableCountOfALoadavgLine) {
  EXPECT_EQ(CpuContention::runnableIn("0.50 0.40 0.30 3/250 12345\n"), 3);
  EXPECT_EQ(CpuContention::runnableIn("12.01 9.87 4.20 17/1033 99\n"), 17);
}

TEST(CpuContention, ALineItCannotReadCountsAsUnknown) {
  EXPECT_EQ(CpuContention::runnableIn(""), -1);
  EXPECT_EQ(CpuContention::runnableIn("0.50 0.40 0.30"), -1);
  EXPECT_EQ(CpuContention::runnableIn("0.50 0.40 0.30 x/250 1"), -1);
  EXPECT_EQ(CpuContention::runnableIn("0.50 0.40 0.30 3 250 1"), -1);
}

// On this machine (Linux, /proc mounted) it answers without failing, and a
// thread that runs alone on its cores counts at least itself.
TEST(CpuContention, ThisMachineCountsAtLeastTheReader) {
  CpuContention contention;
  (void)contention.contended();
  char line[128] = {};
  FILE* f = std::fopen("/proc/loadavg", "r");
  ASSERT_NE(f, nullptr);
  ASSERT_NE(std::fgets(line, sizeof(line), f), nullptr);
  std::fclose(f);
  EXPECT_GE(CpuContention::runnableIn(line), 1) << line;
}

}  // namespace
}  // namespace ringreduce
