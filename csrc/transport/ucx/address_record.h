// The record each rank publishes in the group's store: which machine it runs
// on, its data worker's UCX address and its peer monitor's. Records come from the store, which is
// as trusted as torch's TCPStore (anyone who can write to it can direct the
// group's connections), but a malformed one must still only ever produce an
// error, never a crash: see tests/fuzz.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace ringreduce {

struct AddressRecord {
  std::vector<uint8_t> data;     // never empty in a valid record
  std::vector<uint8_t> monitor;  // empty when the peer monitor is off
  uint64_t host = 0;             // hostIdentityHash() (core/base/host_identity.h)
};

// [host : 8][data length : 4][data address][monitor address], numbers little endian
std::vector<uint8_t> packAddressRecord(const AddressRecord& record);
// Throws TransportError naming `peer` for a malformed record.
AddressRecord unpackAddressRecord(const uint8_t* bytes, size_t size, int peer);

}  // namespace ringreduce
