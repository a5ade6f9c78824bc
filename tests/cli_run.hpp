#pragma once
// The command line run in-process (run_cli with string streams), the unit tests' way to check
// what a command prints and returns without starting the binary (tests/e2e_run.hpp does that).

#include <chrono>
#include <sstream>
#include <string>
#include <vector>

#include "cli/cli.hpp"
#include "heap_counter.hpp"

namespace testing_cli {

/// What one command returned and printed, how long it took, and its heap work (heap_counter.hpp;
/// zero in sanitizer builds).
struct Run {
  int code = -1;
  std::string out;
  std::string err;
  double seconds = 0;
  heap_counter::Totals heap;
};

/// run_cli(args) with stdout and stderr captured.
inline Run run(const std::vector<std::string>& args) {
  std::ostringstream out, err;
  const heap_counter::Scope scope;
  const auto t0 = std::chrono::steady_clock::now();
  const int code = mlaplan::cli::run_cli(args, out, err);
  const std::chrono::duration<double> dt = std::chrono::steady_clock::now() - t0;
  return {code, out.str(), err.str(), dt.count(), scope.totals()};
}

/// A file of the repository's configs/ folder.
inline std::string config_file(const std::string& rel) { return std::string(MLAPLAN_SOURCE_DIR) + "/configs/" + rel; }

}  // namespace testing_cli
