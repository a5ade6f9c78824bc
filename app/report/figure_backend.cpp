// The attention backend vLLM runs and one row per kernel shape (docs/report.md).

#include <algorithm>
#include <array>
#include <cmath>

#include "mlaplan/base/number_format.hpp"
#include "output/backend_text.hpp"
#include "report/figures.hpp"
#include "report/palette.hpp"

namespace mlaplan::cli::figures {

std::vector<std::string> kernel_shape_cells(const KernelShape& s) {
  return {s.phase,
          s.kernel,
          shape_layer_types(s),
          shape_heads(s),
          std::to_string(s.d_qk),
          shape_topk(s),
          shape_page_rows(s),
          std::string(to_string(s.status))};
}

std::string_view shape_colour(ShapeStatus s) {
  return s == ShapeStatus::available ? kPassColour : s == ShapeStatus::missing ? kErrorColour : kWarningColour;
}

/// The backend vLLM runs, how it was chosen, its decode path and one row per kernel shape (a
/// shape that is not available in the error or warning colour, with its note and fix below).
Figure backend_figure(const PlanResult& r) {
  Figure f;
  Element& g = f.body;
  g.set("class", "backend");
  double y = 0;
  if (!r.layout) {
    g.add(text_at(kMargin, 16, "No layout: no backend was chosen.", 13));
    f.height = 30;
    return f;
  }
  const Layout& l = *r.layout;
  const BackendInfo& b = backend_info(l.backend);
  g.set("data-backend", b.key);
  g.add(text_at(kMargin, y + 15, backend_heading(r), 14, "start", backend_refusal(r) ? kErrorColour : kInk, true));
  y += 22;
  const double room = kWidth - 2 * kMargin;
  for (const auto& line : svg::wrap_text((l.backend_how.empty() ? std::string() : "chosen: " + l.backend_how + " · ") +
                                             "decode path: " + std::string(b.decode_path),
                                         12, room)) {
    g.add(text_at(kMargin, y + 13, line, 12, "start", kMuted));
    y += 17;
  }
  if (r.kernel_shapes.empty()) {
    f.height = y + 6;
    return f;
  }
  y += 6;
  const double font = 11.5, pad = 6, row_h = 18;
  std::vector<double> widths;
  // Headers are bold: a tenth wider than text_width's regular estimate.
  for (const auto& c : kKernelShapeColumns) widths.push_back(1.1 * svg::text_width(c, font) + 2 * pad);
  for (const auto& s : r.kernel_shapes) {
    const auto cells = kernel_shape_cells(s);
    for (std::size_t c = 0; c < cells.size(); ++c)
      widths[c] = std::max(widths[c], svg::text_width(cells[c], font) + 2 * pad);
  }
  double sum = 0;
  for (double w : widths) sum += w;
  while (sum > room) {  // the widest column gives way (the kernel names) until the table fits
    auto it = std::max_element(widths.begin(), widths.end());
    if (*it <= 60) break;
    const double cut = std::min(*it - 60, sum - room);
    *it -= cut;
    sum -= cut;
  }
  Element table = svg::group("kernel-shapes");
  auto draw_row = [&](const std::vector<std::string>& cells, Element row, bool header, std::size_t index,
                      std::string_view status_ink) {
    row.add(filled_rect(kMargin, y, std::min(sum, room), row_h,
                        header      ? "#eaeef2"
                        : index % 2 ? "#f6f8fa"
                                    : "#ffffff"));
    double x = kMargin;
    for (std::size_t c = 0; c < cells.size(); ++c) {
      const bool status = !header && c + 1 == cells.size();
      const std::string shown = svg::fit_text(cells[c], font, widths[c] - 2 * pad);
      Element cell = text_at(x + pad, y + 13, shown, font, "start", status ? status_ink : kInk, header || status);
      if (shown != cells[c]) cell.tooltip(cells[c]);
      row.add(std::move(cell));
      x += widths[c];
    }
    y += row_h;
    return row;
  };
  table.add(draw_row({kKernelShapeColumns.begin(), kKernelShapeColumns.end()}, svg::group("header"), true, 0, kInk));
  for (std::size_t i = 0; i < r.kernel_shapes.size(); ++i) {
    const KernelShape& s = r.kernel_shapes[i];
    Element row = svg::group("kernel-shape " + std::string(to_string(s.status)));
    row.set("data-phase", s.phase).set("data-status", to_string(s.status));
    row = draw_row(kernel_shape_cells(s), std::move(row), false, i, shape_colour(s.status));
    if (s.status != ShapeStatus::available) {
      std::string text = s.note;
      if (!s.fix.empty()) text += (text.empty() ? "fix: " : " · fix: ") + s.fix;
      for (const auto& line : svg::wrap_text(text, 11, room - 24)) {
        row.add(text_at(kMargin + 24, y + 12, line, 11, "start", shape_colour(s.status)));
        y += 16;
      }
    }
    table.add(std::move(row));
  }
  g.add(std::move(table));
  f.height = y + 8;
  return f;
}

}  // namespace mlaplan::cli::figures
