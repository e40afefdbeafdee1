// What can be chosen for CUDA tensors and what was, each enum with its one
// name table (core/base/name_table.h). The names of what the user asks for are
// the values the environment variables take.
#pragma once

#include <cstdint>

#include "core/base/name_table.h"

namespace ringreduce {

// RINGREDUCE_CUDA_ALGO: which path runs a CUDA allreduce (core/config/config.h).
// Flags: the device-flags path (cuda/signal/): collectives synchronised on
// the device, from the caller's thread, capturable in CUDA graphs. Ring:
// the device ring (algorithms/device/ring.h), UCX moving device segments
// and our kernel reducing them, on any nodes.
enum class CudaAlgorithm : uint8_t { Auto, OneShot, TwoShot, Staged, Nccl, Host, Flags, Ring };

template <>
struct NameTable<CudaAlgorithm> {
  static constexpr NamedValue<CudaAlgorithm> entries[] = {
      {CudaAlgorithm::Auto, "auto"},
      {CudaAlgorithm::OneShot, "oneshot"},
      {CudaAlgorithm::TwoShot, "twoshot"},
      {CudaAlgorithm::Staged, "staged"},
      {CudaAlgorithm::Nccl, "nccl"},
      {CudaAlgorithm::Host, "host"},
      {CudaAlgorithm::Flags, "flags"},
      {CudaAlgorithm::Ring, "ring"},
  };
};

// RINGREDUCE_CUDA_SYNC: how the device-flags path's ranks meet on the
// device. Auto decides at set-up from the GPUs and MPS (cuda/path_selection.h).
enum class CudaSync : uint8_t { Auto, Flags, StreamMemOps };

template <>
struct NameTable<CudaSync> {
  static constexpr NamedValue<CudaSync> entries[] = {
      {CudaSync::Auto, "auto"},
      {CudaSync::Flags, "flags"},
      {CudaSync::StreamMemOps, "memops"},
  };
};

// RINGREDUCE_CUDA_WIRE_DTYPE: the 16-bit float that float32 SUM/AVG may
// travel as through the IPC scratch buffers.
enum class WireDtype : uint8_t { None, Fp16, Bf16 };

template <>
struct NameTable<WireDtype> {
  static constexpr NamedValue<WireDtype> entries[] = {
      {WireDtype::None, "none"},
      {WireDtype::Fp16, "fp16"},
      {WireDtype::Bf16, "bf16"},
  };
};

// The path a CUDA collective took. HostStaging: no device path applied, and
// the caller stages the data through pinned host memory over UCX. OneShot,
// TwoShot and Staged are the IPC allreduce algorithms (cuda/ipc/); Ipc is
// how the other collectives run among the ranks of one node.
// Flags*: the device-flags path (cuda/signal/): FlagsOneShot and
// FlagsTwoShot through the registered buffers, FlagsInPlace on the ranks'
// own tensors, Flags for the other collectives. DeviceRing: the caller runs
// the device ring (algorithms/device/ring.h) over the transport.
enum class DevicePathTaken : uint8_t {
  HostStaging,
  OneShot,
  TwoShot,
  Staged,
  Ipc,
  Nccl,
  FlagsOneShot,
  FlagsTwoShot,
  FlagsInPlace,
  Flags,
  DeviceRing,
};

template <>
struct NameTable<DevicePathTaken> {
  static constexpr NamedValue<DevicePathTaken> entries[] = {
      {DevicePathTaken::HostStaging, "host staging"},
      {DevicePathTaken::OneShot, "one-shot"},
      {DevicePathTaken::TwoShot, "two-shot"},
      {DevicePathTaken::Staged, "staged two-shot"},
      {DevicePathTaken::Ipc, "ipc"},
      {DevicePathTaken::Nccl, "nccl"},
      {DevicePathTaken::FlagsOneShot, "device-flags one-shot"},
      {DevicePathTaken::FlagsTwoShot, "device-flags two-shot"},
      {DevicePathTaken::FlagsInPlace, "device-flags in-place two-shot"},
      {DevicePathTaken::Flags, "device-flags"},
      {DevicePathTaken::DeviceRing, "device ring"},
  };
};

// What the device path ran itself; HostStaging and DeviceRing are left to
// the caller (over the transport).
inline bool ranOnDevice(DevicePathTaken path) {
  return path != DevicePathTaken::HostStaging && path != DevicePathTaken::DeviceRing;
}

}  // namespace ringreduce
