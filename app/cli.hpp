#pragma once
// The CLI as a library: run_cli() parses arguments, runs the subcommand and returns the exit code.

#include <iosfwd>
#include <string>
#include <vector>

namespace mlaplan::cli {

/// Runs mla-plan with `args` (without the program name), writing to `out` and `err`.
/// Never throws; every error becomes a message on `err` and an exit code (docs/cli.md).
int run_cli(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace mlaplan::cli
