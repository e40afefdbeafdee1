// What torch asks of a backend whose groups are bound to a device
// (init_process_group(device_id=...)): `ProcessGroupRing.Options`, the
// group's `options` (deep-copyable; torch's split_group and DeviceMesh copy
// them for subgroups) and `perform_nocolor_split` (new_group's ranks outside
// the new group call it).
#pragma once

#include <pybind11/pybind11.h>

#include "backend/process_group_ring.h"

namespace ringreduce {

using PyProcessGroupRing =
    pybind11::class_<ProcessGroupRing, c10d::Backend, c10::intrusive_ptr<ProcessGroupRing>>;

void bindOptions(PyProcessGroupRing& group);

}  // namespace ringreduce
