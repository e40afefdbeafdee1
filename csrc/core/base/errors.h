// Error types of the library. Each carries a complete, user-facing message:
// the backend turns them into Python exceptions unchanged.
#pragma once

#include <stdexcept>
#include <string>

namespace ringreduce {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Bad arguments from the caller (dtype, op, sizes, ranks).
class InvalidArgument : public Error {
 public:
  using Error::Error;
};

// A wait ran past its deadline.
class TimeoutError : public Error {
 public:
  using Error::Error;
};

// The transport failed: UCX error, peer gone, malformed message.
class TransportError : public Error {
 public:
  using Error::Error;
};

}  // namespace ringreduce
