// The output of `check` (output/check_output.hpp): GitHub escaping, the per-file printer and the
// --matrix tables.

#include "output/check_output.hpp"

#include "mlaplan/base/number_format.hpp"

#include <algorithm>
#include <cstdio>
#include <ostream>

#include "mlaplan/base/text.hpp"
#include "output/backend_text.hpp"
#include "output/output.hpp"

namespace mlaplan::cli {

namespace {

std::string gh_escape_data(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '%') o += "%25";
    else if (c == '\r') o += "%0D";
    else if (c == '\n') o += "%0A";
    else o += c;
  }
  return o;
}

std::string gh_escape_property(const std::string& s) {
  std::string o;
  for (char c : gh_escape_data(s)) {
    if (c == ':') o += "%3A";
    else if (c == ',') o += "%2C";
    else o += c;
  }
  return o;
}

ojson file_json(const CheckFileResult& r) {
  ojson f = {{"config", r.path}, {"status", r.code == 0 ? "pass" : "fail"}, {"exit_code", r.code}};
  ojson fs = ojson::array();
  for (const auto& x : r.findings) fs.push_back(finding_json(x));
  f["findings"] = std::move(fs);
  if (r.planned) {
    f["family"] = r.family;
    f["target"] = r.target;
    f["kv_cache_dtype"] = r.kv_cache_dtype;
    f["layout"] = {{"label", r.layout}, {"recommended", r.recommended}, {"launch", r.launch}};
    f["global_bytes_per_token"] = {{"rows", r.global_rows}, {"pages", r.global_pages}};
    if (!r.fit.empty()) f["fit"] = r.fit;
    if (r.concurrency) {
      f["maximum_concurrency"] = *r.concurrency;
      f["gpu_kv_cache_tokens"] = *r.kv_tokens;
      f["max_model_len"] = *r.max_model_len;
      f["weights_bytes_per_gpu"] = *r.weights_bytes;
      if (r.spare_bytes) f["spare_bytes"] = *r.spare_bytes;
    }
  }
  return f;
}

/// The width of the matrix's backend column: the longest backend_title() of the catalogue, so
/// that every table has the same columns whatever backends its cells run.
int backend_column_width() {
  static const int width = [] {
    std::size_t w = 7;  // "backend"
    for (const auto& b : backend_catalogue()) w = std::max(w, backend_title(b.id).size());
    return static_cast<int>(w);
  }();
  return width;
}

/// The line of one matrix cell (without its newline): `result` is the fit of a supported cell,
/// or "[N]", the number of its reason in the legend below the table.
std::string matrix_line(std::string_view gpu, const std::string& dtype, std::int64_t tp, std::int64_t dp,
                        std::int64_t gpus, const std::string& backend, bool supported, const std::string& result) {
  char line[512];
  std::snprintf(line, sizeof line, "  %-14s %-14s %4lld %4lld %4lld  %-*s  %s ", std::string(gpu).c_str(),
                dtype.c_str(), static_cast<long long>(tp), static_cast<long long>(dp), static_cast<long long>(gpus),
                backend_column_width(), backend.empty() ? "-" : backend.c_str(), supported ? "yes" : "no ");
  return line + printable(result);
}

/// The distinct reasons of one config's matrix, numbered in order of first appearance.
class ReasonLegend {
 public:
  /// The index (0-based) of `reason`, added when new.
  std::size_t id(const std::string& reason) {
    const auto it = std::find(reasons_.begin(), reasons_.end(), reason);
    if (it != reasons_.end()) return static_cast<std::size_t>(it - reasons_.begin());
    reasons_.push_back(reason);
    return reasons_.size() - 1;
  }
  const std::vector<std::string>& reasons() const { return reasons_; }
  /// "  reasons:\n  [1] text\n..." ("" when no cell has one).
  std::string text() const {
    if (reasons_.empty()) return {};
    std::string o = "  reasons:\n";
    for (std::size_t i = 0; i < reasons_.size(); ++i)
      o += "  [" + std::to_string(i + 1) + "] " + printable(reasons_[i]) + "\n";
    return o;
  }

