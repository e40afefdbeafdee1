// float16 / bfloat16 <-> float32 conversions. The ring accumulates half
// precision data in float32 (one rounding at the end instead of one per hop),
// so these run once on the way in and once on the way out.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ringreduce {

float halfToFloat(uint16_t h);
uint16_t floatToHalf(float f);  // round to nearest even
float bfloat16ToFloat(uint16_t b);
uint16_t floatToBFloat16(float f);  // round to nearest even, NaN preserved

// Whole-buffer forms. `half` selects float16 (true) or bfloat16 (false).
void halfBufferToFloat(bool half, const uint16_t* in, float* out, size_t count);
void floatBufferToHalf(bool half, const float* in, uint16_t* out, size_t count);

}  // namespace ringreduce
