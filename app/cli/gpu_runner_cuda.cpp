// verify and bench on the local CUDA devices: the GpuRunner of mla-plan-cuda (gpu_runner.hpp),
// linked with the project's kernels. The config and every flag are checked before (cmd_verify.cpp,
// cmd_bench.cpp); this is what runs on the GPU and prints the results.

#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "output/bench_output.hpp"
#include "cli/commands.hpp"
#include "cli/gpu_runner.hpp"
#include "cli/local_gpu.hpp"
#include "mlaplan/gpu_check/bench.hpp"
#include "mlaplan/base/error.hpp"
#include "mlaplan/base/text.hpp"
#include "mlaplan/gpu_check/verify.hpp"
#include "mlaplan_kernels/bench_device.hpp"
#include "mlaplan_kernels/kernels.hpp"
#include "mlaplan_kernels/verify_device.hpp"
#include "output/verify_output.hpp"

namespace mlaplan::cli {

namespace {

/// A GPU the kernels were not built for: the rules say why; nothing runs.
class NoDevice final : public VerifyDevice {
 public:
  explicit NoDevice(std::string why) : why_(std::move(why)) {}
  VerifyRun run(const VerifyProblem&) override { throw Error(ErrorKind::no_gpu, why_); }
  std::string unsupported_reason(const VerifyProblem&) const override { return why_; }

 private:
  std::string why_;
};

/// The CUDA verify device `index`, or a NoDevice saying why there is none (no_gpu).
std::unique_ptr<VerifyDevice> open_verify_device(int index) {
  try {
    return kernels::make_cuda_verify_device(index);
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::no_gpu) throw;
    return std::make_unique<NoDevice>(e.what());
  }
}

VerifyGpuInfo gpu_info(const LocalGpu& g) {
  VerifyGpuInfo v;
  v.index = g.info.index;
  v.name = g.info.name;
  v.sm = g.target.cc.sm();
  v.compute_capability = g.target.cc.str();
  v.num_sms = g.info.sm_count;
  v.memory_bytes = g.info.global_mem_bytes;
  v.driver_version = g.info.driver_version;
  v.runtime_version = g.info.runtime_version;
  return v;
}

/// The device indices of --device: `all` every device there is (Error no_gpu with none), else as
/// listed, each checked to exist (Error usage naming the item).
std::vector<int> listed_devices(const DeviceList& d, std::ostream& err) {
  const int count = kernels::device_count();
  if (count == 0) {
    (void)open_local_gpu(d.all || d.indices.empty() ? 0 : d.indices.front(), "verify", err);  // throws no_gpu
  }
  if (d.all) {
    std::vector<int> all;
    for (int i = 0; i < count; ++i) all.push_back(i);
    return all;
  }
  if (d.indices.size() > 1) {
    for (std::size_t i = 0; i < d.indices.size(); ++i) {
      if (d.indices[i] >= count) {
        throw_usage("--device[" + std::to_string(i) + "]: '" + std::to_string(d.indices[i]) +
                    "' does not exist; allowed 0.." + std::to_string(count - 1) + " (this machine has " +
                    std::to_string(count) + " CUDA device" + (count == 1 ? "" : "s") + ")");
      }
    }
  }
  return d.indices.empty() ? std::vector<int>{0} : d.indices;
}

int verify_on_gpus(const VerifyCliOptions& opt, const ModelConfig& cfg, const Topology& topo, VerifyOptions& vo,
                   std::int64_t ranks, std::ostream& out, std::ostream& err) {
  const std::vector<int> indices = listed_devices(opt.device, err);
  vo.progress = [&err](const std::string& s) { err << s << "\n" << std::flush; };

  check_device_count(indices.size(), vo, ranks);  // --device all: the devices there are
  std::vector<VerifyGpuInfo> gpus;
  std::map<int, LocalGpu> opened;
  std::map<int, int> seen;
  std::vector<VerifyDeviceEntry> entries;
  for (const int index : indices) {
    auto it = opened.find(index);
    if (it == opened.end()) it = opened.emplace(index, open_local_gpu(index, "verify", err)).first;
    const LocalGpu& gpu = it->second;
    gpus.push_back(gpu_info(gpu));
    VerifyDeviceEntry e;
    e.index = index;
    e.name = gpu.info.name;
    const int n = ++seen[index];
    e.label = "device " + std::to_string(index) + (n > 1 ? " #" + std::to_string(n) : "");
    e.target = gpu.target;
    e.open = [index] { return open_verify_device(index); };
    if (ranks > 1) {
      e.rank = static_cast<std::int64_t>(entries.size());
      if (indices.size() > 1) e.label += " (rank " + std::to_string(*e.rank) + ")";
    }
    entries.push_back(std::move(e));
  }
  // One device: on this thread, as verify always ran (an Error escapes to the CLI's boundary);
  // several: one thread each, each with its own VerifyDevice.
  const VerifyMultiReport multi = entries.size() == 1 ? run_verify_device(cfg, topo, entries.front(), vo)
                                                      : run_verify_devices(cfg, topo, entries, vo);

  if (opt.json) {
    out << verify_json(opt.config, gpus, multi, opt.decode_mode);
  } else {
    write_verify_text(out, opt.config, gpus, multi, opt.decode_mode);
  }
  if (multi.exit_code != 0) err << "mla-plan: error: " << multi.exit_message << "\n";
  return multi.exit_code;
}

int bench_on_gpu(const BenchCliOptions& opt, const ModelConfig& cfg, const Topology& topo, BenchOptions& bo,
                 std::ostream& out, std::ostream& err) {
  const LocalGpu gpu = open_local_gpu(opt.device, "bench", err);
  auto device = kernels::make_cuda_bench_device(opt.device);
  bo.progress = [&err](const std::string& s) { err << s << "\n" << std::flush; };
  const BenchReport report = run_bench(cfg, topo, gpu.target, *device, bo);

  const BenchGpuInfo info{gpu.info.index, gpu.info.name, gpu.target.cc.str(), gpu.info.sm_count, gpu.target.cc.sm()};
  if (opt.json) {
    out << bench_json(opt.config, info, report, bo.run);
  } else {
    write_bench_text(out, opt.config, info, report, bo.run);
  }
  if (report.exit_code != 0) err << "mla-plan: error: " << report.exit_message << "\n";
  return report.exit_code;
}

}  // namespace

const GpuRunner& cuda_gpu_runner() {
  static const GpuRunner runner{verify_on_gpus, bench_on_gpu};
  return runner;
}

}  // namespace mlaplan::cli
