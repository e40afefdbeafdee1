// The host loops (core/math/host_loops_body.h) for AVX2 + F16C.
// Headers first, compiled as usual; only what follows the pragma is
// compiled for the instruction set. No loop multiplies and then adds, so a
// fused multiply-add cannot change a rounding between the sets.
#if defined(__x86_64__)
#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>

#include "core/math/element_math.h"
#include "core/base/errors.h"
#include "core/math/half_conversion.h"
#include "core/math/host_loops.h"

#include <immintrin.h>

#pragma GCC target("avx2,f16c")

#define RR_ISA_NAMESPACE isa_avx2
#define RR_ISA_ENUM HostIsa::Avx2
#define RR_ISA_NAME "avx2"
#define RR_VECTOR_LANES 8
#include "core/math/host_loops_body.h"
#endif  // __x86_64__
