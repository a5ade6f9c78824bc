#pragma once
// Helpers the tests share: the bundled configs (and their topologies, loaded once), a preset
// target, every rule of a config on a target, and lookups in the results.

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "mlaplan/model/config.hpp"
#include "mlaplan/rules/rules.hpp"
#include "mlaplan/hardware/target.hpp"
#include "mlaplan/model/topology.hpp"

namespace testing_rules {

/// Path of a bundled config (configs/NAME).
inline std::string config_path(const std::string& name) { return std::string(MLAPLAN_SOURCE_DIR) + "/configs/" + name; }

inline mlaplan::ModelConfig released(const std::string& name) { return mlaplan::load_config(config_path(name)); }

/// A config of the source tree and its topology, loaded once per path (relative to the tree).
struct Model {
  mlaplan::ModelConfig cfg;
  mlaplan::Topology topo;
};
inline const Model& model(const std::string& rel) {
  static std::map<std::string, Model> cache;
  auto it = cache.find(rel);
  if (it == cache.end()) {
    Model m{mlaplan::load_config(std::string(MLAPLAN_SOURCE_DIR) + "/" + rel), {}};
    m.topo = mlaplan::build_topology(m.cfg);
    it = cache.emplace(rel, std::move(m)).first;
  }
  return it->second;
}
inline const Model& v41() { return model("configs/deepseek-v4.1-flash.json"); }
inline const Model& v40() { return model("configs/deepseek-v4-flash.json"); }
inline const Model& v32() { return model("configs/deepseek-v3.2.json"); }

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
