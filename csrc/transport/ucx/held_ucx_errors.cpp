// UCX's errors held while this thread connects (held_ucx_errors.h)
#include "transport/ucx/held_ucx_errors.h"

#include <ucs/debug/log_def.h>

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <mutex>

namespace ringreduce {

namespace {

// The distinct messages kept: a lasting failure repeats the same one or two.
constexpr size_t kMaxDistinct = 4;

thread_local HeldUcxErrors* holding = nullptr;

ucs_log_func_rc_t holdWhileConnecting(const char* /*file*/, unsigned /*line*/,
                                      const char* /*function*/, ucs_log_level_t level,
                                      const ucs_log_component_config_t* /*component*/,
                                      const char* format, va_list ap) {
  if (holding == nullptr || level != UCS_LOG_LEVEL_ERROR) return UCS_LOG_FUNC_RC_CONTINUE;
  char message[512];
  va_list copy;
  va_copy(copy, ap);
  std::vsnprintf(message, sizeof(message), format, copy);
  va_end(copy);
  return HeldUcxErrors::holdOnThisThread(level, message) ? UCS_LOG_FUNC_RC_STOP
                                                         : UCS_LOG_FUNC_RC_CONTINUE;
}

}  // namespace

HeldUcxErrors::HeldUcxErrors() {
  static std::once_flag installed;
  std::call_once(installed, [] { ucs_log_push_handler(holdWhileConnecting); });
}

HeldUcxErrors::Scope::Scope(HeldUcxErrors& held) : outer_(holding) { holding = &held; }

HeldUcxErrors::Scope::~Scope() { holding = outer_; }

std::string HeldUcxErrors::text() const {
  std::string joined;
  for (const std::string& m : distinct_) joined += (joined.empty() ? "" : "; ") + m;
  return joined;
}

bool HeldUcxErrors::holdOnThisThread(int level, const char* message) {
  // Fatal messages stay UCX's (peer_gone_log_filter.h takes the one it may).
  if (holding == nullptr || level != UCS_LOG_LEVEL_ERROR || message == nullptr) return false;
  holding->hold(message);
  return true;
}

void HeldUcxErrors::hold(const char* message) {
  ++count_;
  if (distinct_.size() < kMaxDistinct &&
      std::find(distinct_.begin(), distinct_.end(), message) == distinct_.end()) {
    distinct_.emplace_back(message);
  }
}

}  // namespace ringreduce
