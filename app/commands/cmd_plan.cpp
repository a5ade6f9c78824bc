#include <CLI/CLI.hpp>
#include <ostream>

#include "cli/cli.hpp"
#include "cli/commands.hpp"
#include "mlaplan/base/error.hpp"
#include "mlaplan/base/limits.hpp"
#include "mlaplan/base/text.hpp"
#include "mlaplan/hardware/target.hpp"
#include "mlaplan/plan/search.hpp"
#include "mlaplan/rules/rules.hpp"

namespace mlaplan::cli {

void setup_plan(CLI::App& app, PlanOptions& opt) {
  CLI::App* sub = &app;  // created by the command table (cli.cpp) with its name and summary
  sub->add_option("CONFIG", opt.config, "config.json, or a directory holding one")->required();
  sub->add_flag("--json", opt.json, "Print the machine-readable plan (docs/cli.md); same as --format json");
  sub->add_option("--format", opt.format, "text | json | markdown (a summary for a pull-request comment)")
      ->check(one_of({"text", "json", "markdown"}));
  sub->add_flag("--details", opt.details,
                "Also print the target and parallelism, the backend's kernel shapes, every cache object and page pool, "
                "the tile-scheduler plans and the project's kernel modes, and the notes (text output; --json always "
                "has them)");
  sub->add_flag("--show-records", opt.show_records,
                "Print every tile-scheduler record in the text output (implies --details)");
  sub->add_option("--dtype", opt.dtype, "model dtype the engine runs (default: the config's)");
  bind_target_flags(*sub, opt.target);
  bind_layout_flags(*sub, opt.layout);
  bind_fit_flags(*sub, opt.fit);
  bind_batch_flags(*sub, opt.batch);
  bind_search_flags(*sub, opt);
  bind_layout_given(*sub, opt.layout_given);
}

std::pair<std::int64_t, std::optional<std::string>> parse_gpus_value(std::string_view text) {
  const std::string allowed = "N (1.." + std::to_string(LayoutLimits::max_parallel_size) +
                              ") or NxGPU with a preset of `mla-plan gpus` (8xh200)";
  std::string_view count = text;
  std::optional<std::string> gpu;
  const auto x = text.find_first_of("xX");
  if (x != std::string_view::npos) {
    count = text.substr(0, x);
    std::string_view g = text.substr(x + 1);
    while (!count.empty() && count.back() == ' ') count.remove_suffix(1);
    while (!g.empty() && g.front() == ' ') g.remove_prefix(1);
    if (g.empty()) throw_usage("--gpus: " + quoted(text) + " names no GPU after 'x'; allowed " + allowed);
    gpu = std::string(find_gpu_preset(g).id);
  }
  const std::int64_t n = parse_int_value("--gpus", count, IntRange{1, LayoutLimits::max_parallel_size, allowed});
  return {n, gpu};
}

void bind_search_flags(CLI::App& sub, PlanOptions& opt, bool with_min_concurrency) {
  sub.add_option("--gpus", opt.gpus,
                 "search every layout vLLM can start on at most N GPUs (N, or NxGPU: 8xh200) and plan the best; "
                 "without a layout flag the search covers one node of the target GPU")
      ->group("Search");
  sub.add_option("--objective", opt.objective,
                 "concurrency | context | gpus: what the search ranks by (the most requests of max_model_len, "
                 "the longest context at --min-concurrency, the fewest GPUs; default concurrency)")
      ->check(one_of({"concurrency", "context", "gpus"}))
      ->group("Search");
  if (with_min_concurrency) {
    add_int_option(sub, "--min-concurrency", opt.min_concurrency,
                   "requests at once that --max-model-len auto and --objective context must serve (default 1)",
                   IntRange{1, BatchLimits::max_requests, {}})
        ->group("Search");
  }
}

PlanQuestion PlanOptions::question(PlanRequest& r) const {
  PlanQuestion q;
  q.max_model_len_auto = layout.max_model_len_auto;
  q.min_concurrency = min_concurrency.value_or(r.guards.min_concurrency.value_or(1));
  // A layout is given by a flag, or (options made in code) by a value other than the default.
  const LayoutOptions& lo = layout.options;
  const bool layout_set = layout_given.any() || lo.tensor_parallel_size != 1 || lo.pipeline_parallel_size != 1 ||
                          lo.data_parallel_size != 1 || lo.decode_context_parallel_size != 1 ||
                          fit.enable_expert_parallel || fit.engram != "offload";
  // A vllm serve command line is one layout, as vLLM starts it: no search unless --gpus asks.
  if (gpus || (!layout_set && !vllm)) {
    SearchOptions so;
    so.objective = parse_search_objective(objective);
    so.min_concurrency = q.min_concurrency;
    so.fixed.kv_cache_dtype = layout.options.kv_cache_dtype != "auto";
    so.fixed.attention_backend = layout.options.attention_backend.has_value();
    if (gpus) {
      const auto [n, gpu] = parse_gpus_value(*gpus);
      if (gpu) {
        if (r.target.gpu && *r.target.gpu != *gpu && std::string(find_gpu_preset(*r.target.gpu).id) != *gpu) {
          throw_usage("--gpus " + *gpus + " names " + *gpu + " but --gpu is " + *r.target.gpu + "; give the GPU once");
        }
        r.target.gpu = gpu;
      }
      so.gpus = n;
      q.search_why = "--gpus " + *gpus;
    } else {
      const Target t = resolve_target(r.target);
      so.gpus = gpus_per_node(t);
      q.search_why = "no layout flag: one node";
    }
    // A layout flag given with --gpus fixes that dimension.
    so.fixed.tensor_parallel = layout_given.tensor_parallel || lo.tensor_parallel_size != 1;
    so.fixed.pipeline_parallel = layout_given.pipeline_parallel || lo.pipeline_parallel_size != 1;
    so.fixed.data_parallel = layout_given.data_parallel || lo.data_parallel_size != 1;
    so.fixed.context_parallel = layout_given.context_parallel || lo.decode_context_parallel_size != 1;
    so.fixed.expert_parallel = layout_given.expert_parallel || fit.enable_expert_parallel;
    so.fixed.engram = layout_given.engram || fit.engram != "offload";
    q.search = so;
  }
  return q;
}

PlanRequest PlanOptions::request() const {
  if (batch.context_lens_file) throw_internal("--context-lens @FILE was not read before planning");
  PlanRequest r;
  r.target = target.request();
  r.layout = layout.resolved(batch.options.spec_tokens);
  fit.apply_to(r.layout);
  r.batch = batch.options;
  r.budget = fit.resolved_budget();
  r.deploy = fit.resolved_deploy();
  r.prefill = fit.resolved_prefill();
  r.dtype = dtype;
  return r;
}

ModelSourceOptions model_source(const PlanOptions& opt) {
  ModelSourceOptions source;
  source.revision = opt.fit.revision;
  source.download_dir = opt.fit.download_dir;
  source.hf_overrides = opt.fit.hf_overrides;
  return source;
}

namespace {

/// --speculative-config's method against the config's own drafter: mla-plan plans that drafter.
void check_spec_method(const ModelConfig& cfg, const std::string& method) {
  const DraftMethod m = draft_method(cfg);
  const bool ok = (m == DraftMethod::mtp && (method == "mtp" || method == "deepseek_mtp")) ||
                  (m == DraftMethod::dspark && method == "dspark");
  if (ok) return;
  throw_usage("--speculative-config: method " + mlaplan::quoted(method) + " is not the config's own drafter (" +
              std::string(to_string(m)) +
              (m == DraftMethod::none ? ": the config has no draft layers"
                                      : "; mla-plan plans it: give \"method\": \"" + std::string(to_string(m)) + "\"") +
              "); a separate draft model is not modelled");
}

}  // namespace

PlanResult compute_plan(const PlanOptions& opt) {
  PlanRequest r = opt.request();
  const PlanQuestion q = opt.question(r);
  ModelConfig cfg = load_config(opt.config, model_source(opt));
  if (opt.vllm && opt.vllm->spec_method) check_spec_method(cfg, *opt.vllm->spec_method);
  PlanResult p = answer_question(cfg, r, q);
  if (opt.vllm) {
    if (!opt.vllm->ignored.empty()) {
      std::string list;
      for (const auto& f : opt.vllm->ignored) list += (list.empty() ? "" : ", ") + f;
      p.findings.push_back(Finding{"vllm.ignored", Severity::info,
                                   "vllm serve: accepted and ignored (they change nothing mla-plan computes): " + list,
                                   "", ""});
    }
    if (!opt.vllm->from_environment.empty()) {
      std::string list;
      for (const auto& e : opt.vllm->from_environment) list += (list.empty() ? "" : ", ") + e;
      p.findings.push_back(Finding{"vllm.environment", Severity::info,
                                   "vllm serve: read from the environment as vLLM reads it: " + list, "", ""});
    }
    for (const auto& f : opt.vllm->not_modelled) {
      p.findings.push_back(Finding{"vllm.not_modelled", Severity::warning,
                                   "vllm serve: " + f + "; mla-plan does not model it: the numbers are without it", "",
                                   ""});
    }
  }
  return p;
}

int run_plan(const PlanOptions& options, std::ostream& out, std::ostream& err) {
  PlanOptions opt = options;
  opt.batch.read_files();
  const PlanResult r = compute_plan(opt);
  const std::string format = opt.json ? "json" : opt.format;
  out << (format == "json"       ? render_plan_json(r)
          : format == "markdown" ? render_plan_markdown(r)
                                 : printable_lines(render_plan_text(r, opt.show_records, opt.details)));
  if (r.exit_code != 0) err << "mla-plan: error: " << printable(r.exit_message) << "\n";
  return r.exit_code;
}

const CommandRow& plan_command() {
  static const CommandRow row = command_row<PlanOptions, setup_plan, run_plan>(
      "plan",
      "Map every layer to its attention type and role, plan its caches, what fits, and the decode schedules of a "
      "batch");
  return row;
}

}  // namespace mlaplan::cli
