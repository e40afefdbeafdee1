// libFuzzer target: any bytes a peer (or anything else) put under an address
// key must unpack to a record or raise TransportError; never crash, never
// read out of bounds. Run with scripts/fuzz.sh.
#include <cstddef>
#include <cstdint>

#include "core/base/errors.h"
#include "transport/ucx/address_record.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const ringreduce::AddressRecord record = ringreduce::unpackAddressRecord(data, size, 1);
    // What unpacks must pack back to the same bytes.
    const auto again = ringreduce::packAddressRecord(record);
    if (again.size() != size) __builtin_trap();
    for (size_t i = 0; i < size; ++i) {
      if (again[i] != data[i]) __builtin_trap();
    }
  } catch (const ringreduce::TransportError&) {
  }
  return 0;
}
