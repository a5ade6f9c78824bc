#pragma once
// Subcommands of mla-plan: one options struct each, a setup function that binds its flags to a
// CLI11 subcommand, and a run function that does the work and returns the exit code. Where a
// subcommand checks flag values before it opens any file, a validate function (or
// schedule_input) does that; CommandLine::parse() (cli.hpp) calls it after parsing, and the run
// function expects options that passed it. Each subcommand's file in app/commands/ ties the three
// into its row (command_row(), cli.hpp); an options struct no other file needs can live there too.

#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "cli/sglang_args.hpp"
#include "cli/vllm_args.hpp"
#include "flags/flags.hpp"
#include "mlaplan/model/config.hpp"
#include "mlaplan/cache/decode.hpp"
#include "mlaplan/cache/layout.hpp"
#include "mlaplan/plan/plan.hpp"
#include "mlaplan/gpu_check/engine_probe.hpp"
#include "mlaplan/plan/search.hpp"
#include "mlaplan/rules/rules.hpp"
#include "mlaplan/cache/scheduler.hpp"
#include "mlaplan/hardware/target.hpp"
#include "mlaplan/model/topology.hpp"

namespace CLI {
class App;
}

namespace mlaplan::cli {

enum class OutputFormat { text, json };

/// Everything `plan` computed for one config, ready to print (include/mlaplan/plan/plan.hpp).
using PlanResult = mlaplan::Plan;

// ---- plan ----
struct PlanOptions {
  std::string config;
  bool json = false;
  std::string format = "text";  ///< text | json | markdown (--json means json)
  bool details = false;         ///< --details: every section of the text output
  bool show_records = false;
  std::optional<std::string> dtype;
  TargetFlags target;
  LayoutFlags layout;
  FitFlags fit;
  BatchFlags batch;
  EngineFlags engine;                           ///< --engine and SGLang's flags
  LayoutGiven layout_given;                     ///< the parallel-layout flags given (bind_layout_given())
  std::optional<std::string> gpus;              ///< --gpus N | NxGPU: search the layouts of N GPUs
  std::string objective = "concurrency";        ///< --objective concurrency | context | gpus
  std::optional<std::int64_t> min_concurrency;  ///< --min-concurrency (plan: what auto and context serve)
  /// `mla-plan vllm serve ...`: the vLLM command line these options were read from (vllm_args.hpp).
  std::optional<VllmServeInput> vllm;
  /// `mla-plan sglang serve ...` / `mla-plan python -m sglang.launch_server ...`: the SGLang
  /// command line these options were read from (sglang_args.hpp).
  std::optional<SglangServeInput> sglang_serve;
  /// The library's request of these flags (Error(usage) for a pair that excludes each other).
  PlanRequest request() const;
  /// What to answer beyond the one layout: the search (with --gpus, or without a layout flag:
  /// one node), --max-model-len auto. Sets `request`'s target from --gpus NxGPU.
  PlanQuestion question(PlanRequest& request) const;
};
/// --gpus N | NxGPU ("8", "8xh200", "16 x b200"): the count and the GPU preset when named.
std::pair<std::int64_t, std::optional<std::string>> parse_gpus_value(std::string_view text);
/// Binds --gpus, --objective and (unless `with_min_concurrency` is false: check binds it as a
/// guard) --min-concurrency to `opt`.
void bind_search_flags(CLI::App& sub, PlanOptions& opt, bool with_min_concurrency = true);
void setup_plan(CLI::App& app, PlanOptions& opt);
int run_plan(const PlanOptions& opt, std::ostream& out, std::ostream& err);

/// Where the plan flags say the model comes from (--revision, --download-dir, --hf-overrides).
ModelSourceOptions model_source(const PlanOptions& opt);

/// Computes the plan of one config. Throws mlaplan::Error for unreadable / invalid configs and
/// bad flag values; backend violations and capacity shortfalls are recorded in the result.
PlanResult compute_plan(const PlanOptions& opt);

// ---- schedule (direct mode) ----
struct ScheduleOptions {
  std::string kernel;
  std::int64_t num_sms = 0;
  std::int64_t h_q = 0;
  std::int64_t s_q = 1;
  std::int64_t h_k = 1;
  std::vector<std::int64_t> lengths;
  std::vector<std::int64_t> extra_lengths;
  bool json = false;
  bool show_records = false;
  SchedInput input;  ///< the flags checked (schedule_input()), before the run
};
void setup_schedule(CLI::App& app, ScheduleOptions& opt);
/// Validates the flags into a scheduler input (throws Error(usage)).
SchedInput schedule_input(const ScheduleOptions& opt);
/// Plans `in` (schedule_input() of `opt`) and prints it as `opt` says.
int run_schedule(const ScheduleOptions& opt, const SchedInput& in, std::ostream& out);

/// One plan with what it was computed for. `layer_type` is empty in direct mode.
struct ScheduleEntry {
  std::string layer_type;
  SchedInput input;
  SchedPlan plan;
};

// ---- check ----
struct CheckOptions {
  std::vector<std::string> configs;
  std::string format = "text";
  bool json = false;
  bool matrix = false;
  bool recursive = false;  ///< --recursive: a folder of configs' subdirectories too
  std::vector<std::int64_t> tp_sizes;
  std::vector<std::int64_t> dp_sizes;
  PlanGuards guards;                       ///< the guard flags, bound as they are (plan.hpp)
  std::string guard_accounting = "pages";  ///< --guard-accounting: guards.guard_rows once checked
  PlanOptions plan;                        ///< target, layout, capacity and batch flags shared with plan
  std::string effective_format() const;
  std::vector<std::int64_t> effective_tp_sizes() const;  ///< tp_sizes, or {1} when none was given
  std::vector<std::int64_t> effective_dp_sizes() const;  ///< dp_sizes, or {1} when none was given
  /// Every (TP, DP) pair of the matrix, TP outer.
  std::vector<std::pair<std::int64_t, std::int64_t>> layouts() const;
};
void setup_check(CLI::App& app, CheckOptions& opt);
/// The flag values of check that no single plan validates: how many configs and TP sizes, the
/// guards (throws Error(usage)).
void validate_check(const CheckOptions& opt);
int run_check(const CheckOptions& opt, std::ostream& out, std::ostream& err);

// ---- verify ----
struct VerifyCliOptions {
  std::string config;
  DeviceList device{false, {0}};        ///< --device N | N,N,... | all
  std::string decode_mode = "planned";  ///< --decode-mode (verify_decode_mode_values())
  std::vector<std::string> kv_dtypes;
  std::optional<std::string> attention_backend;  ///< --attention-backend (vLLM's name)
  bool force = false;
  bool json = false;
  std::optional<std::string> dtype;
  std::uint64_t seed = 20261130;
  std::int64_t iterations = 20;
  std::int64_t tensor_parallel_size = 1;
  std::int64_t data_parallel_size = 1;  ///< --data-parallel-size: each listed device one rank of TP x DP
  BatchFlags batch;
  /// --engine-kernels [PYTHON]: also run the engine's own op through the probe; "" given without a
  /// value (python3)
  std::optional<std::string> engine_kernels;
  std::vector<std::string> engine_paths;      ///< --engine-path DIR (repeatable): first on the probe's sys.path
  std::optional<std::string> engine_route;    ///< --engine-route vllm|flash_mla
  std::optional<std::string> engine_bundles;  ///< --engine-bundles DIR: keep the case bundles here
  std::optional<std::string> engine_probe;    ///< --engine-probe FILE: another probe than the one beside mla-plan
  std::int64_t engine_timeout = 600;          ///< --engine-timeout SECONDS per probe run
};
/// The engine probe options of verify's --engine-* flags (nullopt without --engine-kernels):
/// Error(usage) for an --engine-* flag without --engine-kernels, naming it. `exe_dir`: where the
/// probe is looked for when --engine-probe is not given.
std::optional<EngineProbeOptions> verify_engine_options(const VerifyCliOptions& opt, const std::string& exe_dir);
/// The directory of this executable ("" when /proc/self/exe cannot be read).
std::string executable_directory();
void setup_verify(CLI::App& app, VerifyCliOptions& opt);
int run_verify_cli(const VerifyCliOptions& opt, std::ostream& out, std::ostream& err);

// ---- bench ----
struct BenchCliOptions {
  std::string config;
  int device = 0;
  std::string kv_cache_dtype = "auto";
  std::vector<std::int64_t> batches;  ///< empty: the default sizes
  std::vector<std::string> layer_types;
  std::int64_t replays = 60;
  std::int64_t warmup = 5;
  std::uint64_t seed = 2026;
  std::int64_t tensor_parallel_size = 1;
  std::optional<std::string> attention_backend;  ///< vLLM's backend name whose layout and heads are timed
  std::optional<std::string> dtype;
  bool force = false;
  bool json = false;
};
void setup_bench(CLI::App& app, BenchCliOptions& opt);
int run_bench_cli(const BenchCliOptions& opt, std::ostream& out, std::ostream& err);

// ---- gpus, formats ----
struct InfoOptions {
  bool json = false;
};
void setup_gpus(CLI::App& app, InfoOptions& opt);
void setup_formats(CLI::App& app, InfoOptions& opt);
int run_gpus(const InfoOptions& opt, std::ostream& out);
int run_formats(const InfoOptions& opt, std::ostream& out);

// ---- output ----
std::string render_schedules_json(const std::vector<ScheduleEntry>& entries);
std::string render_schedules_text(const std::vector<ScheduleEntry>& entries, bool show_records);
std::string render_plan_json(const PlanResult& r);
/// Plan text with every section (the scheduler, kernel and cache detail included).
std::string render_plan_text(const PlanResult& r, bool show_records = false);
/// Plan text; without `details` the deployer's screen (fit, layers, caches and the decode in
/// words), with it every section (`show_records` implies it).
std::string render_plan_text(const PlanResult& r, bool show_records, bool details);

// ---- report (app/commands/cmd_report.cpp, app/report/report.cpp, docs/report.md) ----
struct ReportOptions {
  PlanOptions plan;                        ///< CONFIG and the flags of plan
  std::string output;                      ///< -o FILE.svg | FILE.html
  std::optional<std::string> verify_json;  ///< --verify-json
  std::optional<std::string> bench_json;   ///< --bench-json
};
void setup_report(CLI::App& app, ReportOptions& opt);
/// The report's kind from the extension of -o (throws Error(usage) for any other).
void validate_report(const ReportOptions& opt);
int run_report(const ReportOptions& opt, std::ostream& out, std::ostream& err);

// ---- Markdown (app/output/render_markdown.cpp) ----
/// One file of `check`, as the Markdown table shows it.
struct CheckSummaryRow {
  std::string path;
  int code = 0;
  std::string detail;             ///< "deepseek_v41 on h200, fp8_ds_mla"; "" when no plan was made
  std::vector<Finding> findings;  ///< errors and warnings
};
std::string render_plan_markdown(const PlanResult& r);
/// `check --format markdown`, written as the files are checked: the heading and the table's
/// header, then one row per file, then the line with the counts.
std::string render_check_markdown_head();
std::string render_check_markdown_row(const CheckSummaryRow& row);
std::string render_check_markdown_tail(std::size_t passed, std::size_t total);

}  // namespace mlaplan::cli
