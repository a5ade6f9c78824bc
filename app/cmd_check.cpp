// `mla-plan check CONFIG...`: the backend rules for many configs in one run, for CI. Per file a
// pass/fail line and its findings; the exit code is the highest among the files (docs/ci.md).

#include <CLI/CLI.hpp>
#include <cstdio>
#include <limits>
#include <locale>
#include <nlohmann/json.hpp>
#include <ostream>
#include <sstream>

#include "commands.hpp"
#include "json_out.hpp"
#include "mlaplan/error.hpp"
#include "mlaplan/limits.hpp"
#include "mlaplan/number_format.hpp"

namespace mlaplan::cli {

using ojson = nlohmann::ordered_json;

namespace {
const RealRange kGlobalBytesRange{0.0, CheckLimits::max_global_bytes_per_token, false, {}};
}  // namespace

void setup_check(CLI::App& app, CheckOptions& opt) {
  auto* sub = app.add_subcommand("check", "Check configs against the sparse-MLA backend's rules on a target (for CI)");
  sub->add_option("CONFIG", opt.configs, "config.json files or directories holding one")->required();
  sub->add_option("--format", opt.format, "text | json | github (workflow annotations) | markdown (a PR comment)")
      ->check(one_of({"text", "json", "github", "markdown"}));
  sub->add_flag("--json", opt.json, "same as --format json");
  sub->add_flag("--matrix", opt.matrix,
                "for each config: every GPU preset x kv dtype (x TP size) supported, or why not");
  sub->add_option("--dtype", opt.plan.dtype, "model dtype the engine runs (default: the config's)");
  add_real_option(*sub, "--max-global-bytes-per-token", opt.max_global_bytes_per_token,
                  "fail (exit 4) when the global bytes per token exceed this",
                  kGlobalBytesRange)
      ->group("Guards");
  sub->add_option("--guard-accounting", opt.guard_accounting,
                  "accounting the bytes guard compares: pages (the engine's, default) | rows (DeepSeek's)")
      ->check(one_of({"rows", "pages"}))
      ->group("Guards");
  add_int_option(*sub, "--min-concurrency", opt.min_concurrency,
                 "fail (exit 4) when fewer requests at max_model_len fit on the target",
                 IntRange{0, std::numeric_limits<std::int64_t>::max(), {}})
      ->group("Guards");
  bind_target_flags(*sub, opt.plan.target);
  bind_layout_flags(*sub, opt.plan.layout);
  // For the matrix, --tensor-parallel-size takes a list; the layout flag keeps the first value.
  sub->remove_option(sub->get_option("--tensor-parallel-size"));
  add_int_list_option(*sub, "--tensor-parallel-size,--tp", opt.tp_sizes,
                      "TP size; with --matrix a comma-separated list", parallel_size_range())
      ->group("Parallelism");
  bind_capacity_flags(*sub, opt.plan.capacity);
}

namespace {

struct FileResult {
  std::string path;
  int code = 0;
  std::vector<Finding> findings;  ///< errors and warnings (infos are not repeated here)
  std::optional<PlanResult> plan;
};

std::string gh_escape_data(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '%') o += "%25";
    else if (c == '\r') o += "%0D";
    else if (c == '\n') o += "%0A";
    else o += c;
  }
  return o;
}

std::string gh_escape_property(const std::string& s) {
  std::string o;
  for (char c : gh_escape_data(s)) {
    if (c == ':') o += "%3A";
    else if (c == ',') o += "%2C";
    else o += c;
  }
  return o;
}

void apply_guards(const CheckOptions& opt, FileResult& fr) {
  if (!fr.plan || !fr.plan->layout || !fr.plan->capacity) return;
  const auto& a = fr.plan->layout->accounting;
  if (opt.max_global_bytes_per_token) {
    const bool rows = opt.guard_accounting == "rows";
    const auto& measured = rows ? a.global_rows : a.global_pages;
    if (measured.value() > *opt.max_global_bytes_per_token) {
      fr.findings.push_back(Finding{"guard.global_bytes_per_token", Severity::error,
                                    "global bytes per token " + measured.str() + " (" +
                                        (rows ? "rows" : "pages") + " accounting) exceeds the limit " +
                                        format_general(*opt.max_global_bytes_per_token),
                                    {}, {}});
      fr.code = combine_exit_codes(fr.code, exit_code(ErrorKind::does_not_fit));
    }
  }
  if (opt.min_concurrency) {
    const auto& c = *fr.plan->capacity;
    if (c.concurrency_total < *opt.min_concurrency) {
      fr.findings.push_back(Finding{"guard.concurrency", Severity::error,
                                    "concurrency at max_model_len " + std::to_string(c.max_model_len) + " on " +
                                        fr.plan->target.id + " is " + std::to_string(c.concurrency_total) +
                                        ", below the minimum " + std::to_string(*opt.min_concurrency),
                                    {}, {}});
      fr.code = combine_exit_codes(fr.code, exit_code(ErrorKind::does_not_fit));
    }
  }
}

