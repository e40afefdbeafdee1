// A buffer cut into one chunk per rank and each chunk into segments (partition.h)
#include "core/plan/partition.h"

#include <algorithm>

namespace ringreduce {

Range chunkOf(size_t count, int parts, int index) {
  const size_t n = static_cast<size_t>(parts);
  const size_t i = static_cast<size_t>(index);
  const size_t base = count / n;
  const size_t extra = count % n;
  Range r;
  r.offset = i * base + std::min(i, extra);
  r.count = base + (i < extra ? 1 : 0);
  return r;
}

Range alignedChunkOf(size_t count, int parts, int index, size_t align) {
  const size_t per = (count + parts - 1) / parts;
  const size_t step = align == 0 ? per : (per + align - 1) / align * align;
  Range r;
  r.offset = std::min(count, step * static_cast<size_t>(index));
  r.count = std::min(count - r.offset, step);
  return r;
}

size_t segmentCount(size_t count, size_t segmentElems) {
  if (count == 0) return 1;
  return (count + segmentElems - 1) / segmentElems;
}

Range segmentOf(const Range& chunk, size_t segmentElems, size_t index) {
  Range r;
  const size_t begin = std::min(chunk.count, index * segmentElems);
  r.offset = chunk.offset + begin;
  r.count = std::min(segmentElems, chunk.count - begin);
  return r;
}

}  // namespace ringreduce

namespace ringreduce {

SegmentPlan planSegments(size_t maxChunk, size_t elemSize, size_t segmentBytes,
                         size_t maxSegments) {
  SegmentPlan plan;
  const size_t target = std::max<size_t>(1, segmentBytes / std::max<size_t>(1, elemSize));
  plan.segments = std::min(std::max<size_t>(1, maxSegments), segmentCount(maxChunk, target));
  // Spread the chunk evenly over the segments instead of leaving a runt.
  plan.elemsPerSegment = std::max<size_t>(1, (maxChunk + plan.segments - 1) / plan.segments);
  return plan;
}

}  // namespace ringreduce
