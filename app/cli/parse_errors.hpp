#pragma once
// CLI11's parse errors as mla-plan's one-line messages (docs/cli.md): what is wrong, with the
// subcommand, the flag and the user's text named (quoted), and what is allowed.
//
//   plan: unknown flag '--foo'; run 'mla-plan plan --help' for the flags
//   plan: unknown flag '--tensor-parallel' (did you mean '--tensor-parallel-size'?); run ...
//   plan: unknown flag '--context' (did you mean '--context-len' or '--context-lens'?); run ...
//   plan: unexpected argument 'b.json': CONFIG is already 'a.json' and plan takes one; run ...
//   plan: --batch needs a value (a decimal integer); run 'mla-plan plan --help' for the flags
//   --batch given twice ('8' and '16'); give it once
//   schedule: --num-sms and --h-q are required; run 'mla-plan schedule --help' for the flags
//   --format: 'xml' is not allowed; allowed: text, json, markdown
//   unknown command 'plna' (did you mean 'plan'?), and no file or directory of that name; the ...
//
// The suggestions are suggest()'s (include/mlaplan/base/suggest.hpp).

#include <string>
#include <string_view>

namespace CLI {
class App;
class ParseError;
}  // namespace CLI

namespace mlaplan::cli {

/// The message (without "mla-plan: error: ") of `e`, thrown by `app.parse()`; it reads what the
/// parse left in `app` (the subcommand chosen, the values given, the arguments left over).
std::string parse_error_message(const CLI::App& app, const CLI::ParseError& e);

/// The message for a first word that is no command when it is near one (`mla-plan plna ...`),
/// or "" when it is not, or looks like a path (it holds anything but letters, digits, '-' and
/// '_'). The caller asks only for a word that names no file: an existing file is a config.
std::string unknown_command_message(std::string_view word);

/// The message for a first argument that is a flag of neither mla-plan itself nor plan (which
/// `mla-plan --tp 8 CONFIG` runs) when it is near one of mla-plan's own, --help and --version
/// (`mla-plan --verison`); "" otherwise.
std::string unknown_first_flag_message(const CLI::App& app, std::string_view arg);

}  // namespace mlaplan::cli