FileResult check_one(const std::string& path, const CheckOptions& opt, PlanOptions plan_opt) {
  FileResult fr;
  fr.path = path;
  plan_opt.config = path;
  try {
    fr.plan = compute_plan(plan_opt);
    fr.code = fr.plan->exit_code;
    for (const auto& f : fr.plan->findings) {
      if (f.severity != Severity::info) fr.findings.push_back(f);
    }
    if (fr.plan->exit_code == exit_code(ErrorKind::does_not_fit)) {
      fr.findings.push_back(Finding{"capacity.does_not_fit", Severity::error, fr.plan->exit_message, {}, {}});
    }
    apply_guards(opt, fr);
  } catch (const Error& e) {
    if (e.kind() == ErrorKind::usage) throw;  // a bad flag is wrong for every file
    fr.code = exit_code(e.kind());
    fr.findings.push_back(Finding{e.kind() == ErrorKind::invalid_config ? "config.invalid" : "error", Severity::error,
                                  e.what(), {}, {}});
  } catch (const std::exception& e) {
    fr.code = exit_code(ErrorKind::internal);
    fr.findings.push_back(Finding{"internal", Severity::error, std::string("internal error: ") + e.what(), {}, {}});
  }
  return fr;
}

int run_matrix(const CheckOptions& opt, const std::vector<std::int64_t>& tps, std::ostream& out) {
  int overall = 0;
  ojson files = ojson::array();
  for (const auto& path : opt.configs) {
    ModelConfig cfg;
    try {
      cfg = load_config(path);
    } catch (const Error& e) {
      if (opt.effective_format() == "json") {
        files.push_back({{"config", path}, {"exit_code", exit_code(e.kind())}, {"error", e.what()}});
      } else {
        out << path << ": " << e.what() << "\n";
      }
      overall = combine_exit_codes(overall, exit_code(e.kind()));
      continue;
    }
    ojson cells = ojson::array();
    std::ostringstream table;
    table.imbue(std::locale::classic());  // no digit grouping from the global locale
    table << path << "\n";
    char line[512];
    std::snprintf(line, sizeof line, "  %-14s %-14s %4s  %s\n", "gpu", "kv dtype", "TP", "result");
    table << line;
    for (const auto& g : gpu_presets()) {
      for (const std::string dtype : {"fp8_ds_mla", "nvfp4_ds_mla"}) {
        if (dtype == "nvfp4_ds_mla" && cfg.family != Family::deepseek_v41) continue;
        for (auto tp : tps) {
          PlanOptions po = opt.plan;
          po.target = TargetFlags{};
          po.target.gpu = std::string(g.id);
          po.layout.options.kv_cache_dtype = dtype;
          po.layout.options.tensor_parallel_size = tp;
          std::string result;
          bool supported = false;
          std::int64_t concurrency = 0;
          int code = 0;
          try {
            const auto r = compute_plan_for(cfg, po);
            code = r.exit_code;
            supported = r.exit_code == 0;
            concurrency = r.capacity ? r.capacity->concurrency_total : 0;
            result = supported ? "supported, " + std::to_string(concurrency) + " requests at max_model_len " +
                                     std::to_string(r.layout->max_model_len)
                               : r.exit_message;
          } catch (const Error& e) {
            code = exit_code(e.kind());
            result = e.what();
          }
          cells.push_back({{"gpu", g.id},
                           {"kv_cache_dtype", dtype},
                           {"tensor_parallel_size", tp},
                           {"supported", supported},
                           {"exit_code", code},
                           {"concurrency", concurrency},
                           {"reason", supported ? "" : result}});
          std::snprintf(line, sizeof line, "  %-14s %-14s %4lld  %s %s\n", std::string(g.id).c_str(), dtype.c_str(),
                        static_cast<long long>(tp), supported ? "yes" : "no ", result.c_str());
          table << line;
        }
      }
    }
    if (opt.effective_format() == "json") {
      files.push_back({{"config", path}, {"exit_code", 0}, {"matrix", std::move(cells)}});
    } else {
      out << table.str() << "\n";
    }
  }
  if (opt.effective_format() == "json") {
    ojson j = {{"schema", "mla-plan/1"}, {"files", std::move(files)}, {"exit_code", overall}};
    out << dump_json(j);
  }
  return overall;
}

}  // namespace

std::string CheckOptions::effective_format() const { return json ? "json" : format; }

