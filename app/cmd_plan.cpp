#include <CLI/CLI.hpp>
#include <ostream>

#include "commands.hpp"
#include "mlaplan/error.hpp"
#include "mlaplan/text.hpp"

namespace mlaplan::cli {

void setup_plan(CLI::App& app, PlanOptions& opt) {
  auto* sub = app.add_subcommand("plan", "Map every layer to its attention type and role, plan its caches, what fits, "
                                         "and the decode schedules of a batch");
  sub->add_option("CONFIG", opt.config, "config.json, or a directory holding one")->required();
  sub->add_flag("--json", opt.json, "Print the machine-readable plan (docs/cli.md); same as --format json");
  sub->add_option("--format", opt.format, "text | json | markdown (a summary for a pull-request comment)")
      ->check(one_of({"text", "json", "markdown"}));
  sub->add_flag("--show-records", opt.show_records, "Print every tile-scheduler record in the text output");
  sub->add_option("--dtype", opt.dtype, "model dtype the engine runs (default: the config's)");
  bind_target_flags(*sub, opt.target);
  bind_layout_flags(*sub, opt.layout);
  bind_capacity_flags(*sub, opt.capacity);
  bind_batch_flags(*sub, opt.batch);
}

namespace {

/// Everything of a plan but r.config and r.topology, from `config` and `topology` (which may be
/// r's own).
void plan_into(PlanResult& r, const ModelConfig& config, const Topology& topology, const PlanOptions& opt) {
  r.target = resolve_target(opt.target.request());

  const LayoutOptions layout_options = opt.layout.resolved(opt.batch.options.spec_tokens);
  r.rules = evaluate_rules(config, topology, r.target, RuleOptions{opt.dtype, layout_options});
  for (const auto& rr : r.rules) {
    if (rr.finding.severity == Severity::error && rr.kind == ErrorKind::usage) throw_usage(rr.finding.message);
  }
  r.findings = config.findings;
  for (const auto& rr : r.rules) r.findings.push_back(rr.finding);

  r.layout = plan_layout(config, topology, r.target, layout_options, Strictness::lenient);
  r.capacity = plan_capacity(*r.layout, opt.capacity.options);
  r.batch = make_decode_batch(opt.batch.options, r.layout->max_model_len,
                              r.layout->max_model_len_default ? MaxModelLenSource::config_default
                                                              : MaxModelLenSource::flag);
  r.schedules = plan_decode_schedules(config, topology, *r.layout, r.batch);

  r.exit_code = rules_exit_code(r.rules);
  for (const auto& rr : r.rules) {
    if (rr.finding.severity == Severity::error) {
      r.exit_message = rr.finding.message + (rr.finding.fix.empty() ? "" : " (fix: " + rr.finding.fix + ")");
      break;
    }
  }
  if (r.exit_code == 0 && !r.capacity->fits) {
    r.exit_code = exit_code(ErrorKind::does_not_fit);
    r.exit_message = r.capacity->message;
  }
}

}  // namespace

PlanResult compute_plan_for(ModelConfig config, const PlanOptions& opt) {
  PlanResult r;
  r.config = std::move(config);
  r.topology = build_topology(r.config);
  plan_into(r, r.config, r.topology, opt);
  return r;
}

PlanResult compute_plan_on(const ModelConfig& config, const Topology& topology, const PlanOptions& opt) {
  PlanResult r;
  plan_into(r, config, topology, opt);
  return r;
}

PlanResult compute_plan(const PlanOptions& opt) { return compute_plan_for(load_config(opt.config), opt); }

int run_plan(const PlanOptions& opt, std::ostream& out, std::ostream& err) {
  const PlanResult r = compute_plan(opt);
  const std::string format = opt.json ? "json" : opt.format;
  out << (format == "json"       ? render_plan_json(r)
          : format == "markdown" ? render_plan_markdown(r)
                                 : printable_lines(render_plan_text(r, opt.show_records)));
  if (r.exit_code != 0) err << "mla-plan: error: " << printable(r.exit_message) << "\n";
  return r.exit_code;
}

}  // namespace mlaplan::cli
