// `mla-plan verify CONFIG`: on-GPU verification that this GPU runs the planned layouts and
// schedules with the project's kernels, numerically (docs/verify.md).

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <limits>
#include <nlohmann/json.hpp>
#include <ostream>

#include "commands.hpp"
#include "json_out.hpp"
#include "mlaplan/error.hpp"
#include "mlaplan/limits.hpp"
#include "mlaplan/number_format.hpp"
#include "mlaplan/text.hpp"
#include "mlaplan/verify.hpp"

#ifdef MLAPLAN_HAVE_CUDA
#include "local_gpu.hpp"
#include "mlaplan_kernels/kernels.hpp"
#include "mlaplan_kernels/verify_device.hpp"
#endif

namespace mlaplan::cli {

using ojson = nlohmann::ordered_json;

void setup_verify(CLI::App& app, VerifyCliOptions& opt) {
  auto* sub = app.add_subcommand(
      "verify", "Run the project's sparse-MLA kernels on the local GPU over the planned layout and schedules, "
                "and check them against the host quantizer, scheduler and reference");
  sub->add_option("CONFIG", opt.config, "config.json, or a directory holding one")->required();
  add_int_option(*sub, "--device", opt.device, "CUDA device index (default 0)",
                 IntRange{0, std::numeric_limits<int>::max(), {}});
  add_list_option(*sub, "--kv-cache-dtype", opt.kv_dtypes,
                  "kv dtypes to verify, comma-separated (default: every dtype the backend lists)");
  sub->add_flag("--force", opt.force, "also run combinations the backend rules reject (labelled as such)");
  sub->add_flag("--json", opt.json, "machine-readable matrix");
  sub->add_option("--dtype", opt.dtype, "model dtype the engine runs (default: the config's)");
  add_seed_option(*sub, "--seed", opt.seed, "random seed of the inputs");
  add_int_option(*sub, "--iterations", opt.iterations, "timed runs per cell (median reported, default 20)",
                 IntRange{1, VerifyLimits::max_iterations, {}});
  add_int_option(*sub, "--tensor-parallel-size,--tp", opt.tensor_parallel_size, "TP size (sets h_q per rank)",
                 parallel_size_range())
      ->group("Parallelism");
  bind_batch_flags(*sub, opt.batch);
}

#ifdef MLAPLAN_HAVE_CUDA
namespace {

// Formatting of the matrix (only a build with the kernels prints one).
std::string sci(double v) { return format_scientific(v, 2); }

ojson cell_json(const VerifyCell& c) {
  ojson j = {{"kv_cache_dtype", c.kv_cache_dtype},
             {"layer_type", std::string(to_string(c.type))},
             {"h_q", c.h_q},
             {"status", std::string(to_string(c.status))},
             {"forced", c.forced},
             {"reason", c.reason}};
  if (!c.main_format.empty()) {
    j["main"] = {{"format", c.main_format}, {"page_block_size", c.main_page}, {"page_stride", c.main_stride},
                 {"topk", c.topk}};
  }
  if (!c.extra_format.empty()) {
    j["extra"] = {{"format", c.extra_format}, {"page_block_size", c.extra_page}, {"page_stride", c.extra_stride},
                  {"topk", c.extra_topk}};
  }
  if (c.ran) {
    j["b"] = c.b;
    j["kernel"] = c.kernel;
    j["quantize_match"] = c.quantize_match;
    j["schedule_match"] = c.schedule_match;
    j["max_abs"] = c.decode.max_abs;
    j["max_rel"] = c.decode.max_rel;
    j["cos_diff"] = c.decode.cos_diff;
    j["lse_max_abs"] = c.decode.lse_max_abs;
    j["tolerance"] = {{"abs", 1e-3}, {"rel", 2.01 / 128}, {"cos_diff", 5e-6}, {"lse_abs", 1e-6},
                      {"lse_rel", 8.01 / 65536}};
    j["decode_us"] = c.decode_us;
  }
  return j;
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
    const auto resolved = std::string(to_string(parse_kv_cache_dtype(d)));  // usage error for unknown values
    if (std::find(kv_dtypes.begin(), kv_dtypes.end(), resolved) == kv_dtypes.end()) kv_dtypes.push_back(resolved);
  }
  VerifyOptions vo;
  vo.kv_cache_dtypes = kv_dtypes;
  vo.batch = opt.batch.options;
  vo.layout.tensor_parallel_size = opt.tensor_parallel_size;
  vo.layout.num_speculative_tokens = opt.batch.options.spec_tokens;
  vo.dtype = opt.dtype;
  vo.force = opt.force;
  vo.seed = opt.seed;
  vo.timing_iterations = static_cast<std::int32_t>(opt.iterations);
  check_verify_options(cfg, topo, vo);  // TP, --spec-tokens, the batch and its decode tokens
#ifndef MLAPLAN_HAVE_CUDA
  (void)out;
  (void)err;
  throw Error(ErrorKind::no_gpu,
              "this mla-plan was built without CUDA: verify needs the project's kernels (install the CUDA toolkit "
              "and rebuild; see README)");
#else
  const LocalGpu gpu = open_local_gpu(opt.device, "verify", err);
  const auto& info = gpu.info;
  const Target& target = gpu.target;
  vo.progress = [&err](const std::string& s) { err << s << "\n" << std::flush; };

