// The core's exceptions as the c10 types torch raises in Python (error_translation.h)
#include "backend/error_translation.h"

#include <c10/util/Exception.h>

#include "core/base/errors.h"

namespace ringreduce {

namespace {
c10::SourceLocation here(const char* function) {
  return c10::SourceLocation{function, __FILE__, static_cast<uint32_t>(__LINE__)};
}
}  // namespace

std::exception_ptr distBackendError(const std::string& message) {
  return std::make_exception_ptr(c10::DistBackendError(here(__func__), message));
}

std::exception_ptr translateCurrentException() {
  try {
    throw;
  } catch (const c10::Error&) {
    return std::current_exception();  // already a torch exception
  } catch (const InvalidArgument& e) {
    return std::make_exception_ptr(c10::ValueError(here(__func__), e.what()));
  } catch (const std::exception& e) {
    return distBackendError(e.what());
  } catch (...) {
    return distBackendError("ringreduce: unknown error");
  }
}

}  // namespace ringreduce
