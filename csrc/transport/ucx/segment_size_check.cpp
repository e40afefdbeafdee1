// Refuses a shared-memory segment size UCX cannot carry (segment_size_check.h)
#include "transport/ucx/segment_size_check.h"

#include <cctype>
#include <cstdlib>
#include <cstring>
#include <limits>

#include <uct/api/uct.h>

#include "core/base/errors.h"
#include "transport/ucx/ucx_memory_domains.h"

namespace ringreduce {

namespace {

// Every variable UCX 1.13 reads a shared-memory segment size from: the
// transports' common "MM_" prefix and each transport's own.
constexpr const char* kSegmentVariables[] = {"UCX_MM_SEG_SIZE", "UCX_POSIX_SEG_SIZE",
                                             "UCX_SYSV_SEG_SIZE", "UCX_XPMEM_SEG_SIZE"};

std::string lowered(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (!std::isspace(static_cast<unsigned char>(c))) {
      out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    }
  }
  return out;
}

}  // namespace

std::optional<uint64_t> parseUcxMemoryUnits(const std::string& text) {
  const std::string value = lowered(text);
  if (value == "inf") return std::numeric_limits<uint64_t>::max();
  size_t digits = 0;
  while (digits < value.size() && std::isdigit(static_cast<unsigned char>(value[digits]))) {
    ++digits;
  }
  if (digits == 0 || digits > 18) return std::nullopt;  // "auto", garbage, or past 2^60
  const uint64_t number = std::stoull(value.substr(0, digits));
  const std::string unit = value.substr(digits);
  uint64_t scale = 0;
  if (unit.empty() || unit == "b") scale = 1;
  if (unit == "k" || unit == "kb") scale = uint64_t{1} << 10;
  if (unit == "m" || unit == "mb") scale = uint64_t{1} << 20;
  if (unit == "g" || unit == "gb") scale = uint64_t{1} << 30;
  if (scale == 0) return std::nullopt;
  if (number > std::numeric_limits<uint64_t>::max() / scale) {
    return std::numeric_limits<uint64_t>::max();
  }
  return number * scale;
}

std::string unusableSegmentSize(const std::function<const char*(const char*)>& lookup) {
  for (const char* variable : kSegmentVariables) {
    const char* value = lookup(variable);
    if (value == nullptr) continue;
    const std::optional<uint64_t> bytes = parseUcxMemoryUnits(value);
    if (!bytes || *bytes <= kMaxUcxSharedMemorySegment) continue;
    return std::string("ringreduce: ") + variable + "=" + value +
           " is more than UCX's shared-memory transport can carry (at most " +
           std::to_string(kMaxUcxSharedMemorySegment) +
           " bytes): its queue holds a message's length in 16 bits, so a message of 64 KiB "
           "or more would arrive with a wrong length (UCX aborts the process or hands over a "
           "truncated message). Set it to at most " +
           std::to_string(kMaxUcxSharedMemorySegment) + ", or unset it (UCX's default: 8256)";
  }
  return {};
}

namespace {

// The shared-memory transports whose queue (uct_mm_fifo_element_t) holds a
// message's length in 16 bits: UCX's components of the same names.
bool isSharedMemoryComponent(const char* name) {
  return std::strcmp(name, "posix") == 0 || std::strcmp(name, "sysv") == 0 ||
         std::strcmp(name, "xpmem") == 0;
}

// Each transport of `md`: its "MM_SEG_SIZE" as UCX reads it, into `out`.
void segmentSizesOf(uct_md_h md, std::vector<std::pair<std::string, std::string>>& out) {
  uct_tl_resource_desc_t* transports = nullptr;
  unsigned count = 0;
  if (uct_md_query_tl_resources(md, &transports, &count) != UCS_OK) return;
  for (unsigned t = 0; t < count; ++t) {
    uct_iface_config_t* config = nullptr;
    if (uct_md_iface_config_read(md, transports[t].tl_name, nullptr, nullptr, &config) !=
        UCS_OK) {
      continue;
    }
    char value[64] = "";
    if (uct_config_get(config, "MM_SEG_SIZE", value, sizeof(value)) == UCS_OK) {
      out.emplace_back(transports[t].tl_name, value);
    }
    uct_config_release(config);
  }
  uct_release_tl_resource_list(transports);
}

}  // namespace

std::vector<std::pair<std::string, std::string>> ucxSharedMemorySegmentSizes() {
  std::vector<std::pair<std::string, std::string>> sizes;
  forEachUcxMemoryDomain(isSharedMemoryComponent,
                         [&](const char*, uct_md_h md) { segmentSizesOf(md, sizes); });
  return sizes;
}

std::string unusableConfiguredSegmentSize(
    const std::vector<std::pair<std::string, std::string>>& sizes) {
  for (const auto& [transport, value] : sizes) {
    const std::optional<uint64_t> bytes = parseUcxMemoryUnits(value);
    if (!bytes || *bytes <= kMaxUcxSharedMemorySegment) continue;
    std::string upper;
    for (char c : transport) upper += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    return "ringreduce: UCX is configured to give its " + transport +
           " shared-memory transport segments of " + value +
           " bytes, more than it can carry (at most " +
           std::to_string(kMaxUcxSharedMemorySegment) +
           "): its queue holds a message's length in 16 bits, so a message of 64 KiB or more "
           "would arrive with a wrong length (UCX aborts the process or hands over a truncated "
           "message). The setting is UCX_MM_SEG_SIZE or UCX_" + upper +
           "_SEG_SIZE in a ucx.conf UCX reads (/etc/ucx/ucx.conf, $HOME/ucx.conf, "
           "$UCX_CONFIG_DIR/ucx.conf, ./ucx.conf; `ucx_info -c` prints what UCX reads): set it "
           "to at most " + std::to_string(kMaxUcxSharedMemorySegment) +
           " or remove it (UCX's default: 8256)";
  }
  return {};
}

void refuseUnusableSegmentSize() {
  std::string reason = unusableSegmentSize([](const char* name) { return std::getenv(name); });
  if (reason.empty()) reason = unusableConfiguredSegmentSize(ucxSharedMemorySegmentSizes());
  if (!reason.empty()) throw InvalidArgument(reason);
}

}  // namespace ringreduce
