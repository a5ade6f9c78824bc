// The GPU runner of verify and bench, and the message without one (gpu_runner.hpp).

#include "cli/gpu_runner.hpp"

#include <optional>
#include <utility>

#include "mlaplan/base/text.hpp"

namespace mlaplan::cli {

namespace {

const GpuRunner* g_runner = nullptr;
std::optional<KernelsExecutable> g_kernels;

}  // namespace

const GpuRunner* gpu_runner() { return g_runner; }

void set_gpu_runner(const GpuRunner* runner) { g_runner = runner; }

void set_kernels_executable(std::optional<KernelsExecutable> k) { g_kernels = std::move(k); }

std::string no_kernels_message(std::string_view command) {
  const std::string cmd(command);
  if (!g_kernels) {
    return "this mla-plan was built without CUDA: " + cmd +
           " needs the project's kernels (install the CUDA toolkit and rebuild; see README)";
  }
  return cmd + " runs the project's CUDA kernels, which are built into mla-plan-cuda next to this mla-plan: " +
         mlaplan::quoted(g_kernels->path, kQuotedPathMaxBytes) + " cannot be run (" + g_kernels->problem +
         "); build it with `cmake --build " + g_kernels->build_dir +
         " --target mla-plan-cuda` (scripts/test.sh builds every target)";
}

}  // namespace mlaplan::cli
