// The host reduction loops, written once and compiled once per instruction
// set (core/math/host_loops.h): each host_loops_<set>.cpp includes its headers,
// sets `#pragma GCC target`, defines
//   RR_ISA_NAMESPACE  a namespace of its own (no symbol is shared between sets)
//   RR_ISA_ENUM       its HostIsa
//   RR_VECTOR_LANES   0 (no hand-written vectors), 8 (AVX2) or 16 (AVX-512)
// and includes this file. No include guard: that is the point.
//
// The element-wise loops are plain loops over the functors of
// core/math/element_math.h that GCC vectorises for the target; float16/bfloat16
// are widened, combined and narrowed in registers by hand, since no compiler
// vectorises that.

namespace ringreduce {
namespace RR_ISA_NAMESPACE {
namespace {

template <typename T, typename Fn>
void apply(void* dst, const void* src, size_t count, Fn fn) {
  T* __restrict d = static_cast<T*>(dst);
  const T* __restrict s = static_cast<const T*>(src);
  for (size_t i = 0; i < count; ++i) d[i] = fn(d[i], s[i]);
}

template <typename T>
void reduceReal(ReduceOp op, void* dst, const void* src, size_t count) {
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Avg:
      return apply<T>(dst, src, count, SumOp());
    case ReduceOp::Product:
      return apply<T>(dst, src, count, ProductOp());
    case ReduceOp::Min:
      return apply<T>(dst, src, count, MinOp());
    case ReduceOp::Max:
      return apply<T>(dst, src, count, MaxOp());
    default:
      break;
  }
  if constexpr (std::is_integral_v<T>) {
    switch (op) {
      case ReduceOp::BAnd:
        return apply<T>(dst, src, count, BAndOp());
      case ReduceOp::BOr:
        return apply<T>(dst, src, count, BOrOp());
      case ReduceOp::BXor:
        return apply<T>(dst, src, count, BXorOp());
      default:
        break;
    }
  }
  throw InvalidArgument(std::string("reduce: operator ") + reduceOpName(op) +
                        " has no host loop for this type");
}

// Booleans hold 0/1 bytes; any nonzero byte reads as true and the result is
// stored as 0 or 1.
template <typename Fn>
void applyBool(void* dst, const void* src, size_t count, Fn fn) {
  apply<uint8_t>(dst, src, count, [fn](uint8_t a, uint8_t b) { return uint8_t(fn(a, b) != 0); });
}

void reduceBool(ReduceOp op, void* dst, const void* src, size_t count) {
  switch (boolOperator(op)) {
    case ReduceOp::BOr:
      return applyBool(dst, src, count, BOrOp());
    case ReduceOp::BAnd:
      return applyBool(dst, src, count, BAndOp());
    case ReduceOp::BXor:
      return applyBool(dst, src, count, BXorOp());
    default:
      break;
  }
  throw InvalidArgument(unsupportedReason(DataType::Bool, op));
}

// Interleaved (re, im) pairs: a sum is an element-wise sum of 2*count reals.
template <typename T>
void reduceComplex(ReduceOp op, void* dst, const void* src, size_t count) {
  if (op == ReduceOp::Sum || op == ReduceOp::Avg) return apply<T>(dst, src, 2 * count, SumOp());
  throw InvalidArgument(unsupportedReason(
      sizeof(T) == 4 ? DataType::Complex64 : DataType::Complex128, op));
}

// AVG's quotient, truncating toward zero for integers as C++ (and NCCL's
// integer average) does.
//
// Integers: there is no vector integer division, and a scalar one costs tens
// of cycles per element. Through a float type that holds every value of T
// exactly, the quotient rounds to within |v|/divisor * 2^-p of the true one,
// less than the 1/divisor that separates a non-integer quotient from the
// next integer while |v| < 2^p: truncating it gives exactly v / divisor.
// float (p = 24) serves 8- and 16-bit integers, double (p = 53) 32-bit ones;
// int64 divides as it is.
template <typename T>
using WideOf = std::conditional_t<
    std::is_floating_point_v<T> || sizeof(T) == 8, T,
    std::conditional_t<(sizeof(T) <= 2), float, double>>;

template <typename T>
struct Divide {
  WideOf<T> divisor;
  T operator()(T v) const { return static_cast<T>(static_cast<WideOf<T>>(v) / divisor); }
};

// By a power of two (every world of 2, 4, 8, ... ranks) the same quotient
// needs no division: a float multiplies by the reciprocal, which is exact,
// so both forms round the same real number once; an integer shifts, after
// adding divisor - 1 to a negative value so that the shift truncates toward
// zero rather than rounding down. Either costs a fraction of a division.
template <typename T>
struct DivideByPowerOfTwo {
  explicit DivideByPowerOfTwo(int divisor)
      : shift(__builtin_ctz(static_cast<unsigned>(divisor))),
        mask(static_cast<T>(divisor - 1)),
        inverse(static_cast<T>(1.0 / divisor)) {}
  // Integers: the caller keeps divisor <= 2^(bits - 1) (fits), so the bias
  // added to a negative value never wraps.
  static bool serves(int divisor) {
    return std::is_floating_point_v<T> || !std::is_signed_v<T> ||
           static_cast<unsigned long long>(divisor) <= (1ull << (sizeof(T) * 8 - 1));
  }
  T operator()(T v) const {
    if constexpr (std::is_floating_point_v<T>) {
      return v * inverse;
    } else if constexpr (std::is_signed_v<T>) {
      const T negative = static_cast<T>(v >> (sizeof(T) * 8 - 1));  // all ones or zero
      return static_cast<T>(static_cast<T>(v + (negative & mask)) >> shift);
    } else {
      return static_cast<T>(v >> shift);
    }
  }
  int shift;
  T mask;     // integers: divisor - 1
  T inverse;  // floats: 2^-shift, exact
};

bool isPowerOfTwo(int divisor) { return divisor > 0 && (divisor & (divisor - 1)) == 0; }

template <typename T>
bool shiftable(int divisor) {
  return isPowerOfTwo(divisor) && DivideByPowerOfTwo<T>::serves(divisor);
}

template <typename T, typename Quotient>
void divideWith(void* data, size_t count, Quotient quotient) {
  T* __restrict d = static_cast<T*>(data);
  for (size_t i = 0; i < count; ++i) d[i] = quotient(d[i]);
}

template <typename T>
void divideAll(void* data, size_t count, int divisor) {
  if (shiftable<T>(divisor)) return divideWith<T>(data, count, DivideByPowerOfTwo<T>(divisor));
  divideWith<T>(data, count, Divide<T>{static_cast<WideOf<T>>(divisor)});
}

// AVG's last step in one pass: d = (d + s) / divisor, the sum wrapping or
// rounding exactly as SumOp does, so the bits are those of the two-pass form
// (reduce, then divideAll) while the data is read once.
template <typename T, typename Quotient>
void sumAndDivideWith(void* dst, const void* src, size_t count, Quotient quotient) {
  T* __restrict d = static_cast<T*>(dst);
  const T* __restrict s = static_cast<const T*>(src);
  for (size_t i = 0; i < count; ++i) d[i] = quotient(SumOp()(d[i], s[i]));
}

template <typename T>
void sumAndDivide(void* dst, const void* src, size_t count, int divisor) {
  if (shiftable<T>(divisor)) {
    return sumAndDivideWith<T>(dst, src, count, DivideByPowerOfTwo<T>(divisor));
  }
  sumAndDivideWith<T>(dst, src, count, Divide<T>{static_cast<WideOf<T>>(divisor)});
}

// ---- float16 / bfloat16 ----------------------------------------------------

float widenOne(bool half, uint16_t v) { return half ? halfToFloat(v) : bfloat16ToFloat(v); }
uint16_t narrowOne(bool half, float v) { return half ? floatToHalf(v) : floatToBFloat16(v); }

#if RR_VECTOR_LANES == 16
// Sixteen float lanes in a zmm register.
struct Lanes {
  static constexpr size_t kCount = 16;
  using F = __m512;
  using I = __m512i;
  // 2 * kCount 16-bit values widened in an order of the pair's choosing
  // (narrowPair puts them back): bfloat16 then needs only in-lane unpacks
  // and one pack, no lane-crossing moves.
  struct Pair {
    F lo, hi;
  };
  static F widen(bool half, const uint16_t* p) {
    const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    if (half) return _mm512_cvtph_ps(raw);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(raw), 16));
  }
  static Pair widenPair(bool half, const uint16_t* p) {
    if (half) return {widen(true, p), widen(true, p + kCount)};  // loads fold into vcvtph2ps
    const I raw = _mm512_loadu_si512(p);
    const I zero = _mm512_setzero_si512();
    return {_mm512_castsi512_ps(_mm512_unpacklo_epi16(zero, raw)),
            _mm512_castsi512_ps(_mm512_unpackhi_epi16(zero, raw))};
  }
  // floatToBFloat16 per lane, the result in each lane's low 16 bits: add
  // the rounding bias (0x7fff plus the lowest kept bit) and keep the high
  // half; a NaN keeps its high half with the quiet bit set.
  static I roundToBFloat16(F v) {
    const I u = _mm512_castps_si512(v);
    const I high = _mm512_srli_epi32(u, 16);
    const I bias =
        _mm512_add_epi32(_mm512_set1_epi32(0x7fff), _mm512_and_si512(high, _mm512_set1_epi32(1)));
    const I rounded = _mm512_srli_epi32(_mm512_add_epi32(u, bias), 16);
    const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    return _mm512_mask_blend_epi32(nan, rounded, _mm512_or_si512(high, _mm512_set1_epi32(0x40)));
  }
  static __m256i toHalf(F v) {
    return _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  }
  static void narrow(bool half, F v, uint16_t* p) {
    const __m256i packed = half ? toHalf(v) : _mm512_cvtepi32_epi16(roundToBFloat16(v));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), packed);
  }
  static void narrowPair(bool half, Pair v, uint16_t* p) {
    if (half) {
      narrow(true, v.lo, p);
      narrow(true, v.hi, p + kCount);
      return;
    }
    _mm512_storeu_si512(p, _mm512_packus_epi32(roundToBFloat16(v.lo), roundToBFloat16(v.hi)));
  }
  static F splat(float v) { return _mm512_set1_ps(v); }
  static F add(F a, F b) { return _mm512_add_ps(a, b); }
  static F mul(F a, F b) { return _mm512_mul_ps(a, b); }
  static F div(F a, F b) { return _mm512_div_ps(a, b); }
};
#elif RR_VECTOR_LANES == 8
// Eight float lanes in a ymm register; as the sixteen-lane form.
struct Lanes {
  static constexpr size_t kCount = 8;
  using F = __m256;
  using I = __m256i;
  struct Pair {
    F lo, hi;
  };
  static F widen(bool half, const uint16_t* p) {
    const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    if (half) return _mm256_cvtph_ps(raw);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(raw), 16));
  }
  static Pair widenPair(bool half, const uint16_t* p) {
    if (half) return {widen(true, p), widen(true, p + kCount)};
    const I raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    const I zero = _mm256_setzero_si256();
    return {_mm256_castsi256_ps(_mm256_unpacklo_epi16(zero, raw)),
            _mm256_castsi256_ps(_mm256_unpackhi_epi16(zero, raw))};
  }
  static I roundToBFloat16(F v) {
    const I u = _mm256_castps_si256(v);
    const I high = _mm256_srli_epi32(u, 16);
    const I bias =
        _mm256_add_epi32(_mm256_set1_epi32(0x7fff), _mm256_and_si256(high, _mm256_set1_epi32(1)));
    const I rounded = _mm256_srli_epi32(_mm256_add_epi32(u, bias), 16);
    const I nan = _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    return _mm256_blendv_epi8(rounded, _mm256_or_si256(high, _mm256_set1_epi32(0x40)), nan);
  }
  static __m128i toHalf(F v) {
    return _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  }
  // packus saturates, which no lane (all below 2^16) reaches.
  static void narrow(bool half, F v, uint16_t* p) {
    __m128i packed;
    if (half) {
      packed = toHalf(v);
    } else {
      const I bits = roundToBFloat16(v);
      packed = _mm_packus_epi32(_mm256_castsi256_si128(bits), _mm256_extracti128_si256(bits, 1));
    }
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), packed);
  }
  static void narrowPair(bool half, Pair v, uint16_t* p) {
    if (half) {
      narrow(true, v.lo, p);
      narrow(true, v.hi, p + kCount);
      return;
    }
    const I packed = _mm256_packus_epi32(roundToBFloat16(v.lo), roundToBFloat16(v.hi));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), packed);
  }
  static F splat(float v) { return _mm256_set1_ps(v); }
  static F add(F a, F b) { return _mm256_add_ps(a, b); }
  static F mul(F a, F b) { return _mm256_mul_ps(a, b); }
  static F div(F a, F b) { return _mm256_div_ps(a, b); }
};
#endif

