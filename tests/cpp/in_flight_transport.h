// A Transport whose sends and receives stay in flight, and whose cancel,
// like UCX's for a send it has accepted, does not stop a send: what was
// posted may still be read after its owner abandoned it. It keeps the bytes
// each send held when posted, so a test can check that a send abandoned in
// flight still reads them later (after its owner, and the owner's frame,
// are gone).
#pragma once

#include <cstring>
#include <string>
#include <vector>

#include "transport/transport.h"

namespace ringreduce::testing {

class InFlightTransport : public Transport {
 public:
  InFlightTransport(int rank, int size) : Transport(rank, size, Config{}) {}

  struct Sent {
    const unsigned char* from;          // what UCX would pack, later
    std::vector<unsigned char> posted;  // what it held when posted
    // Whether the send would still carry what was posted.
    bool unchanged() const { return std::memcmp(from, posted.data(), posted.size()) == 0; }
  };
  std::vector<Sent> sends;

  unsigned progress() override { return 0; }
  std::string describeEndpoint(int) override { return "none"; }

 protected:
  void* postSend(int, uint64_t, const void* data, size_t bytes, std::string*) override {
    const auto* from = static_cast<const unsigned char*>(data);
    sends.push_back({from, std::vector<unsigned char>(from, from + bytes)});
    return &handle_;
  }
  void* postRecv(uint64_t, uint64_t, void*, size_t, std::string*) override { return &handle_; }
  Completion poll(void*, bool) override { return Completion{}; }
  void cancel(void*) override {}

 private:
  int handle_ = 0;
};

// Whatever runs next on the thread reuses the frames that were below it.
__attribute__((noinline)) inline void overwriteTheStack() {
  volatile unsigned char junk[8192];
  for (size_t i = 0; i < sizeof(junk); ++i) junk[i] = 0xab;
}

}  // namespace ringreduce::testing
