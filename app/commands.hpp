#pragma once
// Subcommands of mla-plan: one options struct each, a setup function that binds its flags to a
// CLI11 subcommand, and a run function that does the work and returns the exit code.

#include <iosfwd>
#include <string>
#include <vector>

#include "mlaplan/config.hpp"
#include "mlaplan/topology.hpp"

namespace CLI {
class App;
}

namespace mlaplan::cli {

enum class OutputFormat { text, json };

/// Everything `plan` computed for one config, ready to print.
struct PlanResult {
  ModelConfig config;
  Topology topology;
};

// ---- plan ----
struct PlanOptions {
  std::string config;
  bool json = false;
};
void setup_plan(CLI::App& app, PlanOptions& opt);
int run_plan(const PlanOptions& opt, std::ostream& out, std::ostream& err);

/// Computes the plan of one config (throws mlaplan::Error).
PlanResult compute_plan(const PlanOptions& opt);

// ---- output ----
std::string render_plan_json(const PlanResult& r);
std::string render_plan_text(const PlanResult& r);

}  // namespace mlaplan::cli
