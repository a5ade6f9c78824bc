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
#include <vector>

#include "cli/commands.hpp"

namespace mlaplan::cli {

enum class Command { none, plan, schedule, check, verify, bench, gpus, formats, report };

/// What CommandLine::parse() made of the arguments: a command ready to run with its options, or,
/// for command none, the exit code of a run that ended while parsing (--help, --version: 0; a
/// usage error: 1, its message already written).
struct ParsedCli {
  Command command = Command::none;
  int exit_code = 0;
  PlanOptions plan;
  ScheduleOptions schedule;
  SchedInput schedule_input;  ///< schedule's flags, checked
  CheckOptions check;
  VerifyCliOptions verify;
  BenchCliOptions bench;
  InfoOptions info;
  ReportOptions report;
  /// The flags as typed, for the messages of the run (as_typed(), flag_values.hpp).
  std::vector<TypedFlag> typed_flags;
};

/// One subcommand: its name and one-line summary (the help), how its flags are bound to the parse
/// result, the flag checks made before any file is opened (null: none), and what runs it.
struct CommandRow {
  std::string_view name;
  std::string_view summary;
  Command command;
  void (*setup)(CLI::App& sub, ParsedCli& p);
  void (*check)(ParsedCli& p);
  int (*run)(const ParsedCli& p, std::ostream& out, std::ostream& err);
};

/// Every subcommand, in the order of `mla-plan --help`: the one table the help, the suggestions
/// for a mistyped command, the checks and the dispatch come from.
std::span<const CommandRow> command_table();
/// The names of command_table(), in its order.
std::vector<std::string> command_names();

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
