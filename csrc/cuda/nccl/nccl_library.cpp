// NCCL, loaded with dlopen on first use (nccl_library.h)
#include "cuda/nccl/nccl_library.h"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>

namespace ringreduce::cuda {

namespace {

template <typename Fn>
bool resolve(void* handle, const char* name, Fn& fn, std::string& missing) {
  fn = reinterpret_cast<Fn>(dlsym(handle, name));
  if (fn == nullptr) missing += std::string(missing.empty() ? "" : ", ") + name;
  return fn != nullptr;
}

}  // namespace

std::unique_ptr<NcclLibrary> NcclLibrary::open(const std::string& name, std::string* why) {
  // RTLD_LOCAL: our symbols never interpose on a copy torch itself loaded.
  void* handle = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* reason = dlerror();
    if (why) {
      *why = "cannot load " + name + ": " + (reason ? reason : "unknown error") +
             " (set RINGREDUCE_NCCL_LIBRARY to its path, or install nvidia-nccl-cu13)";
    }
    return nullptr;
  }
  auto loaded = std::make_unique<NcclLibrary>();
  NcclLibrary& lib = *loaded;
  lib.path = name;
  std::string missing;
  resolve(handle, "ncclGetVersion", lib.getVersion, missing);
  resolve(handle, "ncclGetErrorString", lib.getErrorString, missing);
  resolve(handle, "ncclGetUniqueId", lib.getUniqueId, missing);
  resolve(handle, "ncclCommInitRank", lib.commInitRank, missing);
  resolve(handle, "ncclCommDestroy", lib.commDestroy, missing);
  resolve(handle, "ncclCommAbort", lib.commAbort, missing);
  resolve(handle, "ncclCommGetAsyncError", lib.commGetAsyncError, missing);
  resolve(handle, "ncclAllReduce", lib.allReduce, missing);
  resolve(handle, "ncclBroadcast", lib.broadcast, missing);
  resolve(handle, "ncclReduce", lib.reduce, missing);
  resolve(handle, "ncclAllGather", lib.allGather, missing);
  resolve(handle, "ncclReduceScatter", lib.reduceScatter, missing);
  resolve(handle, "ncclSend", lib.send, missing);
  resolve(handle, "ncclRecv", lib.recv, missing);
  resolve(handle, "ncclGroupStart", lib.groupStart, missing);
  resolve(handle, "ncclGroupEnd", lib.groupEnd, missing);
  // Optional: without the first the init blocks (NcclCommunicator says so);
  // without the second a clean close destroys at once.
  lib.commInitRankConfig = reinterpret_cast<decltype(lib.commInitRankConfig)>(
      dlsym(handle, "ncclCommInitRankConfig"));
  lib.commFinalize = reinterpret_cast<decltype(lib.commFinalize)>(
      dlsym(handle, "ncclCommFinalize"));
  if (!missing.empty()) {
    if (why) *why = name + " lacks " + missing + " (NCCL 2.10 or newer is needed)";
    dlclose(handle);
    return nullptr;
  }
  if (lib.getVersion(&lib.version) != 0) {
    if (why) *why = name + ": ncclGetVersion failed";
    dlclose(handle);
    return nullptr;
  }
  // The library stays loaded for the life of the process, as torch keeps its own.
  return loaded;
}

const NcclLibrary* NcclLibrary::load(std::string* why) {
  static std::once_flag once;
  static std::unique_ptr<NcclLibrary> loaded;
  static std::string error;
  std::call_once(once, [] {
    const char* configured = std::getenv("RINGREDUCE_NCCL_LIBRARY");
    loaded = open(configured && *configured ? configured : "libnccl.so.2", &error);
  });
  if (!loaded && why) *why = error;
  return loaded.get();
}

}  // namespace ringreduce::cuda
