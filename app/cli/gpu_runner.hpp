#pragma once
// How verify and bench reach the project's CUDA kernels (docs/cli.md, "verify and bench").
//
// The CLI library (mlaplan_cli) holds no CUDA: the plain `mla-plan` plans, checks and reports
// without the kernels, so it builds without nvcc and quickly. The kernels are linked into a
// second executable of the same CLI, `mla-plan-cuda` (app/cli/main.cpp with app/cli/gpu_runner_cuda.cpp), which sets a GpuRunner.
// The plain `mla-plan` of a build with the kernels hands a parsed `verify` or `bench` over to
// `mla-plan-cuda` next to it (execv, the same arguments: app/cli/main.cpp). Without a runner, verify
// and bench check the config and every flag, then end with no_gpu (exit 6) saying what to build.

#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <string_view>

#include "cli/commands.hpp"
#include "mlaplan/gpu_check/bench.hpp"
#include "mlaplan/gpu_check/verify.hpp"

namespace mlaplan::cli {

/// What verify and bench run on the GPU once the config and every flag are checked.
struct GpuRunner {
  /// verify on the devices of opt.device: `vo` is checked, `ranks` = verify_rank_count(vo).
  int (*verify)(const VerifyCliOptions& opt, const ModelConfig& cfg, const Topology& topo, VerifyOptions& vo,
                std::int64_t ranks, std::ostream& out, std::ostream& err);
  /// bench on opt.device: `bo` is checked.
  int (*bench)(const BenchCliOptions& opt, const ModelConfig& cfg, const Topology& topo, BenchOptions& bo,
               std::ostream& out, std::ostream& err);
};

/// The runner of this process (null unless main() set one).
const GpuRunner* gpu_runner();
/// Sets the runner: `mla-plan-cuda`'s main(), and tests with a fake one. Null removes it.
void set_gpu_runner(const GpuRunner* runner);

/// The runner of the project's kernels (app/cli/gpu_runner_cuda.cpp: only in `mla-plan-cuda`).
const GpuRunner& cuda_gpu_runner();

/// Where the plain `mla-plan` of a build with the kernels looked for `mla-plan-cuda`, for the
/// message of verify and bench when it could not hand them over.
struct KernelsExecutable {
  std::string path;       ///< the executable it looked for
  std::string problem;    ///< why it could not run it ("No such file or directory")
  std::string build_dir;  ///< the CMake build directory of this binary
};
/// Set by the plain `mla-plan` when it could not hand verify or bench over; absent (nullopt, the
/// default): a build without CUDA.
void set_kernels_executable(std::optional<KernelsExecutable> k);

/// With TP x DP > 1 (`ranks`) a device list has one device per rank, or one device (rank 0):
/// Error(usage) otherwise. verify checks a listed --device before any GPU is looked for.
void check_device_count(std::size_t devices, const VerifyOptions& vo, std::int64_t ranks);

/// The no_gpu message of `command` (verify, bench) in a process without a runner: a build
/// without CUDA, or one whose `mla-plan-cuda` is not built (set_kernels_executable()).
std::string no_kernels_message(std::string_view command);

}  // namespace mlaplan::cli
