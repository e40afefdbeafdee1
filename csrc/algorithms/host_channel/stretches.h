// Several tensors as one message: the coalesced collectives over the host
// channel lay their parts end to end and cut that stream into the channel's
// turns as they cut one tensor, so a block of small tensors costs one turn
// (one flag each way), not one per tensor. A turn's window of the stream
// then meets one or more parts: its stretches.
#pragma once

#include <algorithm>
#include <cstddef>

namespace ringreduce {

// Calls fn(part, inPart, inWindow, length) for each stretch of `parts` laid
// end to end (part i `lengthOf(i)` long, in any unit) that lies in the
// window [first, first + length): the part's index, where the stretch
// starts in the part and in the window, and how long it is; in order.
template <typename LengthOf, typename Fn>
void forEachStretch(size_t parts, const LengthOf& lengthOf, size_t first, size_t length,
                    const Fn& fn) {
  const size_t end = first + length;
  size_t start = 0;  // of part i in the stream
  for (size_t i = 0; i < parts && start < end; ++i) {
    const size_t partEnd = start + lengthOf(i);
    const size_t from = std::max(start, first);
    const size_t to = std::min(partEnd, end);
    if (from < to) fn(i, from - start, from - first, to - from);
    start = partEnd;
  }
}

}  // namespace ringreduce
