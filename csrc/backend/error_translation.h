// Maps the core's exceptions onto the c10 types that torch turns into the
// matching Python exceptions: InvalidArgument -> ValueError, timeouts and
// transport failures -> torch.distributed.DistBackendError.
#pragma once

#include <exception>
#include <string>

namespace ringreduce {

// Call inside a catch block: the exception being handled, translated.
std::exception_ptr translateCurrentException();
std::exception_ptr distBackendError(const std::string& message);

}  // namespace ringreduce
