// `mla-plan check CONFIG...`: the backend rules for many configs in one run, for CI. Per file a
// pass/fail line and its findings; the exit code is the most severe among the files (docs/ci.md).

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <locale>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <sstream>

#include "output/backend_text.hpp"
#include "cli/cli.hpp"
#include "cli/commands.hpp"
#include "flags/flag_values.hpp"
#include "commands/check_inputs.hpp"
#include "output/check_output.hpp"
#include "output/error_json.hpp"
#include "output/json_out.hpp"
#include "mlaplan/base/error.hpp"
#include "mlaplan/plan/launch.hpp"
#include "mlaplan/plan/search.hpp"
#include "mlaplan/base/input_file.hpp"
#include "mlaplan/base/json_locate.hpp"
#include "mlaplan/base/limits.hpp"
#include "mlaplan/plan/matrix.hpp"
#include "mlaplan/base/number_format.hpp"
#include "mlaplan/model/safetensors.hpp"
#include "mlaplan/base/text.hpp"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace mlaplan::cli {

namespace {
const RealRange kGlobalBytesRange{0.0, CheckLimits::max_global_bytes_per_token, false, {}};
}  // namespace

void setup_check(CLI::App& app, CheckOptions& opt) {
  CLI::App* sub = &app;  // created by the command table (cli.cpp) with its name and summary
  sub->add_option("CONFIG", opt.configs,
                  "config.json files, model directories, folders of configs (every *.json that is a model config) "
                  "or quoted globs")
      ->required();
  sub->add_flag("--recursive,-r", opt.recursive, "search the subdirectories of a folder of configs too");
  sub->add_option("--format", opt.format, "text | json | github (workflow annotations) | markdown (a PR comment)")
      ->check(one_of({"text", "json", "github", "markdown"}));
  sub->add_flag("--json", opt.json, "same as --format json");
  sub->add_flag("--matrix", opt.matrix,
                "for each config: every GPU preset x kv dtype (x TP size) supported, or why not");
  add_model_dtype_option(*sub, opt.plan.dtype);
  add_real_option(*sub, "--max-global-bytes-per-token", opt.guards.max_global_bytes_per_token,
                  "fail (exit 4) when the global bytes per token exceed this", kGlobalBytesRange)
      ->group("Guards");
  sub->add_option("--guard-accounting", opt.guard_accounting,
                  "accounting the bytes guard compares: pages (the engine's, default) | rows (DeepSeek's)")
      ->check(one_of({"rows", "pages"}))
      ->group("Guards");
  add_int_option(*sub, "--min-concurrency", opt.guards.min_concurrency,
                 "fail (exit 4) when fewer requests at max_model_len fit on the target",
                 IntRange{0, std::numeric_limits<std::int64_t>::max(), {}})
      ->group("Guards");
  sub->add_flag("--require-batch-fits", opt.guards.batch_fits,
                "fail (exit 4) when the decode batch (--batch, --context-len, --context-lens) does not fit the KV "
                "cache")
      ->group("Guards");
  add_int_option(*sub, "--prefix-hit-prompt-len", opt.guards.prefix_hit_prompt_len,
                 "fail (exit 4) when a prompt of this many tokens cannot hit vLLM's prefix cache",
                 IntRange{1, ConfigLimits::max_positions, {}})
      ->group("Guards");
  add_int_option(*sub, "--min-offload-tokens", opt.guards.min_offload_tokens,
                 "fail (exit 4) when the host tier of --kv-offloading-size holds fewer tokens of history",
                 IntRange{1, std::numeric_limits<std::int64_t>::max(), {}})
      ->group("Guards");
  sub->add_flag("--require-prefill-fits", opt.guards.prefill_fits,
                "fail (exit 4) when the sparse indexer's transient prefill peak at max_model_len exceeds what the "
                "budget leaves of the GPU")
      ->group("Guards");
  add_int_option(*sub, "--require-prompt-len", opt.guards.prompt_len,
                 "fail (exit 4) unless a prompt of N tokens prefills within what the budget leaves of the GPU",
                 IntRange{1, ConfigLimits::max_positions, {}})
      ->group("Guards");
  bind_target_flags(*sub, opt.plan.target);
  sub->get_option("--gpu")->description(
      "target GPU preset, or several comma-separated (h200,b200): one verdict per GPU (mla-plan gpus lists them; "
      "default h200)");
  bind_layout_flags(*sub, opt.plan.layout);
  // For the matrix, --tensor-parallel-size takes a list; the layout flag keeps the first value.
  sub->remove_option(sub->get_option("--tensor-parallel-size"));
  add_int_list_option(*sub, "--tensor-parallel-size,--tp", opt.tp_sizes,
                      "TP size; with --matrix a comma-separated list", parallel_size_range())
      ->group("Parallelism");
  sub->remove_option(sub->get_option("--data-parallel-size"));
  add_int_list_option(*sub, "--data-parallel-size,--dp", opt.dp_sizes, "DP size; with --matrix a comma-separated list",
                      parallel_size_range())
      ->group("Parallelism");
  bind_fit_flags(*sub, opt.plan.fit);
  bind_batch_flags(*sub, opt.plan.batch);
  bind_engine_flags(*sub, opt.plan.engine);
  add_real_option(*sub, "--require-margin-gib", opt.guards.margin_gib,
                  "fail (exit 4) when the fit has less than this many GiB to spare on its limiting GPU (fit.margin)",
                  RealRange{0.0, TargetLimits::max_memory_gib, false, "GiB"})
      ->group("Guards");
  bind_search_flags(*sub, opt.plan, /*with_min_concurrency=*/false);
  bind_layout_given(*sub, opt.plan.layout_given);
}

