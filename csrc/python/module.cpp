// torch_ringreduce._C: the backend class and build/runtime information.
#include <pybind11/chrono.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <torch/csrc/utils/pybind.h>

#include "backend/device_path.h"
#include "backend/process_group_ring.h"
#include "python/options_binding.h"
#include "core/config/settings_agreement.h"
#include "core/math/host_loops.h"
#include "core/observe/latency_probe.h"
#include "transport/ucx/ucx_info.h"

namespace py = pybind11;

#ifndef RINGREDUCE_VERSION
#define RINGREDUCE_VERSION "0.0.0"
#endif

PYBIND11_MODULE(_C, m) {
  m.doc() = "ringreduce: ring-allreduce c10d backend over UCX";
  // The base class must be known to pybind11 before we derive from it.
  py::module_::import("torch.distributed");

  ringreduce::PyProcessGroupRing group(m, "ProcessGroupRing");
  ringreduce::bindOptions(group);
  group
      .def(py::init([](const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                       std::chrono::milliseconds timeout, std::string groupName, int globalRank,
                       int ranksOnHostHint, std::map<std::string, std::string> config) {
             return c10::make_intrusive<ringreduce::ProcessGroupRing>(
                 store, rank, size, timeout, std::move(groupName), globalRank, ranksOnHostHint,
                 std::move(config));
           }),
           py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout"),
           py::arg("group_name") = "", py::arg("global_rank") = -1,
           py::arg("ranks_on_host_hint") = 0,
           py::arg("config") = std::map<std::string, std::string>{},
           // Bootstrap waits on the store for the other ranks.
           py::call_guard<py::gil_scoped_release>())
      .def_property_readonly("timeout", &ringreduce::ProcessGroupRing::timeout)
      .def(
          "shrink",
          // dist.shrink_group calls it; the ranks that stay meet on the store
          // (without the GIL: the parent's finishing work may need it).
          [](ringreduce::ProcessGroupRing& group, const std::vector<int64_t>& ranksToExclude,
             int shrinkFlags, const py::object& options) {
            c10::intrusive_ptr<c10d::Backend::Options> opts;
            if (!options.is_none()) {
              try {
                opts = options.cast<c10::intrusive_ptr<c10d::Backend::Options>>();
              } catch (const py::cast_error&) {
                throw py::type_error(
                    "ringreduce: shrink_group's pg_options must be a "
                    "torch.distributed.Backend.Options (its timeout and group_name are used) "
                    "or None, not " + std::string(py::str(py::type::of(options).attr("__name__"))));
              }
            }
            py::gil_scoped_release release;
            return c10::intrusive_ptr<c10d::Backend>(group.shrink(ranksToExclude, shrinkFlags, opts));
          },
          py::arg("ranks_to_exclude"), py::arg("shrink_flags") = 0,
          py::arg("opts_override") = py::none(),
          "A new group without `ranks_to_exclude` (dist.shrink_group calls it).")
      .def("_ranks_on_this_host", &ringreduce::ProcessGroupRing::ranksOnThisHost,
           "The ranks on this machine the group's defaults went by (LOCAL_WORLD_SIZE aside).")
      .def("_cuda_paths", &ringreduce::ProcessGroupRing::cudaPaths,
           "The CUDA paths the group set up (topology, peer access, device flags, IPC, NCCL, "
           "device ring) and why the others are not; after a CUDA collective has run.")
      .def("_device_flags", &ringreduce::ProcessGroupRing::deviceFlags,
           "Whether CUDA allreduce, all_gather_into_tensor and reduce_scatter_tensor take "
           "the device-flags path (auto on one host, or RINGREDUCE_CUDA_ALGO=flags).")
      .def("_trace_json", &ringreduce::ProcessGroupRing::traceJson,
           "The group's flight recorder (its last operations) as JSON.")
      .def("_shutdown_at_exit", &ringreduce::ProcessGroupRing::shutdownAtExit,
           // Finished operations release tensors, which takes the GIL.
           py::call_guard<py::gil_scoped_release>())
      .def("_dump_trace", &ringreduce::ProcessGroupRing::dumpTrace,
           "Writes the flight recorder to RINGREDUCE_TRACE_DIR; returns the path or ''.")
      .def(
          "_config",
          [](const ringreduce::ProcessGroupRing& group) {
            py::dict settings;
            for (const auto& [key, value] : group.effectiveConfig()) settings[key.c_str()] = value;
            return settings;
          },
          "The group's settings, {RINGREDUCE_* name: value as text}, as read at its creation.")
      .def(
          "_autotune_choices",
          [](const ringreduce::ProcessGroupRing& group) {
            py::list choices;
            for (const auto& choice : group.autotuneChoices()) {
              py::dict entry;
              entry["class_bytes"] = choice.classBytes;
              entry["settings"] = choice.settings;
              entry["seconds"] = choice.seconds;
              entry["baseline_seconds"] = choice.baselineSeconds;
              choices.append(entry);
            }
            return choices;
          },
          "RINGREDUCE_AUTOTUNE's choices so far: one dict per allreduce size class.");

  // The fused kernel alone, for tests/gpu and benchmarks/cuda_allreduce.py.
  m.def(
      "_reduce_copy",
      [](const std::vector<at::Tensor>& srcs, const std::vector<at::Tensor>& dsts,
         const c10d::ReduceOp& op, int avgDivisor) {
        ringreduce::DevicePath::reduceCopy(srcs, dsts, op, avgDivisor);
      },
      py::arg("srcs"), py::arg("dsts"), py::arg("op"), py::arg("avg_divisor") = 0);
  // benchmarks/small_path_breakdown.py: the latency probe's marks
  // (core/observe/latency_probe.h; RINGREDUCE_PROBE=1 before the first group).
  m.def("_probe_take", [] {
    py::list marks;
    for (const ringreduce::probe::Event& event : ringreduce::probe::take()) {
      marks.append(py::make_tuple(event.thread, ringreduce::nameOf(event.point), event.nanoseconds));
    }
    return marks;
  });
  m.def("_probe_enabled", &ringreduce::probe::enabled);
  m.def("version", [] { return std::string(RINGREDUCE_VERSION); });
  // What every rank compares with its peers' when a group is made.
  m.def("build_identity", &ringreduce::buildIdentity);
  m.def("ucx_version", &ringreduce::ucxVersion);
  m.def("ucx_transports", &ringreduce::ucxTransports);
  m.def("ucx_built_version", &ringreduce::ucxBuiltVersion);
  m.def("ucx_library", &ringreduce::ucxLibraryPath);
  m.def("ucx_device_memory", [] {
    const ringreduce::UcxDeviceMemory memory = ringreduce::ucxDeviceMemory();
    py::dict info;
    info["cuda"] = memory.cuda;
    info["memory_types"] = memory.memoryTypes;
    info["cuda_module"] = memory.cudaModule;
    info["error"] = memory.error;
    return info;
  });
  m.def("build_info", [] {
    py::dict info;
    info["cpu_path"] = true;
    // Our CUDA kernels and NCCL (dlopen on first use): compiled when nvcc
    // was found at build time. Without it CUDA tensors still work, staged
    // through pinned host memory.
    info["cuda_path"] = ringreduce::DevicePath::compiled();
    info["cuda_runtime"] = ringreduce::DevicePath::describe();
    info["nccl_loading"] = ringreduce::DevicePath::compiled()
                               ? "dlopen on first use (RINGREDUCE_NCCL_LIBRARY or libnccl.so.2)"
                               : "not compiled";
    // The host loops' instruction set: the one chosen (or why none could
    // be: a bad RINGREDUCE_HOST_ISA) and every one this CPU runs.
    py::list available;
    for (const ringreduce::HostLoops* loops : ringreduce::availableHostLoops()) {
      available.append(loops->name);
    }
    info["host_loops_available"] = available;
    try {
      info["host_loops"] = std::string(ringreduce::hostLoops().name);
      // What calls over fewer bytes than host_loops_wide_from use (host_loops.h).
      info["host_loops_small"] = std::string(ringreduce::hostLoopsForBytes(0).name);
      info["host_loops_wide_from"] = ringreduce::kWideVectorsFromBytes;
    } catch (const std::exception& error) {
      info["host_loops_error"] = std::string(error.what());
    }
    return info;
  });
  m.def("nccl_status", [] {
    std::string detail;
    const bool found = ringreduce::DevicePath::ncclAvailable(&detail);
    return py::make_tuple(found, detail);
  });
}
