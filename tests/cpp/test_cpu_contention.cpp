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

// The load level: 0 up to `spare` tasks beyond the cores, then the octave of
// runnable tasks per core, topped at kTopLevel; a count it cannot read is 0.
TEST(CpuContention, TheLevelIsTheOctaveOfRunnableTasksPerCore) {
  EXPECT_EQ(CpuContention::levelOf(-1, 2, 1), 0);
  EXPECT_EQ(CpuContention::levelOf(9, 0, 1), 0);
  EXPECT_EQ(CpuContention::levelOf(3, 2, 1), 0);  // one task passing through
  EXPECT_EQ(CpuContention::levelOf(3, 2, 0), 1);
  EXPECT_EQ(CpuContention::levelOf(4, 2, 1), 1);  // 2 busy beside 2 ranks on 2 cores
  EXPECT_EQ(CpuContention::levelOf(7, 2, 1), 1);
  EXPECT_EQ(CpuContention::levelOf(8, 2, 1), 2);
  EXPECT_EQ(CpuContention::levelOf(10, 2, 1), 2);  // 8 busy
  EXPECT_EQ(CpuContention::levelOf(15, 2, 1), 2);
  EXPECT_EQ(CpuContention::levelOf(16, 2, 1), 3);
  EXPECT_EQ(CpuContention::levelOf(1000, 2, 1), CpuContention::kTopLevel);
  EXPECT_EQ(CpuContention::levelOf(40, 16, 1), 1);
  EXPECT_EQ(CpuContention::levelOf(64, 16, 1), 2);
}

// On this machine (Linux, /proc mounted) it answers without failing, and a
// thread that runs alone on its cores counts at least itself.
TEST(CpuContention, ThisMachineCountsAtLeastTheReader) {
  CpuContention contention;
  (void)contention.contended();
  EXPECT_GE(contention.level(), 0);
  EXPECT_LE(contention.level(), CpuContention::kTopLevel);
  char line[128] = {};
  FILE* f = std::fopen("/proc/loadavg", "r");
  ASSERT_NE(f, nullptr);
  ASSERT_NE(std::fgets(line, sizeof(line), f), nullptr);
  std::fclose(f);
  EXPECT_GE(CpuContention::runnableIn(line), 1) << line;
}

}  // namespace
}  // namespace ringreduce