namespace {

/// The config.json that `path` (a file or a model directory) reads, or "" when a directory has
/// none that can be named.
std::string config_file_of(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_directory(path, ec)) return path;
  try {
    return (std::filesystem::path(resolve_model_dir(path)) / "config.json").string();
  } catch (const Error&) {
    return "";
  }
}

/// fr.locations from fr.config_file: the text read once (only when a finding has a pointer), each
/// pointer located in it; a config's parse error at the line and column it names.
void locate_findings(CheckFileResult& fr) {
  fr.locations.assign(fr.findings.size(), std::nullopt);
  if (fr.config_file.empty()) return;
  std::optional<std::string> text;
  for (std::size_t i = 0; i < fr.findings.size(); ++i) {
    const Finding& f = fr.findings[i];
    if (f.id == "config.invalid") {
      fr.locations[i] = error_json::parse_error_location(f.message, fr.config_file);
      if (fr.locations[i]) continue;
      // A field's error ("FILE: /compress_ratios/3: ..."): where that field's value is.
      const auto field = error_json::config_field_of(f.message);
      if (!field || field->first != printable(fr.config_file)) continue;
      if (!text) {
        try {
          text = read_input_file(fr.config_file, config_file_rules());
        } catch (const Error&) {
          return;
        }
      }
      fr.locations[i] = locate_json_value(*text, field->second);
    } else if (!f.path.empty()) {
      if (!text) {
        try {
          text = read_input_file(fr.config_file, config_file_rules());
        } catch (const Error&) {
          return;  // gone since it was planned: no locations
        }
      }
      fr.locations[i] = locate_json_value(*text, f.path);
    }
  }
}

/// CheckFileResult::fit of a fit.
std::string fit_answer(const Fit& f) {
  if (f.refused) return "refused";
  if (!f.decided) return "not_decided";
  return f.fits ? "fits" : "does_not_fit";
}

/// The request of one check: plan's flags, the guards, no decode schedules.
PlanRequest check_request(const CheckOptions& opt, const PlanOptions& plan_opt) {
  PlanRequest req = plan_opt.request();
  req.schedules = false;
  req.guards = opt.guards;
  req.guards.guard_rows = opt.guard_accounting == "rows";
  return req;
}