template <ReduceOp kOp>
float combineOne(float a, float b) {
  if constexpr (kOp == ReduceOp::Product) return ProductOp()(a, b);
  if constexpr (kOp == ReduceOp::Min) return MinOp()(a, b);
  if constexpr (kOp == ReduceOp::Max) return MaxOp()(a, b);
  return SumOp()(a, b);
}

#if RR_VECTOR_LANES > 0
template <ReduceOp kOp>
Lanes::F combineLanes(Lanes::F a, Lanes::F b) {
  // MIN and MAX stay in 16 bits (reduceHalfExtreme).
  static_assert(kOp == ReduceOp::Sum || kOp == ReduceOp::Product);
  if constexpr (kOp == ReduceOp::Product) return Lanes::mul(a, b);
  return Lanes::add(a, b);
}
#endif

#if RR_VECTOR_LANES > 0
// What happens to a combined vector before it is narrowed: nothing (a
// reduction step), or AVG's division.
struct KeepLanes {
  Lanes::F operator()(Lanes::F v) const { return v; }
};
struct ScaleLanes {
  Lanes::F factor;
  Lanes::F operator()(Lanes::F v) const { return Lanes::mul(v, factor); }
};
struct DivideLanes {
  Lanes::F divisor;
  Lanes::F operator()(Lanes::F v) const { return Lanes::div(v, divisor); }
};

