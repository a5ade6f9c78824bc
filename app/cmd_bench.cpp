// `mla-plan bench CONFIG`: the project's sparse decode timed on the local GPU for every layer type
// of the config, with rates and the fraction of the floor (docs/cli.md, docs/perf.md).

#include <CLI/CLI.hpp>
#include <cstdio>
#include <limits>
#include <ostream>

#include "bench_output.hpp"
#include "commands.hpp"
#include "mlaplan/bench.hpp"
#include "mlaplan/error.hpp"
#include "mlaplan/text.hpp"

#ifdef MLAPLAN_HAVE_CUDA
#include "local_gpu.hpp"
#include "mlaplan_kernels/bench_device.hpp"
#endif

namespace mlaplan::cli {

void setup_bench(CLI::App& app, BenchCliOptions& opt) {
  CLI::App* sub = &app;  // created by the command table (cli.cpp) with its name and summary
  sub->add_option("CONFIG", opt.config, "config.json, or a directory holding one")->required();
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
  sub->add_option("--dtype", opt.dtype, "model dtype the engine runs (default: the config's)");
  sub->add_flag("--force", opt.force, "also time combinations the backend rules reject (labelled as such)");
  sub->add_flag("--json", opt.json, "machine-readable results");
}

namespace {

[[maybe_unused]] std::string fixed(double v, int digits) {
  char b[48];
  std::snprintf(b, sizeof b, "%.*f", digits, v);
  return b;
}

}  // namespace

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
  bo.dtype = opt.dtype;
  bo.force = opt.force;
  check_bench_flags(cfg, topo, bo);  // every flag before any GPU is looked for
#ifndef MLAPLAN_HAVE_CUDA
  (void)out;
  (void)err;
  (void)topo;
  throw Error(ErrorKind::no_gpu,
              "this mla-plan was built without CUDA: bench needs the project's kernels (install the CUDA toolkit and "
              "rebuild; see README)");
#else
  const LocalGpu gpu = open_local_gpu(opt.device, "bench", err);
  auto device = kernels::make_cuda_bench_device(opt.device);
  bo.progress = [&err](const std::string& s) { err << s << "\n" << std::flush; };
  const BenchReport report = run_bench(cfg, topo, gpu.target, *device, bo);

  if (opt.json) {
    out << bench_json(opt.config, BenchGpuInfo{gpu.info.index, gpu.info.name, gpu.target.cc.str(), gpu.info.sm_count},
                      report, bo.run);
  } else {
    out << "mla-plan bench: " << printable(opt.config, kQuotedPathMaxBytes) << " on " << gpu.info.name << " ("
        << gpu.target.cc.sm() << ", " << gpu.info.sm_count << " SMs), kv " << report.kv_cache_dtype
        << (report.forced ? " (forced)" : "") << ", " << bo.run.replays << " replays\n";
    for (const auto& r : report.rules) {
      if (r.finding.severity == Severity::info) continue;
      out << "  " << to_string(r.finding.severity) << " [" << r.finding.id << "]: " << printable(r.finding.message)
          << "\n";
    }
    const auto& c = report.ceilings;
    if (c.copy_gbps > 0) {
      out << "ceilings: copy " << fixed(c.copy_gbps, 0) << " GB/s (" << c.copy_how << "); matmul "
          << (c.matmul_tflops > 0 ? fixed(c.matmul_tflops, 1) + " TFLOP/s (" + c.matmul_how + ")" : c.matmul_how)
          << "\n";
    }
    char line[512];
    std::snprintf(line, sizeof line, "%-8s %6s %4s %5s %-9s %-13s %9s %9s %7s %7s %9s %8s\n", "type", "layers", "h_q",
                  "b", "rows", "plan", "us/call", "decode us", "TFLOPS", "GB/s", "floor us", "of floor");
    out << line;
    for (const auto& r : report.rows) {
      const auto& s = r.shape;
      const std::string rows = std::to_string(s.topk) + (s.has_extra ? "+" + std::to_string(s.extra_topk) : "");
      if (r.ran) {
        std::snprintf(line, sizeof line, "%-8s %6lld %4d %5d %-9s %-13s %9.1f %9.1f %7.1f %7.0f %9.2f %7.1f%%\n",
                      std::string(to_string(s.type)).c_str(), static_cast<long long>(s.num_layers), s.h_q, s.b,
                      rows.c_str(), std::string(to_string(s.mode.mode)).c_str(), r.timing.us_per_call,
                      r.timing.us_decode, r.tflops, r.gbps, r.floor_us, 100.0 * r.floor_fraction);
      } else {
        std::snprintf(line, sizeof line, "%-8s %6lld %4d %5d %-9s %-13s %9s  %s\n",
                      std::string(to_string(s.type)).c_str(), static_cast<long long>(s.num_layers), s.h_q, s.b,
                      rows.c_str(), "-", "-", r.reason.c_str());
      }
      out << line;
    }
    out << "us/call: scheduler (split_kv) + decode + combine (split_kv) in one CUDA graph, L2 flushed before each "
           "replay, median; decode us: without the scheduler; floor: max(bytes / copy rate, FLOPs / matmul rate)"
        << (c.matmul_tflops > 0 ? "" : " (bytes only: no matmul rate)") << "\n";
  }
  if (report.exit_code != 0) err << "mla-plan: error: " << report.exit_message << "\n";
  return report.exit_code;
#endif
}

}  // namespace mlaplan::cli