/// One file's result. A flag value that is wrong for this file (a bound from its config, such as
/// --max-model-len past its max_position_embeddings) stops the run when `first` (nothing is printed
/// yet: a flag wrong for every file is one error line), and is this file's failure (exit 1)
/// otherwise, so that the results already printed stay a whole document.
CheckFileResult check_one(const std::string& path, const CheckOptions& opt, PlanOptions plan_opt, bool first) {
  const bool locate = opt.effective_format() == "github";
  CheckFileResult fr;
  fr.path = path;
  plan_opt.config = path;
  try {
    PlanResult plan;
    const bool recommend =
        !opt.matrix &&
        (plan_opt.gpus || (!plan_opt.layout_given.any() && opt.tp_sizes.empty() && opt.dp_sizes.empty()));
    if (recommend) {
      // No layout flag: the layout the search of one node recommends (or of --gpus).
      PlanRequest req = check_request(opt, plan_opt);
      PlanQuestion q = plan_opt.question(req);
      q.extras = false;
      plan = answer_question(load_config(path, model_source(plan_opt)), req, q);
    } else {
      plan = make_plan(load_config(path, model_source(plan_opt)), check_request(opt, plan_opt));
    }
    fr.recommended = recommend && plan.search && !plan.search->ranked.empty();
    if (plan.launch) fr.launch = plan.launch->argv;
    fr.code = plan.exit_code;
    fr.config_file = plan.config.file;
    for (const auto& f : plan.findings) {
      if (f.severity != Severity::info) fr.findings.push_back(f);
    }

    if (plan.layout) {
      fr.planned = true;
      fr.family = std::string(to_string(plan.config.family));
      fr.target = plan.target.id;
      fr.kv_cache_dtype = std::string(to_string(plan.layout->kv_cache_dtype));
      const auto& pl = plan.layout->parallel;
      fr.layout =
          "TP " + std::to_string(pl.tensor_parallel_size) +
          (pl.data_parallel_size > 1 ? " x DP " + std::to_string(pl.data_parallel_size) : "") +
          (pl.pipeline_parallel_size > 1 ? " x PP " + std::to_string(pl.pipeline_parallel_size) : "") +
          (pl.decode_context_parallel_size > 1 ? " x DCP " + std::to_string(pl.decode_context_parallel_size) : "") +
          (pl.enable_expert_parallel ? ", EP" : "") +
          (pl.engram == EngramPlacement::gpu && !plan.config.checkpoint.engram_layer_ids.empty() ? ", Engram on GPU"
                                                                                                 : "");
      fr.global_rows = plan.layout->accounting.global_rows.value();
      fr.global_pages = plan.layout->accounting.global_pages.value();
      if (plan.engine == EngineChoice::sglang && plan.sglang && plan.sglang_input) {
        // SGLang's answer: whether its server starts, and what its pools hold.
        const SglangFit& sg = *plan.sglang;
        fr.fit = sg.refused ? "refused" : !sg.decided ? "not_decided" : sg.fits ? "fits" : "does_not_fit";
        if (plan.sglang_launch) fr.launch = plan.sglang_launch->argv;
        if (sg.fits) {
          fr.concurrency = sg.served_requests();
          fr.kv_tokens = sg.total_tokens;
          fr.max_model_len = sg.context_len;
          fr.weights_bytes = plan.sglang_input->weights_bytes;
        }
      } else if (plan.fit) {
        fr.fit = fit_answer(*plan.fit);
      }
      if (plan.engine != EngineChoice::sglang && plan.fit && plan.fit->decided) {
        fr.concurrency = plan.fit->total_concurrency;
        fr.kv_tokens = plan.fit->total_kv_tokens;
        fr.max_model_len = plan.layout->max_model_len;
        fr.weights_bytes = plan.fit->placement.max_rank_bytes;
        if (plan.fit->margin) fr.spare_bytes = plan.fit->margin->spare_bytes;
      }
    }
  } catch (const Error& e) {
    if (e.kind() == ErrorKind::usage && first) throw;
    fr.code = exit_code(e.kind());
    const char* id = e.kind() == ErrorKind::invalid_config ? "config.invalid"
                     : e.kind() == ErrorKind::usage        ? "flag.invalid"
                                                           : "error";
    Finding f{id, Severity::error, e.what(), {}, {}};
    // An invalid config's error about a field ("FILE: /compress_ratios/3: ..."): its JSON pointer,
    // as the rules' findings carry theirs (--format json's path).
    if (e.kind() == ErrorKind::invalid_config) {
      if (const auto field = error_json::config_field_of(f.message)) f.path = field->second;
    }
    fr.findings.push_back(std::move(f));
    if (e.kind() == ErrorKind::invalid_config && locate) fr.config_file = config_file_of(path);
  } catch (const std::exception& e) {
    fr.code = exit_code(ErrorKind::internal);
    fr.findings.push_back(Finding{"internal", Severity::error, std::string("internal error: ") + e.what(), {}, {}});
  }
  if (locate) locate_findings(fr);
  return fr;
}

