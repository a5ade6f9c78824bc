#pragma once
// `mla-plan report`: the plan drawn as one self-contained SVG, or an HTML page holding the same
// drawings with headings and tables (docs/report.md). Rendering is a pure function of the plan
// and the optional verify / bench results, so the same inputs give byte-identical files.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "cli/commands.hpp"
#include "mlaplan/base/limits.hpp"  // ResultLimits: beyond them a result file is Error(invalid_config), exit 2

namespace mlaplan::cli {

/// A table found in a verify / bench JSON file: an array of row objects.
struct ResultTable {
  std::string pointer;               ///< JSON pointer of the array: "/results"
  std::vector<std::string> columns;  ///< union of the row keys, first seen first (at most ResultLimits::max_columns)
  std::vector<std::vector<std::string>>
      rows;                     ///< cells as text ("" for a missing key); at most ReportLimits::max_html_rows
  std::int64_t total_rows = 0;  ///< row objects in the file (rows holds the first of them)
};

/// What a --verify-json / --bench-json file holds, read tolerantly.
struct ResultFile {
  std::string flag;                                          ///< "--verify-json" / "--bench-json"
  std::string title;                                         ///< "GPU verification" / "Benchmarks"
  std::string path;                                          ///< the file as given
  std::vector<std::pair<std::string, std::string>> summary;  ///< top-level scalars: schema, exit_code, ...
  std::vector<ResultTable> tables;  ///< every array of objects under "results", "matrix" or "rows"
};

/// Parses result JSON text. Error(invalid_config) (exit 2) naming `flag` and `path` when it is not
/// JSON (a NUL byte anywhere, nesting past ResultLimits::max_nesting_depth, a syntax error).
ResultFile parse_result_json(std::string_view text, const std::string& flag, const std::string& title,
                             const std::string& path);
/// Reads and parses a result file (read_input_file: a regular file of at most
/// ResultLimits::max_file_bytes). Error(invalid_config) (exit 2) naming `flag`, the file and the
/// cause when it cannot be read or is not a regular file.
ResultFile read_result_json(const std::string& flag, const std::string& title, const std::string& path);

/// The report as a standalone SVG document.
std::string render_report_svg(const PlanResult& r, const std::vector<ResultFile>& extras);
/// The report as a standalone HTML page (inline SVG, no scripts, no external resources).
std::string render_report_html(const PlanResult& r, const std::vector<ResultFile>& extras);

/// Bytes of one cache part (compressed, indexer, window, state) in both accountings.
struct PartBytes {
  double rows_per_token = 0;       ///< global parts: DeepSeek's rows accounting (draft excluded)
  double pages_per_token = 0;      ///< global parts: the engine's pages accounting
  std::int64_t request_rows = 0;   ///< one request at max_model_len, rows accounting
  std::int64_t request_pages = 0;  ///< one request at max_model_len, pages accounting
};
/// Bytes by cache part, in the order of kCachePartStyles; the parts sum to the layout's
/// accounting (rows: up to rounding of the per-token fractions).
std::vector<PartBytes> bytes_by_part(const Layout& layout);

}  // namespace mlaplan::cli
