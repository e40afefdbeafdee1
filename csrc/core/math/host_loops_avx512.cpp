// The host loops (core/math/host_loops_body.h) for AVX-512 F/BW/VL/DQ, in 512-bit vectors.
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

// GCC 12 warns that the intrinsics' own `_mm512_undefined` placeholders may
// be used uninitialised (a false positive of its headers, not of this code).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx2,f16c,prefer-vector-width=512")

#define RR_ISA_NAMESPACE isa_avx512
#define RR_ISA_ENUM HostIsa::Avx512
#define RR_ISA_NAME "avx512"
#define RR_VECTOR_LANES 16
#include "core/math/host_loops_body.h"
#endif  // __x86_64__
