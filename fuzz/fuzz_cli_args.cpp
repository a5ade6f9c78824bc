// Fuzz target fuzz_cli_args: bytes -> argument list -> the CLI's first stage,
// CommandLine::parse() (app/cli/cli.hpp), as run_cli() calls it: the arguments parsed by the command
// line of every subcommand, and every flag value checked that the CLI checks before it opens a
// file (schedule's flags, check's list and guard limits, report's output kind). The command is
// not run (fuzz_cli runs it), so no argument needs rewriting: this stage reads and writes no file.
//
// One CommandLine serves many inputs, as CLI11 allows (parse() clears the app and resets the
// options first): building the command line of every subcommand takes most of the time of a
// fresh parse under ASan. So that the reuse cannot hide or invent a result, one input in
// kFreshEvery (chosen by its bytes, so the choice is reproducible) is parsed by a new CommandLine
// too, as run_cli() does, and the two outcomes must be equal. The kept CommandLine is replaced
// every kParsesPerCommandLine inputs: CLI11 2.1's App::clear() leaves the list behind
// App::parse_order() (unused by mla-plan) as it is, so it grows by an entry per option parsed.
//
// The input is one argument per line, as for fuzz_cli. The bug oracle is fuzz_cli's (an exception
// escaping, exit 70, an exit code outside 0-7, output that is not lines of printable UTF-8, a stderr
// line that is not a message of its own, a crash, a sanitizer report or a leak), plus what
// the parse stage promises:
// - it ends with exit 0 (a command ready to run, --help, --version) or exit 1 (a usage error);
// - a usage error is a message on stderr starting "mla-plan: error: ", with nothing on stdout, or
//   (the arguments ask for --json) the error document of exit 1 carrying that message;
// - a command ready to run has written nothing.

#include <cstdint>
#include <memory>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/cli.hpp"
#include "fuzz_check.hpp"
#include "output/error_json.hpp"

namespace {

struct Parse {
  mlaplan::fuzz::CliOutcome outcome;
  const mlaplan::cli::CommandRow* command = nullptr;  ///< a row of the static command_table()
};

Parse parse_with(mlaplan::cli::CommandLine& command_line, const std::vector<std::string>& args) {
  Parse p;
  p.outcome = mlaplan::fuzz::check_cli_stage("CommandLine::parse", [&](std::ostream& out, std::ostream& err) {
    const mlaplan::cli::ParsedCli& parsed = command_line.parse(args, out, err);
    p.command = parsed.command;
    return parsed.exit_code;
  });
  return p;
}

/// Whether `out` is what a usage error prints on stdout for `args`: nothing, or with --json the
/// error document of exit 1 whose message is stderr's line.
bool usage_stdout_ok(const std::vector<std::string>& args, const std::string& out, const std::string& err) {
  if (out.empty()) return true;
  if (!mlaplan::cli::error_json::json_requested(args)) return false;
  const auto doc = nlohmann::json::parse(out, nullptr, /*allow_exceptions=*/false);
  return doc.is_object() && doc.value("exit_code", 0) == 1 && doc.contains("error") && doc["error"].is_object() &&
         doc["error"].value("kind", "") == "usage" &&
         "mla-plan: error: " + doc["error"].value("message", "") + "\n" == err;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  const std::vector<std::string> args = mlaplan::fuzz::split_lines(bytes);

  static std::unique_ptr<mlaplan::cli::CommandLine> kept;
  static std::uint64_t parses = 0;
  if (parses++ % mlaplan::fuzz::kParsesPerCommandLine == 0) kept = std::make_unique<mlaplan::cli::CommandLine>();
  const Parse p = parse_with(*kept, args);
  const auto& o = p.outcome;
  if (o.code != 0 && o.code != 1) {
    mlaplan::fuzz::fail("the parse ended with exit " + std::to_string(o.code) + " (expected 0 or 1): " + o.err);
  }
  if (o.code == 1 && (o.err.rfind("mla-plan: error: ", 0) != 0 || !usage_stdout_ok(args, o.out, o.err))) {
    mlaplan::fuzz::fail("usage error without its message on stderr alone: out '" + o.out + "', err '" + o.err + "'");
  }
  if (p.command != nullptr && (o.code != 0 || !o.out.empty() || !o.err.empty())) {
    mlaplan::fuzz::fail("a parsed command with exit " + std::to_string(o.code) + " or output: out '" + o.out +
                        "', err '" + o.err + "'");
  }

  if (mlaplan::fuzz::input_hash(bytes) % mlaplan::fuzz::kFreshEvery == 0) {
    mlaplan::cli::CommandLine fresh;
    const Parse f = parse_with(fresh, args);
    if (f.command != p.command || f.outcome.code != o.code || f.outcome.out != o.out || f.outcome.err != o.err) {
      mlaplan::fuzz::fail("a kept CommandLine parsed differently from a new one: exit " + std::to_string(o.code) +
                          " vs " + std::to_string(f.outcome.code) + ", err '" + o.err + "' vs '" + f.outcome.err + "'");
    }
  }
  return 0;
}
