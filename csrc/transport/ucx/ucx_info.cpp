// What the UCX library found on this machine (ucx_info.h)
#include "transport/ucx/ucx_info.h"

#include <dlfcn.h>
#include <glob.h>

#include <ucs/memory/memory_type.h>
#include <uct/api/uct.h>

#include "transport/ucx/ucx_memory_domains.h"

namespace ringreduce {

namespace {

// The file a loaded symbol came from.
std::string libraryOf(const void* symbol) {
  Dl_info info{};
  if (dladdr(symbol, &info) == 0 || info.dli_fname == nullptr) return "";
  return info.dli_fname;
}

std::string folderOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "" : path.substr(0, slash);
}

// UCX loads its CUDA transports (cuda_copy, cuda_ipc) from a module beside
// libucs; a UCX built without CUDA (Debian's) has none.
bool hasCudaModule() {
  const void* inLibucs = reinterpret_cast<const void*>(&ucs_memory_type_names);
  const std::string folder = folderOf(libraryOf(inLibucs));
  if (folder.empty()) return false;
  glob_t found{};
  const bool any = glob((folder + "/ucx/libuct_cuda.so*").c_str(), 0, nullptr, &found) == 0;
  globfree(&found);
  return any;
}

}  // namespace

std::string ucxVersion() { return ucp_get_version_string(); }

std::string ucxBuiltVersion() {
  return std::to_string(UCP_API_MAJOR) + "." + std::to_string(UCP_API_MINOR);
}

std::string ucxLibraryPath() {
  return libraryOf(reinterpret_cast<const void*>(&ucp_get_version_string));
}

std::vector<std::string> ucxTransports() {
  std::vector<std::string> found;
  forEachUcxMemoryDomain([](const char*) { return true; }, [&](const char*, uct_md_h md) {
    uct_tl_resource_desc_t* tls = nullptr;
    unsigned tlCount = 0;
    if (uct_md_query_tl_resources(md, &tls, &tlCount) != UCS_OK) return;
    for (unsigned t = 0; t < tlCount; ++t) {
      found.push_back(std::string(tls[t].tl_name) + "/" + tls[t].dev_name);
    }
    uct_release_tl_resource_list(tls);
  });
  return found;
}

std::vector<std::string> ucxMemoryTypes(ucp_context_h context) {
  ucp_context_attr_t attr{};
  attr.field_mask = UCP_ATTR_FIELD_MEMORY_TYPES;
  std::vector<std::string> names;
  if (ucp_context_query(context, &attr) != UCS_OK) return names;
  // Types this build knows by name; a newer library's extra ones are not
  // needed to tell whether CUDA memory is among them.
  for (int type = 0; type < UCS_MEMORY_TYPE_LAST; ++type) {
    if (attr.memory_types & UCS_BIT(type)) names.emplace_back(ucs_memory_type_names[type]);
  }
  return names;
}

UcxDeviceMemory ucxDeviceMemory() {
  UcxDeviceMemory result;
  result.cudaModule = hasCudaModule();
  ucp_config_t* config = nullptr;
  ucs_status_t status = ucp_config_read(nullptr, nullptr, &config);
  ucp_context_h context = nullptr;
  if (status == UCS_OK) {
    ucp_params_t params{};
    params.field_mask = UCP_PARAM_FIELD_FEATURES;
    params.features = UCP_FEATURE_TAG;
    status = ucp_init(&params, config, &context);
    ucp_config_release(config);
  }
  if (status != UCS_OK) {
    result.error = std::string("UCX context init failed: ") + ucs_status_string(status);
    return result;
  }
  result.memoryTypes = ucxMemoryTypes(context);
  ucp_cleanup(context);
  for (const std::string& name : result.memoryTypes) result.cuda |= name == "cuda";
  return result;
}

}  // namespace ringreduce
