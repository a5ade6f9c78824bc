#pragma once
// The local CUDA device for the commands that run kernels (verify, bench): found, checked and
// described as a planning target. Only in mla-plan-cuda (gpu_runner.hpp).

#include <ostream>
#include <string>

#include "mlaplan/hardware/target.hpp"
#include "mlaplan_kernels/kernels.hpp"

namespace mlaplan::cli {

struct LocalGpu {
  kernels::DeviceInfo info;
  Target target;  ///< detected_target() of the device
};

/// Device `index`: Error(no_gpu) when there is no usable device, Error(usage) when `index` does
/// not exist. Prints one line about the device to `err`, prefixed with `command`.
LocalGpu open_local_gpu(int index, const std::string& command, std::ostream& err);

}  // namespace mlaplan::cli
