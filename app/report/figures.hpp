#pragma once
// The report's figures (docs/report.md), one file each (figure_*.cpp), and what they draw with
// (figures.cpp): the page's measures and colours, text and shape helpers, a wrapping legend. Each
// figure is an SVG group of known height; report.cpp stacks them into the SVG report and puts
// them under headings in the HTML one.

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cli/commands.hpp"
#include "mlaplan/base/limits.hpp"
#include "report/report.hpp"
#include "report/svg.hpp"

namespace mlaplan::cli::figures {

using svg::Element;

inline constexpr double kWidth = 1240;
inline constexpr double kMargin = 24;
inline constexpr std::string_view kFontStack = "-apple-system, 'Segoe UI', Helvetica, Arial, sans-serif";
inline constexpr std::string_view kInk = "#1f2328";
inline constexpr std::string_view kMuted = "#57606a";
inline constexpr std::string_view kGrid = "#d0d7de";
inline constexpr std::string_view kIdleFill = "#fbe9e7";
inline constexpr std::string_view kIdleInk = "#b42318";

// ------------------------------------------------------------------ text

std::string trimmed(double v, int digits);
/// "890 B", "18.56 KiB", "1.75 GiB".
std::string fmt_bytes(double b);
/// Bytes per token with up to two decimals and thousands separators: "1,790", "3,850.25".
std::string fmt_per_token(double v);
std::string status_text(const PlanResult& r);
std::string_view status_colour(const PlanResult& r);  ///< the pass or the error colour of the plan's exit
std::string model_line(const PlanResult& r);
std::string target_line(const PlanResult& r);
std::string layer_tooltip(const Layer& l, const Topology& topo);
std::string draft_kind(const Topology& topo);  ///< "DSpark" or "MTP"

// ------------------------------------------------------------------ shapes

Element text_at(double x, double y, std::string text, double size, std::string_view anchor = "start",
                std::string_view fill = kInk, bool bold = false);
Element filled_rect(double x, double y, double w, double h, std::string_view fill);
Element translated(double x, double y);
Element diamond(double cx, double cy, double r);
Element triangle(double cx, double cy, double r);
Element star(double cx, double cy, double r);
Element swatch(std::string_view fill, double w = 14, double h = 14);

/// A layer-map marker: its shape and its CSS class.
struct Marker {
  std::string css;
  Element shape;
};
Marker kv_marker(double cx, double cy, std::string_view ink);
Marker index_marker(double cx, double cy, std::string_view ink);
Marker reindex_marker(double cx, double cy, std::string_view ink);
Marker candidate_marker(double cx, double cy, std::string_view ink);
Element marker_element(Marker m);

/// A legend laid out left to right, wrapping at `max_x`.
class LegendFlow {
 public:
  LegendFlow(Element& parent, double x0, double y, double max_x)
      : parent_(parent), x0_(x0), x_(x0), y_(y), max_x_(max_x) {}
  /// `swatch` is drawn in a box of swatch_w x 14 whose top-left is the origin.
  void add(Element swatch, double swatch_w, const std::string& text) {
    const double w = swatch_w + 6 + svg::text_width(text, 12) + 24;
    if (x_ > x0_ && x_ + w > max_x_) {
      x_ = x0_;
      y_ += 22;
    }
    Element g = translated(x_, y_);
    g.set("class", "legend-item");
    g.add(std::move(swatch));
    g.add(text_at(swatch_w + 6, 11.5, text, 12));
    parent_.add(std::move(g));
    x_ += w;
  }
  /// The y below the last line.
  double bottom() const { return y_ + 22; }

 private:
  Element& parent_;
  double x0_, x_, y_, max_x_;
};

/// A section: its drawing and the height the drawing needs.
struct Figure {
  Element body = svg::group();
  double height = 0;
};

// ------------------------------------------------------------------ the figures

Figure layer_map(const PlanResult& r);       ///< figure_layer_map.cpp
Figure memory_picture(const PlanResult& r);  ///< figure_memory.cpp
Figure prefill_figure(const PlanResult& r);  ///< figure_prefill.cpp
/// figure_kv_tiers.cpp: the prefix cache and the host offload tier as (what, value) rows
/// (docs/prefix-cache.md, docs/offload.md); empty when the plan has none.
std::vector<std::pair<std::string, std::string>> kv_tier_rows(const PlanResult& r);
Figure kv_tiers_figure(const PlanResult& r);
/// figure_backend.cpp: the columns of a kernel-shape row, and one row's cells in their order.
inline constexpr std::array<std::string_view, 8> kKernelShapeColumns{
    "phase", "kernel", "layer types", "heads per rank -> kernel", "d_qk", "topk (+ extra)", "page rows", "status"};
std::vector<std::string> kernel_shape_cells(const KernelShape& s);
Figure backend_figure(const PlanResult& r);
Figure schedules(const PlanResult& r);        ///< figure_schedules.cpp
Figure findings_figure(const PlanResult& r);  ///< figure_findings.cpp
/// figure_results.cpp: a verify / bench result file's tables, and the colour of a cell's value.
Figure result_figure(const ResultFile& file);
std::string_view cell_colour(const std::string& v);

}  // namespace mlaplan::cli::figures
