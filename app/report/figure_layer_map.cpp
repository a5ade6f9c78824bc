// The layer map: every layer as a cell, its type, its roles and the cache runs it shares (docs/report.md).

#include <algorithm>
#include <array>
#include <cmath>

#include "mlaplan/base/number_format.hpp"
#include "output/backend_text.hpp"
#include "report/figures.hpp"
#include "report/palette.hpp"

namespace mlaplan::cli::figures {
namespace {

// ------------------------------------------------------------------ 1. layer map

constexpr int kMapColumns = 20;
constexpr double kCellW = 54;
constexpr double kCellH = 50;
constexpr double kCellPitch = 58;

struct ShareRun {
  std::int64_t first = 0, last = 0, source = 0;
  LayerType type = LayerType::swaonly;
};

}  // namespace

Figure layer_map(const PlanResult& r) {
  const auto& topo = r.topology;
  Figure f;
  Element& g = f.body;
  g.set("class", "layer-map");

  Element defs("defs");
  {
    Element hatch("pattern");
    hatch.set("id", "draft-hatch").set("width", 6).set("height", 6).set("patternUnits", "userSpaceOnUse");
    hatch.set("patternTransform", "rotate(45)");
    hatch.add(filled_rect(0, 0, 2.2, 6, kInk)).set("fill-opacity", 0.22);
    defs.add(std::move(hatch));
    Element arrow("marker");
    arrow.set("id", "share-arrow").set("viewBox", "0 0 10 10").set("refX", 9).set("refY", 5);
    arrow.set("markerWidth", 7).set("markerHeight", 7).set("orient", "auto");
    arrow.add(svg::path("M0,0 L10,5 L0,10 z")).set("fill", kInk);
    defs.add(std::move(arrow));
  }
  g.add(std::move(defs));

  // Sharing groups: runs whose layers read a cache another layer of the run owns.
  std::vector<ShareRun> shares;
  for (const auto& run : topo.runs) {
    if (!run.kv_source) continue;
    if (run.first == run.last && *run.kv_source == run.first) continue;
    shares.push_back({run.first, run.last, *run.kv_source, run.type});
  }
  const bool has_bands = !shares.empty();
  const double band_gap = 14, band_h = 16;
  const double row_pitch = kCellH + (has_bands ? band_gap + band_h + 14 : 14);
  const double x0 = (kWidth - kMapColumns * kCellPitch + (kCellPitch - kCellW)) / 2;

  auto cell_x = [&](std::int64_t i) { return x0 + static_cast<double>(i % kMapColumns) * kCellPitch; };
  auto cell_y = [&](std::int64_t i) { return static_cast<double>(i / kMapColumns) * row_pitch; };

  bool any_kv = false, any_index = false, any_reindex = false, any_candidate = false, any_draft = false;
  for (const auto& l : topo.layers) {
    const auto& st = type_style(l.type);
    const double x = cell_x(l.index), y = cell_y(l.index);
    Element cell = svg::group(std::string("layer ") + std::string(to_string(l.type)) + (l.draft ? " draft" : ""));
    cell.set("data-layer", l.index).set("data-type", to_string(l.type));
    if (l.draft) cell.set("data-draft", "true");
    cell.tooltip(layer_tooltip(l, topo));
    Element box = filled_rect(x, y, kCellW, kCellH, st.fill);
    box.set("rx", 4);
    if (l.draft) box.set("stroke", kInk).set("stroke-width", 2).set("stroke-dasharray", "5 3");
    cell.add(std::move(box));
    if (l.draft) {
      Element hatch = svg::rect(x, y, kCellW, kCellH);
      hatch.set("rx", 4).set("fill", "url(#draft-hatch)");
      cell.add(std::move(hatch));
    }
    const double cx = x + kCellW / 2;
    cell.add(text_at(cx, y + (l.draft ? 19 : 22), std::to_string(l.index), 15, "middle", st.ink, true));
    cell.add(text_at(cx, y + (l.draft ? 32 : 38), std::string(to_string(l.type)), 10.5, "middle", st.ink));
    if (l.draft) cell.add(text_at(cx, y + 44, "draft", 9, "middle", st.ink)).set("font-style", "italic");
    if (l.is_kv_source) {
      cell.add(marker_element(kv_marker(x + 9, y + 9, st.ink)));
      any_kv = true;
    }
    if (l.is_reindex) {
      cell.add(marker_element(reindex_marker(x + kCellW - 9, y + 9, st.ink)));
      any_reindex = true;
    } else if (l.is_index_source) {
      cell.add(marker_element(index_marker(x + kCellW - 9, y + 9, st.ink)));
      any_index = true;
    }
    if (l.is_candidate_source) {
      cell.add(marker_element(candidate_marker(x + kCellW - 9, y + kCellH - 9, st.ink)));
      any_candidate = true;
    }
    any_draft = any_draft || l.draft;
    g.add(std::move(cell));
  }

  // Bands under the cells, one segment per map row, with an arrow up to the source's cell.
  for (const auto& s : shares) {
    const auto& st = type_style(s.type);
    Element band = svg::group("share-band");
    band.set("data-first", s.first).set("data-last", s.last).set("data-source", s.source);
    band.tooltip("layers " + std::to_string(s.first) + "-" + std::to_string(s.last) + " (" +
                 std::string(to_string(s.type)) + ") read the compressed cache of layer " + std::to_string(s.source));
    bool arrow_drawn = false;
    for (std::int64_t a = s.first; a <= s.last;) {
      const std::int64_t row_end = (a / kMapColumns + 1) * kMapColumns - 1;
      const std::int64_t b = std::min(s.last, row_end);
      const double bx = cell_x(a), by = cell_y(a) + kCellH + band_gap;
      const double bw = cell_x(b) + kCellW - bx;
      Element rect = filled_rect(bx, by, bw, band_h, st.fill);
      rect.set("rx", 5).set("fill-opacity", 0.35).set("stroke", st.fill).set("stroke-width", 1.2);
      band.add(std::move(rect));
      double text_x = bx + 8;
      const bool source_here = s.source >= a && s.source <= b;
      if (source_here && !arrow_drawn) {
        const double sx = cell_x(s.source) + kCellW / 2;
        Element arrow = svg::line(sx, by + 3, sx, cell_y(s.source) + kCellH + 1.5);
        arrow.set("stroke", kInk).set("stroke-width", 1.5).set("marker-end", "url(#share-arrow)");
        arrow.set("class", "share-arrow");
        band.add(std::move(arrow));
        arrow_drawn = true;
        if (sx - bx < 40) text_x = sx + 8;
      }
      // The longest description that fits the segment.
      const std::string src = std::to_string(s.source);
      const std::string layers = s.first == s.last ? "layer " + std::to_string(s.first)
                                                   : "layers " + std::to_string(s.first) + "-" + std::to_string(s.last);
      const std::vector<std::string> texts =
          a == s.first ? std::vector<std::string>{layers + " read layer " + src + "'s compressed cache",
                                                  layers + " read layer " + src + "'s cache", "read layer " + src,
                                                  "KV of " + src, src}
                       : std::vector<std::string>{"(continued) read layer " + src + "'s compressed cache",
                                                  "(cont.) read layer " + src, "KV of " + src, src};
      const double room = bx + bw - text_x - 6;
      for (const auto& t : texts) {
        if (svg::text_width(t, 10.5) <= room) {
          band.add(text_at(text_x, by + 12, t, 10.5));
          break;
        }
      }
      a = b + 1;
    }
    g.add(std::move(band));
  }

  // The legend goes under the last row of cells, or under its bands when it has some.
  const auto n = static_cast<std::int64_t>(topo.layers.size());
  const std::int64_t last_row = n == 0 ? 0 : (n - 1) / kMapColumns;
  bool last_row_banded = false;
  for (const auto& s : shares) last_row_banded = last_row_banded || s.last / kMapColumns == last_row;
  double y = static_cast<double>(last_row) * row_pitch + kCellH + (last_row_banded ? band_gap + band_h : 0) + 22;

  // Legend: the types present, then the marks used.
  Element legend = svg::group("legend");
  LegendFlow flow(legend, x0, y, kWidth - kMargin);
  for (auto t : topo.types_present) {
    const auto& st = type_style(t);
    std::string text =
        std::string(to_string(t)) + ": " + std::string(st.meaning) + " (" + std::to_string(topo.count(t));
    if (topo.count_draft(t) > 0) text += ", " + std::to_string(topo.count_draft(t)) + " draft";
    text += ")";
    flow.add(swatch(st.fill, 18), 18, text);
  }
  LegendFlow marks(legend, x0, flow.bottom(), kWidth - kMargin);
  const std::string_view mark_ink = kInk;
  if (any_kv) {
    Element sw = svg::group();
    sw.add(marker_element(kv_marker(7, 7, mark_ink)));
    marks.add(std::move(sw), 14, "KV source: owns a compressed cache");
  }
  if (any_index) {
    Element sw = svg::group();
    sw.add(marker_element(index_marker(7, 8, mark_ink)));
    marks.add(std::move(sw), 14, "index source: publishes top-k indices");
  }
  if (any_reindex) {
    Element sw = svg::group();
    sw.add(marker_element(reindex_marker(7, 8, mark_ink)));
    marks.add(std::move(sw), 14, "reindex: index source without a cache of its own");
  }
  if (any_candidate) {
    Element sw = svg::group();
    sw.add(marker_element(candidate_marker(7, 7, mark_ink)));
    marks.add(std::move(sw), 14, "candidate source: its top blocks constrain later index sources");
  }
  if (any_draft) {
    Element sw = svg::group();
    sw.add(filled_rect(0, 0, 18, 14, "#ffffff"))
        .set("stroke", kInk)
        .set("stroke-width", 1.5)
        .set("stroke-dasharray", "4 2");
    sw.add(filled_rect(0, 0, 18, 14, "url(#draft-hatch)"));
    marks.add(std::move(sw), 18, "draft layer (" + draft_kind(topo) + ")");
  }
  if (has_bands) {
    Element sw = svg::group();
    sw.add(filled_rect(0, 2, 26, 10, "#8c959f")).set("fill-opacity", 0.35).set("rx", 3);
    Element arrow = svg::line(8, 12, 8, 0.5);
    arrow.set("stroke", kInk).set("stroke-width", 1.5);
    sw.add(std::move(arrow));
    sw.add(svg::path("M4.5,4 L8,-1 L11.5,4 z")).set("fill", kInk);
    marks.add(std::move(sw), 26, "sharing group: layers reading one layer's compressed cache, arrow to that layer");
  }
  g.add(std::move(legend));
  f.height = marks.bottom();
  return f;
}

}  // namespace mlaplan::cli::figures
