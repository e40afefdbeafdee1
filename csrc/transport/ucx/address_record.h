// The record each rank publishes in the group's store: which machine it runs
// on, its data worker's UCX address, its peer monitor's, and what must be
// alike on every rank (core/config/settings_agreement.h: the build and the
// settings that decide how messages go). Records come from the store, which is
// as trusted as torch's TCPStore (anyone who can write to it can direct the
// group's connections), but a malformed one must still only ever produce an
// error, never a crash: see tests/fuzz.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace ringreduce {

struct AddressRecord {
  std::vector<uint8_t> data;     // never empty in a valid record
  std::vector<uint8_t> monitor;  // empty when the peer monitor is off
  uint64_t host = 0;             // hostIdentityHash() (core/base/host_identity.h)
  std::string agreed;            // agreedSettings(), compared across ranks
};

// The record's first 8 bytes: its layout. A rank of another build that
// publishes another layout is named as such, not read as garbage.
constexpr uint64_t kAddressRecordMagic = 0x3230726464617272ull;  // "rraddr02"

// [magic : 8][host : 8][data length : 4][monitor length : 4][data address]
// [monitor address][agreed], numbers little endian

std::vector<uint8_t> packAddressRecord(const AddressRecord& record);
// Throws TransportError naming `peer` for a malformed record or one of
// another layout (another build).
AddressRecord unpackAddressRecord(const uint8_t* bytes, size_t size, int peer);

}  // namespace ringreduce
