// float32 SUM/AVG sent as 16-bit floats, RINGREDUCE_WIRE_DTYPE (wire_dtype.h)
#include "algorithms/wire_dtype.h"

#include <cstdint>

#include "core/math/half_conversion.h"

namespace ringreduce {

bool usesWireDtype(const Comm& comm, const ReductionArgs& args) {
  return comm.config.hostWireDtype != WireDtype::None && args.type == DataType::Float32 &&
         (args.op == ReduceOp::Sum || args.op == ReduceOp::Avg) && comm.transport.size() > 1 &&
         args.count > 0;
}

void withWireDtype(const Comm& comm, const ReductionArgs& args,
                   const std::function<void(const ReductionArgs&)>& reduce) {
  if (!usesWireDtype(comm, args)) return reduce(args);
  const bool half = comm.config.hostWireDtype == WireDtype::Fp16;
  auto* wire = static_cast<uint16_t*>(
      comm.workspace.get(Workspace::kWire, args.count * sizeof(uint16_t)));
  auto* data = static_cast<float*>(args.data);
  floatBufferToHalf(half, data, wire, args.count);
  ReductionArgs onWire = args;
  onWire.data = wire;
  onWire.type = half ? DataType::Float16 : DataType::BFloat16;
  reduce(onWire);
  halfBufferToFloat(half, wire, data, args.count);
}

}  // namespace ringreduce
