#pragma once
// Helpers the rule and backend tests share: the bundled configs, a preset target, every rule of
// a config on a target, and lookups in the results.

#include <optional>
#include <string>
#include <vector>

#include "mlaplan/config.hpp"
#include "mlaplan/rules.hpp"
#include "mlaplan/target.hpp"
#include "mlaplan/topology.hpp"

namespace testing_rules {

/// Path of a bundled config (configs/NAME).
inline std::string config_path(const std::string& name) { return std::string(MLAPLAN_SOURCE_DIR) + "/configs/" + name; }

inline mlaplan::ModelConfig released(const std::string& name) { return mlaplan::load_config(config_path(name)); }

inline mlaplan::Target gpu(const std::string& id) {
  mlaplan::TargetRequest r;
  r.gpu = id;
  return mlaplan::resolve_target(r);
}

inline std::vector<mlaplan::RuleResult> eval(const mlaplan::ModelConfig& cfg, const mlaplan::Target& t,
                                             mlaplan::RuleOptions o = {}) {
  return mlaplan::evaluate_rules(cfg, mlaplan::build_topology(cfg), t, o);
}

/// A copy of the first result with this id and severity (results are often temporaries).
inline std::optional<mlaplan::RuleResult> find(const std::vector<mlaplan::RuleResult>& rs, const std::string& id,
                                               mlaplan::Severity sev = mlaplan::Severity::error) {
  for (const auto& r : rs) {
    if (r.finding.id == id && r.finding.severity == sev) return r;
  }
  return std::nullopt;
}

inline int errors(const std::vector<mlaplan::RuleResult>& rs) {
  int n = 0;
  for (const auto& r : rs) n += r.finding.severity == mlaplan::Severity::error;
  return n;
}

}  // namespace testing_rules
