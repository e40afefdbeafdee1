// The record each rank publishes in the group's store (address_record.h)
#include "transport/ucx/address_record.h"

#include <string>

#include "core/base/errors.h"

namespace ringreduce {

namespace {
// UCX worker addresses are a few hundred bytes; anything near this is garbage.
constexpr uint32_t kMaxAddressBytes = 1u << 20;
constexpr size_t kHeaderBytes = 8 + 4;  // host, data length

void putLittleEndian(std::vector<uint8_t>& blob, uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) blob.push_back(static_cast<uint8_t>(value >> (8 * i)));
}

uint64_t getLittleEndian(const uint8_t* bytes, int count) {
  uint64_t value = 0;
  for (int i = 0; i < count; ++i) value |= static_cast<uint64_t>(bytes[i]) << (8 * i);
  return value;
}
}  // namespace

std::vector<uint8_t> packAddressRecord(const AddressRecord& record) {
  std::vector<uint8_t> blob;
  blob.reserve(kHeaderBytes + record.data.size() + record.monitor.size());
  putLittleEndian(blob, record.host, 8);
  putLittleEndian(blob, record.data.size(), 4);
  blob.insert(blob.end(), record.data.begin(), record.data.end());
  blob.insert(blob.end(), record.monitor.begin(), record.monitor.end());
  return blob;
}

AddressRecord unpackAddressRecord(const uint8_t* bytes, size_t size, int peer) {
  const uint64_t length = size >= kHeaderBytes ? getLittleEndian(bytes + 8, 4) : 0;
  if (size < kHeaderBytes || length == 0 || length > kMaxAddressBytes ||
      size - kHeaderBytes < length || size - kHeaderBytes - length > kMaxAddressBytes) {
    throw TransportError("ringreduce: malformed address record of rank " + std::to_string(peer) +
                         " in the store (" + std::to_string(size) +
                         " bytes); is another program using the same store keys?");
  }
  AddressRecord record;
  record.host = getLittleEndian(bytes, 8);
  const uint8_t* data = bytes + kHeaderBytes;
  record.data.assign(data, data + length);
  record.monitor.assign(data + length, bytes + size);
  return record;
}

}  // namespace ringreduce