/// A config of the matrix as read before anything is planned: the config, or why it could not
/// be read.
struct MatrixInput {
  std::string path;
  std::optional<ModelConfig> config;
  std::optional<Error> error;
};

/// Reads every config of the matrix, holding each parsed config (a few bytes per layer) until
/// it is planned, and counts the layer rows (layers x TP sizes) the run would plan: past
/// CheckLimits::max_matrix_layer_rows it stops with a usage error before anything is printed.
std::vector<MatrixInput> read_matrix_inputs(const CheckOptions& opt, const std::vector<check_inputs::Input>& given,
                                            std::int64_t tp_sizes) {
  std::vector<MatrixInput> inputs;
  inputs.reserve(given.size());
  std::int64_t layers = 0;
  for (const auto& [path, error] : given) {
    MatrixInput in{path, std::nullopt, std::nullopt};
    if (!error.empty()) {
      in.error = Error(ErrorKind::invalid_config, error);
    } else {
      try {
        in.config = load_config(path, model_source(opt.plan));
      } catch (const Error& e) {
        in.error = e;
      }
    }
    if (in.config) {
      layers += in.config->total_layers();
      if (layers * tp_sizes > CheckLimits::max_matrix_layer_rows) {
        const std::size_t n = inputs.size() + 1;
        const std::string where = mlaplan::quoted(path, std::string::npos);
        throw_usage("--matrix: " + std::to_string(layers) + " layers (backbone + draft) in " +
                    (n == 1 ? where : "the first " + std::to_string(n) + " configs (up to " + where + ")") + " x " +
                    std::to_string(tp_sizes) + " TP size" + (tp_sizes == 1 ? "" : "s") + " = " +
                    std::to_string(layers * tp_sizes) + " layer rows; allowed up to " +
                    std::to_string(CheckLimits::max_matrix_layer_rows) +
                    " in one run (each layer row is planned on every GPU preset and kv dtype): split the configs "
                    "over several runs or give fewer TP sizes");
      }
    }
    inputs.push_back(std::move(in));
  }
  return inputs;
}

/// One config's matrix: every GPU preset x kv dtype x TP size. Prints it (text) or adds it to
/// `json` as it is done.
int matrix_of(const MatrixInput& in, const CheckOptions& opt,
              const std::vector<std::pair<std::int64_t, std::int64_t>>& layouts, std::ostream& out,
              JsonFilesStream* json) {
  const std::string& path = in.path;
  if (in.error) {
    print_matrix_error(path, *in.error, out, json);
    return exit_code(in.error->kind());
  }
  const ModelConfig& cfg = *in.config;
  std::vector<MatrixLayout> matrix_layouts;
  for (const auto& [tp, dp] : layouts) matrix_layouts.push_back(MatrixLayout{tp, dp});
  // --gpu h200,b200 and --kv-cache-dtype narrow the matrix; the other layout flags apply to every cell.
  MatrixScope scope;
  if (opt.plan.target.gpu) scope.gpus = split_list_value("--gpu", *opt.plan.target.gpu);
  if (opt.plan.layout.options.kv_cache_dtype != "auto")
    scope.kv_cache_dtypes = {opt.plan.layout.options.kv_cache_dtype};
  PlanRequest base = check_request(opt, opt.plan);
  base.target = TargetRequest{};
  const ConfigMatrix m = plan_matrix(cfg, base, matrix_layouts, scope);
  print_config_matrix(path, cfg.family, m, opt.plan.fit.enable_expert_parallel, out, json);
  return m.exit_code;
}

