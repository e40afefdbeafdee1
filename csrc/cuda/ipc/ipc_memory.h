// Device memory and events shared between the processes of one node through
// CUDA IPC. Debian's UCX cannot move device memory, so ranks on one node map
// each other's buffers and order their streams with interprocess events; the
// handles travel over our own transport as plain bytes.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>

namespace ringreduce::cuda {

constexpr size_t kIpcHandleBytes = 64;  // cudaIpcMemHandle_t, cudaIpcEventHandle_t
using IpcHandle = std::array<uint8_t, kIpcHandleBytes>;

// Where a pointer lives, as a peer needs it: the allocation's handle and the
// pointer's offset in it. Plain data, sent as is.
struct ExportedRange {
  uint8_t ok = 0;  // 0: the memory cannot be shared (see exportRange)
  IpcHandle handle{};
  uint64_t offset = 0;
};

// Fails (ok = 0, `why` set) for memory cudaIpcGetMemHandle refuses: the
// caching allocator's expandable segments (cuMemCreate), managed or host
// memory. Never throws for that; throws Error for a broken runtime.
ExportedRange exportRange(int device, const void* ptr, std::string* why);

// The peers' allocations this process has opened, by handle. Opening costs
// tens of microseconds, so mappings are kept until the group ends: the
// caching allocator hands out the same few segments again and again, so the
// cache stays small. A peer never frees what it exported while it is
// mapped here: it holds the memory until every rank has closed its
// mappings (the groups' close()).
class PeerMappings {
 public:
  explicit PeerMappings(int device) : device_(device) {}
  // Leaves open what closeAll() did not close: a kernel may still use it,
  // and closing under it is undefined.
  ~PeerMappings() = default;
  PeerMappings(const PeerMappings&) = delete;
  PeerMappings& operator=(const PeerMappings&) = delete;

  // The peer's pointer (allocation base + offset) in this process.
  void* map(const ExportedRange& range);
  size_t size() const { return open_.size(); }
  // The caller has waited for every kernel and copy that may use them.
  void closeAll();

 private:
  int device_;
  std::map<IpcHandle, void*> open_;
};

// Copies `bytes` between device pointers of `device` (mapped peer pointers
// included), queued on `stream`.
void copyOnStream(int device, void* dst, const void* src, size_t bytes, void* stream);

// Sets `bytes` bytes at `dst` (device memory of `device`) to `value`,
// queued on `stream`.
void fillOnStream(int device, void* dst, int value, size_t bytes, void* stream);
// Waits (on the host) for what is queued on `stream`: only for streams of
// our own whose work cannot wait on a peer (set-up).
void synchronizeStream(int device, void* stream);

// Pinned host memory the device writes and the host reads (cudaHostAlloc,
// mapped): where kernels report to a host thread without any copy.
class PinnedMirror {
 public:
  PinnedMirror(int device, size_t bytes);  // zeroed
  ~PinnedMirror();
  PinnedMirror(const PinnedMirror&) = delete;
  PinnedMirror& operator=(const PinnedMirror&) = delete;
  void* host() const { return host_; }
  void* device() const { return device_; }

 private:
  void* host_ = nullptr;
  void* device_ = nullptr;
};

// A device buffer of our own (cudaMalloc, so always shareable). Once
// exported it is freed only after release(): peers may map it, and freeing
// mapped memory is undefined; a buffer never released stays allocated for
// the life of the process.
class DeviceBuffer {
 public:
  DeviceBuffer(int device, size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  ExportedRange exported();
  // Every rank that mapped it has closed its mapping (a cross-rank close).
  void release() { shared_ = false; }

 private:
  int device_;
  void* data_ = nullptr;
  size_t bytes_ = 0;
  bool shared_ = false;
};

// An interprocess event this process records; peers open it by handle. Not
// destroyed with the object (see the destructor): a peer may still wait on it.
class SharedEvent {
 public:
  explicit SharedEvent(int device);
  ~SharedEvent();
  SharedEvent(const SharedEvent&) = delete;
  SharedEvent& operator=(const SharedEvent&) = delete;
  void record(void* stream);
  const IpcHandle& handle() const { return handle_; }

 private:
  int device_;
  void* event_ = nullptr;
  IpcHandle handle_{};
};

// A peer's SharedEvent opened in this process. waitOn() makes a stream wait
// for the peer's latest record issued before the call; the caller orders
// the peer's record before the call with a host message.
class PeerEvent {
 public:
  PeerEvent(int device, const IpcHandle& handle);
  ~PeerEvent();
  PeerEvent(const PeerEvent&) = delete;
  PeerEvent& operator=(const PeerEvent&) = delete;
  void waitOn(void* stream);

 private:
  int device_;
  void* event_ = nullptr;
};

}  // namespace ringreduce::cuda
