#pragma once
// JSON pieces shared by the subcommands' --json output (docs/cli.md).

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "mlaplan/model/config.hpp"

namespace mlaplan::cli {

/// The JSON value every --json writer builds: objects keep their keys in insertion order.
using ojson = nlohmann::ordered_json;

/// The "schema" of every --json document (defined in app/output/render_json.cpp, the JSON contract's
/// one translation unit): "mla-plan/3" since a stage's vllm_kv lists only the groups it has layers
/// in, each with its index, and group_count ("mla-plan/2": the plan's "capacity" became "fit"). The JSON
/// Schema files in schemas/ describe the documents of this version.
extern const char* const kJsonSchema;

/// The object every --json document starts from: {"schema": kJsonSchema, "tool_version": the
/// version of mla-plan (`mla-plan --version`)}. Each writer adds its keys after these.
nlohmann::ordered_json json_document();
/// The first lines of a document that starts from json_document(), as dump_json() writes them:
/// "{", then one line per key of json_document(), each ending with a comma. For a document
/// written piece by piece (check), followed by its other keys.
std::string json_document_head();

/// {"id", "severity", "message", "path"?, "fix"?}
nlohmann::ordered_json finding_json(const Finding& f);
/// An array of finding_json().
nlohmann::ordered_json findings_json(const std::vector<Finding>& findings);
/// The text of a --json output: indented by 2, with a final newline. Strings that are not valid
/// UTF-8 (file names and flag values as given, and messages quoting them) are written with U+FFFD
/// in place of each bad byte sequence, never an error.
std::string dump_json(const nlohmann::ordered_json& j);
/// `j` as dump_json() writes it where it is a value `depth` levels deep in a larger document
/// (an element of a top-level array: depth 2): every line after the first indented by 2 x depth
/// spaces, no final newline. The caller writes what precedes the first line. A document written
/// piece by piece with this has the bytes dump_json() gives for the whole.
std::string dump_json_nested(const nlohmann::ordered_json& j, int depth);

}  // namespace mlaplan::cli