 private:
  std::vector<std::string> reasons_;
};

/// What passed, in numbers: "31.30x requests of 1,048,576 tokens, 62.76 GiB to spare" ("" when
/// the fit gave none).
std::string passed_numbers(const CheckFileResult& r) {
  if (!r.concurrency) return {};
  std::string o = format_fixed(*r.concurrency, 2) + "x requests of " + format_grouped(*r.max_model_len) + " tokens";
  if (r.spare_bytes) o += ", " + format_gib(*r.spare_bytes) + " to spare";
  return o;
}

}  // namespace

void CheckPrinter::file(const CheckFileResult& r) {
  ++files_;
  failed_ += r.code != 0;
  if (format_ == "json") {
    json_.file(file_json(r));
  } else if (format_ == "markdown") {
    if (files_ == 1) out_ << render_check_markdown_head();
    // A file that passed shows the numbers that passed, as the text line does.
    const std::string numbers = r.code == 0 ? passed_numbers(r) : std::string();
    out_ << render_check_markdown_row(
        {r.path, r.code,
         r.planned ? r.family + " on " + r.target + ", " + r.kv_cache_dtype + (numbers.empty() ? "" : ": " + numbers)
                   : "",
         r.findings});
  } else if (format_ == "github") {
    const std::string on_gpu = r.gpu_count > 1 && !r.target.empty() ? " (" + printable(r.target) + ")" : "";
    if (r.code == 0) {
      // stdout holds one workflow command per finding; what passed, with its numbers, goes to the
      // job's log on stderr, beside the summary.
      err_ << "mla-plan check: PASS " << printable(r.path);
      if (r.planned) {
        err_ << "  [" << printable(r.family) << " on " << printable(r.target) << ", " << printable(r.kv_cache_dtype)
             << ", " << printable(r.layout) << "]";
        if (const std::string numbers = passed_numbers(r); !numbers.empty()) err_ << " " << numbers;
      }
      err_ << "\n";
    }
    for (std::size_t i = 0; i < r.findings.size(); ++i) {
      const Finding& f = r.findings[i];
      // With a location, the file that holds it: a directory's config.json.
      const auto* loc = i < r.locations.size() && r.locations[i] ? &*r.locations[i] : nullptr;
      out_ << "::" << (f.severity == Severity::error ? "error" : "warning")
           << " file=" << gh_escape_property(printable(loc ? r.config_file : r.path));
      if (loc) out_ << ",line=" << std::to_string(loc->line) << ",col=" << std::to_string(loc->column);
      out_ << ",title=" << gh_escape_property("mla-plan " + printable(f.id) + on_gpu)
           << "::" << gh_escape_data(printable(f.message))
           << (f.fix.empty() ? "" : gh_escape_data(" (fix: " + printable(f.fix) + ")")) << "\n";
    }
  } else {
    out_ << (r.code == 0 ? "PASS " : "FAIL ") << printable(r.path);
    if (r.code != 0) out_ << " (exit " << r.code << ")";
    if (r.planned) {
      out_ << "  [" << printable(r.family) << " on " << printable(r.target) << ", " << printable(r.kv_cache_dtype)
           << ", " << printable(r.layout) << (r.recommended ? " (recommended for one node)" : "") << "]";
      if (r.concurrency) out_ << " " << passed_numbers(r);
    }
    out_ << "\n";
    for (const auto& f : r.findings) {
      out_ << "  " << to_string(f.severity) << " [" << printable(f.id) << "]: " << printable(f.message) << "\n";
      if (!f.fix.empty()) out_ << "    fix: " << printable(f.fix) << "\n";
    }
  }
}

