// The host loops (core/math/host_loops_body.h) for any CPU the build targets
// (SSE2 on x86-64): compiled with the build's own flags, no pragma.

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>

#include "core/math/element_math.h"
#include "core/base/errors.h"
#include "core/math/half_conversion.h"
#include "core/math/host_loops.h"

#define RR_ISA_NAMESPACE isa_baseline
#define RR_ISA_ENUM HostIsa::Baseline
#define RR_ISA_NAME "baseline"
#define RR_VECTOR_LANES 0
#include "core/math/host_loops_body.h"
