// A file descriptor that the device makes readable: an eventfd written by a
// host function queued on a stream after its work (callAfterQueuedWork). A
// host thread that waits for device work sleeps on it in the same poll as
// the transport's event fd, so it wakes when the device gets there or the
// network has news, whichever is first, instead of polling the device in
// fixed slices. Arming costs a host function on the stream (and its
// callback's wake-up), so a waiter arms only once it has stopped spinning.
// No CUDA types here; usable wherever the CUDA path is compiled (and on the
// tests' fake device).
#pragma once

#include <memory>

namespace ringreduce::cuda {

class StreamWake {
 public:
  StreamWake();  // throws Error when no eventfd can be made
  // A host function still queued keeps the eventfd open until it has run.
  ~StreamWake();
  StreamWake(const StreamWake&) = delete;
  StreamWake& operator=(const StreamWake&) = delete;

  int fd() const;
  // The fd becomes readable once the work queued so far on `stream` is done.
  void armAfter(void* stream);
  // Forgets what the fd said so far (a readable fd is then news).
  void clear();
  // Sleeps until the fd is readable or `timeoutMs` passed; true if readable.
  bool sleep(int timeoutMs) const;

 private:
  struct Shared;
  // The host function: writes the eventfd, lets go of its share.
  static void wakeFromDevice(void* held);
  std::shared_ptr<Shared> shared_;
};

}  // namespace ringreduce::cuda
