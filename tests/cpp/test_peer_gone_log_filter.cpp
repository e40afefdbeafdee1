// UCX's fatal log of a copy from a gone peer's memory, or from a buffer a
// peer gave up, no longer aborts the process; every other fatal message
// still does (transport/ucx/peer_gone_log_filter.h).
#include <gtest/gtest.h>
#include <ucs/config/global_opts.h>
#include <ucs/debug/log_def.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>

#include "transport/ucx/peer_gone_log_filter.h"

using namespace ringreduce;

namespace {

// As UCX 1.13's cma transport words it (cma_ep.c), with `error` for errno.
std::string copyFailure(const char* call, int error) {
  return std::string(call) + "(pid=4242 {0x7f0,524288}-->{0x7f1,524288}) returned -1: " +
         std::strerror(error);
}

// What UCX's cma transport does on a failed copy from an endpoint whose
// failure is not handled: a FATAL message through UCX's handlers.
void logFatalCopyFailure(int error) {
  ucs_log_dispatch("/build/ucx/src/uct/sm/scopy/cma/cma_ep.c", 81, "uct_cma_ep_tx",
                   UCS_LOG_LEVEL_FATAL, &ucs_global_opts.log_component, "%s",
                   copyFailure("process_vm_readv", error).c_str());
}

}  // namespace

TEST(PeerGoneLogFilter, TakesOnlyACopyFromAGonePeer) {
  const int fatal = UCS_LOG_LEVEL_FATAL;
  const char* cma = "/build/ucx/src/uct/sm/scopy/cma/cma_ep.c";
  EXPECT_TRUE(isCopyFromAGonePeer(cma, fatal, copyFailure("process_vm_readv", ESRCH).c_str()));
  EXPECT_TRUE(isCopyFromAGonePeer("cma_ep.c", fatal, copyFailure("process_vm_writev", ESRCH).c_str()));
  // A buffer a peer gave up (freed after its collective failed): a bad address.
  EXPECT_TRUE(isCopyFromAGonePeer(cma, fatal, copyFailure("process_vm_readv", EFAULT).c_str()));
  EXPECT_TRUE(isCopyFromAGonePeer(cma, fatal, copyFailure("process_vm_writev", EFAULT).c_str()));
  // Another errno (a seccomp filter's EPERM), level or source stays UCX's.
  EXPECT_FALSE(isCopyFromAGonePeer(cma, fatal, copyFailure("process_vm_readv", EPERM).c_str()));
  EXPECT_FALSE(isCopyFromAGonePeer(cma, UCS_LOG_LEVEL_ERROR,
                                   copyFailure("process_vm_readv", ESRCH).c_str()));
  EXPECT_FALSE(isCopyFromAGonePeer("/build/ucx/src/uct/sm/mm/base/mm_ep.c", fatal,
                                   copyFailure("process_vm_readv", ESRCH).c_str()));
  EXPECT_FALSE(isCopyFromAGonePeer(cma, fatal, std::strerror(ESRCH)));
  EXPECT_FALSE(isCopyFromAGonePeer(nullptr, fatal, "x"));
  EXPECT_FALSE(isCopyFromAGonePeer(cma, fatal, nullptr));
}

TEST(PeerGoneLogFilterDeathTest, AGonePeersCopyLeavesTheProcessAliveOtherFatalsStillAbort) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        keepUcxFromAbortingOnAGonePeer();
        logFatalCopyFailure(ESRCH);
        std::exit(0);
      },
      ::testing::ExitedWithCode(0), "");
  EXPECT_EXIT(
      {
        keepUcxFromAbortingOnAGonePeer();
        logFatalCopyFailure(EFAULT);
        std::exit(0);
      },
      ::testing::ExitedWithCode(0), "");
  EXPECT_DEATH(
      {
        keepUcxFromAbortingOnAGonePeer();
        logFatalCopyFailure(EPERM);
        std::exit(0);
      },
      "");
}
