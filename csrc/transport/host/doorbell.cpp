// A rank's doorbell: a datagram socket its peers ring (doorbell.h)
#include "transport/host/doorbell.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstring>

#include "core/base/errors.h"

namespace ringreduce {

namespace {

// An abstract address: a NUL, then the name (no terminating NUL counted).
sockaddr_un addressOf(const std::string& name, socklen_t* length) {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  const size_t bytes = std::min(name.size(), sizeof(address.sun_path) - 1);
  std::memcpy(address.sun_path + 1, name.data(), bytes);
  *length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + bytes);
  return address;
}

}  // namespace

Doorbell::Doorbell(const std::string& prefix, int rank, int ranks) {
  for (int r = 0; r < ranks; ++r) addresses_.push_back(prefix + "/" + std::to_string(r));
  fd_ = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  sender_ = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd_ < 0 || sender_ < 0) {
    const int error = errno;
    close();
    throw Error(std::string("ringreduce: doorbell socket: ") + std::strerror(error));
  }
  socklen_t length = 0;
  const sockaddr_un address = addressOf(addresses_[static_cast<size_t>(rank)], &length);
  if (bind(fd_, reinterpret_cast<const sockaddr*>(&address), length) != 0) {
    const int error = errno;
    close();
    throw Error("ringreduce: doorbell bind(@" + addresses_[static_cast<size_t>(rank)] +
                "): " + std::strerror(error));
  }
}

Doorbell::~Doorbell() { close(); }

void Doorbell::close() {
  if (fd_ >= 0) ::close(fd_);
  if (sender_ >= 0) ::close(sender_);
  fd_ = sender_ = -1;
}

void Doorbell::ring(int rank) const {
  socklen_t length = 0;
  const sockaddr_un address = addressOf(addresses_[static_cast<size_t>(rank)], &length);
  const char byte = 1;
  // EAGAIN: its queue is full of rings it has not read yet; ECONNREFUSED:
  // it has gone. Either way there is no one more to wake.
  (void)sendto(sender_, &byte, 1, MSG_DONTWAIT, reinterpret_cast<const sockaddr*>(&address),
               length);
}

void Doorbell::drain() const {
  char bytes[64];
  while (recv(fd_, bytes, sizeof(bytes), MSG_DONTWAIT) > 0) {
  }
}

}  // namespace ringreduce