// The vector part of reduceHalfFused; returns how many elements it did.
// float16 or bfloat16 is a template argument, so no iteration tests it.
template <ReduceOp kOp, bool kHalf, typename Finish>
size_t reduceHalfPairs(uint16_t* dst, const uint16_t* src, size_t count, Finish finish) {
  constexpr size_t kStep = 2 * Lanes::kCount;
  size_t i = 0;
  for (; i + kStep <= count; i += kStep) {
    const Lanes::Pair a = Lanes::widenPair(kHalf, dst + i);
    const Lanes::Pair b = Lanes::widenPair(kHalf, src + i);
    Lanes::narrowPair(kHalf,
                      {finish(combineLanes<kOp>(a.lo, b.lo)), finish(combineLanes<kOp>(a.hi, b.hi))},
                      dst + i);
  }
  return i;
}

#if RR_VECTOR_LANES == 16
// AVX-512 BF16 (Zen 4, Cooper Lake, Sapphire Rapids) narrows 32 floats to
// bfloat16 in one instruction, rounding to nearest even as floatToBFloat16
// does, NaNs quietened the same way, except that it flushes a float32
// subnormal to a signed zero. Vectors holding one (fpclass 0x20, rare: below
// 1.2e-38) take the exact integer rounding instead, so the bits are the
// other sets' bits. The instruction packs its two sources whole, while
// widenPair's unpacks interleave them per 128-bit lane: one permutation puts
// the elements back in order.
bool cpuNarrowsBFloat16() {
  static const bool has = __builtin_cpu_supports("avx512bf16");
  return has;
}

