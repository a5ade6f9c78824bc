#pragma once
// JSON pieces shared by the subcommands' --json output (docs/cli.md).

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "mlaplan/config.hpp"

namespace mlaplan::cli {

/// {"id", "severity", "message", "path"?, "fix"?}
nlohmann::ordered_json finding_json(const Finding& f);
/// An array of finding_json().
nlohmann::ordered_json findings_json(const std::vector<Finding>& findings);
/// The text of a --json output: indented by 2, with a final newline. Strings that are not valid
/// UTF-8 (file names and flag values as given, and messages quoting them) are written with U+FFFD
/// in place of each bad byte sequence, never an error.
std::string dump_json(const nlohmann::ordered_json& j);

}  // namespace mlaplan::cli