/// check --matrix: every config read (and the layer rows counted), then each config's matrix
/// printed as it is done.
int run_matrix(const CheckOptions& options, std::ostream& out) {
#if defined(__GLIBC__)
  // Each cell makes a plan of a few MB and drops it. glibc maps blocks past its threshold on their
  // own and unmaps them when freed, and gives the free top of its heap back to the kernel, then
  // takes it all back as fresh zeroed pages for the next cell: with the largest configs the
  // matrix spent as long in page faults as in planning. Blocks up to 32 MiB come from the heap,
  // and up to 64 MiB of it stays with the process between cells.
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 64 << 20);
#endif
  CheckOptions opt = options;
  opt.plan.batch.read_files();  // once for every cell
  const auto layouts = opt.layouts();
  const check_inputs::Inputs given = check_inputs::expand(opt.configs, opt.recursive);
  std::vector<MatrixInput> inputs = read_matrix_inputs(opt, given.inputs, static_cast<std::int64_t>(layouts.size()));
  const std::string format = opt.effective_format();
  const bool as_json = format == "json";
  JsonFilesStream json(out);
  if (format == "markdown") out << "```text\n";  // the text tables in a code block
  int overall = 0;
  for (auto& in : inputs) {
    overall = combine_exit_codes(overall, matrix_of(in, opt, layouts, out, as_json ? &json : nullptr));
    in.config.reset();  // planned: its memory goes back
    out.flush();
    if (!out) return overall;  // the output is gone: plan nothing more (the caller reports it)
  }
  if (as_json) {
    json.close(overall, given.skipped);
  } else {
    for (const auto& sk : given.skipped) out << "SKIP " << printable(sk.path) << " (" << printable(sk.reason) << ")\n";
  }
  if (format == "markdown") out << "```\n";
  return overall;
}

}  // namespace

std::string CheckOptions::effective_format() const { return json ? "json" : format; }

std::vector<std::int64_t> CheckOptions::effective_tp_sizes() const {
  return tp_sizes.empty() ? std::vector<std::int64_t>{1} : tp_sizes;
}

std::vector<std::int64_t> CheckOptions::effective_dp_sizes() const {
  return dp_sizes.empty() ? std::vector<std::int64_t>{1} : dp_sizes;
}

std::vector<std::pair<std::int64_t, std::int64_t>> CheckOptions::layouts() const {
  std::vector<std::pair<std::int64_t, std::int64_t>> out;
  for (auto tp : effective_tp_sizes()) {
    for (auto dp : effective_dp_sizes()) out.emplace_back(tp, dp);
  }
  return out;
}

void validate_check(const CheckOptions& opt) {
  const std::vector<std::int64_t> tps = opt.effective_tp_sizes();
  const auto n = static_cast<std::int64_t>(opt.configs.size());
  if (n > CheckLimits::max_configs) {
    throw_usage("CONFIG: " + std::to_string(n) + " configs given; allowed 1.." +
                std::to_string(CheckLimits::max_configs) + " in one run (split the list over several runs)");
  }
  const auto ntp = static_cast<std::int64_t>(tps.size());
  if (ntp > CheckLimits::max_tp_sizes) {
    throw_usage("--tensor-parallel-size has " + std::to_string(ntp) + " values; allowed 1.." +
                std::to_string(CheckLimits::max_tp_sizes));
  }
  const auto ndp = static_cast<std::int64_t>(opt.effective_dp_sizes().size());
  if (ndp > CheckLimits::max_tp_sizes) {
    throw_usage("--data-parallel-size has " + std::to_string(ndp) + " values; allowed 1.." +
                std::to_string(CheckLimits::max_tp_sizes));
  }
  for (std::size_t i = 0; i < tps.size(); ++i) {
    if (tps[i] < 1 || tps[i] > LayoutLimits::max_parallel_size) {
      throw_usage("--tensor-parallel-size[" + std::to_string(i) + "]: '" + std::to_string(tps[i]) +
                  "' is out of range; allowed 1.." + std::to_string(LayoutLimits::max_parallel_size));
    }
  }
  if (opt.matrix && n * ntp * ndp > CheckLimits::max_matrix_rows) {
    throw_usage("--matrix: " + std::to_string(n) + " configs x " + std::to_string(ntp) + " TP sizes x " +
                std::to_string(ndp) + " DP sizes = " + std::to_string(n * ntp * ndp) + " rows; allowed 1.." +
                std::to_string(CheckLimits::max_matrix_rows) + " (each row plans every GPU preset and kv dtype)");
  }
  if (opt.guards.max_global_bytes_per_token &&
      !(*opt.guards.max_global_bytes_per_token >= 0 &&
        *opt.guards.max_global_bytes_per_token <= CheckLimits::max_global_bytes_per_token)) {
    throw_usage("--max-global-bytes-per-token: '" + format_general(*opt.guards.max_global_bytes_per_token) +
                "' is out of range; allowed " + kGlobalBytesRange.text());
  }
  if (opt.matrix) {
    // The matrix reports every GPU preset, kv dtype and layout of each config; a guard judges one
    // plan, so a guard given with --matrix is refused rather than ignored.
    PlanGuards given = opt.guards;
    given.guard_rows = opt.guard_accounting == "rows";
    const std::vector<std::string> guards = given_guard_flags(given);
    if (!guards.empty()) {
      throw_usage(join_bounded(guards) + (guards.size() == 1 ? " is a guard" : " are guards") +
                  " of one plan and --matrix applies none (its cells cover every GPU preset and kv dtype): run "
                  "check without --matrix, with --gpu and --tensor-parallel-size, to apply " +
                  (guards.size() == 1 ? "it" : "them"));
    }
  }
  if (opt.plan.target.gpu) {
    // --gpu h200,b200: every preset known before any file is read (check: one verdict per GPU).
    const std::vector<std::string> gpus = split_list_value("--gpu", *opt.plan.target.gpu);
    if (static_cast<std::int64_t>(gpus.size()) > CheckLimits::max_tp_sizes) {
      throw_usage("--gpu has " + std::to_string(gpus.size()) + " values; allowed 1.." +
                  std::to_string(CheckLimits::max_tp_sizes));
    }
    for (const auto& g : gpus) (void)find_gpu_preset(g);
    if (gpus.size() > 1 && opt.plan.target.arch) {
      throw_usage("--gpu takes several values only without --arch (--arch describes one GPU)");
    }
  }
  if (!opt.matrix && tps.size() > 1) throw_usage("--tensor-parallel-size takes several values only with --matrix");
  if (!opt.matrix && ndp > 1) throw_usage("--data-parallel-size takes several values only with --matrix");
}