  std::unique_ptr<VerifyDevice> device;
  std::string unusable;
  try {
    device = kernels::make_cuda_verify_device(opt.device);
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::no_gpu) throw;
    unusable = e.what();
  }
  // A GPU the kernels were not built for: the rules say why; nothing runs.
  class NoDevice final : public VerifyDevice {
   public:
    explicit NoDevice(std::string why) : why_(std::move(why)) {}
    VerifyRun run(const VerifyProblem&) override { throw Error(ErrorKind::no_gpu, why_); }
    std::string unsupported_reason(const VerifyProblem&) const override { return why_; }

   private:
    std::string why_;
  };
  NoDevice none(unusable);
  const VerifyReport report = run_verify(cfg, topo, target, device ? *device : none, vo);

  if (opt.json) {
    ojson j;
    j["schema"] = kJsonSchema;
    j["config"] = opt.config;
    j["device"] = {{"index", info.index},
                   {"name", info.name},
                   {"compute_capability", target.cc.str()},
                   {"num_sms", info.sm_count},
                   {"memory_bytes", info.global_mem_bytes},
                   {"driver_version", info.driver_version},
                   {"runtime_version", info.runtime_version}};
    std::vector<Finding> findings;
    for (const auto& r : report.rules) findings.push_back(r.finding);
    j["findings"] = findings_json(findings);
    j["batch"] = {{"context_lens", report.batch.context_lens}, {"description", report.batch.description}};
    ojson cells = ojson::array();
    for (const auto& c : report.cells) cells.push_back(cell_json(c));
    j["matrix"] = std::move(cells);
    j["exit_code"] = report.exit_code;
    out << dump_json(j);
  } else {
    out << "mla-plan verify: " << printable(opt.config, kQuotedPathMaxBytes) << " on " << info.name << " (" << target.cc.sm() << ", "
        << info.sm_count << " SMs)\n";
    for (const auto& r : report.rules) {
      if (r.finding.severity == Severity::info) continue;
      out << "  " << to_string(r.finding.severity) << " [" << r.finding.id << "]: " << printable(r.finding.message) << "\n";
    }
    if (!report.batch.description.empty()) out << "batch: " << report.batch.description << "\n";
    char line[512];
    std::snprintf(line, sizeof line, "%-13s %-8s %4s %-12s %9s %9s %9s %9s %9s  %s\n", "kv dtype", "type", "h_q",
                  "result", "max abs", "max rel", "cos diff", "lse abs", "time us", "layout / reason");
    out << line;
    for (const auto& c : report.cells) {
      const std::string status = std::string(to_string(c.status)) + (c.forced ? "*" : "");
      const std::string h = c.h_q ? std::to_string(c.h_q) : "-";
      if (c.ran) {
        std::string layout = c.main_format + "/" + std::to_string(c.main_page);
        if (!c.extra_format.empty()) layout += " + " + c.extra_format + "/" + std::to_string(c.extra_page);
        std::snprintf(line, sizeof line, "%-13s %-8s %4s %-12s %9s %9s %9s %9s %9s  %s%s\n", c.kv_cache_dtype.c_str(),
                      std::string(to_string(c.type)).c_str(), h.c_str(), status.c_str(), sci(c.decode.max_abs).c_str(),
                      sci(c.decode.max_rel).c_str(), sci(c.decode.cos_diff).c_str(),
                      sci(c.decode.lse_max_abs).c_str(), format_fixed(c.decode_us, 1).c_str(), layout.c_str(),
                      c.reason.empty() ? "" : ("; " + c.reason).c_str());
      } else {
        std::snprintf(line, sizeof line, "%-13s %-8s %4s %-12s %9s %9s %9s %9s %9s  %s\n", c.kv_cache_dtype.c_str(),
                      std::string(to_string(c.type)).c_str(), h.c_str(), status.c_str(), "-", "-", "-", "-", "-",
                      c.reason.c_str());
      }
      out << line;
    }
    out << "tolerances: element abs 1e-3 or rel 2.01/128, cos diff 5e-6, lse abs 1e-6 or rel 8.01/65536"
        << (std::any_of(report.cells.begin(), report.cells.end(), [](const VerifyCell& c) { return c.forced; })
                ? "; * ran with --force, outside the backend's support"
                : "")
        << "\n";
  }
  if (report.exit_code != 0) err << "mla-plan: error: " << report.exit_message << "\n";
  return report.exit_code;
#endif
}

}  // namespace mlaplan::cli
