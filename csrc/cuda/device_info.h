// What the CUDA runtime reports: for `python -m torch_ringreduce.info` and
// for the backend's choice of data path.
#pragma once

#include <array>
#include <cstdint>
#include <string>

namespace ringreduce::cuda {

// Devices this process can use; 0 (and `why`) without a driver or device.
// Never throws.
int visibleDeviceCount(std::string* why);

// "runtime 13.0 (linked statically), driver 13.0, 1 device(s)" or why not.
std::string runtimeDescription();

// Whether this process's CUDA contexts are MPS clients: the MPS control
// daemon's pipe directory (CUDA_MPS_PIPE_DIRECTORY, else /tmp/nvidia-mps)
// holds its "control" pipe and an MPS daemon process is running here. With
// MPS the kernels of the processes sharing a GPU run at once; without it
// they are time-sliced. `how` says what was found. Never throws.
bool mpsActive(std::string* how);

// Streaming multiprocessors of `device`.
int multiprocessors(int device);

// Identifies a physical GPU across processes (CUDA_VISIBLE_DEVICES may give
// it different indices in different processes).
std::array<uint8_t, 16> deviceUuid(int device);

// Whether `device` can reach the GPU `peer` (a deviceUuid) directly, as far
// as this process can tell: Yes for the same GPU or where
// cudaDeviceCanAccessPeer says so, No where it says not, Unknown where this
// process does not see that GPU (CUDA_VISIBLE_DEVICES: the peer probe
// decides). Never throws.
enum class PeerAccess { Yes, No, Unknown };
PeerAccess peerAccessTo(int device, const std::array<uint8_t, 16>& peer);

}  // namespace ringreduce::cuda
