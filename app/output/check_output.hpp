#pragma once
// What `check` prints (docs/ci.md): one file's result in each format (text, JSON, GitHub
// annotations, Markdown), written file by file, and check --matrix's table of one config.

#include <cstddef>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "mlaplan/base/error.hpp"
#include "mlaplan/base/json_locate.hpp"
#include "mlaplan/plan/matrix.hpp"
#include "cli/commands.hpp"
#include "commands/check_inputs.hpp"
#include "output/json_out.hpp"

namespace mlaplan::cli {

/// What check prints of one file. The file's plan is dropped as soon as this is taken from it,
/// and this as soon as it is printed: a run over thousands of large configs holds one plan at a
/// time.
struct CheckFileResult {
  std::string path;
  int code = 0;
  std::vector<Finding> findings;  ///< errors and warnings (infos are not repeated here)
  bool planned = false;           ///< a layout was made: family .. global_pages are set
  std::string family;
  std::string target;
  std::string kv_cache_dtype;
  /// The layout judged: "TP 8", "TP 1 x DP 8, Engram offload"; with `recommended`, the layout the
  /// search of one node chose (check without a layout flag judges the recommended layout).
  std::string layout;
  bool recommended = false;
  std::vector<std::string> launch;  ///< the `vllm serve` argv of the plan judged
  double global_rows = 0;           ///< global bytes per token, DeepSeek's accounting
  double global_pages = 0;          ///< the same, the engine's
  /// The fit's answer, with a layout: "fits", "does_not_fit", "not_decided" (the weights not all
  /// known) or "refused" (vLLM refuses the configuration: exit 3). The numbers below are given
  /// only with an answer on memory (fits or does_not_fit).
  std::string fit;
  std::optional<double> concurrency;          ///< vLLM's maximum concurrency, all DP engines (with a fit)
  std::optional<std::int64_t> kv_tokens;      ///< vLLM's GPU KV cache size, all DP engines
  std::optional<std::int64_t> max_model_len;  ///< with a fit
  std::optional<std::int64_t> weights_bytes;  ///< per GPU, the largest stage
  std::optional<std::int64_t> spare_bytes;    ///< the fit's margin on the limiting GPU (a fit that fits)
  std::size_t gpu_count = 1;                  ///< the GPUs of --gpu: with several, messages name the GPU
  /// --format github: the config.json read (the directory's, for a directory; "" when unknown),
  /// and where each finding points into it (its JSON pointer's value, or a parse error's place).
  std::string config_file;
  std::vector<std::optional<JsonTextLocation>> locations;  ///< one per finding, or empty
};

/// {"schema", "tool_version", "files": [...], "exit_code": N} written one file at a time, with the
/// bytes dump_json() gives for the whole object. Nothing is written before the first file.
class JsonFilesStream {
 public:
  explicit JsonFilesStream(std::ostream& out) : out_(out) {}
  void file(const ojson& f) {
    out_ << (files_ == 0 ? json_document_head() + "  \"files\": [\n    " : std::string(",\n    "))
         << dump_json_nested(f, 2);
    ++files_;
  }
  /// The end of the document: the files passed over (when any), then the exit code.
  void close(int exit_code, const std::vector<check_inputs::Skipped>& skipped = {}) {
    if (files_ == 0) out_ << json_document_head() << "  \"files\": [],\n";
    else out_ << "\n  ],\n";
    if (!skipped.empty()) {
      ojson list = ojson::array();
      for (const auto& sk : skipped) list.push_back({{"path", sk.path}, {"reason", sk.reason}});
      out_ << "  \"skipped\": " << dump_json_nested(list, 1) << ",\n";
    }
    out_ << "  \"exit_code\": " << exit_code << "\n}\n";
  }

 private:
  std::ostream& out_;
  std::size_t files_ = 0;
};

/// The output of check (without --matrix) in one format, written file by file.
class CheckPrinter {
 public:
  CheckPrinter(std::string format, std::ostream& out, std::ostream& err)
      : format_(std::move(format)), out_(out), err_(err), json_(out) {}
  void file(const CheckFileResult& r);
  void finish(int overall, const std::vector<check_inputs::Skipped>& skipped = {});

 private:
  std::string format_;
  std::ostream& out_;
  std::ostream& err_;
  JsonFilesStream json_;
  std::size_t files_ = 0;
  std::size_t failed_ = 0;
};

/// check --matrix, a config that could not be read: its line (text) or its file object (`json`).
void print_matrix_error(const std::string& path, const Error& e, std::ostream& out, JsonFilesStream* json);
/// check --matrix, one config's matrix: its table and reasons (text) or its file object (`json`).
void print_config_matrix(const std::string& path, Family family, const ConfigMatrix& m, bool enable_expert_parallel,
                         std::ostream& out, JsonFilesStream* json);

}  // namespace mlaplan::cli
