// UCX's errors on a thread that is connecting are held, not printed; other
// threads' and other levels' go through (transport/ucx/held_ucx_errors.h).
#include <gtest/gtest.h>
#include <ucs/config/global_opts.h>
#include <ucs/debug/log_def.h>

#include <string>
#include <thread>

#include "transport/ucx/held_ucx_errors.h"

using namespace ringreduce;

namespace {

// As UCX 1.13's sysv shared memory words a peer's segment that is gone (mm_sysv.c).
void logShmatFailure(ucs_log_level_t level) {
  ucs_log_dispatch("/build/ucx/src/uct/sm/mm/sysv/mm_sysv.c", 57, "uct_sysv_mem_attach_common",
                   level, &ucs_global_opts.log_component, "shmat(shmid=%d) failed: %s", 29392937,
                   "Invalid argument");
}

std::string printedBy(void (*log)()) {
  testing::internal::CaptureStdout();
  testing::internal::CaptureStderr();
  log();
  return testing::internal::GetCapturedStdout() + testing::internal::GetCapturedStderr();
}

}  // namespace

TEST(HeldUcxErrors, AScopeHoldsThisThreadsErrorsOnceEachInOrder) {
  HeldUcxErrors held;
  {
    HeldUcxErrors::Scope holding(held);
    EXPECT_TRUE(HeldUcxErrors::holdOnThisThread(UCS_LOG_LEVEL_ERROR, "shmat failed"));
    EXPECT_TRUE(HeldUcxErrors::holdOnThisThread(UCS_LOG_LEVEL_ERROR, "no FIFO"));
    EXPECT_TRUE(HeldUcxErrors::holdOnThisThread(UCS_LOG_LEVEL_ERROR, "shmat failed"));
    // Fatal messages stay UCX's; so do warnings (below the default level anyway).
    EXPECT_FALSE(HeldUcxErrors::holdOnThisThread(UCS_LOG_LEVEL_FATAL, "fatal"));
    EXPECT_FALSE(HeldUcxErrors::holdOnThisThread(UCS_LOG_LEVEL_WARN, "warn"));
    bool heldElsewhere = true;
    std::thread([&] {
      heldElsewhere = HeldUcxErrors::holdOnThisThread(UCS_LOG_LEVEL_ERROR, "other thread");
    }).join();
    EXPECT_FALSE(heldElsewhere);
  }
  EXPECT_FALSE(HeldUcxErrors::holdOnThisThread(UCS_LOG_LEVEL_ERROR, "after the scope"));
  EXPECT_EQ(held.count(), 3u);
  EXPECT_EQ(held.text(), "shmat failed; no FIFO");
}

TEST(HeldUcxErrors, ScopesNestTheInnermostHolds) {
  HeldUcxErrors outer;
  HeldUcxErrors inner;
  HeldUcxErrors::Scope holdingOuter(outer);
  {
    HeldUcxErrors::Scope holdingInner(inner);
    HeldUcxErrors::holdOnThisThread(UCS_LOG_LEVEL_ERROR, "inner");
  }
  HeldUcxErrors::holdOnThisThread(UCS_LOG_LEVEL_ERROR, "outer");
  EXPECT_EQ(inner.text(), "inner");
  EXPECT_EQ(outer.text(), "outer");
}

TEST(HeldUcxErrors, UcxPrintsNothingThatAScopeHeldAndStillPrintsTheRest) {
  const ucs_log_level_t before = ucs_global_opts.log_component.log_level;
  ucs_global_opts.log_component.log_level = UCS_LOG_LEVEL_ERROR;  // as ringreduce sets it
  static HeldUcxErrors held;  // installs the handler; the lambdas below cannot capture
  const std::string heldOutput = printedBy([] {
    HeldUcxErrors::Scope holding(held);
    logShmatFailure(UCS_LOG_LEVEL_ERROR);
  });
  EXPECT_EQ(heldOutput.find("shmat"), std::string::npos) << heldOutput;
  EXPECT_EQ(held.text(), "shmat(shmid=29392937) failed: Invalid argument");
  const std::string printed = printedBy([] { logShmatFailure(UCS_LOG_LEVEL_ERROR); });
  EXPECT_NE(printed.find("shmat(shmid=29392937) failed"), std::string::npos) << printed;
  ucs_global_opts.log_component.log_level = before;
}
