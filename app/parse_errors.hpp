#pragma once
// CLI11's parse errors as mla-plan's one-line messages (docs/cli.md): what is wrong, with the
// subcommand, the flag and the user's text named (quoted), and what is allowed.
//
//   plan: unknown flag '--foo'; run 'mla-plan plan --help' for the flags
//   plan: unknown flag '--tensor-parallel' (did you mean '--tensor-parallel-size'?); run ...
//   plan: unexpected argument 'b.json': CONFIG is already 'a.json' and plan takes one; run ...
//   plan: --batch needs a value (a decimal integer); run 'mla-plan plan --help' for the flags
//   --batch given twice ('8' and '16'); give it once
//   schedule: --num-sms and --h-q are required; run 'mla-plan schedule --help' for the flags
//   --format: 'xml' is not allowed; allowed: text, json, markdown
//   unknown command 'chek' (did you mean 'check'?); the commands: plan, check, ...

#include <string>
#include <vector>

namespace CLI {
class App;
class ParseError;
}  // namespace CLI

namespace mlaplan::cli {

/// What the parse was given.
struct ParseErrorContext {
  std::vector<std::string> args;  ///< the arguments as the user gave them
  bool implicit_plan = false;     ///< "plan" was put in front of them (`mla-plan CONFIG ...`)
};

/// The message (without "mla-plan: error: ") of `e`, thrown by `app.parse()`; it reads what the
/// parse left in `app` (the subcommand chosen, the values given, the arguments left over).
std::string parse_error_message(const CLI::App& app, const CLI::ParseError& e, const ParseErrorContext& context);

}  // namespace mlaplan::cli
