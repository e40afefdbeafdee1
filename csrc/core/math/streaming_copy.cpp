// Non-temporal copy (streaming_copy.h)
#include "core/math/streaming_copy.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#if defined(__x86_64__) || defined(_M_X64)
#include <emmintrin.h>
#define RR_STREAMING_STORES 1
#endif

namespace ringreduce {

namespace {
constexpr size_t kLine = 64;
}  // namespace

bool streamingStoresAvailable() {
#ifdef RR_STREAMING_STORES
  return true;
#else
  return false;
#endif
}

void copyStreaming(void* dst, const void* src, size_t bytes) {
#ifdef RR_STREAMING_STORES
  auto* out = static_cast<char*>(dst);
  const auto* in = static_cast<const char*>(src);
  // Up to the first line boundary of the destination: ordinary stores.
  const size_t head = std::min(bytes, (kLine - reinterpret_cast<uintptr_t>(out) % kLine) % kLine);
  std::memcpy(out, in, head);
  size_t at = head;
  // Whole lines: four 16-byte streaming stores each (a full line, so the
  // write-combining buffer goes out without a read of the line).
  for (; at + kLine <= bytes; at += kLine) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + at));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + at + 16));
    const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + at + 32));
    const __m128i d = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + at + 48));
    _mm_stream_si128(reinterpret_cast<__m128i*>(out + at), a);
    _mm_stream_si128(reinterpret_cast<__m128i*>(out + at + 16), b);
    _mm_stream_si128(reinterpret_cast<__m128i*>(out + at + 32), c);
    _mm_stream_si128(reinterpret_cast<__m128i*>(out + at + 48), d);
  }
  std::memcpy(out + at, in + at, bytes - at);
  // Streaming stores are weakly ordered: without the fence a peer could see
  // the flag published next before the data.
  _mm_sfence();
#else
  std::memcpy(dst, src, bytes);
#endif
}

}  // namespace ringreduce
