// Fuzz target fuzz_cli: bytes -> argument list -> the whole CLI in-process (run_cli), as
// `mla-plan ARGS...` would run, with stdout and stderr into string streams.
//
// The input is one argument per line ('\n' separates arguments; a final '\n' ends the last one).
// Exit code 70 (internal error) is a bug, as is an exception escaping run_cli, a crash, a sanitizer
// report, a leak, or output that is not lines of printable UTF-8 with every message on one line
// of its own (fuzz_check.hpp); any other exit code (0-7) is an accepted outcome.
//
// Arguments are rewritten before the run so that a run touches only the bundled files:
// - tokens name the bundled configs (and one result file for --verify-json / --bench-json), as a
//   whole argument or as the value of --flag=TOKEN; see kTokens;
// - every other argument (or --flag= value) holding a '/' or equal to "." or ".." becomes
//   "/dev/null/..." (never readable: /dev/null is not a directory); after an '@' that is no token
//   (--context-lens @FILE) the same holds for FILE, a token names its file ("@@lens"), and "@-"
//   (standard input) becomes "@/dev/null/-";
// - the value of report's -o / --output becomes "/dev/null/VALUE", so the report is rendered in full
//   and then cannot be written.
// Inputs that would make one run long are skipped (return -1): more than kMaxArgs arguments or
// kMaxListItems list items (arguments + commas), more than kMaxConfigs bundled configs or more than
// one released config (40-61 layers), and for `check --matrix` (which plans every GPU preset x kv
// dtype x TP size x config) more than one config or kMaxMatrixListItems list items.
// `verify` and `bench` never reach a GPU here: the CLI library has no kernels (app/cli/gpu_runner.hpp),
// so they check the config and flags and exit 6.
//
// Speed: building the command line of every subcommand (CLI11 makes every option of every
// subcommand) is most of the heap allocations of a typical input (about 12,000 of 15,000), and
// under ASan the allocations are most of the time. So, as in fuzz_cli_args, one CommandLine parses
// many inputs (CommandLine::parse, then execute_cli: run_cli's two stages) and is replaced every
// kParsesPerCommandLine inputs. One input in kFreshEvery (chosen by its bytes, so the choice is
// reproducible) also runs as run_cli() does, with a new CommandLine, and the two runs' exit codes
// and outputs must be equal.

#include <cstdint>
#include <memory>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "cli/cli.hpp"
#include "fuzz_check.hpp"

