#pragma once
// The sparse-MLA backend's capability and dtype rules (docs/rules.md): every rule evaluated for a
// config on a target, each result a finding with a stable id, a severity, a message naming the
// value and what is allowed, and a fix where one exists.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "mlaplan/config.hpp"
#include "mlaplan/error.hpp"
#include "mlaplan/layout.hpp"
#include "mlaplan/target.hpp"
#include "mlaplan/topology.hpp"

namespace mlaplan {

/// One rule of the catalogue (for docs, `check --list-rules` and tests).
struct RuleInfo {
  std::string_view id;
  std::string_view summary;
};
/// Every rule id the engine can report, in evaluation order.
const std::vector<RuleInfo>& rule_catalogue();

/// What the rules are evaluated against besides the config: the model dtype the engine would run
/// (the config's unless overridden) and the layout flags.
struct RuleOptions {
  std::optional<std::string> dtype;  ///< --dtype; default: the config's dtype
  LayoutOptions layout;
};

/// A finding with the exit-code kind it carries when its severity is error.
struct RuleResult {
  Finding finding;
  ErrorKind kind = ErrorKind::unsupported;
};

/// Evaluates every rule. Never throws for user values: bad flag values come back as usage errors.
std::vector<RuleResult> evaluate_rules(const ModelConfig& cfg, const Topology& topo, const Target& target,
                                       const RuleOptions& options);

/// The exit code of a set of results: 0 when no error, else the highest kind among the errors.
int rules_exit_code(const std::vector<RuleResult>& results);

}  // namespace mlaplan