std::vector<std::int64_t> CheckOptions::effective_tp_sizes() const {
  return tp_sizes.empty() ? std::vector<std::int64_t>{1} : tp_sizes;
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
  for (std::size_t i = 0; i < tps.size(); ++i) {
    if (tps[i] < 1 || tps[i] > LayoutLimits::max_parallel_size) {
      throw_usage("--tensor-parallel-size[" + std::to_string(i) + "]: '" + std::to_string(tps[i]) +
                  "' is out of range; allowed 1.." +
                  std::to_string(LayoutLimits::max_parallel_size));
    }
  }
  if (opt.matrix && n * ntp > CheckLimits::max_matrix_rows) {
    throw_usage("--matrix: " + std::to_string(n) + " configs x " + std::to_string(ntp) + " TP sizes = " +
                std::to_string(n * ntp) + " rows; allowed 1.." + std::to_string(CheckLimits::max_matrix_rows) +
                " (each row plans every GPU preset and kv dtype)");
  }
  if (opt.max_global_bytes_per_token && !(*opt.max_global_bytes_per_token >= 0 &&
                                          *opt.max_global_bytes_per_token <= CheckLimits::max_global_bytes_per_token)) {
    throw_usage("--max-global-bytes-per-token: '" + format_general(*opt.max_global_bytes_per_token) +
                "' is out of range; allowed " + kGlobalBytesRange.text());
  }
  if (!opt.matrix && tps.size() > 1) throw_usage("--tensor-parallel-size takes several values only with --matrix");
}

int run_check(const CheckOptions& opt, std::ostream& out, std::ostream& err) {
  const std::vector<std::int64_t> tps = opt.effective_tp_sizes();
  if (opt.matrix && opt.effective_format() == "markdown") {
    out << "```text\n";
    const int code = run_matrix(opt, tps, out);
    out << "```\n";
    return code;
  }
  if (opt.matrix) return run_matrix(opt, tps, out);
  PlanOptions plan_opt = opt.plan;
  plan_opt.layout.options.tensor_parallel_size = tps.front();

  int overall = 0;
  std::vector<FileResult> results;
  for (const auto& path : opt.configs) {
    results.push_back(check_one(path, opt, plan_opt));
    overall = combine_exit_codes(overall, results.back().code);
  }
  const std::string format = opt.effective_format();
  if (format == "json") {
    ojson files = ojson::array();
    for (const auto& r : results) {
      ojson f = {{"config", r.path}, {"status", r.code == 0 ? "pass" : "fail"}, {"exit_code", r.code}};
      ojson fs = ojson::array();
      for (const auto& x : r.findings) fs.push_back(finding_json(x));
      f["findings"] = std::move(fs);
      if (r.plan && r.plan->layout) {
        f["family"] = std::string(to_string(r.plan->config.family));
        f["target"] = r.plan->target.id;
        f["kv_cache_dtype"] = std::string(to_string(r.plan->layout->kv_cache_dtype));
        f["global_bytes_per_token"] = {{"rows", r.plan->layout->accounting.global_rows.value()},
                                       {"pages", r.plan->layout->accounting.global_pages.value()}};
        if (r.plan->capacity) {
          f["concurrency"] = r.plan->capacity->concurrency_total;
          f["max_model_len"] = r.plan->capacity->max_model_len;
        }
      }
      files.push_back(std::move(f));
    }
    ojson j = {{"schema", "mla-plan/1"}, {"files", std::move(files)}, {"exit_code", overall}};
    out << dump_json(j);
  } else if (format == "markdown") {
    std::vector<CheckSummaryRow> rows;
    for (const auto& r : results) {
      std::string detail;
      if (r.plan && r.plan->layout) {
        detail = std::string(to_string(r.plan->config.family)) + " on " + r.plan->target.id + ", " +
                 std::string(to_string(r.plan->layout->kv_cache_dtype));
      }
      rows.push_back({r.path, r.code, detail, r.findings});
    }
    out << render_check_markdown(rows);
  } else if (format == "github") {
    for (const auto& r : results) {
      for (const auto& f : r.findings) {
        out << "::" << (f.severity == Severity::error ? "error" : "warning") << " file=" << gh_escape_property(r.path)
            << ",title=" << gh_escape_property("mla-plan " + f.id) << "::" << gh_escape_data(f.message)
            << (f.fix.empty() ? "" : gh_escape_data(" (fix: " + f.fix + ")")) << "\n";
      }
    }
    std::size_t failed = 0;
    for (const auto& r : results) failed += r.code != 0;
    err << "mla-plan check: " << results.size() - failed << " passed, " << failed << " failed\n";
  } else {
    std::size_t failed = 0;
    for (const auto& r : results) {
      failed += r.code != 0;
      out << (r.code == 0 ? "PASS " : "FAIL ") << r.path;
      if (r.code != 0) out << " (exit " << r.code << ")";
      if (r.plan && r.plan->layout) {
        out << "  [" << to_string(r.plan->config.family) << " on " << r.plan->target.id << ", "
            << to_string(r.plan->layout->kv_cache_dtype) << "]";
      }
      out << "\n";
      for (const auto& f : r.findings) {
        out << "  " << to_string(f.severity) << " [" << f.id << "]: " << f.message << "\n";
        if (!f.fix.empty()) out << "    fix: " << f.fix << "\n";
      }
    }
    out << results.size() - failed << " of " << results.size() << " configs passed\n";
  }
  return overall;
}

}  // namespace mlaplan::cli
