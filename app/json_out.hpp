#pragma once
// JSON pieces shared by the subcommands' --json output (docs/cli.md).

#include <nlohmann/json.hpp>
#include <vector>

#include "mlaplan/config.hpp"

namespace mlaplan::cli {

/// {"id", "severity", "message", "path"?, "fix"?}
nlohmann::ordered_json finding_json(const Finding& f);
/// An array of finding_json().
nlohmann::ordered_json findings_json(const std::vector<Finding>& findings);

}  // namespace mlaplan::cli