namespace {

constexpr std::size_t kMaxArgs = 48;
constexpr std::size_t kMaxListItems = 64;  ///< arguments + commas: bounds every list flag
constexpr std::size_t kMaxConfigs = 3;
constexpr std::size_t kMaxReleasedConfigs = 1;
constexpr std::size_t kMaxMatrixListItems = 16;

enum class TokenKind { config, released_config, other };

struct Token {
  std::string_view name;
  std::string_view relative_path;
  TokenKind kind;
};

// @v41, @v4, @v32: the released configs (40-61 layers: every output is large, a run is slow);
// @t41, @t4, @t32: few-layer configs the backend accepts (fast, the same code paths);
// @small41 ... @types4: the small test configs (the backend rejects them: exit 3).
constexpr Token kTokens[] = {
    {"@t41", "fuzz/data/v41-6layer.json", TokenKind::config},
    {"@t4", "fuzz/data/v4-4layer.json", TokenKind::config},
    {"@t32", "fuzz/data/v32-2layer.json", TokenKind::config},
    {"@v41", "configs/deepseek-v4.1-flash.json", TokenKind::released_config},
    {"@v4", "configs/deepseek-v4-flash.json", TokenKind::released_config},
    {"@v32", "configs/deepseek-v3.2.json", TokenKind::released_config},
    {"@small41", "configs/small/v41-5layer-derived-sources.json", TokenKind::config},
    {"@reindex41", "configs/small/v41-6layer-reindex.json", TokenKind::config},
    {"@flat41", "configs/small/v41-8layer-flat.json", TokenKind::config},
    {"@types4", "configs/small/v4-2layer-layer-types.json", TokenKind::config},
    {"@configs", "configs", TokenKind::config},  // a directory without config.json
    {"@result", "fuzz/data/verify-result.json", TokenKind::other},
    {"@lens", "fuzz/data/context-lens.txt", TokenKind::other},  // --context-lens @@lens
};

const Token* find_token(std::string_view arg) {
  for (const auto& t : kTokens) {
    if (arg == t.name) return &t;
  }
  return nullptr;
}

std::string token_path(std::string_view arg) {
  const Token* t = find_token(arg);
  return t ? std::string(MLAPLAN_SOURCE_DIR) + "/" + std::string(t->relative_path) : std::string();
}

/// The token an argument names, as a whole or as the value of --flag=TOKEN.
const Token* token_of(std::string_view arg) {
  if (arg.substr(0, 2) == "--") {
    if (auto eq = arg.find('='); eq != std::string_view::npos) return find_token(arg.substr(eq + 1));
  }
  return find_token(arg);
}

/// Whether one run of these arguments stays short (see the top of the file).
bool bounded(const std::vector<std::string>& args) {
  if (args.size() > kMaxArgs) return false;
  std::size_t items = args.size(), configs = 0, released = 0;
  bool matrix = false;
  for (const auto& a : args) {
    for (char c : a) items += c == ',';
    matrix |= a.rfind("--matrix", 0) == 0;
    if (const Token* t = token_of(a)) {
      configs += t->kind != TokenKind::other;
      released += t->kind == TokenKind::released_config;
    }
  }
  if (items > kMaxListItems || configs > kMaxConfigs || released > kMaxReleasedConfigs) return false;
  return !matrix || (configs <= 1 && items <= kMaxMatrixListItems);
}

/// A token becomes its path; anything that could name another file becomes unreadable.
std::string confine_path(std::string_view value) {
  if (auto p = token_path(value); !p.empty()) return p;
  if (!value.empty() && value.front() == '@') {
    const std::string_view file = value.substr(1);
    return "@" + (file == "-" ? std::string("/dev/null/-") : confine_path(file));
  }
  if (value.find('/') != std::string_view::npos || value == "." || value == "..") {
    return "/dev/null/" + std::string(value);
  }
  return std::string(value);
}

std::string confine_arg(const std::string& arg) {
  if (arg.rfind("--", 0) == 0) {
    if (auto eq = arg.find('='); eq != std::string::npos)
      return arg.substr(0, eq + 1) + confine_path(arg.substr(eq + 1));
  }
  return confine_path(arg);
}

std::string unwritable(std::string_view value) { return "/dev/null/" + std::string(value); }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> raw = mlaplan::fuzz::split_lines(text);
  if (!bounded(raw)) return -1;

  std::vector<std::string> args;
  args.reserve(raw.size());
  for (std::size_t i = 0; i < raw.size(); ++i) {
    const std::string& a = raw[i];
    if (a == "-o" || a == "--output") {
      args.push_back(a);
      if (i + 1 < raw.size()) args.push_back(unwritable(raw[++i]));
    } else if (a.rfind("--output=", 0) == 0) {
      args.push_back("--output=" + unwritable(a.substr(9)));
    } else if (a.rfind("-o", 0) == 0) {
      args.push_back("-o" + unwritable(a.substr(2)));
    } else {
      args.push_back(confine_arg(a));
    }
  }

  // CLI11 2.1's App::clear() keeps the list behind parse_order(), which grows by an entry per option
  // parsed: the kept CommandLine is replaced now and then (as in fuzz_cli_args).
  static std::unique_ptr<mlaplan::cli::CommandLine> kept;
  static std::uint64_t parses = 0;
  if (parses++ % mlaplan::fuzz::kParsesPerCommandLine == 0) kept = std::make_unique<mlaplan::cli::CommandLine>();
  const mlaplan::fuzz::CliOutcome o =
      mlaplan::fuzz::check_cli_stage("parse + execute_cli", [&](std::ostream& out, std::ostream& err) {
        return mlaplan::cli::execute_cli(kept->parse(args, out, err), out, err);
      });
  if (mlaplan::fuzz::input_hash(text) % mlaplan::fuzz::kFreshEvery == 0) {
    const mlaplan::fuzz::CliOutcome f = mlaplan::fuzz::check_cli_stage(
        "run_cli", [&](std::ostream& out, std::ostream& err) { return mlaplan::cli::run_cli(args, out, err); });
    if (f.code != o.code || f.out != o.out || f.err != o.err) {
      mlaplan::fuzz::fail("a kept CommandLine ran differently from run_cli: exit " + std::to_string(o.code) + " vs " +
                          std::to_string(f.code) + ", err '" + o.err + "' vs '" + f.err + "'");
    }
  }
  return 0;
}
