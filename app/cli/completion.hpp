#pragma once
// The files an installed mla-plan comes with, generated from its own command line (the CLI11
// subcommands and flags that command_table() sets up), so that they cannot drift from it:
// - `mla-plan --completions bash`: the bash completion script
//   (share/bash-completion/completions/mla-plan),
// - `mla-plan --completions zsh`: the zsh completion function (share/zsh/site-functions/_mla-plan),
// - `mla-plan --man`: the man page (share/man/man1/mla-plan.1).
// The build writes them next to the binary and `cmake --install` puts them in place (app/CMakeLists.txt,
// docs/install.md).

#include <iosfwd>
#include <string>
#include <string_view>
#include <vector>

namespace CLI {
class App;
}

namespace mlaplan::cli {

/// What a flag's value (or a positional argument) is, for completion.
enum class ValueKind {
  none,       ///< a flag without a value
  word,       ///< a value of its own (a number, a name): completed from `values` when known
  file,       ///< a path of a file
  directory,  ///< a path of a directory
};

/// One flag (or positional argument) of a command as the generated files show it.
struct FlagDoc {
  std::vector<std::string> names;  ///< "-o", "--output"; short names first; a positional's: its name ("CONFIG")
  std::string value_name;          ///< "INT", "TEXT", "SIZE|auto"; "" for a flag without a value
  ValueKind kind = ValueKind::none;
  std::vector<std::string> values;  ///< the values allowed, where the set is known
  std::string help;
  std::string group;      ///< the help's heading ("Layout"); "" for the first one
  bool many = false;      ///< a positional that takes several (check's CONFIG...)
  bool required = false;  ///< a positional or flag that must be given
};

/// One subcommand.
struct CommandDoc {
  std::string name;
  std::string summary;
  std::vector<FlagDoc> flags;        ///< in the order of its help, -h/--help first
  std::vector<FlagDoc> positionals;  ///< CONFIG, CONFIG...
};

/// The whole command line.
struct CliDoc {
  std::string description;     ///< mla-plan's own (the top of --help)
  std::vector<FlagDoc> flags;  ///< -h/--help, --version
  std::vector<CommandDoc> commands;
  /// The first words that run plan with another engine's command line, with that engine's own
  /// flags: `vllm serve`, `sglang serve`, `python -m sglang.launch_server`.
  std::vector<std::string> vllm_flags, sglang_flags;
};

/// The command line `app` (make_app() of cli.cpp: every subcommand of command_table()) described.
CliDoc describe_cli(CLI::App& app);

std::string bash_completion(const CliDoc& doc);
std::string zsh_completion(const CliDoc& doc);
std::string man_page(const CliDoc& doc);

/// Whether `word`, the first argument, asks for one of the generated files (--completions, --man).
bool is_generated_file_request(std::string_view word);
/// `mla-plan --completions bash|zsh` and `mla-plan --man`: writes the file to `out` and returns 0,
/// or says what is wrong on `err` and returns exit 1. `args` are all the arguments.
int write_generated_file(CLI::App& app, const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace mlaplan::cli
