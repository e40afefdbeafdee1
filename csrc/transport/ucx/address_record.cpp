#include "transport/ucx/address_record.h"

#include <string>

#include "core/errors.h"

namespace ringreduce {

namespace {
// UCX worker addresses are a few hundred bytes; anything near this is garbage.
constexpr uint32_t kMaxAddressBytes = 1u << 20;
}  // namespace

std::vector<uint8_t> packAddressRecord(const AddressRecord& record) {
  std::vector<uint8_t> blob(4);
  const auto length = static_cast<uint32_t>(record.data.size());
  for (int i = 0; i < 4; ++i) blob[i] = static_cast<uint8_t>(length >> (8 * i));
  blob.insert(blob.end(), record.data.begin(), record.data.end());
  blob.insert(blob.end(), record.monitor.begin(), record.monitor.end());
  return blob;
}

AddressRecord unpackAddressRecord(const uint8_t* bytes, size_t size, int peer) {
  uint32_t length = 0;
  if (size >= 4) {
    for (int i = 0; i < 4; ++i) length |= static_cast<uint32_t>(bytes[i]) << (8 * i);
  }
  if (size < 4 || length == 0 || length > kMaxAddressBytes || size - 4 < length ||
      size - 4 - length > kMaxAddressBytes) {
    throw TransportError("ringreduce: malformed address record of rank " + std::to_string(peer) +
                         " in the store (" + std::to_string(size) +
                         " bytes); is another program using the same store keys?");
  }
  AddressRecord record;
  record.data.assign(bytes + 4, bytes + 4 + length);
  record.monitor.assign(bytes + 4 + length, bytes + size);
  return record;
}

}  // namespace ringreduce
