// Event queries from a thread that captures nothing, made harmless to a CUDA
// graph that another thread is capturing. torch.cuda.graph captures in
// CUDA's global mode, where an event query from any other thread is a
// prohibited call that invalidates the capture: our watchdog's and
// executor's polls then broke a user's capture (seen on an H200, the
// capture ending in cudaErrorStreamCaptureInvalidated). In thread-local
// mode a thread's calls concern only captures it runs itself. Scoped, so a
// caller's own thread keeps its mode (PyTorch's NCCL watchdog does the same).
// No CUDA types here: backend/ includes it where CUDA is compiled.
#pragma once

namespace ringreduce::cuda {

class ThreadLocalCaptureMode {
 public:
  ThreadLocalCaptureMode();
  ~ThreadLocalCaptureMode();
  ThreadLocalCaptureMode(const ThreadLocalCaptureMode&) = delete;
  ThreadLocalCaptureMode& operator=(const ThreadLocalCaptureMode&) = delete;

 private:
  int previous_ = -1;  // the thread's cudaStreamCaptureMode before, -1 if unknown
};

}  // namespace ringreduce::cuda
