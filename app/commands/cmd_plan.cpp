#include <CLI/CLI.hpp>
#include <ostream>

#include "cli/cli.hpp"
#include "cli/commands.hpp"
#include "flags/flag_values.hpp"
#include <algorithm>
#include <cmath>

#include "mlaplan/base/error.hpp"
#include "mlaplan/base/input_file.hpp"
#include "mlaplan/base/number_format.hpp"
#include "mlaplan/engine/sglang/startup_log.hpp"
#include "mlaplan/engine/vllm/startup_log.hpp"
#include "mlaplan/base/limits.hpp"
#include "mlaplan/base/text.hpp"
#include "mlaplan/hardware/target.hpp"
#include "mlaplan/plan/search.hpp"
#include "mlaplan/rules/rules.hpp"

namespace mlaplan::cli {

void setup_plan(CLI::App& app, PlanOptions& opt) {
  CLI::App* sub = &app;  // created by the command table (cli.cpp) with its name and summary
  sub->add_option(
         "CONFIG", opt.config,
         "config.json, a model directory, a Hugging Face cache directory, or ORG/NAME in the local Hugging Face cache")
      ->required();
  sub->add_flag("--json", opt.json, "Print the machine-readable plan (docs/cli.md); same as --format json");
  sub->add_option("--format", opt.format, "text | json | markdown (a summary for a pull-request comment)")
      ->check(one_of({"text", "json", "markdown"}));
  sub->add_flag("--details", opt.details,
                "Also print the target and parallelism, the backend's kernel shapes, every cache object and page pool, "
                "the tile-scheduler plans and the project's kernel modes, and the notes (text output; --json always "
                "has them)");
  sub->add_flag("--show-records", opt.show_records,
                "Print every tile-scheduler record in the text output (implies --details)");
  add_model_dtype_option(*sub, opt.dtype);
  bind_target_flags(*sub, opt.target);
  bind_layout_flags(*sub, opt.layout);
  bind_fit_flags(*sub, opt.fit);
  bind_batch_flags(*sub, opt.batch);
  bind_engine_flags(*sub, opt.engine);
  bind_search_flags(*sub, opt);
  bind_layout_given(*sub, opt.layout_given);
  sub->add_option("--from-log", opt.fit.from_log,
                  "a vLLM start-up log of these flags: its lines are set against this plan term by term, and its "
                  "measured terms (weights as loaded, CUDA graphs, activation, non-torch, the GPU total) replace the "
                  "estimates")
      ->group("Fit");
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
    try {
      gpu = std::string(find_gpu_preset(g).id);
    } catch (const Error& e) {
      // find_gpu_preset speaks of --gpu: the value came from --gpus.
      std::string why = e.what();
      if (why.rfind("--gpu: ", 0) == 0) why = why.substr(7);
      throw_usage("--gpus: " + quoted(text) + ": " + why);
    }
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
  // A vllm serve (sglang serve) command line is one layout, as the engine starts it: no search
  // unless --gpus asks.
  if (gpus || (!layout_set && !vllm && !sglang_serve)) {
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
    if (gpus) {
      // The fixed dimensions alone need TP x PP x DP GPUs: more than --gpus is a contradiction
      // (no layout of N GPUs has them), not a search that finds nothing.
      std::int64_t need = 1;
      std::string named;
      auto fixed = [&](bool is_fixed, std::int64_t size, const char* flag) {
        if (!is_fixed || size <= 1) return;
        need *= size;
        named += (named.empty() ? "" : " x ") + std::string(flag) + " " + std::to_string(size);
      };
      fixed(so.fixed.tensor_parallel, lo.tensor_parallel_size, "--tensor-parallel-size");
      fixed(so.fixed.pipeline_parallel, lo.pipeline_parallel_size, "--pipeline-parallel-size");
      fixed(so.fixed.data_parallel, lo.data_parallel_size, "--data-parallel-size");
      if (need > so.gpus) {
        throw_usage("--gpus " + *gpus + ": " + named + " needs " + std::to_string(need) + " GPUs; allowed: --gpus " +
                    std::to_string(need) + " or more, or layout flags that fit " + std::to_string(so.gpus) + " GPUs");
      }
    }
    q.search = so;
  }
  return q;
}

PlanRequest PlanOptions::request() const {
  if (batch.context_lens_file) throw_internal("--context-lens @FILE was not read before planning");
  PlanRequest r;
  r.target = target.request();
  r.batch = batch.options;
  const SglangOptions& sg = engine.engine != "vllm" ? engine.sglang : SglangOptions{};
  if (!sg.speculative_algorithm.empty() && r.batch.spec_tokens == 0) {
    // SGLang's speculative flags load the draft stages: the plan's speculative tokens are the
    // draft tokens beyond the first (DSpark: its block, 5 unless given; EAGLE: its steps, 3).
    std::string algo = sg.speculative_algorithm;
    for (char& c : algo) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    r.batch.spec_tokens = sg.speculative_num_draft_tokens ? *sg.speculative_num_draft_tokens - 1
                          : algo == "DSPARK"              ? sg.speculative_dspark_block_size.value_or(5)
                                                          : sg.speculative_num_steps.value_or(3);
  }
  r.layout = layout.resolved(r.batch.spec_tokens);
  fit.apply_to(r.layout);
  r.budget = fit.resolved_budget();
  r.deploy = fit.resolved_deploy();
  r.prefill = fit.resolved_prefill();
  r.dtype = dtype;
  r.engine = parse_engine_choice(engine.engine);
  r.sglang = engine.sglang;
  // SGLang keeps V4.1's Engram tables on the GPU unless its host-table switch (--engram offload) is on.
  r.sglang.engram_host_table = layout_given.engram && fit.engram == "offload";
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

/// A vLLM start-up log's lines may be long and many (a 100 MB log reads in a fraction of a second).
constexpr std::int64_t kMaxLogFileBytes = 256LL << 20;

std::optional<double> arg_number(const VllmStartupLog& log, const std::string& key) {
  const auto it = log.args.find(key);
  if (it == log.args.end()) return std::nullopt;
  try {
    std::size_t used = 0;
    const double v = std::stod(it->second, &used);
    if (used != it->second.size()) return std::nullopt;
    return v;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

std::optional<double> term_gib(const Plan& p, const std::string& id) {
  if (!p.fit || p.fit->stages.empty()) return std::nullopt;
  const BudgetTerm* t = p.fit->stages.front().budget.term(id);
  if (t == nullptr) return std::nullopt;
  return static_cast<double>(t->bytes) / static_cast<double>(std::int64_t{1} << 30);
}

std::string gib2(double v) { return format_fixed(v, 2); }

/// `plan --from-log FILE`: the plan of the flags as the model estimates it, set against the log
/// term by term; then the plan again with the log's measured terms (where the layout is the log's
/// and no flag gives the term).
PlanResult plan_from_log(const PlanOptions& opt, const ModelConfig& cfg, PlanRequest r, const PlanQuestion& q) {
  const std::string& path = *opt.fit.from_log;
  const InputFileRules rules{"--from-log: ", kMaxLogFileBytes, "the limit for start-up logs (256 MiB)",
                             "a vLLM start-up log is a few MiB"};
  VllmStartupLog log;
  // A file that cannot be read is exit 2, as every input file (its message names --from-log);
  // one that is read but is not a start-up log is a bad flag value (exit 1).
  const std::string text = read_input_file(path, rules);
  try {
    log = read_vllm_startup_log(text);
  } catch (const Error& e) {
    if (e.kind() == ErrorKind::invalid_config) throw_usage("--from-log " + mlaplan::quoted(path) + ": " + e.what());
    throw;
  }
  if (!log.unreadable_lines.empty()) {
    // A line that says a term but whose number cannot be read: the log is not what it seems.
    std::string why = log.notes.empty() ? "" : log.notes.front();
    for (const auto& n : log.notes) {
      if (n.rfind("line " + std::to_string(log.unreadable_lines.front()) + ":", 0) == 0) why = n;
    }
    throw_usage("--from-log " + mlaplan::quoted(path) + ": " + why);
  }
  const PlanResult model = answer_question(cfg, r, q);
  LogCheck check;
  check.file = path;
  check.vllm_version = log.vllm_version.value_or("");
  check.model_runner_v2 = log.model_runner_v2;
  check.notes = log.notes;
  constexpr double kGiB = 1073741824.0;
  const Fit* f = model.fit ? &*model.fit : nullptr;
  const Budget* b = f && !f->stages.empty() ? &f->stages.front().budget : nullptr;
  auto row = [&](std::string what, std::string unit, std::optional<double> planned, std::optional<double> logged,
                 std::size_t line, double rel) {
    LogCheckRow x{std::move(what), std::move(unit), planned, logged, line, false};
    if (planned && logged) {
      const double diff = std::fabs(*planned - *logged);
      x.disagrees = x.unit == "GiB" ? diff > std::max(0.25, rel * std::fabs(*logged)) : diff > rel * std::fabs(*logged);
    }
    check.rows.push_back(std::move(x));
  };
  // The flags the log ran with (its non-default args), against the plan's.
  if (f && model.layout) {
    const auto& pl = f->placement.layout;
    const std::pair<const char*, double> mine[] = {
        {"tensor_parallel_size", static_cast<double>(pl.tensor_parallel_size)},
        {"data_parallel_size", static_cast<double>(pl.data_parallel_size)},
        {"pipeline_parallel_size", static_cast<double>(pl.pipeline_parallel_size)},
        {"max_model_len", static_cast<double>(model.layout->max_model_len)},
        {"max_num_batched_tokens", static_cast<double>(model.layout->in_flight_tokens)},
        {"gpu_memory_utilization", b ? b->gpu_memory_utilization : 0.0}};
    for (const auto& [key, value] : mine) {
      const auto theirs = arg_number(log, key);
      if (theirs && std::fabs(*theirs - value) > 1e-9) {
        check.notes.push_back(std::string("the log ran ") + key + " " + format_general(*theirs) + ", this plan " +
                              format_general(value) + ": pass the log's flags to compare like with like");
      }
    }
  }
  const bool layout_matches = std::none_of(check.notes.begin(), check.notes.end(), [](const std::string& n) {
    return n.find("_parallel_size") != std::string::npos;
  });
  // Weights as loaded.
  std::optional<double> loaded_plan;
  if (b)
    loaded_plan =
        (static_cast<double>(b->weights_bytes()) + term_gib(model, "load_overhead").value_or(0) * kGiB) / kGiB;
  if (log.model_loading_gib) {
    row("weights as loaded (\"Model loading took\")", "GiB", loaded_plan, log.model_loading_gib->value,
        log.model_loading_gib->line, 0.05);
  }
  if (log.cudagraph_estimate_gib) {
    row("CUDA-graph estimate", "GiB", term_gib(model, "cudagraph"), log.cudagraph_estimate_gib->value,
        log.cudagraph_estimate_gib->line, 0.05);
  }
  if (log.peak_activation_gib)
    row("peak activation", "GiB", term_gib(model, "activation_peak"), log.peak_activation_gib, 0, 0.05);
  std::optional<double> log_non_torch = log.non_torch_gib;
  if (!log_non_torch && log.consumed_gib && log.model_loading_gib) {
    log_non_torch = *log.consumed_gib - log.model_loading_gib->value;
  }
  if (log_non_torch) row("non-torch memory", "GiB", term_gib(model, "non_torch"), log_non_torch, 0, 0.05);
  // V1 logs print no split of the profile's peak: what the requested memory leaves.
  std::optional<double> remainder;
  if (!log.peak_activation_gib && log.model_loading_gib && log.available_kv_gib && b) {
    const double total = log.total_gib.value_or(static_cast<double>(b->total_bytes) / kGiB);
    const double util = arg_number(log, "gpu_memory_utilization").value_or(b->gpu_memory_utilization);
    remainder = total * util - log.model_loading_gib->value -
                (log.cudagraph_estimate_gib ? log.cudagraph_estimate_gib->value : 0.0) - log.available_kv_gib->value;
    row("activation + non-torch (what the requested memory leaves)", "GiB",
        term_gib(model, "activation_peak").value_or(0) + term_gib(model, "non_torch").value_or(0), remainder, 0, 0.05);
  }
  if (log.total_gib && b) row("GPU total", "GiB", static_cast<double>(b->total_bytes) / kGiB, log.total_gib, 0, 0.01);
  if (log.available_kv_gib) {
    row("Available KV cache memory", "GiB",
        f ? std::optional<double>(static_cast<double>(f->vllm.available_bytes) / kGiB) : std::nullopt,
        log.available_kv_gib->value, log.available_kv_gib->line, 0.02);
  }
  if (log.gpu_kv_cache_tokens) {
    row("GPU KV cache size", "tokens",
        f ? std::optional<double>(static_cast<double>(f->vllm.gpu_kv_cache_tokens)) : std::nullopt,
        static_cast<double>(*log.gpu_kv_cache_tokens), 0, 0.01);
  }
  if (log.max_concurrency) {
    row("Maximum concurrency", "x", f ? std::optional<double>(f->vllm.concurrency) : std::nullopt, log.max_concurrency,
        0, 0.01);
  }

  // The measured terms, where the layout is the log's and no flag gives the term.
  if (!layout_matches) {
    check.notes.push_back("the log's terms are not applied: it ran another parallel layout");
  } else {
    auto apply = [&](std::optional<double>& slot, std::optional<double> value, const std::string& flag,
                     const std::string& what) {
      if (!value || slot) return;
      slot = std::max(0.0, *value);
      check.applied.push_back(flag + " " + gib2(*slot) + " (" + what + ")");
    };
    if (log.model_loading_gib && !r.budget.weights_gib) {
      apply(r.budget.weights_gib, log.model_loading_gib->value, "--weights-gib", "\"Model loading took\"");
      if (!r.budget.load_overhead_gib) r.budget.load_overhead_gib = 0.0;  // the loaded figure holds it
    }
    if (!log.model_runner_v2)
      apply(r.budget.cudagraph_gib,
            log.cudagraph_estimate_gib.has_value() ? std::optional<double>(log.cudagraph_estimate_gib->value)
                                                   : std::nullopt,
            "--cudagraph-gib", "\"Estimated CUDA graph memory\"");
    apply(r.budget.activation_gib, log.peak_activation_gib ? log.peak_activation_gib : remainder, "--activation-gib",
          log.peak_activation_gib ? "the peak activation the log prints"
                                  : "what the log's requested memory leaves: activation and non-torch together");
    if (log.peak_activation_gib) {
      apply(r.budget.non_torch_gib, log_non_torch, "--non-torch-gib", "the log's non-torch memory");
    } else if (remainder && !r.budget.non_torch_gib) {
      r.budget.non_torch_gib = 0.0;  // counted in the activation term above
    }
    if (log.total_gib && !r.target.memory_gib && !r.resolved_target) {
      r.target.memory_gib = *log.total_gib;
      check.applied.push_back("--gpu-memory-gib " + gib2(*log.total_gib) + " (\"Free memory on device\")");
    }
  }
  PlanResult out = check.applied.empty() ? model : answer_question(cfg, r, q);
  for (const auto& x : check.rows) {
    if (!x.disagrees) continue;
    const auto fmt = [&](double v) {
      return x.unit == "tokens" ? format_grouped(static_cast<std::int64_t>(v)) : gib2(v);
    };
    out.findings.push_back(Finding{"log.disagrees", Severity::warning,
                                   "--from-log: " + x.what + ": the log " + fmt(*x.logged) + " " + x.unit +
                                       ", this plan's model " + fmt(*x.planned) + " " + x.unit,
                                   "", "the measured terms replace the model's in the plan (see the log check)"});
  }
  out.log_check = std::move(check);
  return out;
}

/// `plan --engine sglang --from-log FILE`: a real SGLang start-up log against the SGLang plan of the
/// same flags, row by row; then the plan again with the log's measured memory (the free memory
/// before and after loading, the resolved mem_fraction_static and server args no flag gives).
PlanResult plan_from_sglang_log(const PlanOptions& opt, const ModelConfig& cfg, PlanRequest r, const PlanQuestion& q) {
  const std::string& path = *opt.fit.from_log;
  const InputFileRules rules{"--from-log: ", kMaxLogFileBytes, "the limit for start-up logs (256 MiB)",
                             "an SGLang start-up log is a few MiB"};
  SglangStartupLog log;
  // A file that cannot be read is exit 2, as every input file (its message names --from-log);
  // one that is read but is not a start-up log is a bad flag value (exit 1).
  const std::string text = read_input_file(path, rules);
  try {
    log = read_sglang_startup_log(text);
  } catch (const Error& e) {
    if (e.kind() == ErrorKind::invalid_config) throw_usage("--from-log " + mlaplan::quoted(path) + ": " + e.what());
    throw;
  }
  // The flags the log's server ran with, where no flag of this plan gives them: the model's plan
  // and the log then describe the same server.
  auto arg_int = [&](const char* key) -> std::optional<std::int64_t> {
    const auto it = log.server_args.find(key);
    if (it == log.server_args.end()) return std::nullopt;
    try {
      std::size_t used = 0;
      const long long v = std::stoll(it->second, &used);
      if (used != it->second.size()) return std::nullopt;
      return v;
    } catch (const std::exception&) {
      return std::nullopt;
    }
  };
  LogCheck check;
  {
    SglangOptions& o = r.sglang;
    const auto f = log.server_args.find("mem_fraction_static");
    if (f != log.server_args.end() && !o.mem_fraction_static) {
      try {
        o.mem_fraction_static = std::stod(f->second);
        check.applied.push_back("--mem-fraction-static " + format_shortest(*o.mem_fraction_static) + " (server_args)");
      } catch (const std::exception&) {
        check.notes.push_back("server_args' mem_fraction_static " + mlaplan::quoted(f->second) + " is not a number");
      }
    }
    auto apply_int = [&](std::optional<std::int64_t>& slot, const char* key, const std::string& flag,
                         bool off_value = false) {
      const auto v = arg_int(key);
      if (!v || slot || (*v <= 0 && !(off_value && *v == -1))) return;
      slot = *v;
      check.applied.push_back(flag + " " + std::to_string(*v) + " (server_args)");
    };
    apply_int(o.chunked_prefill_size, "chunked_prefill_size", "--chunked-prefill-size", /*off_value=*/true);
    apply_int(o.max_running_requests, "max_running_requests", "--max-running-requests");
    apply_int(o.cuda_graph_max_bs, "cuda_graph_max_bs", "--cuda-graph-max-bs");
    if (!o.disable_radix_cache && log.server_args.count("disable_radix_cache") &&
        log.server_args.at("disable_radix_cache") == "True") {
      o.disable_radix_cache = true;
      check.applied.push_back("--disable-radix-cache (server_args)");
    }
    if (o.generation.empty() && !log.generation.empty()) {
      o.generation = log.generation;
      check.applied.push_back("--sglang-version " + log.generation + " (the configurator's lines)");
    }
  }
  const PlanResult model = answer_question(cfg, r, q);
  const SglangFit* sg = model.sglang ? &*model.sglang : nullptr;
  constexpr double kGiB = 1073741824.0;
  check.file = path;
  check.vllm_version = "SGLang" + (log.generation.empty() ? std::string() : ", its lines those of " + log.generation);
  check.notes.insert(check.notes.begin(), log.notes.begin(), log.notes.end());
  auto line_of = [&](const char* field) -> std::size_t {
    const auto it = log.lines.find(field);
    return it == log.lines.end() ? 0 : it->second;
  };
  auto row = [&](std::string what, std::string unit, std::optional<double> planned, std::optional<double> logged,
                 std::size_t line, double rel) {
    if (!logged) return;
    LogCheckRow x{std::move(what), std::move(unit), planned, logged, line, false};
    if (planned) {
      const double diff = std::fabs(*planned - *logged);
      x.disagrees = x.unit == "GiB" ? diff > std::max(0.25, rel * std::fabs(*logged)) : diff > rel * std::fabs(*logged);
    }
    check.rows.push_back(std::move(x));
  };
  auto gib_of = [&](std::int64_t bytes) { return std::optional<double>(static_cast<double>(bytes) / kGiB); };
  const std::optional<double> pre = log.profiled_total_gib ? log.profiled_total_gib : log.free_before_load_gib;
  const std::optional<double> after = log.profiled_available_gib ? log.profiled_available_gib : log.free_after_load_gib;
  const std::optional<double> fraction =
      log.server_args.count("mem_fraction_static")
          ? std::optional<double>(std::stod(log.server_args.at("mem_fraction_static")))
          : std::nullopt;
  if (sg && !sg->refused) {
    row("free memory before loading", "GiB", gib_of(sg->free_before_load_bytes), pre, line_of("free_before_load"),
        0.01);
    std::optional<double> loaded;
    if (pre && after) loaded = *pre - *after;
    const SglangTerm* w = nullptr;
    const SglangTerm* g = nullptr;
    for (const auto& t : sg->terms) {
      if (t.id == "weights") w = &t;
      if (t.id == "load_growth") g = &t;
    }
    row("weights and load-time growth", "GiB",
        w && g ? std::optional<double>(static_cast<double>(w->bytes + g->bytes) / kGiB) : std::nullopt,
        log.load_usage_gib ? log.load_usage_gib : loaded, line_of("load_usage"), 0.02);
    row("free after loading", "GiB", gib_of(sg->available_after_load_bytes), after, line_of("free_after_load"), 0.02);
    row("mem_fraction_static", "", sg->mem_fraction_static, fraction, line_of("server_args"), 0.0005);
    row("KV budget (available_bytes)", "GiB", gib_of(sg->budget_bytes), log.available_bytes_gib,
        line_of("memory_calculation"), 0.02);
    row("bytes per full token", "B", sg->bytes_per_full_token, log.bytes_per_full_token, line_of("memory_calculation"),
        0.0005);
    row("SWA slots", "tokens", std::optional<double>(static_cast<double>(sg->pools.swa)),
        log.swa_tokens ? std::optional<double>(static_cast<double>(*log.swa_tokens)) : std::nullopt,
        line_of("pool_sizes"), 0.01);
    row("max_total_num_tokens", "tokens", std::optional<double>(static_cast<double>(sg->pools.full)),
        log.max_total_num_tokens ? std::optional<double>(static_cast<double>(*log.max_total_num_tokens)) : std::nullopt,
        line_of("summary"), 0.01);
    row("max_running_requests", "requests", std::optional<double>(static_cast<double>(sg->max_running_requests)),
        log.max_running_requests ? std::optional<double>(static_cast<double>(*log.max_running_requests)) : std::nullopt,
        line_of("summary"), 0.0);
  }
  // The server args the log ran with, against the plan's.

  bool layout_matches = true;
  if (sg && model.sglang_input) {
    const std::pair<const char*, std::int64_t> mine[] = {{"tp_size", model.sglang_input->tp_size},
                                                         {"dp_size", model.sglang_input->dp_size},
                                                         {"pp_size", model.sglang_input->pp_size},
                                                         {"context_length", sg->context_len}};
    for (const auto& [key, value] : mine) {
      const auto theirs = arg_int(key);
      if (theirs && *theirs != value) {
        if (std::string_view(key) != "context_length") layout_matches = false;
        check.notes.push_back(std::string("the log ran ") + key + " " + std::to_string(*theirs) + ", this plan " +
                              std::to_string(value) + ": pass the log's flags to compare like with like");
      }
    }
  }
  if (!layout_matches) {
    check.notes.push_back("the log's terms are not applied: it ran another parallel layout");
  } else {
    SglangOptions& o = r.sglang;
    if (pre && !o.free_before_load_gib) {
      o.free_before_load_gib = *pre;
      check.applied.push_back("--free-before-load-gib " + gib2(*pre) + " (the log's free memory before loading)");
    }
    if (pre && after && !r.budget.weights_gib) {
      r.budget.weights_gib = std::max(0.0, *pre - *after);
      r.budget.load_overhead_gib = 0.0;  // the loaded figure holds it
      check.applied.push_back("--weights-gib " + gib2(*r.budget.weights_gib) +
                              " --load-overhead-gib 0 (what loading took on the fullest rank)");
    }
  }
  PlanResult out = check.applied.empty() ? model : answer_question(cfg, r, q);
  for (const auto& x : check.rows) {
    if (!x.disagrees) continue;
    out.findings.push_back(Finding{"log.disagrees", Severity::warning,
                                   "--from-log: " + x.what + ": the log " + format_general(*x.logged) +
                                       (x.unit.empty() ? "" : " " + x.unit) + ", this plan's model " +
                                       format_general(*x.planned) + (x.unit.empty() ? "" : " " + x.unit),
                                   "", "the measured terms replace the model's in the plan (see the log check)"});
  }
  out.log_check = std::move(check);
  return out;
}

}  // namespace

PlanResult compute_plan(const PlanOptions& opt) {
  PlanRequest r = opt.request();
  const PlanQuestion q = opt.question(r);
  ModelConfig cfg = load_config(opt.config, model_source(opt));
  if (opt.vllm && opt.vllm->spec_method) check_spec_method(cfg, *opt.vllm->spec_method);
  PlanResult p = !opt.fit.from_log                  ? answer_question(cfg, r, q)
                 : r.engine == EngineChoice::sglang ? plan_from_sglang_log(opt, cfg, r, q)
                                                    : plan_from_log(opt, cfg, r, q);
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
  if (opt.sglang_serve) {
    const SglangServeInput& in = *opt.sglang_serve;
    if (!in.ignored.empty()) {
      std::string list;
      for (const auto& f : in.ignored) list += (list.empty() ? "" : ", ") + f;
      p.findings.push_back(Finding{"sglang.ignored", Severity::info,
                                   in.prog + ": accepted and ignored (they change nothing mla-plan computes): " + list,
                                   "", ""});
    }
    if (!in.from_environment.empty()) {
      std::string list;
      for (const auto& e : in.from_environment) list += (list.empty() ? "" : ", ") + e;
      p.findings.push_back(Finding{"sglang.environment", Severity::info,
                                   in.prog + ": read from the environment as SGLang reads it: " + list, "", ""});
    }
    for (const auto& f : in.not_modelled) {
      p.findings.push_back(Finding{"sglang.not_modelled", Severity::warning,
                                   in.prog + ": " + f + "; mla-plan does not model it: the numbers are without it", "",
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