__attribute__((target("avx512bf16"))) inline __m512i narrowBFloat16Native(__m512 lo, __m512 hi) {
  return _mm512_castps_si512(reinterpret_cast<__m512>(_mm512_cvtne2ps_pbh(hi, lo)));
}

template <ReduceOp kOp, typename Finish>
__attribute__((target("avx512bf16"))) size_t reduceBFloat16PairsNative(uint16_t* dst,
                                                                      const uint16_t* src,
                                                                      size_t count,
                                                                      Finish finish) {
  constexpr size_t kStep = 2 * Lanes::kCount;
  // Element 8k + r of the 32 (lane k of widenPair's halves) sits at 4k + r
  // of the packed result for r < 4 (from `lo`), at 16 + 4k + r - 4 after.
  alignas(64) static const uint16_t kOrder[32] = {
      0, 1, 2, 3, 16, 17, 18, 19, 4, 5, 6, 7, 20, 21, 22, 23,
      8, 9, 10, 11, 24, 25, 26, 27, 12, 13, 14, 15, 28, 29, 30, 31};
  const __m512i order = _mm512_load_si512(kOrder);
  size_t i = 0;
  for (; i + kStep <= count; i += kStep) {
    const Lanes::Pair a = Lanes::widenPair(false, dst + i);
    const Lanes::Pair b = Lanes::widenPair(false, src + i);
    const Lanes::Pair r = {finish(combineLanes<kOp>(a.lo, b.lo)),
                           finish(combineLanes<kOp>(a.hi, b.hi))};
    if (_mm512_fpclass_ps_mask(r.lo, 0x20) | _mm512_fpclass_ps_mask(r.hi, 0x20)) {
      Lanes::narrowPair(false, r, dst + i);
      continue;
    }
    _mm512_storeu_si512(dst + i, _mm512_permutexvar_epi16(order, narrowBFloat16Native(r.lo, r.hi)));
  }
  return i;
}
#endif

