// Counts the heap allocations each thread makes, by replacing the global
// operator new of the test binary that links allocation_counter.cpp (so it
// goes into a binary of its own: the replacement is process-wide). The hot
// path's tests take the difference around a call: a change that adds a
// string, a std::function or a vector to a collective fails them.
#pragma once

#include <cstdint>

namespace ringreduce::testing {

// Every operator new this thread has called since it started (malloc
// called directly is not counted: the code under test does not).
uint64_t allocationsOnThisThread();

// The allocations this thread makes between construction and count().
class AllocationScope {
 public:
  AllocationScope() : start_(allocationsOnThisThread()) {}
  uint64_t count() const { return allocationsOnThisThread() - start_; }

 private:
  uint64_t start_;
};

}  // namespace ringreduce::testing
