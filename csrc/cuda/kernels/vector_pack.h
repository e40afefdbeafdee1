// V elements of T loaded or stored as one 16-byte access (or less, for an
// element type wider than 16/V): the unit every device loop moves data in.
// Plain C++, so the host model of the device protocol uses it too.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/math/element_math.h"  // RR_HOST_DEVICE

namespace ringreduce::cuda {

template <typename T, int V>
struct alignas(sizeof(T) * V >= 16 ? 16 : sizeof(T) * V) Pack {
  T v[V];
};

// Elements of T in one 16-byte pack.
template <typename T>
constexpr int packElements() {
  return sizeof(T) >= 16 ? 1 : static_cast<int>(16 / sizeof(T));
}

RR_HOST_DEVICE bool packAligned(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

}  // namespace ringreduce::cuda