template <ReduceOp kOp, typename Finish>
size_t reduceHalfPairs(bool half, uint16_t* dst, const uint16_t* src, size_t count,
                       Finish finish) {
  if (half) return reduceHalfPairs<kOp, true>(dst, src, count, finish);
#if RR_VECTOR_LANES == 16
  if (cpuNarrowsBFloat16()) return reduceBFloat16PairsNative<kOp>(dst, src, count, finish);
#endif
  return reduceHalfPairs<kOp, false>(dst, src, count, finish);
}
#endif

// dst = round(float(dst) (op) float(src)), divided by `divisor` before the
// rounding when it is not 0: one pass, nothing leaves the registers.
template <ReduceOp kOp>
void reduceHalfFused(bool half, uint16_t* dst, const uint16_t* src, size_t count, int divisor) {
  size_t i = 0;
#if RR_VECTOR_LANES > 0
  // AVG's division, as DivideByPowerOfTwo: by a power of two, the exact
  // reciprocal. A loop per case, so none tests the case per element.
  if (divisor == 0) {
    i = reduceHalfPairs<kOp>(half, dst, src, count, KeepLanes());
  } else if (isPowerOfTwo(divisor)) {
    i = reduceHalfPairs<kOp>(half, dst, src, count,
                             ScaleLanes{Lanes::splat(1.0f / static_cast<float>(divisor))});
  } else {
    i = reduceHalfPairs<kOp>(half, dst, src, count,
                             DivideLanes{Lanes::splat(static_cast<float>(divisor))});
  }
#endif
  for (; i < count; ++i) {
    float value = combineOne<kOp>(widenOne(half, dst[i]), widenOne(half, src[i]));
    if (divisor != 0) value = divideBy(value, static_cast<float>(divisor));
    dst[i] = narrowOne(half, value);
  }
}

