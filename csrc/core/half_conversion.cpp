#include "core/half_conversion.h"

#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

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

namespace {

void widenScalar(bool half, const uint16_t* in, float* out, size_t count) {
  if (half) {
    for (size_t i = 0; i < count; ++i) out[i] = halfToFloat(in[i]);
  } else {
    for (size_t i = 0; i < count; ++i) out[i] = bfloat16ToFloat(in[i]);
  }
}

void narrowScalar(bool half, const float* in, uint16_t* out, size_t count) {
  if (half) {
    for (size_t i = 0; i < count; ++i) out[i] = floatToHalf(in[i]);
  } else {
    for (size_t i = 0; i < count; ++i) out[i] = floatToBFloat16(in[i]);
  }
}

#if defined(__x86_64__)
// Eight values per instruction where the CPU has AVX2 and F16C (chosen at
// run time, so the build runs on any x86-64). Every non-NaN value converts
// to exactly the bits of the scalar forms (round to nearest even, the same
// overflow to infinity); a NaN stays a NaN of the same sign.
__attribute__((target("avx2,f16c"))) void widenAvx2(bool half, const uint16_t* in, float* out,
                                                    size_t count) {
  size_t i = 0;
  if (half) {
    for (; i + 8 <= count; i += 8) {
      const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i));
      _mm256_storeu_ps(out + i, _mm256_cvtph_ps(h));
    }
  } else {
    for (; i + 8 <= count; i += 8) {
      const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i));
      const __m256i wide = _mm256_slli_epi32(_mm256_cvtepu16_epi32(b), 16);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), wide);
    }
  }
  widenScalar(half, in + i, out + i, count - i);
}

__attribute__((target("avx2,f16c"))) void narrowAvx2(bool half, const float* in, uint16_t* out,
                                                     size_t count) {
  size_t i = 0;
  if (half) {
    for (; i + 8 <= count; i += 8) {
      const __m128i h =
          _mm256_cvtps_ph(_mm256_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), h);
    }
  } else {
    // floatToBFloat16, eight at a time: add the rounding bias (0x7fff plus
    // the lowest kept bit), keep the high half; a NaN keeps its high half
    // with the quiet bit set.
    const __m256i absMask = _mm256_set1_epi32(0x7fffffff);
    const __m256i infinity = _mm256_set1_epi32(0x7f800000);
    const __m256i bias = _mm256_set1_epi32(0x7fff);
    const __m256i one = _mm256_set1_epi32(1);
    const __m256i quiet = _mm256_set1_epi32(0x40);
    for (; i + 8 <= count; i += 8) {
      const __m256i u = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + i));
      const __m256i high = _mm256_srli_epi32(u, 16);
      const __m256i isNan = _mm256_cmpgt_epi32(_mm256_and_si256(u, absMask), infinity);
      const __m256i rounded = _mm256_srli_epi32(
          _mm256_add_epi32(u, _mm256_add_epi32(bias, _mm256_and_si256(high, one))), 16);
      const __m256i bits = _mm256_blendv_epi8(rounded, _mm256_or_si256(high, quiet), isNan);
      const __m128i packed =
          _mm_packus_epi32(_mm256_castsi256_si128(bits), _mm256_extracti128_si256(bits, 1));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), packed);
    }
  }
  narrowScalar(half, in + i, out + i, count - i);
}

bool hasAvx2F16c() {
  static const bool has = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c");
  return has;
}
#endif

}  // namespace

void halfBufferToFloat(bool half, const uint16_t* in, float* out, size_t count) {
#if defined(__x86_64__)
  if (hasAvx2F16c()) return widenAvx2(half, in, out, count);
#endif
  widenScalar(half, in, out, count);
}

void floatBufferToHalf(bool half, const float* in, uint16_t* out, size_t count) {
#if defined(__x86_64__)
  if (hasAvx2F16c()) return narrowAvx2(half, in, out, count);
#endif
  narrowScalar(half, in, out, count);
}

}  // namespace ringreduce
