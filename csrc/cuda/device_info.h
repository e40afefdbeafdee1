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

// Identifies a physical GPU across processes (CUDA_VISIBLE_DEVICES may give
// it different indices in different processes).
std::array<uint8_t, 16> deviceUuid(int device);

}  // namespace ringreduce::cuda
