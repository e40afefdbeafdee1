// From a ReduceOp value to its element functor (core/math/element_math.h),
// for the launchers that instantiate one kernel per (type, operator).
#pragma once

#include <type_traits>

#include "core/base/reduce_op.h"
#include "core/math/element_math.h"

namespace ringreduce::cuda {

// Calls fn(Functor{}) for `op` on elements of T (AVG sums; the caller
// divides). False when T has no such operator (a bitwise op on floats).
template <typename T, typename Fn>
bool withOperator(ReduceOp op, Fn&& fn) {
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Avg: fn(SumOp{}); return true;
    case ReduceOp::Product: fn(ProductOp{}); return true;
    case ReduceOp::Min: fn(MinOp{}); return true;
    case ReduceOp::Max: fn(MaxOp{}); return true;
    default: break;
  }
  if constexpr (std::is_integral_v<T>) {
    switch (op) {
      case ReduceOp::BAnd: fn(BAndOp{}); return true;
      case ReduceOp::BOr: fn(BOrOp{}); return true;
      case ReduceOp::BXor: fn(BXorOp{}); return true;
      default: break;
    }
  }
  return false;
}

}  // namespace ringreduce::cuda
