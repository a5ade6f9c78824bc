#include <CLI/CLI.hpp>
#include <ostream>

#include "commands.hpp"

namespace mlaplan::cli {

void setup_plan(CLI::App& app, PlanOptions& opt) {
  auto* sub = app.add_subcommand("plan", "Map every layer to its attention type and role, and plan its caches");
  sub->add_option("CONFIG", opt.config, "config.json, or a directory holding one")->required();
  sub->add_flag("--json", opt.json, "Print the machine-readable plan (docs/cli.md)");
}

PlanResult compute_plan(const PlanOptions& opt) {
  PlanResult r;
  r.config = load_config(opt.config);
  r.topology = build_topology(r.config);
  return r;
}

int run_plan(const PlanOptions& opt, std::ostream& out, std::ostream&) {
  const PlanResult r = compute_plan(opt);
  out << (opt.json ? render_plan_json(r) : render_plan_text(r));
  return 0;
}

}  // namespace mlaplan::cli
