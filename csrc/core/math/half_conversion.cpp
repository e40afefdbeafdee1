// float16 / bfloat16 <-> float32 conversions (half_conversion.h)
#include "core/math/half_conversion.h"

#include <cstring>

#include "core/math/host_loops.h"

namespace ringreduce {

namespace {
uint32_t bitsOf(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}
float floatOf(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}
}  // namespace

float halfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu;
  uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0x1f) {  // inf / NaN
    return floatOf(sign | 0x7f800000u | (mantissa << 13));
  }
  if (exponent == 0) {
    if (mantissa == 0) return floatOf(sign);
    // Subnormal half: value = mantissa * 2^-24, exact in float32.
    const float magnitude = static_cast<float>(mantissa) * 5.9604644775390625e-8f;
    return sign ? -magnitude : magnitude;
  }
  return floatOf(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

uint16_t floatToHalf(float f) {
  const uint32_t u = bitsOf(f);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t absBits = u & 0x7fffffffu;
  if (absBits >= 0x7f800000u) {  // inf or NaN
    return sign | 0x7c00u | (absBits > 0x7f800000u ? 0x200u : 0u);
  }
  if (absBits >= 0x477ff000u) {  // rounds to >= 65520: overflow to inf
    return sign | 0x7c00u;
  }
  if (absBits < 0x38800000u) {  // below the smallest normal half: subnormal or 0
    // Adding 0.5 moves the value so the float32 rounding does the half rounding.
    const float shifted = floatOf(absBits) + 0.5f;
    return sign | static_cast<uint16_t>(bitsOf(shifted) - bitsOf(0.5f));
  }
  const uint32_t mantissaOdd = (absBits >> 13) & 1u;
  uint32_t rounded = absBits + 0xc8000fffu + mantissaOdd;  // rebias exponent, round
  return sign | static_cast<uint16_t>(rounded >> 13);
}

float bfloat16ToFloat(uint16_t b) { return floatOf(static_cast<uint32_t>(b) << 16); }

uint16_t floatToBFloat16(float f) {
  const uint32_t u = bitsOf(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) {
    return static_cast<uint16_t>((u >> 16) | 0x40u);  // quiet NaN
  }
  const uint32_t roundingBias = 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>((u + roundingBias) >> 16);
}

void halfBufferToFloat(bool half, const uint16_t* in, float* out, size_t count) {
  hostLoopsForBytes(count * sizeof(float)).widen(half, in, out, count);
}

void floatBufferToHalf(bool half, const float* in, uint16_t* out, size_t count) {
  hostLoopsForBytes(count * sizeof(float)).narrow(half, in, out, count);
}

}  // namespace ringreduce
