// ringreduce's Backend.Options for Python, as torch asks of device-bound groups (options_binding.h)
#include "python/options_binding.h"

#include <pybind11/chrono.h>
#include <pybind11/stl.h>
#include <torch/csrc/utils/pybind.h>

#include "backend/ring_options.h"

namespace py = pybind11;

namespace ringreduce {

namespace {

// {key: value} as the settings' text: a bool as 1/0, anything else as str().
std::map<std::string, std::string> settingsFrom(const py::dict& given) {
  std::map<std::string, std::string> settings;
  for (const auto& [key, value] : given) {
    if (!py::isinstance<py::str>(key)) {
      throw py::type_error("ringreduce: Options.config keys are RINGREDUCE_* names (str), got " +
                           std::string(py::repr(key)));
    }
    settings[key.cast<std::string>()] = py::isinstance<py::bool_>(value)
                                            ? std::string(value.cast<bool>() ? "1" : "0")
                                            : py::str(value).cast<std::string>();
  }
  return settings;
}

}  // namespace

void bindOptions(PyProcessGroupRing& group) {
  py::class_<RingOptions, c10d::Backend::Options, c10::intrusive_ptr<RingOptions>>(
      group, "Options",
      "What a ringreduce group is made with: its timeout and RINGREDUCE_* settings (config) "
      "over the environment. Pass as pg_options to init_process_group or new_group; a group's "
      "own are its `options`.")
      .def(py::init([](std::chrono::milliseconds timeout, const py::dict& config) {
             auto options = c10::make_intrusive<RingOptions>(timeout);
             options->config = settingsFrom(config);
             return options;
           }),
           py::arg("timeout") = ::kBackendDefaultTimeout, py::arg("config") = py::dict())
      .def_property(
          "config",
          // Read-only view: assign a whole dict to change it (a copy changed
          // in place would be lost silently).
          [](const RingOptions& self) {
            return py::module_::import("types").attr("MappingProxyType")(py::cast(self.config));
          },
          [](RingOptions& self, const py::dict& config) { self.config = settingsFrom(config); },
          "RINGREDUCE_* settings {name: value} for the group, over the environment")
      .def("__copy__",
           [](const RingOptions& self) { return c10::make_intrusive<RingOptions>(self); })
      .def(
          "__deepcopy__",
          [](const RingOptions& self, const py::dict&) {
            return c10::make_intrusive<RingOptions>(self);
          },
          py::arg("memo"))
      .def("__repr__", [](const RingOptions& self) {
        return "ProcessGroupRing.Options(timeout=" +
               std::string(py::repr(py::cast(self.timeout))) +
               ", config=" + std::string(py::repr(py::cast(self.config))) + ")";
      });

  group
      .def_property_readonly(
          "options",
          [](ProcessGroupRing& self) {
            return c10::static_intrusive_pointer_cast<RingOptions>(self.getBackendOptions());
          },
          "A copy of the options the group was made with (its timeout, name and config)")
      .def("perform_nocolor_split", &ProcessGroupRing::performNocolorSplit, py::arg("device"),
           "new_group's ranks outside the new group call this on a group bound to a device: "
           "ringreduce's new groups are made by their members alone, so it does nothing");
}

}  // namespace ringreduce
