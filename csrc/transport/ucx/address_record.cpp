// The record each rank publishes in the group's store (address_record.h)
#include "transport/ucx/address_record.h"

#include <string>

#include "core/base/errors.h"

namespace ringreduce {

namespace {
// UCX worker addresses are a few hundred bytes; anything near this is garbage.
constexpr uint32_t kMaxAddressBytes = 1u << 20;
// What must agree is a few hundred bytes of settings.
constexpr uint32_t kMaxAgreedBytes = 1u << 16;
constexpr size_t kHeaderBytes = 8 + 8 + 4 + 4;  // magic, host, data and monitor lengths

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
  blob.reserve(kHeaderBytes + record.data.size() + record.monitor.size() + record.agreed.size());
  putLittleEndian(blob, kAddressRecordMagic, 8);
  putLittleEndian(blob, record.host, 8);
  putLittleEndian(blob, record.data.size(), 4);
  putLittleEndian(blob, record.monitor.size(), 4);
  blob.insert(blob.end(), record.data.begin(), record.data.end());
  blob.insert(blob.end(), record.monitor.begin(), record.monitor.end());
  blob.insert(blob.end(), record.agreed.begin(), record.agreed.end());
  return blob;
}

AddressRecord unpackAddressRecord(const uint8_t* bytes, size_t size, int peer) {
  if (size >= 8 && getLittleEndian(bytes, 8) != kAddressRecordMagic) {
    throw TransportError("ringreduce: rank " + std::to_string(peer) +
                         " published an address record of another layout in the store: it runs "
                         "another build of torch_ringreduce (or another program uses the same "
                         "store keys); every rank of a group must run the same build");
  }
  const uint64_t length = size >= kHeaderBytes ? getLittleEndian(bytes + 16, 4) : 0;
  const uint64_t monitor = size >= kHeaderBytes ? getLittleEndian(bytes + 20, 4) : 0;
  const uint64_t rest = size >= kHeaderBytes ? size - kHeaderBytes : 0;
  if (size < kHeaderBytes || length == 0 || length > kMaxAddressBytes ||
      monitor > kMaxAddressBytes || rest < length + monitor ||
      rest - length - monitor > kMaxAgreedBytes) {
    throw TransportError("ringreduce: malformed address record of rank " + std::to_string(peer) +
                         " in the store (" + std::to_string(size) +
                         " bytes); is another program using the same store keys?");
  }
  AddressRecord record;
  record.host = getLittleEndian(bytes + 8, 8);
  const uint8_t* data = bytes + kHeaderBytes;
  record.data.assign(data, data + length);
  record.monitor.assign(data + length, data + length + monitor);
  record.agreed.assign(reinterpret_cast<const char*>(data + length + monitor),
                       reinterpret_cast<const char*>(bytes + size));
  return record;
}

}  // namespace ringreduce
