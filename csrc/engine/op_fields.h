// What an on-caller collective or a send or receive is (dtype, element
// count, reduce op, root, peer and tag, device), as plain fields: the hot
// paths (Engine::runOnCaller, Engine::submitPointToPoint) store them in the
// flight recorder as they are and render them as text only when the trace
// is read or an Info log line is written, so that a call costs no string.
// Torch-free: the backend fills it from its tensors.
#pragma once

#include <cstdint>
#include <ostream>
#include <sstream>
#include <string>

#include "core/base/data_type.h"
#include "core/base/reduce_op.h"

namespace ringreduce {

struct OpFields {
  // The reduce op's code for PREMUL_SUM, which has no ReduceOp of its own
  // (the backend's kPremulSumCode, csrc/backend/tensor_checks.h).
  static constexpr int kPremulSum = 100;

  DataType dtype = DataType::UInt8;
  // A dtype the reductions do not know (moved as bytes: float8, uint16-64),
  // by the name torch gives it (static storage), instead of `dtype`.
  const char* dtypeName = nullptr;
  uint64_t count = 0;  // elements of the tensor that names the op
  int reduceOp = -1;   // a ReduceOp's value, kPremulSum, or -1: none (allgather, broadcast)
  int root = -1;       // -1: none
  int device = -1;     // CUDA device index; -1: none
  // A send's or receive's peer (-1 with From: a receive from any rank) and tag.
  enum class Direction : uint8_t { None, To, From };
  Direction direction = Direction::None;
  int peer = -1;
  int64_t tag = 0;
};

// "4 x float32 SUM on cuda:0", "8 x int64 from root 1", "16 x float32 to
// rank 1, tag 0": the queued collectives' summaries in the same words.
inline std::ostream& operator<<(std::ostream& out, const OpFields& f) {
  out << f.count << " x " << (f.dtypeName != nullptr ? f.dtypeName : dataTypeName(f.dtype));
  if (f.reduceOp == OpFields::kPremulSum) {
    out << " PREMUL_SUM";
  } else if (f.reduceOp >= 0) {
    out << " " << reduceOpName(static_cast<ReduceOp>(f.reduceOp));
  }
  if (f.root >= 0) out << " from root " << f.root;
  if (f.direction == OpFields::Direction::To) out << " to rank " << f.peer << ", tag " << f.tag;
  if (f.direction == OpFields::Direction::From) {
    out << " from " << (f.peer < 0 ? "any rank" : "rank " + std::to_string(f.peer)) << ", tag "
        << f.tag;
  }
  if (f.device >= 0) out << " on cuda:" << f.device;
  return out;
}

inline std::string describe(const OpFields& fields) {
  std::ostringstream text;
  text << fields;
  return text.str();
}

}  // namespace ringreduce
