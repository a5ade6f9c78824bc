// The local CUDA device of verify and bench (local_gpu.hpp).

#include "cli/local_gpu.hpp"

#include "mlaplan/base/error.hpp"

namespace mlaplan::cli {

LocalGpu open_local_gpu(int index, const std::string& command, std::ostream& err) {
  const kernels::DeviceProbe probe = kernels::probe_devices();
  if (probe.problem != kernels::DeviceProblem::none) {
    throw Error(ErrorKind::no_gpu, kernels::device_problem_message(probe, command));
  }
  const int count = probe.count;
  if (index < 0 || index >= count) {
    throw_usage("--device: '" + std::to_string(index) + "' does not exist; allowed 0.." + std::to_string(count - 1) +
                " (this machine has " + std::to_string(count) + " CUDA device" + (count == 1 ? "" : "s") + ")");
  }
  LocalGpu g;
  g.info = kernels::device_info(index);
  g.target = detected_target(g.info.name, ComputeCapability{g.info.cc_major, g.info.cc_minor}, g.info.sm_count,
                             g.info.global_mem_bytes);
  err << command << ": device " << index << ": " << g.info.name << " (" << g.target.cc.sm() << ", " << g.info.sm_count
      << " SMs), driver " << g.info.driver_version / 1000 << "." << g.info.driver_version % 1000 / 10 << ", runtime "
      << g.info.runtime_version / 1000 << "." << g.info.runtime_version % 1000 / 10 << "\n";
  return g;
}

}  // namespace mlaplan::cli