// MIN and MAX of float16/bfloat16 never round: the result is one of the two
// inputs. So they compare the 16-bit values where they lie, twice as many a
// vector as in float32, and store the chosen one, with no widening or
// narrowing (the loop is bound by its instruction count, hence the care).
// As signed 16-bit integers, sign-magnitude bits order as the floats they
// encode except that two negatives order in reverse (flip the comparison
// when both signs are set) and +0 and -0 differ where the floats are equal
// (the float rule "b < a ? b : a" keeps `a` for them). A NaN wins as
// ExtremeOp says, `a`'s first, then `b`'s; it is not quietened, which only
// the payload shows (the widened form sets the quiet bit).
#if RR_VECTOR_LANES == 16
template <bool kLarger, bool kHalf>
size_t extremeHalfWords(uint16_t* dst, const uint16_t* src, size_t count) {
  using I = __m512i;
  constexpr size_t kStep = 32;
  const I magnitude = _mm512_set1_epi16(0x7fff);
  const I infinity = _mm512_set1_epi16(kHalf ? 0x7c00 : 0x7f80);
  size_t i = 0;
  for (; i + kStep <= count; i += kStep) {
    const I a = _mm512_loadu_si512(dst + i);
    const I b = _mm512_loadu_si512(src + i);
    const I absA = _mm512_and_si512(a, magnitude);
    const I absB = _mm512_and_si512(b, magnitude);
    const __mmask32 nanA = _mm512_cmpgt_epi16_mask(absA, infinity);
    const __mmask32 nanB = _mm512_cmpgt_epi16_mask(absB, infinity);
    const __mmask32 zeros = _mm512_testn_epi16_mask(_mm512_or_si512(absA, absB), magnitude);
    const __mmask32 negatives = _mm512_movepi16_mask(_mm512_and_si512(a, b));
    const __mmask32 ordered = kLarger ? _mm512_cmpgt_epi16_mask(b, a) : _mm512_cmplt_epi16_mask(b, a);
    const __mmask32 better = static_cast<__mmask32>((ordered ^ negatives) & ~zeros);
    const __mmask32 pickB = static_cast<__mmask32>(~nanA & (nanB | better));
    _mm512_storeu_si512(dst + i, _mm512_mask_blend_epi16(pickB, a, b));
  }
  return i;
}
#elif RR_VECTOR_LANES == 8
// The same with AVX2's whole-lane masks in place of mask registers.
template <bool kLarger, bool kHalf>
size_t extremeHalfWords(uint16_t* dst, const uint16_t* src, size_t count) {
  using I = __m256i;
  constexpr size_t kStep = 16;
  const I magnitude = _mm256_set1_epi16(0x7fff);
  const I infinity = _mm256_set1_epi16(kHalf ? 0x7c00 : 0x7f80);
  const I zero = _mm256_setzero_si256();
  size_t i = 0;
  for (; i + kStep <= count; i += kStep) {
    const I a = _mm256_loadu_si256(reinterpret_cast<const I*>(dst + i));
    const I b = _mm256_loadu_si256(reinterpret_cast<const I*>(src + i));
    const I absA = _mm256_and_si256(a, magnitude);
    const I absB = _mm256_and_si256(b, magnitude);
    const I nanA = _mm256_cmpgt_epi16(absA, infinity);
    const I nanB = _mm256_cmpgt_epi16(absB, infinity);
    const I zeros = _mm256_cmpeq_epi16(_mm256_or_si256(absA, absB), zero);
    const I negatives = _mm256_srai_epi16(_mm256_and_si256(a, b), 15);
    const I ordered = kLarger ? _mm256_cmpgt_epi16(b, a) : _mm256_cmpgt_epi16(a, b);
    const I better = _mm256_andnot_si256(zeros, _mm256_xor_si256(ordered, negatives));
    const I pickB = _mm256_andnot_si256(nanA, _mm256_or_si256(nanB, better));
    _mm256_storeu_si256(reinterpret_cast<I*>(dst + i), _mm256_blendv_epi8(a, b, pickB));
  }
  return i;
}
#endif

