// Where each rank's chunk of a buffer lies when the split is uneven (chunk_layout.h)
#include "core/plan/chunk_layout.h"

#include <algorithm>

namespace ringreduce {

ChunkLayout ChunkLayout::even(size_t count, int parts) {
  ChunkLayout layout;
  for (int i = 0; i < parts; ++i) layout.bounds_.push_back(layout.total() + chunkOf(count, parts, i).count);
  return layout;
}

ChunkLayout ChunkLayout::ofSizes(const std::vector<size_t>& sizes) {
  ChunkLayout layout;
  for (size_t size : sizes) layout.bounds_.push_back(layout.total() + size);
  return layout;
}

size_t ChunkLayout::largest() const {
  size_t most = 0;
  for (int i = 0; i < parts(); ++i) most = std::max(most, chunk(i).count);
  return most;
}

}  // namespace ringreduce
