// How a buffer of `count` elements is cut into one chunk per rank, and each
// chunk into pipeline segments. Every rank computes the same plan.
#pragma once

#include <cstddef>

namespace ringreduce {

struct Range {
  size_t offset = 0;  // in elements
  size_t count = 0;
};

// Chunk i of `parts` nearly equal chunks: the first count % parts chunks hold
// one element more.
Range chunkOf(size_t count, int parts, int index);

// Chunk i of `parts` chunks whose boundaries fall on multiples of `align`
// elements (so that 16-byte vector loads apply in every chunk); the last
// chunks take what is left and may be shorter or empty.
Range alignedChunkOf(size_t count, int parts, int index, size_t align);

// Number of segments needed to cover `count` elements, `segmentElems` each
// (at least 1, so that empty chunks still take part in the step pattern).
size_t segmentCount(size_t count, size_t segmentElems);

// Segment `index` of a chunk, relative to that chunk.
Range segmentOf(const Range& chunk, size_t segmentElems, size_t index);

}  // namespace ringreduce

namespace ringreduce {

// Segments per chunk for a pipelined collective. Every chunk gets the same
// number of segments (the last ones of a smaller chunk may be empty), so that
// sender and receiver agree on message slots without further exchange.
struct SegmentPlan {
  size_t segments = 1;
  size_t elemsPerSegment = 1;
};

// `maxChunk` elements of `elemSize` bytes, about `segmentBytes` per segment,
// and no more than `maxSegments` segments.
SegmentPlan planSegments(size_t maxChunk, size_t elemSize, size_t segmentBytes,
                         size_t maxSegments);

}  // namespace ringreduce
