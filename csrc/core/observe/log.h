// NCCL_DEBUG-style logging, switched on with RINGREDUCE_DEBUG=WARN|INFO|TRACE.
// Lines go to stderr as "host:pid:tid [rank] RINGREDUCE INFO message".
#pragma once

#include <sstream>
#include <string>

namespace ringreduce {

enum class LogLevel { None = 0, Warn = 1, Info = 2, Trace = 3 };

LogLevel logLevel();  // parsed once from the environment
void logLine(LogLevel level, int rank, const std::string& message);

}  // namespace ringreduce

// The stream expression is only evaluated when the level is on.
#define RR_LOG(level, rank, expr)                                        \
  do {                                                                   \
    if (::ringreduce::logLevel() >= ::ringreduce::LogLevel::level) {     \
      std::ostringstream rr_log_stream_;                                 \
      rr_log_stream_ << expr;                                            \
      ::ringreduce::logLine(::ringreduce::LogLevel::level, (rank),       \
                            rr_log_stream_.str());                       \
    }                                                                    \
  } while (0)
