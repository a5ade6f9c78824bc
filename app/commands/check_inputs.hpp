#pragma once
// What `check` reads from its CONFIG arguments (docs/ci.md, "Files, globs and directories"):
// - a file is checked as it is, model config or not;
// - a model directory (one holding config.json, or a Hugging Face cache repository) is one config,
//   as `plan` reads it;
// - any other directory is a folder of configs: each `*.json` in it that is a model config (rule
//   below) is checked, in name order; the other `*.json` files are listed as skipped. Its
//   subdirectories are searched with --recursive (a model directory among them is one config;
//   hidden directories and links to directories are skipped), listed as skipped without it
//   (hidden ones not listed);
// - an argument that names nothing and holds a glob character (`*`, `?`, `[`) is a pattern (a
//   quoted glob): its matches, sorted, each as if it had been typed.
//
// A `*.json` in a folder is a model config when its top level is a JSON object with one of the
// keys a model config has: model_type, architectures, num_hidden_layers or text_config. One that
// cannot be read or is not valid JSON is checked too (and fails): a config with a syntax error is
// never skipped. Anything else (a tokenizer, generation or index file, a package.json, a JSON
// array) is skipped.

#include <string>
#include <vector>

namespace mlaplan::cli::check_inputs {

/// One input of the run: a path to check, or (error non-empty) an argument that gives none (a
/// pattern without matches, a folder without a model config), which fails with exit 2.
struct Input {
  std::string path;
  std::string error;
};

/// A file or directory passed over, and why.
struct Skipped {
  std::string path;
  std::string reason;
};

struct Inputs {
  std::vector<Input> inputs;
  std::vector<Skipped> skipped;
};

/// Whether `text` (a `*.json` file's) is a model config by the rule above.
bool looks_like_model_config(const std::string& text);

/// The inputs of `args` (CONFIG arguments as given). Error(usage) past CheckLimits::max_configs.
Inputs expand(const std::vector<std::string>& args, bool recursive);

}  // namespace mlaplan::cli::check_inputs
