// `mla-plan verify CONFIG`: on-GPU verification that this GPU runs the planned layouts and
// schedules with the project's kernels, numerically (docs/verify.md).

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <limits>
#include <map>
#include <ostream>

#include "commands.hpp"
#include "flag_values.hpp"
#include "mlaplan/backends.hpp"
#include "mlaplan/error.hpp"
#include "mlaplan/limits.hpp"
#include "mlaplan/verify.hpp"
#include "verify_output.hpp"

#ifdef MLAPLAN_HAVE_CUDA
#include "local_gpu.hpp"
#include "mlaplan_kernels/kernels.hpp"
#include "mlaplan_kernels/verify_device.hpp"
#endif

namespace mlaplan::cli {

void setup_verify(CLI::App& app, VerifyCliOptions& opt) {
  CLI::App* sub = &app;  // created by the command table (cli.cpp) with its name and summary
  sub->add_option("CONFIG", opt.config, "config.json, or a directory holding one")->required();
  add_device_list_option(*sub, "--device", opt.device,
                         "CUDA device index, a comma-separated list (each runs at once on its own thread; an index "
                         "may repeat), or all (default 0)");
  sub->add_option("--decode-mode", opt.decode_mode,
                  "decode mode of each cell: planned (the planner's choice per layer type), all (one cell per "
                  "mode), split_kv, one_pass or cluster_split (default planned)")
      ->check(one_of(verify_decode_mode_values()));
  add_list_option(*sub, "--kv-cache-dtype", opt.kv_dtypes,
                  "kv dtypes to verify, comma-separated (default: every dtype the backend lists)");
  sub->add_option("--attention-backend", opt.attention_backend,
                  "vLLM's backend name whose layout the cells run, e.g. FLASHINFER_MLA_SPARSE_DSV41 (default: vLLM's "
                  "choice for this GPU; a backend of another architecture needs --force)");
  sub->add_flag("--force", opt.force, "also run combinations the backend rules reject (labelled as such)");
  sub->add_flag("--json", opt.json, "machine-readable matrix");
  sub->add_option("--dtype", opt.dtype, "model dtype the engine runs (default: the config's)");
  add_seed_option(*sub, "--seed", opt.seed, "random seed of the inputs");
  add_int_option(*sub, "--iterations", opt.iterations, "timed runs per cell (median reported, default 20)",
                 IntRange{1, VerifyLimits::max_iterations, {}});
  add_int_option(*sub, "--tensor-parallel-size,--tp", opt.tensor_parallel_size, "TP size (sets h_q per rank)",
                 parallel_size_range())
      ->group("Parallelism");
  add_int_option(*sub, "--data-parallel-size,--dp", opt.data_parallel_size,
                 "DP size of DP attention: each rank runs its share of the batch (with TP x DP > 1, --device lists "
                 "one device per rank, or one device that runs rank 0)",
                 parallel_size_range())
      ->group("Parallelism");
  bind_batch_flags(*sub, opt.batch);
}

namespace {

/// With TP x DP > 1 the devices are the layout's ranks, one each (device k runs rank k), or a
/// single device runs rank 0: Error(usage) for another number of devices.
void check_device_count(std::size_t devices, const VerifyOptions& vo, std::int64_t ranks) {
  if (ranks > 1 && devices > 1 && static_cast<std::int64_t>(devices) != ranks) {
    throw_usage("--device lists " + std::to_string(devices) + " devices, but TP " +
                std::to_string(vo.layout.tensor_parallel_size) + " x DP " +
                std::to_string(vo.layout.data_parallel_size) + " has " + std::to_string(ranks) +
                " ranks; list one device per rank (an index may repeat), or one device to run rank 0");
  }
}

}  // namespace

#ifdef MLAPLAN_HAVE_CUDA
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

}  // namespace
#endif

