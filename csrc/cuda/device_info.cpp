// What the CUDA runtime reports about this process's devices (device_info.h)
#include "cuda/device_info.h"

#include <cuda_runtime_api.h>

#include <dirent.h>
#include <sys/stat.h>

#include <cstdlib>
#include <cstring>
#include <fstream>

#include "cuda/cuda_error.h"

namespace ringreduce::cuda {

namespace {

std::string versionText(int version) {
  return std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10);
}

}  // namespace

int visibleDeviceCount(std::string* why) {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    (void)cudaGetLastError();
    if (why) *why = cudaGetErrorString(status);
    return 0;
  }
  if (count == 0 && why) *why = "no CUDA device";
  return count;
}

std::string runtimeDescription() {
  std::string text = "runtime " + versionText(CUDART_VERSION) + " (linked statically)";
  int driver = 0;
  if (cudaDriverGetVersion(&driver) == cudaSuccess && driver > 0) {
    text += ", driver " + versionText(driver);
  } else {
    (void)cudaGetLastError();
    text += ", no driver";
    return text;
  }
  std::string why;
  const int count = visibleDeviceCount(&why);
  text += ", " + std::to_string(count) + " device(s)";
  if (count == 0) text += " (" + why + ")";
  return text;
}

bool mpsActive(std::string* how) {
  const char* dir = std::getenv("CUDA_MPS_PIPE_DIRECTORY");
  const std::string pipes = dir != nullptr && *dir != '\0' ? dir : "/tmp/nvidia-mps";
  struct stat info {};
  if (stat((pipes + "/control").c_str(), &info) != 0) {
    if (how) *how = "no MPS control pipe in " + pipes;
    return false;
  }
  // A pipe left behind by a daemon that has quit would mislead: look for
  // the daemon itself (its name, as /proc shows it, is cut to 15 bytes).
  bool running = false;
  if (DIR* proc = opendir("/proc")) {
    while (dirent* entry = readdir(proc)) {
      if (entry->d_name[0] < '0' || entry->d_name[0] > '9') continue;
      std::ifstream comm(std::string("/proc/") + entry->d_name + "/comm");
      std::string name;
      if (std::getline(comm, name) && name.rfind("nvidia-cuda-mps", 0) == 0) {
        running = true;
        break;
      }
    }
    closedir(proc);
  }
  if (how) {
    *how = running ? "MPS daemon running, pipes in " + pipes
                   : "an MPS pipe in " + pipes + " but no MPS daemon process visible";
  }
  return running;
}

int multiprocessors(int device) {
  int count = 0;
  checkCuda(cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device),
            "cudaDeviceGetAttribute(multiprocessor count)");
  return count > 0 ? count : 1;
}

std::array<uint8_t, 16> deviceUuid(int device) {
  cudaDeviceProp prop;
  checkCuda(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");
  std::array<uint8_t, 16> uuid{};
  static_assert(sizeof(prop.uuid) == 16, "unexpected cudaUUID_t size");
  std::memcpy(uuid.data(), &prop.uuid, 16);
  return uuid;
}

PeerAccess peerAccessTo(int device, const std::array<uint8_t, 16>& peer) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();
    return PeerAccess::Unknown;
  }
  for (int d = 0; d < count; ++d) {
    cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, d) != cudaSuccess) {
      (void)cudaGetLastError();
      continue;
    }
    if (std::memcmp(&prop.uuid, peer.data(), 16) != 0) continue;
    if (d == device) return PeerAccess::Yes;
    int can = 0;
    if (cudaDeviceCanAccessPeer(&can, device, d) != cudaSuccess) {
      (void)cudaGetLastError();
      return PeerAccess::Unknown;
    }
    return can ? PeerAccess::Yes : PeerAccess::No;
  }
  return PeerAccess::Unknown;
}

}  // namespace ringreduce::cuda