template <bool kLarger>
void reduceHalfExtreme(bool half, uint16_t* dst, const uint16_t* src, size_t count) {
  size_t i = 0;
#if RR_VECTOR_LANES > 0
  i = half ? extremeHalfWords<kLarger, true>(dst, src, count)
           : extremeHalfWords<kLarger, false>(dst, src, count);
#endif
  constexpr ReduceOp kOp = kLarger ? ReduceOp::Max : ReduceOp::Min;
  for (; i < count; ++i) {
    dst[i] = narrowOne(half, combineOne<kOp>(widenOne(half, dst[i]), widenOne(half, src[i])));
  }
}

void reduceHalf(bool half, ReduceOp op, uint16_t* dst, const uint16_t* src, size_t count,
                int divisor) {
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Avg:
      return reduceHalfFused<ReduceOp::Sum>(half, dst, src, count, divisor);
    case ReduceOp::Product:
      return reduceHalfFused<ReduceOp::Product>(half, dst, src, count, divisor);
    case ReduceOp::Min:
      return reduceHalfExtreme<false>(half, dst, src, count);
    case ReduceOp::Max:
      return reduceHalfExtreme<true>(half, dst, src, count);
    default:
      break;
  }
  throw InvalidArgument(unsupportedReason(half ? DataType::Float16 : DataType::BFloat16, op));
}

void widenBuffer(bool half, const uint16_t* in, float* out, size_t count) {
  size_t i = 0;
#if RR_VECTOR_LANES == 16
  for (; i + Lanes::kCount <= count; i += Lanes::kCount) {
    _mm512_storeu_ps(out + i, Lanes::widen(half, in + i));
  }
#elif RR_VECTOR_LANES == 8
  for (; i + Lanes::kCount <= count; i += Lanes::kCount) {
    _mm256_storeu_ps(out + i, Lanes::widen(half, in + i));
  }
#endif
  for (; i < count; ++i) out[i] = widenOne(half, in[i]);
}

#if RR_VECTOR_LANES == 16
// float32 to bfloat16 as the wire dtype sends it, 32 at a time, in order;
// vectors with a float32 subnormal round exactly (reduceBFloat16PairsNative).
__attribute__((target("avx512bf16"))) size_t narrowBFloat16BufferNative(const float* in,
                                                                       uint16_t* out,
                                                                       size_t count) {
  size_t i = 0;
  for (; i + 2 * Lanes::kCount <= count; i += 2 * Lanes::kCount) {
    const __m512 lo = _mm512_loadu_ps(in + i);
    const __m512 hi = _mm512_loadu_ps(in + i + Lanes::kCount);
    if (_mm512_fpclass_ps_mask(lo, 0x20) | _mm512_fpclass_ps_mask(hi, 0x20)) {
      Lanes::narrow(false, lo, out + i);
      Lanes::narrow(false, hi, out + i + Lanes::kCount);
      continue;
    }
    _mm512_storeu_si512(out + i, narrowBFloat16Native(lo, hi));
  }
  return i;
}
#endif

void narrowBuffer(bool half, const float* in, uint16_t* out, size_t count) {
  size_t i = 0;
#if RR_VECTOR_LANES == 16
  if (!half && cpuNarrowsBFloat16()) i = narrowBFloat16BufferNative(in, out, count);
  for (; i + Lanes::kCount <= count; i += Lanes::kCount) {
    Lanes::narrow(half, _mm512_loadu_ps(in + i), out + i);
  }
#elif RR_VECTOR_LANES == 8
  for (; i + Lanes::kCount <= count; i += Lanes::kCount) {
    Lanes::narrow(half, _mm256_loadu_ps(in + i), out + i);
  }
#endif
  for (; i < count; ++i) out[i] = narrowOne(half, in[i]);
}

// ---- entry points ------------------------------------------------------------

