// `mla-plan verify CONFIG`: on-GPU verification that this GPU runs the planned layouts and
// schedules with the project's kernels, numerically (docs/verify.md). Here the config and every
// flag are checked; the run on the GPU is mla-plan-cuda's (gpu_runner_cuda.cpp).

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <filesystem>
#include <limits>
#include <ostream>

#include "cli/cli.hpp"
#include "cli/commands.hpp"
#include "flags/flag_values.hpp"
#include "cli/gpu_runner.hpp"
#include "mlaplan/rules/backends.hpp"
#include "mlaplan/base/error.hpp"
#include "mlaplan/base/limits.hpp"
#include "mlaplan/base/text.hpp"
#include "mlaplan/gpu_check/verify.hpp"

namespace mlaplan::cli {

void setup_verify(CLI::App& app, VerifyCliOptions& opt) {
  CLI::App* sub = &app;  // created by the command table (cli.cpp) with its name and summary
  sub->add_option(
         "CONFIG", opt.config,
         "config.json, a model directory, a Hugging Face cache directory, or ORG/NAME in the local Hugging Face cache")
      ->required();
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
  add_model_dtype_option(*sub, opt.dtype);
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
  sub->add_option("--engine-kernels", opt.engine_kernels,
                  "also run the engine's own sparse decode op (vLLM's FlashMLA ops, else the flash_mla package) on "
                  "every cell's bytes, under this Python (default python3; give it after CONFIG or as "
                  "--engine-kernels=PYTHON)")
      ->expected(0, 1)
      ->group("Engine kernels");
  sub->add_option("--engine-path", opt.engine_paths,
                  "a directory put first on the probe's sys.path, e.g. a FlashMLA build (repeatable)")
      ->group("Engine kernels");
  sub->add_option("--engine-route", opt.engine_route,
                  "only this op library: vllm (torch.ops._flashmla_C) or flash_mla (default: vllm, then flash_mla)")
      ->check(one_of({"vllm", "flash_mla"}))
      ->group("Engine kernels");
  sub->add_option("--engine-bundles", opt.engine_bundles,
                  "keep each cell's case bundle and the probe's results in this directory (default: a temporary "
                  "one, removed)")
      ->group("Engine kernels");
  sub->add_option("--engine-probe", opt.engine_probe,
                  "the probe to run (default: mla_plan_engine_probe.py beside mla-plan)")
      ->group("Engine kernels");
  add_int_option(*sub, "--engine-timeout", opt.engine_timeout, "seconds one probe run may take (default 600)",
                 IntRange{1, 86400, {}})
      ->group("Engine kernels");
}

std::string executable_directory() {
  std::vector<char> buf(4096);
  const ssize_t n = ::readlink("/proc/self/exe", buf.data(), buf.size());
  if (n <= 0 || static_cast<std::size_t>(n) >= buf.size()) return {};
  const std::string self(buf.data(), static_cast<std::size_t>(n));
  const auto slash = self.rfind('/');
  return slash == std::string::npos ? std::string(".") : self.substr(0, slash == 0 ? 1 : slash);
}

std::optional<EngineProbeOptions> verify_engine_options(const VerifyCliOptions& opt, const std::string& exe_dir) {
  if (!opt.engine_kernels) {
    const char* given = !opt.engine_paths.empty()   ? "--engine-path"
                        : opt.engine_route          ? "--engine-route"
                        : opt.engine_bundles        ? "--engine-bundles"
                        : opt.engine_probe          ? "--engine-probe"
                        : opt.engine_timeout != 600 ? "--engine-timeout"
                                                    : nullptr;
    if (given)
      throw_usage(std::string(given) + " needs --engine-kernels (the engine's kernels are not run without it)");
    return std::nullopt;
  }
  EngineProbeOptions e;
  e.python = opt.engine_kernels->empty() ? std::string("python3") : *opt.engine_kernels;
  e.engine_paths = opt.engine_paths;
  e.route = opt.engine_route.value_or("");
  e.bundles_dir = opt.engine_bundles.value_or("");
  e.timeout_s = static_cast<int>(opt.engine_timeout);
  if (opt.engine_probe) {
    e.probe = *opt.engine_probe;
    e.probe_looked_in = *opt.engine_probe;
  } else {
    e.probe_looked_in =
        exe_dir.empty() ? std::string("the directory of mla-plan (/proc/self/exe unreadable)") : exe_dir;
    e.probe = exe_dir.empty() ? std::string() : find_engine_probe(exe_dir);
  }
  if (!e.bundles_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(e.bundles_dir, ec);
    if (ec || !std::filesystem::is_directory(e.bundles_dir)) {
      throw_usage("--engine-bundles: cannot create the directory " + mlaplan::quoted(e.bundles_dir) +
                  (ec ? ": " + ec.message() : std::string()));
    }
  }
  return e;
}

/// With TP x DP > 1 the devices are the layout's ranks, one each (device k runs rank k), or a
/// single device runs rank 0: Error(usage) for another number of devices (gpu_runner.hpp).
void check_device_count(std::size_t devices, const VerifyOptions& vo, std::int64_t ranks) {
  if (ranks > 1 && devices > 1 && static_cast<std::int64_t>(devices) != ranks) {
    throw_usage("--device lists " + std::to_string(devices) + " devices, but TP " +
                std::to_string(vo.layout.tensor_parallel_size) + " x DP " +
                std::to_string(vo.layout.data_parallel_size) + " has " + std::to_string(ranks) +
                " ranks; list one device per rank (an index may repeat), or one device to run rank 0");
  }
}

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
  vo.engine = verify_engine_options(opt, executable_directory());
  check_verify_options(cfg, topo, vo);  // TP, --spec-tokens, the batch and its decode tokens
  // A TP x DP layout: every rank's share of the batch is checked here too (one request per DP rank).
  const std::int64_t ranks = verify_rank_count(vo);
  if (ranks > 1) (void)verify_rank_options(cfg, vo, 0);
  // A listed --device against the ranks, before any GPU is looked for (`all` is counted there).
  if (!opt.device.all) check_device_count(opt.device.indices.size(), vo, ranks);
  // The GPU: in mla-plan-cuda (gpu_runner.hpp); here, what to build.
  if (const GpuRunner* runner = gpu_runner()) return runner->verify(opt, cfg, topo, vo, ranks, out, err);
  throw Error(ErrorKind::no_gpu, no_kernels_message("verify"));
}

const CommandRow& verify_command() {
  static const CommandRow row = command_row<VerifyCliOptions, setup_verify, run_verify_cli>(
      "verify",
      "Run the project's sparse-MLA kernels on the local GPU over the planned layout and schedules, and check them "
      "against the host quantizer, scheduler and reference",
      true);
  return row;
}

}  // namespace mlaplan::cli
