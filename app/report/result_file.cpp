// What report reads of a --verify-json / --bench-json file (report/report.hpp): its scalars and
// every table of row objects, read tolerantly, and the input rules of a result file.

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "mlaplan/base/error.hpp"
#include "mlaplan/base/input_file.hpp"
#include "mlaplan/base/text.hpp"
#include "report/report.hpp"
#include "output/json_out.hpp"

namespace mlaplan::cli {

namespace {

std::string cell_text(const ojson& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_null()) return "";
  std::string s = v.dump(-1, ' ', false, ojson::error_handler_t::replace);
  if (s.size() > 200) s = s.substr(0, 197) + "...";
  return s;
}

std::string escape_pointer_token(const std::string& key) {
  std::string o;
  for (char c : key) {
    if (c == '~') o += "~0";
    else if (c == '/') o += "~1";
    else o += c;
  }
  return o;
}

bool is_table(const ojson& v) {
  return v.is_array() && std::any_of(v.begin(), v.end(), [](const ojson& e) { return e.is_object(); });
}

/// The rows of an array of objects: columns are the keys of the rows kept (first seen first, at
/// most ResultLimits::max_columns); rows past ReportLimits::max_html_rows are counted, not kept.
ResultTable make_table(const ojson& arr, const std::string& pointer) {
  ResultTable t;
  t.pointer = pointer;
  std::vector<const ojson*> kept;
  for (const auto& e : arr) {
    if (!e.is_object()) continue;
    ++t.total_rows;
    if (static_cast<std::int64_t>(kept.size()) < ReportLimits::max_html_rows) kept.push_back(&e);
  }
  for (const ojson* e : kept) {
    for (const auto& [k, v] : e->items()) {
      if (static_cast<std::int64_t>(t.columns.size()) >= ResultLimits::max_columns) break;
      if (std::find(t.columns.begin(), t.columns.end(), k) == t.columns.end()) t.columns.push_back(k);
    }
  }
  t.rows.reserve(kept.size());
  for (const ojson* e : kept) {
    std::vector<std::string> row;
    row.reserve(t.columns.size());
    for (const auto& c : t.columns) {
      const auto it = e->find(c);
      row.push_back(it != e->end() ? cell_text(*it) : std::string());
    }
    t.rows.push_back(std::move(row));
  }
  return t;
}

constexpr std::size_t kMaxTables = static_cast<std::size_t>(ResultLimits::max_tables);
constexpr int kMaxWalkDepth = 8;

/// Finds every array of row objects under a key "results", "matrix" or "rows", at any depth.
void find_tables(const ojson& v, const std::string& pointer, int depth, std::vector<ResultTable>& out) {
  if (depth > kMaxWalkDepth || out.size() >= kMaxTables) return;
  if (v.is_object()) {
    for (const auto& [k, child] : v.items()) {
      const std::string p = pointer + "/" + escape_pointer_token(k);
      if ((k == "results" || k == "matrix" || k == "rows") && is_table(child)) {
        if (out.size() < kMaxTables) out.push_back(make_table(child, p));
      }
      if (child.is_structured()) find_tables(child, p, depth + 1, out);
    }
  } else if (v.is_array()) {
    std::size_t i = 0;
    for (const auto& child : v) {
      if (child.is_structured()) find_tables(child, pointer + "/" + std::to_string(i), depth + 1, out);
      ++i;
    }
  }
}

}  // namespace

ResultFile parse_result_json(std::string_view text, const std::string& flag, const std::string& title,
                             const std::string& path) {
  ResultFile f;
  f.flag = flag;
  f.title = title;
  f.path = path;
  const std::string expected =
      "expected the output of mla-plan " + std::string(flag == "--bench-json" ? "bench" : "verify") + " --json";
  // Any NUL is invalid input: nlohmann's lexer takes a NUL for the end of the input, so the bytes
  // after it would never be looked at.
  if (const auto nul = find_nul_byte(text)) {
    throw_config(flag + ": " + mlaplan::quoted(path, mlaplan::kQuotedPathMaxBytes) + " holds a " +
                 describe_nul_byte(*nul) + "; " + expected + ", which is JSON text");
  }
  ojson j;
  // Depth first, then a plain parse: nlohmann's parse with a callback scans the parent container
  // at every closing brace, quadratic in the rows of a large file.
  if (const auto past = find_nesting_past(text, ResultLimits::max_nesting_depth)) {
    throw_config(flag + ": " + mlaplan::quoted(path, mlaplan::kQuotedPathMaxBytes) + " nests deeper than " +
                 std::to_string(ResultLimits::max_nesting_depth) + " levels (line " + std::to_string(past->line) +
                 "); expected the JSON output of mla-plan");
  }
  try {
    // The whole text is one JSON value: anything but whitespace after it is a parse error.
    j = ojson::parse(text.begin(), text.end());
  } catch (const ojson::exception& e) {
    std::string what = e.what();
    if (auto pos = what.find("] "); what.rfind("[json.exception", 0) == 0 && pos != std::string::npos) {
      what = what.substr(pos + 2);
    }
    // The parser quotes the bytes it last read, which may be anything.
    throw_config(flag + ": " + mlaplan::quoted(path, mlaplan::kQuotedPathMaxBytes) + " is not JSON (" +
                 printable(what, 240) + "); " + expected);
  }
  if (j.is_object()) {
    for (const auto& [k, v] : j.items()) {
      if (v.is_primitive() && !v.is_null() && f.summary.size() < 8) f.summary.emplace_back(k, cell_text(v));
    }
  }
  if (is_table(j)) f.tables.push_back(make_table(j, "/"));
  find_tables(j, "", 0, f.tables);
  return f;
}

ResultFile read_result_json(const std::string& flag, const std::string& title, const std::string& path) {
  const InputFileRules rules{flag + ": ", ResultLimits::max_file_bytes, "the limit for result files",
                             "expected the JSON output of mla-plan"};
  return parse_result_json(read_input_file(path, rules), flag, title, path);
}

}  // namespace mlaplan::cli
