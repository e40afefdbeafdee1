// Ordinary or streaming stores into the host channel (channel_stores.h)
#include "transport/host/channel_stores.h"

#include <algorithm>
#include <cstring>

#include "core/math/streaming_copy.h"

namespace ringreduce {

uint64_t StoreChooser::Timings::best() const {
  return *std::min_element(picosPerByte.begin(), picosPerByte.begin() + count);
}

int StoreChooser::classOf(size_t bytes) {
  int c = 0;
  for (size_t limit = kMinBytes * 2; bytes >= limit && c < kClasses - 1; limit *= 2) ++c;
  return c;
}

bool StoreChooser::streamNext(size_t bytes) {
  SizeClass& cls = classes_[classOf(bytes)];
  // Each kind timed once before any choice; then the other kind now and then.
  if (cls.cached.count == 0) return false;
  if (cls.streamed.count == 0) return true;
  const bool explore = ++cls.copies % kExploreEvery == 0;
  return cls.streaming != explore;
}

void StoreChooser::record(size_t bytes, bool streamed, uint64_t nanos) {
  SizeClass& cls = classes_[classOf(bytes)];
  Timings& t = streamed ? cls.streamed : cls.cached;
  t.picosPerByte[static_cast<size_t>(t.next)] = nanos * 1000 / std::max<size_t>(bytes, 1);
  t.next = (t.next + 1) % kWindow;
  t.count = std::min(t.count + 1, kWindow);
  if (cls.cached.count > 0 && cls.streamed.count > 0) {
    cls.streaming = cls.cached.best() > kStreamAbove * cls.streamed.best();
  }
}

void ChannelWriter::copy(void* dst, const void* src, size_t bytes) {
  if (mode_ == ChannelStores::Streaming) return copyStreaming(dst, src, bytes);
  if (mode_ == ChannelStores::Cached || bytes < StoreChooser::kMinBytes ||
      !streamingStoresAvailable()) {
    std::memcpy(dst, src, bytes);
    return;
  }
  const bool stream = chooser_.streamNext(bytes);
  const auto start = std::chrono::steady_clock::now();
  if (stream) {
    copyStreaming(dst, src, bytes);
  } else {
    std::memcpy(dst, src, bytes);
  }
  const auto took = std::chrono::steady_clock::now() - start;
  chooser_.record(bytes, stream,
                  static_cast<uint64_t>(
                      std::chrono::duration_cast<std::chrono::nanoseconds>(took).count()));
}

}  // namespace ringreduce
