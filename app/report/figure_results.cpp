// The tables of verify / bench result files (--verify-json, --bench-json) (docs/report.md).

#include <algorithm>
#include <array>
#include <cmath>

#include "mlaplan/base/number_format.hpp"
#include "output/backend_text.hpp"
#include "report/figures.hpp"
#include "report/palette.hpp"

namespace mlaplan::cli::figures {
namespace {

// ------------------------------------------------------------------ 5. verify / bench tables

constexpr std::size_t kSvgTableRows = static_cast<std::size_t>(ReportLimits::max_svg_rows);

}  // namespace

std::string_view cell_colour(const std::string& v) {
  std::string l = v;
  std::transform(l.begin(), l.end(), l.begin(),
                 [](char c) { return static_cast<char>(std::tolower(static_cast<unsigned char>(c))); });
  if (l == "pass" || l == "passed" || l == "ok" || l == "true" || l == "yes") return kPassColour;
  if (l == "fail" || l == "failed" || l == "error" || l == "false" || l == "no") return kErrorColour;
  return kInk;
}

Figure result_figure(const ResultFile& file) {
  Figure f;
  Element& g = f.body;
  g.set("class", "results").set("data-flag", file.flag);
  double y = 0;
  std::string summary = file.flag + " " + file.path;
  for (const auto& [k, v] : file.summary) summary += " · " + k + " " + v;
  for (const auto& line : svg::wrap_text(summary, 12, kWidth - 2 * kMargin)) {
    g.add(text_at(kMargin, y + 13, line, 12, "start", kMuted));
    y += 17;
  }
  if (file.tables.empty()) {
    g.add(text_at(kMargin, y + 15, "No array of row objects under \"results\", \"matrix\" or \"rows\".", 12.5));
    f.height = y + 26;
    return f;
  }
  const double max_col = 320, font = 11.5, pad = 6;
  for (const auto& t : file.tables) {
    y += 6;
    g.add(text_at(kMargin, y + 13, t.pointer + " (" + std::to_string(t.total_rows) + " rows)", 12.5, "start", kInk,
                  true));
    y += 20;
    std::vector<double> widths;
    for (std::size_t c = 0; c < t.columns.size(); ++c) {
      double w = svg::text_width(t.columns[c], font) + 2 * pad;
      for (std::size_t i = 0; i < t.rows.size() && i < kSvgTableRows; ++i) {
        w = std::max(w, svg::text_width(t.rows[i][c], font) + 2 * pad);
      }
      widths.push_back(std::min(w, max_col));
    }
    // Shrink the widest columns until the table fits the page.
    const double room = kWidth - 2 * kMargin;
    double sum = 0;
    for (double w : widths) sum += w;
    while (sum > room) {
      auto it = std::max_element(widths.begin(), widths.end());
      if (*it <= 40) break;
      const double cut = std::min(*it - 40, sum - room);
      *it -= cut;
      sum -= cut;
    }
    Element table = svg::group("result-table");
    table.set("data-pointer", t.pointer);
    const double row_h = 18;
    auto draw_row = [&](const std::vector<std::string>& cells, bool header, std::size_t index) {
      double x = kMargin;
      Element row = svg::group(header ? "header" : "row");
      const double total_w = std::min(sum, room);
      row.add(filled_rect(kMargin, y, total_w, row_h, header ? "#eaeef2" : index % 2 ? "#f6f8fa" : "#ffffff"));
      for (std::size_t c = 0; c < cells.size() && c < widths.size(); ++c) {
        if (x + widths[c] > kMargin + room + 0.5) break;
        const std::string shown = svg::fit_text(cells[c], font, widths[c] - 2 * pad);
        Element cell = text_at(x + pad, y + 13, shown, font, "start", header ? kInk : cell_colour(cells[c]), header);
        if (shown != cells[c]) cell.tooltip(cells[c]);
        row.add(std::move(cell));
        x += widths[c];
      }
      table.add(std::move(row));
      y += row_h;
    };
    draw_row(t.columns, true, 0);
    for (std::size_t i = 0; i < t.rows.size() && i < kSvgTableRows; ++i) draw_row(t.rows[i], false, i);
    g.add(std::move(table));
    if (t.total_rows > static_cast<std::int64_t>(kSvgTableRows)) {
      g.add(text_at(kMargin, y + 14,
                    "... " + std::to_string(t.total_rows - static_cast<std::int64_t>(kSvgTableRows)) +
                        " more rows (the HTML report lists up to " + std::to_string(ReportLimits::max_html_rows) + ")",
                    11.5, "start", kMuted));
      y += 20;
    }
  }
  f.height = y + 8;
  return f;
}

}  // namespace mlaplan::cli::figures
