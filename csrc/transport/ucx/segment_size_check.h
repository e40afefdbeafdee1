// Refuses a shared-memory segment size that UCX cannot carry, before the
// group opens its UCX context, with a ValueError that says so.
//
// UCX's shared-memory transports (posix, sysv, xpmem: the "MM_" settings)
// send a message of up to one segment (UCX_MM_SEG_SIZE, or
// UCX_POSIX_SEG_SIZE, UCX_SYSV_SEG_SIZE, UCX_XPMEM_SEG_SIZE; default 8256
// bytes) as one entry of the receiver's queue, whose length field has 16
// bits (uct_mm_fifo_element_t in UCX 1.13 and still in its 2026 master).
// UCX accepts any size there, so with a segment of 64 KiB or more a message
// of 65536 bytes or more arrives with its length wrapped: on this machine's
// UCX 1.13, UCX_MM_SEG_SIZE=64k aborted both processes on an assertion in
// ucp_request.inl (SIGABRT, nothing a caller could catch), and 70000 made a
// 64 KiB receive report 0 bytes (which the receive's size check then called
// a mismatch between the ranks' calls, pointing at the wrong cause).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace ringreduce {

// The largest segment whose messages' lengths fit the queue's 16 bits.
constexpr uint64_t kMaxUcxSharedMemorySegment = 65535;

// A UCX memory-units value ("8256", "64k", "1MB", "inf") in bytes; nullopt
// where it is "auto" or nothing this reads (UCX then judges it itself).
std::optional<uint64_t> parseUcxMemoryUnits(const std::string& text);

// What is wrong with the segment-size variables that `lookup` (a variable's
// value, or nullptr where unset) holds: empty where nothing is.
std::string unusableSegmentSize(const std::function<const char*(const char*)>& lookup);

// The segment size UCX itself will use for each shared-memory transport on
// this machine: {transport, "MM_SEG_SIZE" as UCX prints it}, for posix,
// sysv and xpmem where UCX has them. Read through UCX's own configuration
// API (uct_md_iface_config_read, uct_config_get), so that it holds what the
// environment and UCX's configuration files say, with UCX's precedence and
// UCX's list of files (1.13: /etc/ucx/ucx.conf, its library's ../etc,
// $HOME/ucx.conf, $UCX_CONFIG_DIR/ucx.conf, ./ucx.conf; the environment over
// them all), none of which is ours to get wrong. Empty where UCX lists none.
std::vector<std::pair<std::string, std::string>> ucxSharedMemorySegmentSizes();

// What is wrong with such sizes (as ucxSharedMemorySegmentSizes gives them):
// empty where nothing is.
std::string unusableConfiguredSegmentSize(
    const std::vector<std::pair<std::string, std::string>>& sizes);

// Throws InvalidArgument with the reason: the environment's variables first
// (the message names the one set), then what UCX reads from its files too.
void refuseUnusableSegmentSize();

}  // namespace ringreduce
