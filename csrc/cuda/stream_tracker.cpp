// The streams a group's device work ran on, for a bounded shutdown (stream_tracker.h)
#include "cuda/stream_tracker.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <thread>
#include <vector>

#include "cuda/capture_mode.h"
#include "cuda/cuda_error.h"
#include "cuda/device_scope.h"

namespace ringreduce::cuda {

void* recordMark(int device, void* stream) {
  DeviceScope scope(device);
  cudaEvent_t event;
  checkCuda(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), "cudaEventCreate");
  checkCuda(cudaEventRecord(event, static_cast<cudaStream_t>(stream)), "cudaEventRecord");
  return event;
}

void recordMarkAgain(void* mark, void* stream) {
  checkCuda(cudaEventRecord(static_cast<cudaEvent_t>(mark), static_cast<cudaStream_t>(stream)),
            "cudaEventRecord");
}

bool markReached(void* mark) {
  ThreadLocalCaptureMode relaxed;  // callers include the watchdog's thread
  if (cudaEventQuery(static_cast<cudaEvent_t>(mark)) == cudaSuccess) return true;
  (void)cudaGetLastError();  // cudaErrorNotReady
  return false;
}

void freeMark(void* mark) { (void)cudaEventDestroy(static_cast<cudaEvent_t>(mark)); }

void* recordTimingMark(int device, void* stream) {
  DeviceScope scope(device);
  cudaEvent_t event;
  checkCuda(cudaEventCreate(&event), "cudaEventCreate");
  if (const cudaError_t status = cudaEventRecord(event, static_cast<cudaStream_t>(stream));
      status != cudaSuccess) {
    (void)cudaEventDestroy(event);
    throwCudaError(status, "cudaEventRecord");
  }
  return event;
}

double secondsBetweenMarks(void* start, void* end) {
  float ms = 0;
  checkCuda(cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(start),
                                 static_cast<cudaEvent_t>(end)),
            "cudaEventElapsedTime");
  return static_cast<double>(ms) / 1e3;
}

void callAfterQueuedWork(void* stream, void (*fn)(void*), void* arg) {
  ThreadLocalCaptureMode relaxed;  // the group's stream is never captured
  checkCuda(cudaLaunchHostFunc(static_cast<cudaStream_t>(stream), fn, arg),
            "cudaLaunchHostFunc");
}

bool StreamTracker::waitAll(int device, std::chrono::milliseconds limit) const {
  DeviceScope scope(device);
  const auto deadline = std::chrono::steady_clock::now() + limit;
  std::vector<cudaEvent_t> events;
  bool ok = true;
  for (void* stream : streams_) {
    cudaEvent_t event;
    if (cudaEventCreateWithFlags(&event, cudaEventDisableTiming) != cudaSuccess) {
      (void)cudaGetLastError();
      ok = false;
      break;
    }
    events.push_back(event);
    if (cudaEventRecord(event, static_cast<cudaStream_t>(stream)) != cudaSuccess) {
      (void)cudaGetLastError();
      ok = false;
      break;
    }
  }
  ThreadLocalCaptureMode relaxed;
  for (cudaEvent_t event : events) {
    auto pause = std::chrono::microseconds(10);
    while (ok && cudaEventQuery(event) != cudaSuccess) {
      (void)cudaGetLastError();  // cudaErrorNotReady
      if (std::chrono::steady_clock::now() > deadline) {
        ok = false;
        break;
      }
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::microseconds(2000));
    }
  }
  // An event still pending is destroyed safely: CUDA releases it once done.
  for (cudaEvent_t event : events) (void)cudaEventDestroy(event);
  return ok;
}

}  // namespace ringreduce::cuda