int run_check(const CheckOptions& opt, std::ostream& out, std::ostream& err) {
  if (opt.matrix) return run_matrix(opt, out);
  PlanOptions plan_opt = opt.plan;
  plan_opt.batch.read_files();  // once for every file
  plan_opt.layout.options.tensor_parallel_size = opt.effective_tp_sizes().front();
  plan_opt.layout.options.data_parallel_size = opt.effective_dp_sizes().front();

  // Files, model directories, folders of configs and quoted globs, as check_inputs.hpp says.
  const check_inputs::Inputs given = check_inputs::expand(opt.configs, opt.recursive);
  // --gpu h200,b200: one verdict per GPU for every file, in that order.
  std::vector<std::optional<std::string>> gpus{opt.plan.target.gpu};
  if (opt.plan.target.gpu) {
    gpus.clear();
    for (auto& g : split_list_value("--gpu", *opt.plan.target.gpu)) gpus.emplace_back(std::move(g));
  }

  // Each file's result is printed as soon as it is checked, in every format.
  CheckPrinter printer(opt.effective_format(), out, err);
  int overall = 0;
  bool first = true;
  for (const auto& [path, error] : given.inputs) {
    for (const auto& gpu : gpus) {
      CheckFileResult r;
      if (!error.empty()) {
        // An argument that gives no config (a pattern without matches, a folder without one).
        r.path = path;
        r.code = exit_code(ErrorKind::invalid_config);
        r.findings.push_back(Finding{"config.invalid", Severity::error, error, {}, {}});
      } else {
        plan_opt.target.gpu = gpu;
        r = check_one(path, opt, plan_opt, first);
        r.gpu_count = gpus.size();
      }
      first = false;
      overall = combine_exit_codes(overall, r.code);
      printer.file(r);
      out.flush();
      if (!out) return overall;  // the output is gone: check nothing more (the caller reports it)
      // A file that cannot be read fails once, not once per GPU.
      if (!r.planned && r.code == exit_code(ErrorKind::invalid_config)) break;
    }
  }
  printer.finish(overall, given.skipped);
  return overall;
}

const CommandRow& check_command() {
  static const CommandRow row = command_row<CheckOptions, setup_check, run_check, validate_check>(
      "check", "Check configs against the sparse-MLA backend's rules on a target (for CI)");
  return row;
}

}  // namespace mlaplan::cli
