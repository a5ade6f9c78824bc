#pragma once
// The JSON document of an error (docs/cli.md, "Errors as JSON"): with --json (or --format json)
// every command prints one JSON document on stdout whatever happens, and where the command could
// not write its own (an invalid config, a bad flag, no GPU) it is this one:
//
//   {"schema", "tool_version", "command": "plan",
//    "error": {"kind": "invalid_config", "message": "...", "exit_code": 2,
//              "field": "/compress_ratios/3" | "--batch" | null, "value": 7 | "0" | null,
//              "file"?: "ci/bad.json", "line"?: 12, "column"?: 5},
//    "exit_code": 2}
//
// The message is the one line stderr carries (without "mla-plan: error: "); field, value and the
// place in the file are read from it, the way the messages are written (docs/cli.md, "Flag values").

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "mlaplan/base/json_locate.hpp"
#include "output/json_out.hpp"

namespace mlaplan::cli::error_json {

/// What an error message says about where the error is.
struct ErrorFacts {
  int exit_code = 0;
  std::string message;
  std::string field;                         ///< a flag ("--batch"), a JSON pointer ("/compress_ratios/3"), ""
  std::optional<ojson> value;                ///< the value as given: the flag's text, the config's JSON value
  std::string file;                          ///< the file the error is in, "" when none is named
  std::optional<JsonTextLocation> location;  ///< where in `file` (a field's value, a parse error)
};

/// The name of an exit code's kind: usage, invalid_config, unsupported, does_not_fit,
/// verify_failed, no_gpu, output, internal ("error" for a code that is none of them).
std::string kind_name(int code);

/// Whether the arguments (without the program name) ask for JSON: `--json`, `--format json` or
/// `--format=json` before a `--`.
bool json_requested(const std::vector<std::string>& args);

/// The command the arguments run, for the document: the first word when it is one of
/// `commands`, "plan" for `mla-plan CONFIG`, `vllm serve` and `sglang serve`; "" when none.
std::string command_of(const std::vector<std::string>& args, const std::vector<std::string>& commands);

/// Where nlohmann's "parse error at line N, column M" is, in a message "FILE: not valid JSON:
/// parse error at line N, column M ..." about `file` (its printable() form).
std::optional<JsonTextLocation> parse_error_location(const std::string& message, const std::string& file);

/// The pointer of a config field a message names ("FILE: /pointer: ..."): the file and the
/// pointer, or nothing.
std::optional<std::pair<std::string, std::string>> config_field_of(std::string_view message);

/// Field, value, file and place of an error message of exit `exit_code`. A config field's value
/// and place are read from the file the message names (when it can still be read).
ErrorFacts facts_of(int code, const std::string& message);

/// The error document of `command` (dump_json()'s text, with its final newline).
std::string render(const std::string& command, const ErrorFacts& facts);

/// The message of the last "mla-plan: error: " or "mla-plan: internal error: " line in `err_text`.
std::string last_error_message(std::string_view err_text);

}  // namespace mlaplan::cli::error_json
