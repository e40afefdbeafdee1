// Where each rank's chunk of a buffer lies when the chunks are not the
// even split of chunkOf: chunk i is [bounds[i], bounds[i+1]), back to back
// in rank order. The two-level reduce-scatter and allgather need it (a
// node's ranks own parts of different sizes when nodes differ in size, a
// rank that does not cross the network owns nothing), and the ring and
// halving/doubling forms take it so that they can serve as its phases.
// Units are whatever the caller counts in: elements, or bytes.
#pragma once

#include <cstddef>
#include <vector>

#include "core/plan/partition.h"

namespace ringreduce {

// The ring's pipeline segment unless RINGREDUCE_SEGMENT_BYTES says otherwise
// (Config::segmentBytes): a ring step sends segment k+1 while it reduces k.
constexpr size_t kDefaultSegmentBytes = 256 * 1024;

class ChunkLayout {
 public:
  // chunkOf(count, parts, i) for every i: the flat forms' placement.
  static ChunkLayout even(size_t count, int parts);
  // Chunks of the given sizes, in order.
  static ChunkLayout ofSizes(const std::vector<size_t>& sizes);

  int parts() const { return static_cast<int>(bounds_.size()) - 1; }
  size_t total() const { return bounds_.back(); }
  Range chunk(int i) const { return {bounds_[i], bounds_[i + 1] - bounds_[i]}; }
  // Chunks [first, first + n) as one range (they are contiguous).
  Range span(int first, int n) const {
    return {bounds_[first], bounds_[first + n] - bounds_[first]};
  }
  size_t largest() const;

 private:
  std::vector<size_t> bounds_{0};
};

}  // namespace ringreduce
