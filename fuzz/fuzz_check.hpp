#pragma once
// What the fuzz targets share. fail() is what they do on a bug: it prints why, then traps, so
// libFuzzer and the replay driver both stop there with the message on stderr. The CLI targets
// (fuzz_cli, fuzz_cli_args) also share their input format (split_lines) and their bug oracle
// (check_cli_stage).

#include <cstdint>
#include <cstdio>
#include <exception>
#include <ostream>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "mlaplan/base/text.hpp"

namespace mlaplan::fuzz {

[[noreturn]] inline void fail(const std::string& why) {
  std::fprintf(stderr, "fuzz: BUG: %s\n", why.c_str());
  std::fflush(stderr);
  __builtin_trap();
}

/// The argument list of a CLI target's input: one argument per line ('\n' separates arguments; a
/// final '\n' ends the last one).
inline std::vector<std::string> split_lines(std::string_view text) {
  std::vector<std::string> args;
  std::size_t start = 0;
  while (start < text.size()) {
    const auto nl = text.find('\n', start);
    const auto end = nl == std::string_view::npos ? text.size() : nl;
    args.emplace_back(text.substr(start, end - start));
    start = end + 1;
  }
  return args;
}

/// What one stage of the CLI wrote and returned.
struct CliOutcome {
  int code = 0;
  std::string out;
  std::string err;
};

/// The bug oracle of the CLI targets: runs `stage` (int(std::ostream& out, std::ostream& err), a
/// stage of the CLI on fixed arguments) with string streams. A bug, named with the stage `name`:
/// an exception escaping it, exit 70 (internal error), an exit code outside 0-7; a line of stdout
/// or stderr that is not printable UTF-8 (a control character, ESC, NUL, invalid UTF-8: text from
/// the input that reached the output unescaped); a line of stderr that does not start with
/// "mla-plan" (every message is one line of its own).
template <typename Stage>
CliOutcome check_cli_stage(std::string_view name, Stage&& stage) {
  std::ostringstream out, err;
  CliOutcome o;
  try {
    o.code = stage(static_cast<std::ostream&>(out), static_cast<std::ostream&>(err));
  } catch (const std::exception& e) {
    fail("exception escaped " + std::string(name) + ": " + e.what());
  } catch (...) {
    fail("exception of an unknown type escaped " + std::string(name));
  }
  o.out = out.str();
  o.err = err.str();
  if (o.code == 70) fail("exit 70 (internal error): " + o.err);
  if (o.code < 0 || o.code > 7) fail("exit code " + std::to_string(o.code) + " outside 0-7: " + o.err);
  for (const auto* stream : {&o.out, &o.err}) {
    std::size_t start = 0;
    while (start < stream->size()) {
      std::size_t end = stream->find('\n', start);
      if (end == std::string::npos) end = stream->size();
      const std::string_view line(stream->data() + start, end - start);
      if (!is_printable_line(line)) {
        fail(std::string(stream == &o.out ? "stdout" : "stderr") + " line is not printable UTF-8: " + printable(line));
      }
      if (stream == &o.err && line.rfind("mla-plan", 0) != 0) {
        fail("stderr line that is not a message of its own: " + printable(line) + " in " + printable(o.err));
      }
      start = end + 1;
    }
  }
  return o;
}

/// The CLI targets keep one CommandLine from input to input (building every subcommand's options
/// is most of a fresh parse under ASan). One input in kFreshEvery, chosen by input_hash() so that
/// the choice is reproducible, also runs with a new one, and the outcomes must be equal; the kept
/// one is replaced every kParsesPerCommandLine inputs (CLI11 2.1's App::clear() keeps the list
/// behind parse_order(), which grows by an entry per option parsed).
inline constexpr std::uint32_t kFreshEvery = 32;
inline constexpr std::uint64_t kParsesPerCommandLine = 4096;

/// FNV-1a of the input.
inline std::uint32_t input_hash(std::string_view bytes) {
  std::uint32_t h = 2166136261u;
  for (unsigned char c : bytes) h = (h ^ c) * 16777619u;
  return h;
}

}  // namespace mlaplan::fuzz
