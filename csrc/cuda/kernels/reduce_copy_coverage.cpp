// Which (source dtype, destination dtype, op) the fused kernel handles:
// plain C++, so the host-side tests of the IPC protocol link it without the
// device code.
#include "cuda/kernels/reduce_copy.h"

namespace ringreduce::cuda {

namespace {

bool isWireCast(DataType s, DataType d) {
  const bool narrow = s == DataType::Float32 && isHalfPrecision(d);
  const bool widen = isHalfPrecision(s) && d == DataType::Float32;
  return narrow || widen;
}

}  // namespace

std::string kernelUnsupportedReason(DataType srcType, DataType dstType, ReduceOp op) {
  if (srcType != dstType) {
    if (!isWireCast(srcType, dstType)) {
      return std::string("no device cast from ") + dataTypeName(srcType) + " to " +
             dataTypeName(dstType);
    }
    if (op != ReduceOp::Sum && op != ReduceOp::Avg) {
      return std::string("a 16-bit wire dtype carries SUM and AVG only, not ") +
             reduceOpName(op);
    }
    return "";
  }
  const std::string reason = unsupportedReason(srcType, op);
  if (!reason.empty()) return reason;
  if (isComplex(srcType) && op != ReduceOp::Sum && op != ReduceOp::Avg) {
    return std::string(reduceOpName(op)) + " is not defined for " + dataTypeName(srcType);
  }
  return "";
}

namespace {

constexpr int kDataTypes = static_cast<int>(DataType::Complex128) + 1;
constexpr int kReduceOps = static_cast<int>(ReduceOp::BXor) + 1;

struct SupportTable {
  bool supported[kDataTypes][kDataTypes][kReduceOps] = {};
  SupportTable() {
    for (int s = 0; s < kDataTypes; ++s) {
      for (int d = 0; d < kDataTypes; ++d) {
        for (int o = 0; o < kReduceOps; ++o) {
          supported[s][d][o] = kernelUnsupportedReason(static_cast<DataType>(s),
                                                       static_cast<DataType>(d),
                                                       static_cast<ReduceOp>(o))
                                   .empty();
        }
      }
    }
  }
};

}  // namespace

bool kernelSupports(DataType srcType, DataType dstType, ReduceOp op) {
  static const SupportTable table;
  const auto s = static_cast<unsigned>(srcType), d = static_cast<unsigned>(dstType),
             o = static_cast<unsigned>(op);
  if (s >= kDataTypes || d >= kDataTypes || o >= kReduceOps) return false;
  return table.supported[s][d][o];
}

namespace {

// The largest divisor an integer destination can hold.
long long largestDivisor(DataType type) {
  switch (type) {
    case DataType::Int8: return 127;
    case DataType::UInt8: return 255;
    case DataType::Int16: return 32767;
    default: return 2147483647;
  }
}

}  // namespace

std::string reduceCopyArgsProblem(const ReduceCopyArgs& args) {
  if (args.nsrc < 1 || args.nsrc > kMaxFanout || args.ndst < 0 || args.ndst > kMaxFanout) {
    return "reduce-copy takes 1 to " + std::to_string(kMaxFanout) + " sources and 0 to " +
           std::to_string(kMaxFanout) + " destinations, got " + std::to_string(args.nsrc) +
           " and " + std::to_string(args.ndst);
  }
  if (!kernelSupports(args.srcType, args.dstType, args.op)) {
    return kernelUnsupportedReason(args.srcType, args.dstType, args.op);
  }
  if (args.op != ReduceOp::Avg) {
    if (args.avgDivisor != 0) {
      return std::string("avg_divisor ") + std::to_string(args.avgDivisor) +
             " is for AVG only, not " + reduceOpName(args.op);
    }
    return "";
  }
  if (args.avgDivisor < 1) {
    return "AVG needs avg_divisor >= 1 (the number of ranks), got " +
           std::to_string(args.avgDivisor);
  }
  if (isIntegral(args.dstType) && args.avgDivisor > largestDivisor(args.dstType)) {
    return "avg_divisor " + std::to_string(args.avgDivisor) + " does not fit " +
           dataTypeName(args.dstType);
  }
  return "";
}

}  // namespace ringreduce::cuda
