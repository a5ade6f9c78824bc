// `mla-plan report CONFIG -o FILE.svg|FILE.html`: the plan drawn (docs/report.md). Takes the
// flags of `plan`, writes the report file, then exits as `plan` would.

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>

#include "cli/cli.hpp"
#include "cli/commands.hpp"
#include "flags/flag_values.hpp"
#include "mlaplan/base/error.hpp"
#include "mlaplan/base/text.hpp"
#include "output/output.hpp"
#include "report/report.hpp"
#include "output/json_out.hpp"

namespace mlaplan::cli {

void setup_report(CLI::App& app, ReportOptions& opt) {
  CLI::App* sub = &app;  // created by the command table (cli.cpp) with its name and summary
  sub->add_option(
         "CONFIG", opt.plan.config,
         "config.json, a model directory, a Hugging Face cache directory, or ORG/NAME in the local Hugging Face cache")
      ->required();
  sub->add_option("-o,--output", opt.output,
                  "the report file: FILE.svg (one drawing) or FILE.html (drawings and tables)")
      ->required();
  sub->add_option("--verify-json", opt.verify_json, "add the results of `mla-plan verify --json` saved in this file");
  sub->add_option("--bench-json", opt.bench_json, "add the results of `mla-plan bench --json` saved in this file");
  add_model_dtype_option(*sub, opt.plan.dtype);
  bind_target_flags(*sub, opt.plan.target);
  bind_layout_flags(*sub, opt.plan.layout);
  bind_fit_flags(*sub, opt.plan.fit);
  bind_batch_flags(*sub, opt.plan.batch);
  bind_search_flags(*sub, opt.plan);
  bind_layout_given(*sub, opt.plan.layout_given);
}

namespace {

enum class ReportKind { svg, html };

ReportKind report_kind(const std::string& output) {
  std::string ext = std::filesystem::path(output).extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(),
                 [](char c) { return static_cast<char>(std::tolower(static_cast<unsigned char>(c))); });
  if (ext == ".svg") return ReportKind::svg;
  if (ext == ".html") return ReportKind::html;
  throw_usage("-o: " + mlaplan::quoted(output) + " has " +
              (ext.empty() ? std::string("no extension") : "the extension " + mlaplan::quoted(ext)) +
              "; the report is written as .svg or .html (e.g. -o report.svg)");
}

}  // namespace

void validate_report(const ReportOptions& opt) { (void)report_kind(opt.output); }

int run_report(const ReportOptions& opt, std::ostream& out, std::ostream& err) {
  const ReportKind kind = report_kind(opt.output);
  std::vector<ResultFile> extras;
  if (opt.verify_json) extras.push_back(read_result_json("--verify-json", "GPU verification", *opt.verify_json));
  if (opt.bench_json) extras.push_back(read_result_json("--bench-json", "Benchmarks", *opt.bench_json));

  PlanOptions plan_opt = opt.plan;
  plan_opt.batch.read_files();
  const PlanResult r = compute_plan(plan_opt);
  const std::string text = kind == ReportKind::svg ? render_report_svg(r, extras) : render_report_html(r, extras);

  write_file_whole(opt.output, text, "-o");
  out << "mla-plan: wrote " << printable(opt.output, kQuotedPathMaxBytes) << " ("
      << (kind == ReportKind::svg ? "SVG" : "HTML") << ", " << text.size() << " bytes)\n";
  if (r.exit_code != 0) err << "mla-plan: error: " << printable(r.exit_message) << "\n";
  return r.exit_code;
}

const CommandRow& report_command() {
  static const CommandRow row = command_row<ReportOptions, setup_report, run_report, validate_report>(
      "report",
      "Draw the plan as a self-contained SVG or HTML report: layer map, memory, decode schedules, findings "
      "(docs/report.md)");
  return row;
}

}  // namespace mlaplan::cli
