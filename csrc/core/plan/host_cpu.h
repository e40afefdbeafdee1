// What messages cost the CPUs of the ranks that send and receive them, and
// how many cores those ranks share: the part of a machine the link model
// (core/plan/link_cost.h) leaves out. The virtual-time transport
// (transport/simulated/) runs this work on a limited set of cores, so that
// an emulated cluster whose 8 ranks share 2 cores can be simulated as it
// runs, not as if every rank had a core of its own.
#pragma once

#include <cstddef>
#include <cstdio>
#include <string>

namespace ringreduce {

// CPU seconds one message takes on a class of link (TCP copies every byte
// through the kernel at both ends; shared memory would copy once).
struct MessageCpu {
  double send = 0;            // the sender's CPU per message posted
  double sendPerByte = 0;     // and per byte
  double receive = 0;         // the receiver's CPU per message taken in
  double receivePerByte = 0;  // and per byte
  // The receiver's CPU when such a message wakes it from sleep: going to
  // sleep and waking (system calls, context switches, and on an emulated
  // delayed link the timer that releases the sender's messages).
  double wake = 0;
  // Seconds the sender's transport holds a message before it sends it (an
  // emulated latency added at the sender: DelayedTransport); the send's CPU
  // is spent when it does, waking the sender if it sleeps.
  double heldFor = 0;

  double sending(size_t bytes) const { return send + sendPerByte * static_cast<double>(bytes); }
  double receiving(size_t bytes) const {
    return receive + receivePerByte * static_cast<double>(bytes);
  }
  bool any() const {
    return send > 0 || sendPerByte > 0 || receive > 0 || receivePerByte > 0 || wake > 0;
  }
};

struct HostCpu {
  // Cores shared by all simulated ranks (the emulation runs every rank on one
  // machine); 0: a core per rank, nobody waits for one (the default, and the
  // model before cores existed).
  int cores = 0;
  MessageCpu intraNode, interNode;
  // Seconds a rank that must wait spins on its core before it sleeps
  // (Config::spinMicroseconds); it holds the core meanwhile. Only with
  // limited cores: with a core each, spinning costs nobody anything.
  double spin = 0;
};

// "send 12 us + 0.4 ns/B, receive 9 us + 0.5 ns/B, wake 20 us"
inline std::string describeMessageCpu(const MessageCpu& cpu) {
  char text[200];
  std::snprintf(text, sizeof(text),
                "send %.2f us + %.3f ns/B, receive %.2f us + %.3f ns/B, wake %.2f us",
                cpu.send * 1e6, cpu.sendPerByte * 1e9, cpu.receive * 1e6,
                cpu.receivePerByte * 1e9, cpu.wake * 1e6);
  return text;
}

}  // namespace ringreduce
