#include <CLI/CLI.hpp>
#include <ostream>

#include "cli/cli.hpp"
#include "cli/commands.hpp"
#include "mlaplan/base/error.hpp"
#include "mlaplan/base/text.hpp"

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

PlanResult compute_plan(const PlanOptions& opt) { return make_plan(opt.config, opt.request()); }

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
