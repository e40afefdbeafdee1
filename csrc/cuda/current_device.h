// The few runtime calls that decide which device a thread uses, behind
// plain functions so that the host stand-in for the device
// (tests/cpp/fake_device_context.cpp) can model each thread's current device
// and each device's context, and prove that a rank creates no context on a
// device it does not use. Defined in current_device.cpp.
#pragma once

namespace ringreduce::cuda {

// The calling thread's current device: 0 on a thread that never chose one
// (what cudaGetDevice says, without creating anything); -1 when the runtime
// cannot tell (no driver, no device).
int currentDevice();

// Makes `device` current on the calling thread. Since CUDA 12 this creates
// the device's primary context when it has none (memory on that GPU).
// Throws on failure.
void makeCurrent(int device);

// Whether `device`'s primary context is active in this process, so making
// it current creates nothing. False when that cannot be known.
bool hasPrimaryContext(int device);

}  // namespace ringreduce::cuda