int run_verify_cli(const VerifyCliOptions& opt, std::ostream& out, std::ostream& err) {
  // Read the config first: an invalid config is exit 2 whatever the machine.
  ModelConfig cfg = load_config(opt.config);
  const Topology topo = build_topology(cfg);
  // Then every flag value, before any GPU is looked for: a bad one is exit 1 whatever the machine.
  if (opt.iterations < 1 || opt.iterations > VerifyLimits::max_iterations) {
    throw_usage("--iterations: '" + std::to_string(opt.iterations) + "' is out of range; allowed 1.." +
                std::to_string(VerifyLimits::max_iterations));
  }
  std::vector<std::string> kv_dtypes;
  for (const auto& d : opt.kv_dtypes) {
    // vLLM's value (usage error, with the nearest, for anything else), in its canonical spelling;
    // what it becomes depends on the backend (fp8: fp8_ds_mla on FlashMLA, plain e4m3 on FlashInfer).
    const std::string canonical = canonical_kv_cache_dtype(d);
    if (std::find(kv_dtypes.begin(), kv_dtypes.end(), canonical) == kv_dtypes.end()) kv_dtypes.push_back(canonical);
  }
  VerifyOptions vo;
  vo.kv_cache_dtypes = kv_dtypes;
  vo.decode_modes = parse_verify_decode_modes(opt.decode_mode);
  BatchFlags batch = opt.batch;
  batch.read_files();
  vo.batch = batch.options;
  vo.layout.tensor_parallel_size = opt.tensor_parallel_size;
  vo.layout.data_parallel_size = opt.data_parallel_size;
  vo.layout.attention_backend = opt.attention_backend;
  vo.layout.num_speculative_tokens = opt.batch.options.spec_tokens;
  vo.dtype = opt.dtype;
  vo.force = opt.force;
  vo.seed = opt.seed;
  vo.timing_iterations = static_cast<std::int32_t>(opt.iterations);
  check_verify_options(cfg, topo, vo);  // TP, --spec-tokens, the batch and its decode tokens
  // A TP x DP layout: every rank's share of the batch is checked here too (one request per DP rank).
  const std::int64_t ranks = verify_rank_count(vo);
  if (ranks > 1) (void)verify_rank_options(cfg, vo, 0);
  // A listed --device against the ranks, before any GPU is looked for (`all` is counted below).
  if (!opt.device.all) check_device_count(opt.device.indices.size(), vo, ranks);
#ifndef MLAPLAN_HAVE_CUDA
  (void)out;
  (void)err;
  throw Error(ErrorKind::no_gpu,
              "this mla-plan was built without CUDA: verify needs the project's kernels (install the CUDA toolkit "
              "and rebuild; see README)");
#else
  const std::vector<int> indices = listed_devices(opt.device, err);
  vo.progress = [&err](const std::string& s) { err << s << "\n" << std::flush; };

  check_device_count(indices.size(), vo, ranks);  // --device all: the devices there are
  std::vector<VerifyGpuInfo> gpus;
  VerifyMultiReport multi;
  if (indices.size() == 1) {
    // One device: on this thread, as verify always ran (an Error escapes to the CLI's boundary).
    const LocalGpu gpu = open_local_gpu(indices.front(), "verify", err);
    gpus.push_back(gpu_info(gpu));
    const auto t0 = std::chrono::steady_clock::now();
    std::unique_ptr<VerifyDevice> device = open_verify_device(indices.front());
    VerifyDeviceReport d;
    d.index = gpu.info.index;
    d.name = gpu.info.name;
    d.label = "device " + std::to_string(d.index);
    if (ranks > 1) {
      d.rank = verify_rank(vo, 0);
      d.report = run_verify(cfg, topo, gpu.target, *device, verify_rank_options(cfg, vo, 0));
    } else {
      d.report = run_verify(cfg, topo, gpu.target, *device, vo);
    }
    d.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    d.exit_code = d.report.exit_code;
    d.exit_message = d.report.exit_message;
    multi.exit_code = d.exit_code;
    multi.exit_message = d.exit_message;
    multi.devices.push_back(std::move(d));
  } else {
    // Several: one thread per listed device (run_verify_devices), each with its own VerifyDevice.
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
        e.label += " (rank " + std::to_string(*e.rank) + ")";
      }
      entries.push_back(std::move(e));
    }
    multi = run_verify_devices(cfg, topo, entries, vo);
  }

  if (opt.json) {
    out << verify_json(opt.config, gpus, multi, opt.decode_mode);
  } else {
    write_verify_text(out, opt.config, gpus, multi, opt.decode_mode);
  }
  if (multi.exit_code != 0) err << "mla-plan: error: " << multi.exit_message << "\n";
  return multi.exit_code;
#endif
}

}  // namespace mlaplan::cli