void reduce(DataType type, ReduceOp op, void* dst, const void* src, size_t count) {
  switch (type) {
    case DataType::Float32: return reduceReal<float>(op, dst, src, count);
    case DataType::Float64: return reduceReal<double>(op, dst, src, count);
    case DataType::Int8: return reduceReal<int8_t>(op, dst, src, count);
    case DataType::UInt8: return reduceReal<uint8_t>(op, dst, src, count);
    case DataType::Int16: return reduceReal<int16_t>(op, dst, src, count);
    case DataType::Int32: return reduceReal<int32_t>(op, dst, src, count);
    case DataType::Int64: return reduceReal<int64_t>(op, dst, src, count);
    case DataType::Bool: return reduceBool(op, dst, src, count);
    case DataType::Complex64: return reduceComplex<float>(op, dst, src, count);
    case DataType::Complex128: return reduceComplex<double>(op, dst, src, count);
    case DataType::Float16:
    case DataType::BFloat16:
      return reduceHalf(type == DataType::Float16, op, static_cast<uint16_t*>(dst),
                        static_cast<const uint16_t*>(src), count, 0);
  }
  throw InvalidArgument(std::string("reduce: no loop for ") + dataTypeName(type));
}

void finishAverage(DataType type, void* data, size_t count, int divisor) {
  switch (type) {
    case DataType::Float32: return divideAll<float>(data, count, divisor);
    case DataType::Float64: return divideAll<double>(data, count, divisor);
    case DataType::Complex64: return divideAll<float>(data, 2 * count, divisor);
    case DataType::Complex128: return divideAll<double>(data, 2 * count, divisor);
    case DataType::Int8: return divideAll<int8_t>(data, count, divisor);
    case DataType::UInt8: return divideAll<uint8_t>(data, count, divisor);
    case DataType::Int16: return divideAll<int16_t>(data, count, divisor);
    case DataType::Int32: return divideAll<int32_t>(data, count, divisor);
    case DataType::Int64: return divideAll<int64_t>(data, count, divisor);
    case DataType::Float16:
    case DataType::BFloat16: {
      // Widen, divide, narrow a block at a time: a rare path (AVG's last
      // step is normally fused into reduceAndAverage).
      constexpr size_t kBlock = 1024;
      float block[kBlock];
      auto* halves = static_cast<uint16_t*>(data);
      const bool half = type == DataType::Float16;
      for (size_t done = 0; done < count; done += kBlock) {
        const size_t n = std::min(kBlock, count - done);
        widenBuffer(half, halves + done, block, n);
        divideAll<float>(block, n, divisor);
        narrowBuffer(half, block, halves + done, n);
      }
      return;
    }
    default:
      break;
  }
  throw InvalidArgument(std::string("AVG: cannot average ") + dataTypeName(type));
}

void reduceAndAverage(DataType type, void* dst, const void* src, size_t count, int divisor) {
  switch (type) {
    case DataType::Float16:
    case DataType::BFloat16:
      return reduceHalf(type == DataType::Float16, ReduceOp::Avg, static_cast<uint16_t*>(dst),
                        static_cast<const uint16_t*>(src), count, divisor);
    case DataType::Float32: return sumAndDivide<float>(dst, src, count, divisor);
    case DataType::Float64: return sumAndDivide<double>(dst, src, count, divisor);
    case DataType::Int8: return sumAndDivide<int8_t>(dst, src, count, divisor);
    case DataType::UInt8: return sumAndDivide<uint8_t>(dst, src, count, divisor);
    case DataType::Int16: return sumAndDivide<int16_t>(dst, src, count, divisor);
    case DataType::Int32: return sumAndDivide<int32_t>(dst, src, count, divisor);
    case DataType::Int64: return sumAndDivide<int64_t>(dst, src, count, divisor);
    default:
      break;
  }
  reduce(type, ReduceOp::Avg, dst, src, count);
  finishAverage(type, dst, count, divisor);
}

}  // namespace

extern const HostLoops kLoops;
const HostLoops kLoops = {RR_ISA_ENUM,     RR_ISA_NAME, &reduce,     &reduceAndAverage,
                          &finishAverage, &widenBuffer, &narrowBuffer};

}  // namespace RR_ISA_NAMESPACE
}  // namespace ringreduce
