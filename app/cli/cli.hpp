#pragma once
// The CLI as a library, in two stages:
// - CommandLine::parse() builds the command line (every subcommand and flag), parses the
//   arguments and checks every flag value that is checked before any file is opened;
// - execute_cli() runs the parsed command: reads the files, plans, prints.
// run_cli() is the two in a row, which is all of `mla-plan ARGS...`.

#include <iosfwd>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <typeinfo>
#include <vector>

#include "cli/commands.hpp"

namespace mlaplan::cli {

struct ParsedCli;

/// One subcommand: its name and one-line summary (the help), its options (one object per
/// CommandLine, made, reset to its defaults before each parse, bound by setup), the flag checks
/// made before any file is opened (null: none), and what runs it. Each subcommand's file defines
/// its row with command_row(); command_table() lists them.
struct CommandRow {
  std::string_view name;
  std::string_view summary;
  bool runs_kernels = false;  ///< verify, bench: the plain mla-plan hands it over to mla-plan-cuda
  const std::type_info* options_type = nullptr;
  std::shared_ptr<void> (*make_options)() = nullptr;
  void (*reset_options)(void* options) = nullptr;
  void (*setup)(CLI::App& sub, void* options) = nullptr;
  void (*check)(void* options) = nullptr;
  int (*run)(const void* options, std::ostream& out, std::ostream& err) = nullptr;
};

/// The row of a subcommand whose options are an `Options`: `Setup(CLI::App&, Options&)` binds its
/// flags, `Run(const Options&, std::ostream& out, std::ostream& err)` runs it, and `Check(Options&)`
/// (or nullptr) checks the flag values before any file is opened.
template <class Options, auto Setup, auto Run, auto Check = nullptr>
CommandRow command_row(std::string_view name, std::string_view summary, bool runs_kernels = false) {
  CommandRow row;
  row.name = name;
  row.summary = summary;
  row.runs_kernels = runs_kernels;
  row.options_type = &typeid(Options);
  row.make_options = [] { return std::shared_ptr<void>(std::make_shared<Options>()); };
  // A new object in the same place, so the flags bound to its members stay bound (no temporary:
  // GCC 12 at -O3 warns of one holding a std::vector as maybe uninitialized).
  row.reset_options = [](void* o) {
    Options* options = static_cast<Options*>(o);
    std::destroy_at(options);
    std::construct_at(options);
  };
  row.setup = [](CLI::App& sub, void* o) { Setup(sub, *static_cast<Options*>(o)); };
  if constexpr (!std::is_null_pointer_v<decltype(Check)>) {
    row.check = [](void* o) { Check(*static_cast<Options*>(o)); };
  }
  row.run = [](const void* o, std::ostream& out, std::ostream& err) {
    return Run(*static_cast<const Options*>(o), out, err);
  };
  return row;
}

/// Every subcommand, in the order of `mla-plan --help`: the one table the help, the suggestions
/// for a mistyped command, the checks and the dispatch come from.
std::span<const CommandRow> command_table();
/// The names of command_table(), in its order.
std::vector<std::string> command_names();

/// What CommandLine::parse() made of the arguments: a command ready to run with its options, or,
/// with no command, the exit code of a run that ended while parsing (--help, --version: 0; a
/// usage error: 1, its message already written).
struct ParsedCli {
  const CommandRow* command = nullptr;  ///< the row of the command to run; null: none
  int exit_code = 0;
  /// The options of every subcommand, in the order of command_table().
  std::vector<std::shared_ptr<void>> options;
  /// The flags as typed, for the messages of the run (as_typed(), flag_values.hpp).
  std::vector<TypedFlag> typed_flags;
  /// `mla-plan vllm serve ...`: what the vLLM command line became (given to plan's options).
  std::optional<VllmServeInput> vllm;
  /// `mla-plan sglang serve ...` / `mla-plan python -m sglang.launch_server ...`: what the SGLang
  /// command line became (given to plan's options).
  std::optional<SglangServeInput> sglang_serve;
  /// --json (or --format json) was given: an error the command cannot report in its own document
  /// is printed as the error document on stdout (output/error_json.hpp), beside stderr's line.
  bool json_errors = false;
  /// The command the arguments name ("plan" for `mla-plan CONFIG`), for the error document.
  std::string command_name;

  /// Whether the command to run is `name`.
  bool is(std::string_view name) const { return command != nullptr && command->name == name; }
  /// The options of subcommand `name`, which are an `Options` (Error(internal) otherwise).
  template <class Options>
  const Options& get(std::string_view name) const {
    return *static_cast<const Options*>(options_of(name, typeid(Options)));
  }

 private:
  const void* options_of(std::string_view name, const std::type_info& type) const;
};

/// Stage 1: the command line of mla-plan, every subcommand and flag, built on the first parse()
/// and kept for later ones.
class CommandLine {
 public:
  CommandLine();
  ~CommandLine();
  CommandLine(const CommandLine&) = delete;
  CommandLine& operator=(const CommandLine&) = delete;

  /// Parses `args` (without the program name) and checks the flag values that are checked before
  /// any file is opened; help, version and errors go to `out` and `err`. Opens no file (only a
  /// first word that is no command and is near one is looked up with lstat(): naming no file, it
  /// is a mistyped command, exit 1). Never throws. Every call starts from the defaults (CLI11's clear() and fresh options), so the same
  /// arguments give the same result whatever was parsed before. The result lives until the next
  /// call.
  const ParsedCli& parse(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

 private:
  std::unique_ptr<CLI::App> app_;  ///< bound to parsed_'s options
  ParsedCli parsed_;
};

/// Stage 2: runs a command CommandLine::parse() returned and gives its exit code; for command
/// none, the exit code parse() recorded. Never throws.
int execute_cli(const ParsedCli& parsed, std::ostream& out, std::ostream& err);

/// Runs mla-plan with `args` (without the program name), writing to `out` and `err`: a new
/// CommandLine's parse(), then execute_cli(). Never throws; every error becomes a message on
/// `err` and an exit code (docs/cli.md).
int run_cli(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace mlaplan::cli
