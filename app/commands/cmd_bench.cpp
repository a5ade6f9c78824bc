// `mla-plan bench CONFIG`: the project's sparse decode timed on the local GPU for every layer type
// of the config, with rates and the fraction of the floor (docs/cli.md, docs/perf.md). Here the
// config and every flag are checked; the run on the GPU is mla-plan-cuda's (gpu_runner_cuda.cpp).

#include <CLI/CLI.hpp>
#include <limits>
#include <ostream>

#include "cli/cli.hpp"
#include "cli/commands.hpp"
#include "flags/flag_values.hpp"
#include "cli/gpu_runner.hpp"
#include "mlaplan/gpu_check/bench.hpp"
#include "mlaplan/base/error.hpp"
#include "mlaplan/base/text.hpp"

namespace mlaplan::cli {

void setup_bench(CLI::App& app, BenchCliOptions& opt) {
  CLI::App* sub = &app;  // created by the command table (cli.cpp) with its name and summary
  sub->add_option(
         "CONFIG", opt.config,
         "config.json, a model directory, a Hugging Face cache directory, or ORG/NAME in the local Hugging Face cache")
      ->required();
  add_int_option(*sub, "--device", opt.device, "CUDA device index (default 0)",
                 IntRange{0, std::numeric_limits<int>::max(), {}});
  sub->add_option("--kv-cache-dtype", opt.kv_cache_dtype, "auto|fp8|fp8_ds_mla|nvfp4_ds_mla (default auto)");
  add_int_list_option(*sub, "--batch", opt.batches,
                      "requests per timed shape, comma-separated (default 1,8,32,64,128,256)",
                      IntRange{1, BenchLimits::max_batch, {}});
  add_list_option(*sub, "--layer-type", opt.layer_types, "time only these layer types, comma-separated");
  add_int_option(*sub, "--replays", opt.replays, "timed CUDA-graph replays per shape (median reported, default 60)",
                 IntRange{1, BenchLimits::max_replays, {}});
  add_int_option(*sub, "--warmup", opt.warmup, "untimed replays first (default 5)",
                 IntRange{0, BenchLimits::max_warmup, {}});
  add_seed_option(*sub, "--seed", opt.seed, "random seed of the inputs");
  add_int_option(*sub, "--tensor-parallel-size,--tp", opt.tensor_parallel_size, "TP size (sets h_q per rank)",
                 parallel_size_range())
      ->group("Parallelism");
  sub->add_option("--attention-backend", opt.attention_backend,
                  "vLLM's backend name whose layout and heads are timed, e.g. TRITON_MLA_SPARSE_DSV41 (8 or 16 heads "
                  "unpadded; default: vLLM's choice for this GPU)");
  add_model_dtype_option(*sub, opt.dtype);
  sub->add_flag("--force", opt.force, "also time combinations the backend rules reject (labelled as such)");
  sub->add_flag("--json", opt.json, "machine-readable results");
}

int run_bench_cli(const BenchCliOptions& opt, std::ostream& out, std::ostream& err) {
  // The config and the flags first: exit 2 / 1 whatever the machine.
  ModelConfig cfg = load_config(opt.config);
  const Topology topo = build_topology(cfg);
  BenchOptions bo;
  bo.kv_cache_dtype = std::string(to_string(parse_kv_cache_dtype(opt.kv_cache_dtype)));
  if (!opt.batches.empty()) bo.batches = opt.batches;
  for (std::size_t i = 0; i < opt.layer_types.size(); ++i) {
    const auto t = parse_layer_type(opt.layer_types[i]);
    if (!t) {
      throw_usage("--layer-type[" + std::to_string(i) + "]: " + mlaplan::quoted(opt.layer_types[i]) +
                  " is not a layer type; allowed: swaonly, c1a, c2a, c4a, c128a, dsa");
    }
    bo.types.push_back(*t);
  }
  if (opt.replays < 1 || opt.replays > BenchLimits::max_replays) {
    throw_usage("--replays: '" + std::to_string(opt.replays) + "' is out of range; allowed 1.." +
                std::to_string(BenchLimits::max_replays));
  }
  if (opt.warmup < 0 || opt.warmup > BenchLimits::max_warmup) {
    throw_usage("--warmup: '" + std::to_string(opt.warmup) + "' is out of range; allowed 0.." +
                std::to_string(BenchLimits::max_warmup));
  }
  bo.run.replays = static_cast<std::int32_t>(opt.replays);
  bo.run.warmup = static_cast<std::int32_t>(opt.warmup);
  bo.run.seed = opt.seed;
  bo.layout.tensor_parallel_size = opt.tensor_parallel_size;
  bo.layout.attention_backend = opt.attention_backend;
  bo.dtype = opt.dtype;
  bo.force = opt.force;
  check_bench_flags(cfg, topo, bo);  // every flag before any GPU is looked for
  // The GPU: in mla-plan-cuda (gpu_runner.hpp); here, what to build.
  if (const GpuRunner* runner = gpu_runner()) return runner->bench(opt, cfg, topo, bo, out, err);
  throw Error(ErrorKind::no_gpu, no_kernels_message("bench"));
}

const CommandRow& bench_command() {
  static const CommandRow row = command_row<BenchCliOptions, setup_bench, run_bench_cli>(
      "bench",
      "Time the project's sparse decode on the local GPU for each layer type of a config: us per call, TFLOPS, GB/s "
      "and the fraction of the floor (measured copy and matmul ceilings)",
      true);
  return row;
}

}  // namespace mlaplan::cli