void CheckPrinter::finish(int overall, const std::vector<check_inputs::Skipped>& skipped) {
  const std::string skipped_count =
      skipped.empty() ? std::string()
                      : ", " + std::to_string(skipped.size()) + (skipped.size() == 1 ? " file" : " files") + " skipped";
  if (format_ == "json") {
    json_.close(overall, skipped);
  } else if (format_ == "markdown") {
    if (files_ == 0) out_ << render_check_markdown_head();
    out_ << render_check_markdown_tail(files_ - failed_, files_);
    for (const auto& sk : skipped) out_ << "- skipped `" << printable(sk.path) << "`: " << printable(sk.reason) << "\n";
  } else if (format_ == "github") {
    for (const auto& sk : skipped)
      err_ << "mla-plan check: skipped " << printable(sk.path) << " (" << printable(sk.reason) << ")\n";
    err_ << "mla-plan check: " << files_ - failed_ << " passed, " << failed_ << " failed" << skipped_count << "\n";
  } else {
    for (const auto& sk : skipped) out_ << "SKIP " << printable(sk.path) << " (" << printable(sk.reason) << ")\n";
    out_ << files_ - failed_ << " of " << files_ << " configs passed" << skipped_count << "\n";
  }
}

void print_matrix_error(const std::string& path, const Error& e, std::ostream& out, JsonFilesStream* json) {
  if (json) {
    json->file({{"config", path}, {"exit_code", exit_code(e.kind())}, {"error", e.what()}});
  } else {
    out << printable(path) << ": " << printable(e.what()) << "\n";
  }
}

void print_config_matrix(const std::string& path, Family family, const ConfigMatrix& m, bool enable_expert_parallel,
                         std::ostream& out, JsonFilesStream* json) {
  ojson cells = ojson::array();
  ReasonLegend legend;
  std::string table;
  if (!json) {
    char line[512];
    std::snprintf(line, sizeof line, "  %-14s %-14s %4s %4s %4s  %-*s  %s\n", "gpu", "kv dtype", "TP", "DP", "GPUs",
                  backend_column_width(), "backend", "result");
    table = printable(path) + "\n" + line;
  }
  for (const MatrixCell& c : m.cells) {
    std::optional<std::size_t> reason_id;
    if (!c.supported) reason_id = legend.id(c.result);
    if (json) {
      cells.push_back({{"gpu", c.gpu},
                       {"kv_cache_dtype", c.kv_cache_dtype},
                       {"tensor_parallel_size", c.tensor_parallel_size},
                       {"data_parallel_size", c.data_parallel_size},
                       {"gpus", c.gpus},
                       {"enable_expert_parallel", enable_expert_parallel},
                       {"backend", c.backend ? ojson(std::string(backend_info(*c.backend).key)) : ojson(nullptr)},
                       {"supported", c.supported},
                       {"exit_code", c.exit_code},
                       {"maximum_concurrency", c.maximum_concurrency},
                       {"weights_bytes_per_gpu", c.weights_bytes_per_gpu},
                       {"reason", c.supported ? "" : c.result},
                       {"reason_id", reason_id ? ojson(*reason_id) : ojson(nullptr)}});
    } else {
      table += matrix_line(c.gpu, c.kv_cache_dtype, c.tensor_parallel_size, c.data_parallel_size, c.gpus,
                           c.backend ? backend_title(*c.backend, family) : std::string(), c.supported,
                           reason_id ? "[" + std::to_string(*reason_id + 1) + "]" : c.result) +
               "\n";
    }
  }
  // An incomplete checkpoint: the cells are planned with the config's weights, and the file fails
  // (exit 2) saying why, as plan and check do.
  const std::optional<Finding>& incomplete = m.incomplete;
  if (json) {
    ojson file = {
        {"config", path}, {"exit_code", m.exit_code}, {"matrix", std::move(cells)}, {"reasons", legend.reasons()}};
    if (incomplete) file["error"] = incomplete->message + " (fix: " + incomplete->fix + ")";
    json->file(file);
  } else {
    out << table << legend.text();
    if (incomplete) {
      out << "  error [" << incomplete->id << "]: " << printable(incomplete->message)
          << "\n    fix: " << printable(incomplete->fix) << "\n";
    }
    out << "\n";
  }
}

}  // namespace mlaplan::cli
