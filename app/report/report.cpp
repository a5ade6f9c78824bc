// The drawings of `mla-plan report` (docs/report.md): the layer map, the memory picture, one
// decode-schedule chart per layer type, the findings and any verify / bench tables. Each section
// is an SVG group of known height; the SVG report stacks them in one document, the HTML report
// puts each drawing in its own inline <svg> under a heading and the rest in tables.

#include <algorithm>
#include <array>
#include <cmath>
#include <numbers>

#include "output/backend_text.hpp"
#include "mlaplan/base/number_format.hpp"
#include "report/palette.hpp"
#include "report/report.hpp"
#include "report/svg.hpp"

namespace mlaplan::cli {

namespace {

using svg::Element;

constexpr double kWidth = 1240;
constexpr double kMargin = 24;
constexpr std::string_view kFontStack = "-apple-system, 'Segoe UI', Helvetica, Arial, sans-serif";
constexpr std::string_view kInk = "#1f2328";
constexpr std::string_view kMuted = "#57606a";
constexpr std::string_view kGrid = "#d0d7de";
constexpr std::string_view kIdleFill = "#fbe9e7";
constexpr std::string_view kIdleInk = "#b42318";

// ------------------------------------------------------------------ text helpers

std::string draft_kind(const Topology& topo) { return topo.dspark_drafts ? "DSpark" : "MTP"; }

std::string trimmed(double v, int digits) {
  std::string s = format_fixed(v, digits);
  if (s.find('.') != std::string::npos) {
    while (s.back() == '0') s.pop_back();
    if (s.back() == '.') s.pop_back();
  }
  return s;
}

/// "890 B", "18.56 KiB", "1.75 GiB".
std::string fmt_bytes(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  int u = 0;
  double v = b;
  while (std::fabs(v) >= 1024.0 && u < 5) {
    v /= 1024.0;
    ++u;
  }
  if (u == 0) return format_fixed(v, 0) + " B";
  return format_fixed(v, 2) + " " + units[u];
}

/// Bytes per token with up to two decimals and thousands separators: "1,790", "3,850.25".
std::string fmt_per_token(double v) {
  const double whole = std::floor(v);
  std::string s = svg::grouped(static_cast<std::int64_t>(whole));
  const double frac = v - whole;
  if (frac > 0.004) {
    std::string f = trimmed(frac, 2);  // "0.25"
    if (f == "1") return svg::grouped(static_cast<std::int64_t>(whole) + 1);
    if (f.size() > 1) s += f.substr(1);
  }
  return s;
}

std::string status_text(const PlanResult& r) {
  if (r.exit_code == 0) {
    return "exit 0: supported on " + r.target.id + (r.fit ? ", " + r.fit->verdict : std::string());
  }
  return "exit " + std::to_string(r.exit_code) + ": " + r.exit_message;
}

std::string_view status_colour(const PlanResult& r) { return r.exit_code == 0 ? kPassColour : kErrorColour; }

std::string model_line(const PlanResult& r) {
  const auto& c = r.config;
  std::string s = family_title(c.family) + " (" + std::string(to_string(c.family)) + ") · " +
                  std::to_string(c.num_hidden_layers) + " layers + " + std::to_string(c.num_draft_layers) +
                  " draft · " + std::to_string(c.num_attention_heads) + " query heads · head_dim " +
                  std::to_string(c.head_dim);
  if (c.sliding_window > 0) s += " · window " + std::to_string(c.sliding_window);
  s += " · index_topk " + std::to_string(c.index_topk);
  if (!c.dtype.empty()) s += " · " + c.dtype;
  return s;
}

std::string target_line(const PlanResult& r) {
  const auto& t = r.target;
  std::string s = "target " + t.id + " (" + t.name + ", " + t.cc.sm() + ", " + std::to_string(t.num_sms) + " SMs, " +
                  fmt_bytes(static_cast<double>(t.memory_bytes)) + ")";
  if (r.layout) {
    const auto& l = *r.layout;
    s += " · kv " + std::string(to_string(l.kv_cache_dtype)) + ", indexer " +
         std::string(to_string(l.indexer_cache_dtype)) + ", block " + std::to_string(l.block_size) +
         " · max_model_len " + svg::grouped(l.max_model_len) + " · TP " +
         std::to_string(l.parallel.tensor_parallel_size) + ", PP " + std::to_string(l.parallel.pipeline_parallel_size) +
         ", DP " + std::to_string(l.parallel.data_parallel_size);
  }
  return s;
}

std::string layer_tooltip(const Layer& l, const Topology& topo) {
  std::string s = "layer " + std::to_string(l.index) + ": " + std::string(to_string(l.type)) + " (" +
                  std::string(type_style(l.type).meaning) + ")";
  if (l.draft) s += "\ndraft layer (" + draft_kind(topo) + ")";
  if (l.kv_source) {
    s += *l.kv_source == l.index ? "\nKV source: owns its compressed cache"
                                 : "\nreads the compressed cache of layer " + std::to_string(*l.kv_source);
  }
  if (l.is_reindex) s += "\nreindex: runs the indexer without a cache of its own";
  else if (l.is_index_source) s += "\nindex source: publishes its top-k indices";
  if (l.index_source && *l.index_source != l.index) {
    s += "\nuses the top-k indices of layer " + std::to_string(*l.index_source);
  }
  if (l.is_candidate_source) s += "\ncandidate source: its top blocks constrain later index sources";
  if (l.owns_indexer_cache) s += "\nowns an indexer-key cache";
  if (l.owns_compressor_state) s += "\nowns a compressor state ring";
  return s;
}

// ------------------------------------------------------------------ drawing helpers

Element text_at(double x, double y, std::string text, double size, std::string_view anchor = "start",
                std::string_view fill = kInk, bool bold = false) {
  Element t = svg::label(x, y, std::move(text), anchor);
  t.set("font-size", size);
  if (fill != kInk) t.set("fill", fill);
  if (bold) t.set("font-weight", "bold");
  return t;
}

Element filled_rect(double x, double y, double w, double h, std::string_view fill) {
  Element e = svg::rect(x, y, w, h);
  e.set("fill", fill);
  return e;
}

Element translated(double x, double y) {
  Element g = svg::group();
  g.set("transform", "translate(" + svg::num(x) + "," + svg::num(y) + ")");
  return g;
}

Element diamond(double cx, double cy, double r) {
  return svg::polygon({{cx, cy - r}, {cx + r, cy}, {cx, cy + r}, {cx - r, cy}});
}

Element triangle(double cx, double cy, double r) {
  return svg::polygon({{cx, cy - r}, {cx + r, cy + r * 0.8}, {cx - r, cy + r * 0.8}});
}

Element star(double cx, double cy, double r) {
  std::vector<std::pair<double, double>> pts;
  for (int i = 0; i < 10; ++i) {
    const double a = -std::numbers::pi / 2 + static_cast<double>(i) * std::numbers::pi / 5;
    const double rr = i % 2 == 0 ? r : r * 0.45;
    pts.emplace_back(cx + rr * std::cos(a), cy + rr * std::sin(a));
  }
  return svg::polygon(pts);
}

struct Marker {
  std::string css;
  Element shape;
};

Marker kv_marker(double cx, double cy, std::string_view ink) {
  Element e = diamond(cx, cy, 5);
  e.set("fill", ink);
  return {"marker kv-source", std::move(e)};
}

Marker index_marker(double cx, double cy, std::string_view ink) {
  Element e = triangle(cx, cy, 5);
  e.set("fill", ink);
  return {"marker index-source", std::move(e)};
}

Marker reindex_marker(double cx, double cy, std::string_view ink) {
  Element e = triangle(cx, cy, 5);
  e.set("fill", "none").set("stroke", ink).set("stroke-width", 1.4);
  return {"marker reindex", std::move(e)};
}

Marker candidate_marker(double cx, double cy, std::string_view ink) {
  Element e = star(cx, cy, 6);
  e.set("fill", ink);
  return {"marker candidate-source", std::move(e)};
}

Element marker_element(Marker m) {
  m.shape.set("class", m.css);
  return std::move(m.shape);
}

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

Element swatch(std::string_view fill, double w = 14, double h = 14) {
  Element r = filled_rect(0, 0, w, h, fill);
  r.set("stroke", "#8c959f").set("stroke-width", 0.5);
  return r;
}

/// A section: its drawing and the height the drawing needs.
struct Figure {
  Element body = svg::group();
  double height = 0;
};

// ------------------------------------------------------------------ 1. layer map

constexpr int kMapColumns = 20;
constexpr double kCellW = 54;
constexpr double kCellH = 50;
constexpr double kCellPitch = 58;

struct ShareRun {
  std::int64_t first = 0, last = 0, source = 0;
  LayerType type = LayerType::swaonly;
};

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

// ------------------------------------------------------------------ 2. memory

constexpr double kBarX = 300;
constexpr double kBarW = 700;

/// One stacked horizontal bar: segments by cache part, a label on the left and the total on the right.
/// The labels of a bar's segments too narrow to hold one, as one line below the bar ("" if none).
std::string unlabelled_line(const std::vector<std::string>& unlabelled) {
  std::string line;
  for (const auto& u : unlabelled) line += (line.empty() ? "not labelled in the bar: " : ", ") + u;
  return line;
}

/// A stacked bar at y; advances y past it (and past the line naming the segments too narrow for a
/// label, when there are any) and 8 px of space.
Element stacked_bar(double& y, const std::string& name, const std::string& css, const std::vector<double>& values,
                    double scale_max, const std::string& total, const std::vector<std::string>& segment_text,
                    const std::string& tooltip) {
  Element g = svg::group("mem-bar");
  std::vector<std::string> unlabelled;
  g.set("data-accounting", css);
  g.tooltip(tooltip);
  g.add(text_at(kBarX - 10, y + 15, name, 12.5, "end"));
  double x = kBarX;
  for (std::size_t i = 0; i < values.size() && i < kCachePartStyles.size(); ++i) {
    if (values[i] <= 0 || scale_max <= 0) continue;
    const double w = kBarW * values[i] / scale_max;
    const auto& ps = kCachePartStyles[i];
    Element seg = filled_rect(x, y, w, 22, ps.fill);
    seg.set("class", "segment " + std::string(ps.name));
    seg.set("stroke", "#ffffff").set("stroke-width", 1);
    const std::string& t = segment_text[i];
    seg.tooltip(t);
    g.add(std::move(seg));
    // The full label, else the value alone, else it goes to the line below the bar.
    const std::string value = t.substr(std::min(t.size(), ps.name.size() + 1));
    bool shown_in_bar = false;
    for (const auto& shown : {t, value}) {
      if (svg::text_width(shown, 11) + 8 <= w) {
        g.add(text_at(x + 5, y + 15, shown, 11, "start", "#ffffff"));
        shown_in_bar = true;
        break;
      }
    }
    if (!shown_in_bar) unlabelled.push_back(t);
    x += w;
  }
  g.add(text_at(x + 8, y + 15, total, 12.5, "start", kInk, true));
  y += 22;
  if (const std::string line = unlabelled_line(unlabelled); !line.empty()) {
    for (const auto& wrapped : svg::wrap_text(line, 10.5, kWidth - kBarX - kMargin)) {
      g.add(text_at(kBarX, y + 12, wrapped, 10.5, "start", kMuted));
      y += 14;
    }
  }
  y += 8;
  return g;
}

Figure memory_picture(const PlanResult& r) {
  Figure f;
  Element& g = f.body;
  g.set("class", "memory");
  if (!r.layout) {
    g.add(text_at(kMargin, 16, "No layout: the flags make no layout possible on this target.", 13));
    f.height = 30;
    return f;
  }
  const auto& l = *r.layout;
  const auto& a = l.accounting;
  const auto parts = bytes_by_part(l);

  double y = 0;
  Element legend = svg::group("legend");
  LegendFlow flow(legend, kMargin, y, kWidth - kMargin);
  for (const auto& ps : kCachePartStyles)
    flow.add(swatch(ps.fill), 14, std::string(ps.name) + ": " + std::string(ps.meaning));
  g.add(std::move(legend));
  y = flow.bottom() + 8;

  // (a) global bytes per token
  g.add(text_at(kMargin, y + 12, "Global bytes per token (grow with the history)", 13.5, "start", kInk, true));
  g.add(text_at(kMargin, y + 30,
                "compressed and indexer caches; windows and states are bounded per request (next chart)", 11.5, "start",
                kMuted));
  y += 40;
  {
    std::vector<double> rows, pages;
    std::vector<std::string> rows_text, pages_text;
    for (std::size_t i = 0; i < parts.size(); ++i) {
      rows.push_back(parts[i].rows_per_token);
      pages.push_back(parts[i].pages_per_token);
      rows_text.push_back(std::string(kCachePartStyles[i].name) + " " + fmt_per_token(parts[i].rows_per_token));
      pages_text.push_back(std::string(kCachePartStyles[i].name) + " " + fmt_per_token(parts[i].pages_per_token));
    }
    const double mx = std::max(a.global_rows.value(), a.global_pages.value());
    g.add(stacked_bar(
        y, "rows (DeepSeek's accounting)", "global-rows", rows, mx, fmt_per_token(a.global_rows.value()) + " B/token",
        rows_text,
        "sum over the backbone's cache owners of row bytes / compress ratio: " + a.global_rows.str() + " B per token"));
    g.add(stacked_bar(y, "pages (the engine's accounting)", "global-pages", pages, mx,
                      fmt_per_token(a.global_pages.value()) + " B/token", pages_text,
                      "sum over every global cache (draft layers included) of page bytes / tokens per page: " +
                          a.global_pages.str() + " B per token"));
    y += 10;
  }

  // (b) one request at max_model_len
  g.add(text_at(kMargin, y + 12, "One request at max_model_len " + svg::grouped(l.max_model_len), 13.5, "start", kInk,
                true));
  g.add(text_at(kMargin, y + 30,
                "rows: history x bytes per token + windows and states; pages: whole pages, window pages sized for " +
                    svg::grouped(l.in_flight_tokens) + " in-flight tokens",
                11.5, "start", kMuted));
  y += 40;
  {
    std::vector<double> rows, pages;
    std::vector<std::string> rows_text, pages_text;
    for (std::size_t i = 0; i < parts.size(); ++i) {
      rows.push_back(static_cast<double>(parts[i].request_rows));
      pages.push_back(static_cast<double>(parts[i].request_pages));
      rows_text.push_back(std::string(kCachePartStyles[i].name) + " " +
                          fmt_bytes(static_cast<double>(parts[i].request_rows)));
      pages_text.push_back(std::string(kCachePartStyles[i].name) + " " +
                           fmt_bytes(static_cast<double>(parts[i].request_pages)));
    }
    const double mx = static_cast<double>(std::max(a.total_rows, a.total_pages));
    g.add(stacked_bar(y, "rows (DeepSeek's accounting)", "request-rows", rows, mx,
                      fmt_bytes(static_cast<double>(a.total_rows)), rows_text,
                      svg::grouped(a.total_rows) + " bytes in rows"));
    g.add(stacked_bar(y, "pages (the engine's accounting)", "request-pages", pages, mx,
                      fmt_bytes(static_cast<double>(a.total_pages)), pages_text,
                      svg::grouped(a.total_pages) + " bytes in pages"));
    y += 10;
  }

  // (c) every GPU's memory as vLLM budgets it: weights, what start-up takes, the KV cache
  if (r.fit) {
    const Fit& fit = *r.fit;
    const auto& pl = fit.placement.layout;
    g.add(text_at(kMargin, y + 12,
                  "Per GPU on " + std::to_string(pl.gpus()) + " x " + r.target.id + " (TP " +
                      std::to_string(pl.tensor_parallel_size) + " x DP " + std::to_string(pl.data_parallel_size) +
                      " x PP " + std::to_string(pl.pipeline_parallel_size) + "), vLLM " + std::string(kVllmVersion),
                  13.5, "start", kInk, true));
    y += 24;
    static constexpr std::array<std::string_view, 4> kFills{"#4c72b0", "#c44e52", "#8172b2", "#55a868"};
    // No backend runs on the target: no budget to draw, only why (below).
    for (const auto& st : fit.no_backend ? std::vector<StageFit>{} : fit.stages) {
      const Budget& b = st.budget;
      const double total = static_cast<double>(std::max<std::int64_t>(1, b.total_bytes));
      Element cap = svg::group("capacity");
      cap.set("data-stage", st.weights.stage).set("data-weights", st.weights.total_bytes);
      cap.set("data-available", b.available_bytes).set("data-concurrency", format_fixed(fit.vllm.concurrency, 2));
      cap.add(text_at(kBarX - 10, y + 15,
                      fit.stages.size() > 1 ? "stage " + std::to_string(st.weights.stage) + " GPU" : "each GPU", 12.5,
                      "end"));
      Element frame = svg::rect(kBarX, y, kBarW, 22);
      frame.set("fill", "#ffffff").set("stroke", fit.fits ? std::string(kGrid) : std::string(kErrorColour));
      frame.set("stroke-width", fit.fits ? 1 : 2);
      cap.add(std::move(frame));
      struct Seg {
        std::string name;
        std::int64_t bytes;
        std::string_view fill;
      };
      const std::int64_t overheads = b.overhead_bytes();
      const std::int64_t weights = b.weights_bytes();
      std::vector<Seg> segs{{"weights", weights, kFills[0]},
                            {"start-up overheads", overheads, kFills[1]},
                            {"KV cache", std::max<std::int64_t>(0, b.available_bytes), kFills[3]}};
      double x = kBarX;
      std::vector<std::string> unlabelled;
      for (const auto& sg : segs) {
        if (sg.bytes <= 0) continue;
        const double w = std::min(kBarW - (x - kBarX), kBarW * static_cast<double>(sg.bytes) / total);
        if (w <= 0) break;
        Element seg = filled_rect(x, y, w, 22, sg.fill);
        seg.set("class", "segment " + sg.name);
        seg.set("stroke", "#ffffff").set("stroke-width", 1);
        const std::string label = sg.name + " " + fmt_bytes(static_cast<double>(sg.bytes));
        seg.tooltip(label);
        cap.add(std::move(seg));
        if (svg::text_width(label, 11) + 8 <= w) {
          cap.add(text_at(x + 5, y + 15, label, 11, "start", "#ffffff"));
        } else {
          unlabelled.push_back(label);
        }
        x += w;
      }
      cap.add(text_at(kBarX + kBarW + 8, y + 15, fmt_bytes(total), 12.5, "start", kInk, true));
      std::string tip = "total " + fmt_bytes(total) + " (" + std::string(to_string(b.total_source)) + "), requested " +
                        fmt_bytes(static_cast<double>(b.requested_bytes)) + " at " +
                        format_fixed(b.gpu_memory_utilization, 2);
      for (const auto& t : b.terms) {
        tip += "; " + t.label + " " + fmt_bytes(static_cast<double>(t.bytes)) + " (" +
               std::string(to_string(t.source)) + ")";
      }
      cap.tooltip(tip);
      if (const std::string line = unlabelled_line(unlabelled); !line.empty()) {
        for (const auto& wrapped : svg::wrap_text(line, 10.5, kWidth - kBarX - kMargin)) {
          cap.add(text_at(kBarX, y + 22 + 12, wrapped, 10.5, "start", kMuted));
          y += 14;
        }
      }
      g.add(std::move(cap));
      y += 30;
    }
    const std::string facts = fit.vllm.fits && !fit.refused ? "vLLM prints: " + fit.vllm.log_line : std::string();
    if (!facts.empty()) {
      g.add(text_at(kBarX, y + 12, facts, 12));
      y += 20;
    }
    if (!fit.fits) {
      std::string why = fit.verdict;
      for (const auto& sg : fit.suggestions) why += " Would fit: " + sg + ".";
      for (const auto& line : svg::wrap_text(why, 12, kWidth - kBarX - kMargin)) {
        g.add(text_at(kBarX, y + 12, line, 12, "start", kErrorColour, true));
        y += 17;
      }
    }
    y += 6;
  }
  f.height = y;
  return f;
}

// ------------------------------------------------------------------ 3. schedules

constexpr double kPlotH = 110;

/// The blocks of request `q` that partition record `rec` processes.
std::pair<std::int64_t, std::int64_t> piece(const SchedRecord& rec, const SchedPlan& p, std::int64_t q) {
  const std::int64_t begin = q == rec[0] ? rec[2] : 0;
  const std::int64_t end = q == rec[1] ? rec[3] : p.blocks[static_cast<std::size_t>(q)];
  return {begin, end};
}

Figure schedule_chart(const LayerTypeSchedule& s, const std::string& split_pattern_id) {
  Figure f;
  Element& g = f.body;
  const auto& p = s.plan;
  const auto& st = type_style(s.type);
  g.set("class", "schedule-chart").set("data-type", to_string(s.type));
  g.set("data-partitions", static_cast<std::int64_t>(p.records.size()));
  g.set("data-idle", p.idle_partitions).set("data-split", p.split_requests);

  g.add(filled_rect(kMargin, 2, 14, 14, st.fill)).set("rx", 2);
  std::string title = std::string(to_string(s.type)) + " · " + std::to_string(s.num_layers) +
                      (s.num_layers == 1 ? " layer" : " layers") + " · kernel " + std::string(to_string(p.kernel)) +
                      " · b " + std::to_string(p.batch) + ", h_q " + std::to_string(s.input.h_q) + " · topk " +
                      std::to_string(s.topk);
  if (s.extra_topk > 0) title += " + extra_topk " + std::to_string(s.extra_topk);
  g.add(text_at(kMargin + 20, 14, title, 13.5, "start", kInk, true));
  const auto parts = static_cast<std::int64_t>(p.records.size());
  std::string stats = std::to_string(parts) + " partitions: " + std::to_string(parts - p.idle_partitions) + " used, " +
                      std::to_string(p.idle_partitions) + " idle · " + std::to_string(p.split_requests) + " of " +
                      std::to_string(p.batch) + " requests split (at most " + std::to_string(p.max_splits) +
                      " partials) · blocks per used partition " + std::to_string(p.min_blocks_per_partition) + "-" +
                      std::to_string(p.max_blocks_per_partition) + " · payload " + std::to_string(p.payload);
  g.add(text_at(kMargin + 20, 32, stats, 11.5, "start", kMuted));

  const double top = 42;
  const double scale = static_cast<double>(std::max<std::int64_t>(p.max_blocks_per_partition, 1));
  // Axis and grid. The plot starts right of the widest tick label, which starts right of the
  // rotated axis title (centred at kMargin + 8, about 6 px each side).
  const std::int64_t max_b = std::max<std::int64_t>(p.max_blocks_per_partition, 1);
  std::vector<std::int64_t> ticks{0, max_b};
  if (max_b >= 4) ticks.insert(ticks.begin() + 1, max_b / 2);
  double tick_w = 0;
  for (auto t : ticks) tick_w = std::max(tick_w, svg::text_width(std::to_string(t), 10.5));
  const double px0 = kMargin + std::max(34.0, 8 + 6 + 4 + tick_w + 6), pw = kWidth - kMargin - px0;
  for (auto t : ticks) {
    const double ty = top + kPlotH - kPlotH * static_cast<double>(t) / scale;
    Element grid = svg::line(px0, ty, px0 + pw, ty);
    grid.set("stroke", t == 0 ? std::string(kInk) : std::string(kGrid)).set("stroke-width", t == 0 ? 1 : 0.6);
    g.add(std::move(grid));
    g.add(text_at(px0 - 6, ty + 4, std::to_string(t), 10.5, "end", kMuted));
  }
  {
    Element axis_label = text_at(kMargin + 8, top + kPlotH / 2, "blocks", 10.5, "middle", kMuted);
    axis_label.set("transform", "rotate(-90 " + svg::num(kMargin + 8) + " " + svg::num(top + kPlotH / 2) + ")");
    g.add(std::move(axis_label));
  }

  const double slot = parts > 0 ? pw / static_cast<double>(parts) : pw;
  const double gap = slot > 4 ? 1 : 0;
  std::vector<int> splits_of(static_cast<std::size_t>(p.batch), 1);
  for (std::int64_t q = 0; q < p.batch; ++q) {
    const auto qi = static_cast<std::size_t>(q);
    splits_of[qi] = p.num_splits[qi + 1] - p.num_splits[qi];
  }
  for (std::int64_t i = 0; i < parts; ++i) {
    const auto& rec = p.records[static_cast<std::size_t>(i)];
    const double x = px0 + static_cast<double>(i) * slot;
    const bool idle = rec[0] >= p.batch;
    Element bar = svg::group(idle ? "partition idle" : "partition");
    bar.set("data-partition", i);
    if (idle) {
      bar.tooltip("partition " + std::to_string(i) + ": idle (no request left)");
      Element r = filled_rect(x, top, slot - gap, kPlotH, kIdleFill);
      bar.add(std::move(r));
      g.add(std::move(bar));
      continue;
    }
    std::int64_t total = 0;
    std::string split_names;
    double y = top + kPlotH;
    // A partition holding many requests: the whole requests between its first and last piece
    // (never split: a split request starts or ends a partition) are drawn as one segment, so the
    // drawing stays O(partitions) whatever the batch.
    const bool merge_middle = rec[1] - rec[0] + 1 > ReportLimits::max_pieces_per_partition;
    for (std::int64_t q = rec[0]; q <= rec[1]; ++q) {
      if (merge_middle && q == rec[0] + 1) {
        std::int64_t n = 0;
        for (std::int64_t m = q; m < rec[1]; ++m) n += p.blocks[static_cast<std::size_t>(m)];
        total += n;
        const double h = kPlotH * static_cast<double>(n) / scale;
        y -= h;
        Element seg = filled_rect(x, y, slot - gap, h, st.fill);
        seg.set("class", "piece merged")
            .set("data-requests", rec[1] - q)
            .set("stroke", "#ffffff")
            .set("stroke-width", 0.6);
        bar.add(std::move(seg));
        q = rec[1] - 1;
        continue;
      }
      const auto [b0, b1] = piece(rec, p, q);
      const std::int64_t n = b1 - b0;
      total += n;
      const bool split = splits_of[static_cast<std::size_t>(q)] > 1;
      if (split) split_names += (split_names.empty() ? "" : ", ") + std::to_string(q);
      if (n <= 0) continue;
      const double h = kPlotH * static_cast<double>(n) / scale;
      y -= h;
      Element seg = filled_rect(x, y, slot - gap, h, st.fill);
      seg.set("class", split ? "piece split" : "piece").set("stroke", "#ffffff").set("stroke-width", 0.6);
      bar.add(std::move(seg));
      if (split) {
        Element hatch = svg::rect(x, y, slot - gap, h);
        hatch.set("fill", "url(#" + split_pattern_id + ")");
        bar.add(std::move(hatch));
      }
    }
    bar.set("data-blocks", total);
    bar.tooltip("partition " + std::to_string(i) + ": requests " + std::to_string(rec[0]) + "-" +
                std::to_string(rec[1]) + ", " + std::to_string(total) + " blocks" +
                (split_names.empty() ? "" : "; split requests: " + split_names));
    g.add(std::move(bar));
  }
  // Label runs of idle partitions.
  for (std::int64_t i = 0; i < parts;) {
    if (p.records[static_cast<std::size_t>(i)][0] < p.batch) {
      ++i;
      continue;
    }
    std::int64_t j = i;
    while (j + 1 < parts && p.records[static_cast<std::size_t>(j + 1)][0] >= p.batch) ++j;
    const double x1 = px0 + static_cast<double>(i) * slot, x2 = px0 + static_cast<double>(j + 1) * slot;
    const std::string t = "idle (" + std::to_string(j - i + 1) + ")";
    if (svg::text_width(t, 11) + 6 <= x2 - x1) {
      g.add(text_at((x1 + x2) / 2, top + kPlotH / 2 + 4, t, 11.5, "middle", kIdleInk, true));
    }
    i = j + 1;
  }
  // Partition numbers under the axis.
  const std::int64_t step = parts <= 20 ? 1 : parts <= 80 ? 5 : parts <= 200 ? 10 : 50;
  for (std::int64_t i = 0; i < parts; i += step) {
    g.add(text_at(px0 + (static_cast<double>(i) + 0.5) * slot, top + kPlotH + 14, std::to_string(i), 9.5, "middle",
                  kMuted));
  }
  g.add(text_at(px0 + pw, top + kPlotH + 28, "SM partition", 10.5, "end", kMuted));
  f.height = top + kPlotH + 40;
  return f;
}

Figure schedules(const PlanResult& r) {
  Figure f;
  Element& g = f.body;
  g.set("class", "schedules");
  Element defs("defs");
  Element hatch("pattern");
  hatch.set("id", "split-hatch").set("width", 5).set("height", 5).set("patternUnits", "userSpaceOnUse");
  hatch.set("patternTransform", "rotate(45)");
  hatch.add(filled_rect(0, 0, 1.8, 5, kInk)).set("fill-opacity", 0.45);
  defs.add(std::move(hatch));
  g.add(std::move(defs));

  double y = 0;
  const std::string remark = schedules_remark(r);
  if (r.schedules.empty()) {
    std::string why = "no layout";
    if (r.layout && backend_info(r.layout->backend).tile_plans) {
      why = "no FlashMLA sparse decode kernel for " + r.target.id + " (" + r.target.cc.sm() + ") with " +
            std::to_string(r.layout->parallel.local_query_heads) + " query heads per rank";
    } else if (r.layout) {
      why = remark;
    }
    for (const auto& line : svg::wrap_text("No decode schedules: " + why + ".", 13, kWidth - 2 * kMargin)) {
      g.add(text_at(kMargin, y + 16, line, 13));
      y += 19;
    }
    f.height = y + 11;
    return f;
  }
  g.add(text_at(kMargin, 14, "One decode step of " + r.batch.description, 12.5));
  y = 22;
  if (!remark.empty()) {
    for (const auto& line : svg::wrap_text(remark, 12, kWidth - 2 * kMargin)) {
      g.add(text_at(kMargin, y + 12, line, 12, "start", kMuted));
      y += 17;
    }
    y += 2;
  }
  Element legend = svg::group("legend");
  LegendFlow flow(legend, kMargin, y, kWidth - kMargin);
  flow.add(swatch("#8c959f"), 14, "a request's blocks in one partition (coloured by layer type)");
  {
    Element sw = svg::group();
    sw.add(filled_rect(0, 0, 14, 14, "#8c959f"));
    sw.add(filled_rect(0, 0, 14, 14, "url(#split-hatch)"));
    flow.add(std::move(sw), 14, "hatched: part of a request split over several partitions");
  }
  flow.add(swatch(kIdleFill), 14, "idle partition (no work in this step)");
  g.add(std::move(legend));
  y = flow.bottom() + 6;
  for (const auto& s : r.schedules) {
    Figure chart = schedule_chart(s, "split-hatch");
    Element placed = translated(0, y);
    placed.add(std::move(chart.body));
    g.add(std::move(placed));
    y += chart.height + 8;
  }
  f.height = y;
  return f;
}

// ------------------------------------------------------------------ 3b. attention backend

/// The cells of one kernel-shape row, in kKernelShapeColumns order.
constexpr std::array<std::string_view, 8> kKernelShapeColumns{
    "phase", "kernel", "layer types", "heads per rank -> kernel", "d_qk", "topk (+ extra)", "page rows", "status"};

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

// ------------------------------------------------------------------ kv tiers (a table)

/// The prefix cache and the host offload tier in rows of (what, value): docs/prefix-cache.md,
/// docs/offload.md. Empty when the plan has none.
std::vector<std::pair<std::string, std::string>> kv_tier_rows(const PlanResult& r) {
  std::vector<std::pair<std::string, std::string>> rows;
  if (!r.fit || !r.fit->prefix_cache || !r.fit->host_offload) return rows;
  const Fit& f = *r.fit;
  const PrefixCachePlan& pc = *f.prefix_cache;
  const HostOffloadPlan& ho = *f.host_offload;
  rows.push_back({"prefix-cache hits", "multiples of " + format_grouped(pc.rule.scheduler_block_size) +
                                           " tokens (scheduler block; hash block " +
                                           format_grouped(pc.rule.hash_block_size) + ")"});
  rows.push_back({"shortest prompt that hits",
                  format_grouped(pc.rule.min_hit_prompt_len) + " tokens" +
                      (pc.rule.eagle_drop_tokens > 0
                           ? " (the draft's group drops " + format_grouped(pc.rule.eagle_drop_tokens) + " tokens)"
                           : std::string())});
  rows.push_back(
      {"one cached prompt of " + format_grouped(pc.max_model_len) + " tokens",
       format_grouped(pc.cached_blocks_per_prompt) + " blocks, " + format_gib(pc.cached_bytes_per_prompt) + " per GPU" +
           (f.prefix_prompts_cached ? ", " + format_grouped(*f.prefix_prompts_cached) + " at once" : std::string()) +
           " (retention interval " + format_grouped(pc.retention_interval) + "; dense " +
           format_grouped(pc.dense_cached_blocks_per_prompt) + " blocks)"});
  for (const auto& m : pc.refusals) rows.push_back({"vLLM refuses to start", m});
  const double bpt = ho.bytes_per_token;
  const bool whole = std::fabs(bpt - std::round(bpt)) < 1e-9 && bpt < 9.0e15;
  rows.push_back({"host tier per token of history",
                  (whole ? format_grouped(static_cast<std::int64_t>(std::round(bpt))) : format_fixed(bpt, 2)) +
                      " B over " + format_grouped(ho.workers) + " workers (unpadded pages)"});
  rows.push_back({"host tier per request of " + format_grouped(ho.max_model_len) + " tokens",
                  format_gib(ho.request_bytes) + " moved, " + format_grouped(ho.request_slots) + " host blocks of " +
                      format_grouped(ho.slot_bytes) + " B"});
  if (ho.size_gib) {
    std::string held = format_grouped(*ho.host_slots) + " host blocks";
    if (ho.tokens_held) held += ", " + format_grouped(*ho.tokens_held) + " tokens of history";
    if (ho.requests_held) held += ", " + format_grouped(*ho.requests_held) + " requests of max_model_len";
    rows.push_back({"--kv-offloading-size " + format_general(*ho.size_gib), held});
  } else {
    rows.push_back({"--kv-offloading-size", "not given: no host tier"});
  }
  rows.push_back({"offloading connector", ho.refusal.empty()
                                              ? "starts (tokens_per_hash " + format_grouped(ho.tokens_per_hash) + ")"
                                              : std::string(ho.size_gib ? "refuses" : "would refuse") + " group " +
                                                    std::to_string(*ho.refused_group) + ": " + ho.refusal});
  return rows;
}

Figure kv_tiers_figure(const PlanResult& r) {
  Figure f;
  Element& g = f.body;
  g.set("class", "kv-tiers");
  double y = 0;
  const auto rows = kv_tier_rows(r);
  if (rows.empty()) {
    g.add(text_at(kMargin, y + 14, "No KV-cache groups: no prefix cache, no host tier.", 13, "start", kMuted));
    f.height = 24;
    return f;
  }
  const double label_w = 300, value_x = kMargin + label_w, width = kWidth - value_x - kMargin;
  for (const auto& [label, value] : rows) {
    Element row = svg::group("kv-tier-row");
    row.add(text_at(kMargin, y + 14, label, 12.5, "start", kInk, true));
    for (const auto& line : svg::wrap_text(value, 12.5, width)) {
      row.add(text_at(value_x, y + 14, line, 12.5, "start", kInk));
      y += 18;
    }
    g.add(std::move(row));
  }
  f.height = y + 8;
  return f;
}

// ------------------------------------------------------------------ 4. findings (SVG report)

Figure findings_figure(const PlanResult& r) {
  Figure f;
  Element& g = f.body;
  g.set("class", "findings");
  double y = 0;
  std::vector<const Finding*> problems, notes;
  for (const auto& x : r.findings) (x.severity == Severity::info ? notes : problems).push_back(&x);
  const double text_x = kMargin + 84, width = kWidth - text_x - kMargin;
  if (problems.empty()) {
    g.add(text_at(kMargin, y + 14, "No errors or warnings.", 13, "start", kPassColour, true));
    y += 24;
  }
  for (const auto* x : problems) {
    Element item = svg::group(std::string("finding ") + std::string(to_string(x->severity)));
    item.set("data-id", x->id);
    const auto colour = x->severity == Severity::error ? kErrorColour : kWarningColour;
    item.add(filled_rect(kMargin, y + 2, 74, 17, colour)).set("rx", 3);
    std::string sev(to_string(x->severity));
    std::transform(sev.begin(), sev.end(), sev.begin(),
                   [](char c) { return static_cast<char>(std::toupper(static_cast<unsigned char>(c))); });
    item.add(text_at(kMargin + 37, y + 15, sev, 10.5, "middle", "#ffffff", true));
    bool first = true;
    for (const auto& line : svg::wrap_text("[" + x->id + "] " + x->message, 12.5, width)) {
      item.add(text_at(text_x, y + 15, line, 12.5, "start", kInk, first));
      first = false;
      y += 18;
    }
    if (!x->fix.empty()) {
      for (const auto& line : svg::wrap_text("fix: " + x->fix, 12, width)) {
        item.add(text_at(text_x, y + 15, line, 12, "start", kMuted));
        y += 17;
      }
    }
    y += 6;
    g.add(std::move(item));
  }
  if (!notes.empty()) {
    g.add(text_at(kMargin, y + 16, "Notes (defaults applied, spellings normalised)", 12.5, "start", kInk, true));
    y += 24;
    for (const auto* x : notes) {
      Element item = svg::group("finding info");
      item.set("data-id", x->id);
      for (const auto& line : svg::wrap_text("· " + x->message, 11.5, kWidth - 2 * kMargin - 12)) {
        item.add(text_at(kMargin + 12, y + 13, line, 11.5, "start", kMuted));
        y += 16;
      }
      g.add(std::move(item));
    }
  }
  f.height = y + 6;
  return f;
}

// ------------------------------------------------------------------ 5. verify / bench tables

constexpr std::size_t kSvgTableRows = static_cast<std::size_t>(ReportLimits::max_svg_rows);

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

// ------------------------------------------------------------------ prefill workspace

constexpr double kPrefillPlotH = 130;

/// The sparse indexer's transient prefill peak per GPU over the prompt length, against what the
/// budget leaves of the GPU (docs/prefill.md): where the curve crosses the headroom line is the
/// longest prompt that prefills.
Figure prefill_figure(const PlanResult& r) {
  Figure f;
  Element& g = f.body;
  g.set("class", "prefill");
  if (!r.prefill) {
    const std::string why = r.fit && r.fit->decided && r.fit->fits
                                ? "The model has no sparse indexer: no transient prefill workspace."
                                : "Not computed: the fit has no KV cache to compare the transient with.";
    g.add(text_at(kMargin, 16, why, 12.5, "start", kMuted));
    f.height = 26;
    return f;
  }
  const PrefillFit& p = *r.prefill;
  g.set("data-fits", p.fits ? "true" : "false");
  g.set("data-longest-prompt", p.longest_prompt);
  const std::string head = std::string(p.fits ? "Fits" : "Does not fit") + ": transient " +
                           fmt_bytes(static_cast<double>(p.peak_bytes)) + " per GPU at " +
                           svg::grouped(p.max_model_len) + " tokens, headroom " +
                           fmt_bytes(static_cast<double>(p.headroom_bytes)) + " (" +
                           svg::grouped(std::min(p.chunk_tokens, p.max_model_len)) + "-token chunks)";
  g.add(text_at(kMargin, 15, head, 13.5, "start", p.fits ? kPassColour : kErrorColour, true));
  double y = 24;
  for (const auto& line : svg::wrap_text(
           "Modelled: " + p.engine + ". Budgeted " + fmt_bytes(static_cast<double>(p.budgeted_bytes)) + " of " +
               fmt_bytes(static_cast<double>(p.total_bytes)) + " (weights, start-up terms, the allocated KV cache).",
           11.5, kWidth - 2 * kMargin)) {
    g.add(text_at(kMargin, y + 12, line, 11.5, "start", kMuted));
    y += 16;
  }
  LegendFlow legend(g, kMargin, y + 4, kWidth - kMargin);
  legend.add(swatch("#4c72b0", 14, 4), 14, "transient peak of a prompt of that length");
  legend.add(swatch(kErrorColour, 14, 4), 14, "headroom: GPU memory minus everything budgeted");
  if (p.longest_prompt < p.max_model_len) {
    legend.add(swatch(kMuted, 3, 14), 3, "longest prompt that fits: " + svg::grouped(p.longest_prompt));
  }
  const double top = legend.bottom() + 6;
  const double gib = 1073741824.0;
  const double ymax = std::max({static_cast<double>(p.peak_bytes), static_cast<double>(p.headroom_bytes), 1.0}) * 1.08;
  const std::vector<double> yticks{0, ymax / 2 / gib, ymax / gib * 0.999};
  double tick_w = 0;
  for (double t : yticks) tick_w = std::max(tick_w, svg::text_width(trimmed(t, 2), 10.5));
  const double px0 = kMargin + std::max(34.0, 8 + 6 + 4 + tick_w + 6), pw = kWidth - kMargin - px0;
  auto ypos = [&](double bytes) { return top + kPrefillPlotH - kPrefillPlotH * bytes / ymax; };
  auto xpos = [&](double tokens) { return px0 + pw * tokens / static_cast<double>(p.max_model_len); };
  for (std::size_t i = 0; i < yticks.size(); ++i) {
    const double ty = ypos(yticks[i] * gib);
    Element grid = svg::line(px0, ty, px0 + pw, ty);
    grid.set("stroke", i == 0 ? std::string(kInk) : std::string(kGrid)).set("stroke-width", i == 0 ? 1 : 0.6);
    g.add(std::move(grid));
    g.add(text_at(px0 - 6, ty + 4, trimmed(yticks[i], 2), 10.5, "end", kMuted));
  }
  {
    Element axis_label = text_at(kMargin + 8, top + kPrefillPlotH / 2, "GiB", 10.5, "middle", kMuted);
    axis_label.set("transform", "rotate(-90 " + svg::num(kMargin + 8) + " " + svg::num(top + kPrefillPlotH / 2) + ")");
    g.add(std::move(axis_label));
  }
  // The curve: the transient at 160 prompt lengths (and the exact crossing).
  std::vector<std::int64_t> xs;
  constexpr int kSamples = 160;
  for (int i = 0; i <= kSamples; ++i) xs.push_back(std::max<std::int64_t>(1, p.max_model_len * i / kSamples));
  if (p.longest_prompt > 0 && p.longest_prompt < p.max_model_len) {
    xs.push_back(p.longest_prompt);
    xs.push_back(p.longest_prompt + 1);
  }
  std::sort(xs.begin(), xs.end());
  xs.erase(std::unique(xs.begin(), xs.end()), xs.end());
  std::string d;
  for (std::size_t i = 0; i < xs.size(); ++i) {
    const double b = static_cast<double>(indexer_transient(p.shape, xs[i], p.chunk_tokens));
    d += (i == 0 ? "M" : " L") + svg::num(xpos(static_cast<double>(xs[i]))) + "," + svg::num(ypos(b));
  }
  Element curve = svg::path(d);
  curve.set("class", "transient").set("fill", "none").set("stroke", "#4c72b0").set("stroke-width", 2);
  g.add(std::move(curve));
  Element room = svg::line(px0, ypos(static_cast<double>(p.headroom_bytes)), px0 + pw,
                           ypos(static_cast<double>(p.headroom_bytes)));
  room.set("class", "headroom").set("stroke", kErrorColour).set("stroke-width", 1.5).set("stroke-dasharray", "6 3");
  room.tooltip("headroom " + fmt_bytes(static_cast<double>(p.headroom_bytes)));
  g.add(std::move(room));
  if (p.longest_prompt < p.max_model_len) {
    const double cx = xpos(static_cast<double>(p.longest_prompt));
    Element cross = svg::line(cx, top, cx, top + kPrefillPlotH);
    cross.set("class", "crossing").set("stroke", kMuted).set("stroke-width", 1).set("stroke-dasharray", "3 3");
    cross.tooltip("longest prompt that fits: " + svg::grouped(p.longest_prompt) + " tokens");
    g.add(std::move(cross));
  }
  const double base = top + kPrefillPlotH;
  for (int i = 0; i <= 4; ++i) {
    const std::int64_t t = p.max_model_len * i / 4;
    const std::string_view anchor = i == 0 ? "start" : i == 4 ? "end" : "middle";
    g.add(text_at(xpos(static_cast<double>(t)), base + 15, svg::grouped(t), 10.5, anchor, kMuted));
  }
  g.add(text_at(px0 + pw / 2, base + 31, "prompt length, tokens", 10.5, "middle", kMuted));
  f.height = base + 40;
  return f;
}

// ------------------------------------------------------------------ assembling

struct Section {
  std::string id;
  std::string heading;
  Figure figure;
};

std::vector<Section> drawings(const PlanResult& r) {
  std::vector<Section> s;
  s.push_back({"layer-map", "Layer map", layer_map(r)});
  s.push_back({"memory", "KV-cache memory", memory_picture(r)});
  s.push_back({"prefill", "Prefill workspace of the sparse indexer, per GPU", prefill_figure(r)});
  s.push_back({"kv-tiers", "Prefix cache and host offload", kv_tiers_figure(r)});
  s.push_back({"backend", "Attention backend and kernel shapes", backend_figure(r)});
  s.push_back({"schedules", "Decode schedules (FlashMLA tile scheduler), one per layer type", schedules(r)});
  return s;
}

Element svg_root(double raw_height) {
  const double height = std::ceil(raw_height);
  Element root("svg");
  root.set("width", kWidth).set("height", height);
  root.set("viewBox", "0 0 " + svg::num(kWidth) + " " + svg::num(height));
  root.set("font-family", kFontStack);
  return root;
}

}  // namespace

std::vector<PartBytes> bytes_by_part(const Layout& layout) {
  // The library's accounting by cache kind (layout.hpp), in the picture's order of parts.
  const auto by_kind = bytes_by_cache_kind(layout);
  std::vector<PartBytes> parts(kCachePartStyles.size());
  for (std::size_t k = 0; k < by_kind.size(); ++k) {
    const auto& b = by_kind[k];
    auto& p = parts[static_cast<std::size_t>(cache_part(static_cast<CacheKind>(k)))];
    p.rows_per_token += b.rows_per_token;
    p.pages_per_token += b.pages_per_token;
    p.request_rows += b.request_rows;
    p.request_pages += b.request_pages;
  }
  return parts;
}

std::string render_report_svg(const PlanResult& r, const std::vector<ResultFile>& extras) {
  auto sections = drawings(r);
  sections.push_back({"findings", "Findings", findings_figure(r)});
  for (const auto& e : extras) {
    sections.push_back({e.flag == "--bench-json" ? "bench" : "verify", e.title, result_figure(e)});
  }

  Element body = svg::group("report");
  // Header.
  double y = 0;
  body.add(text_at(kMargin, y + 30, "mla-plan report: " + r.config.source, 20, "start", kInk, true));
  body.add(text_at(kMargin, y + 52, model_line(r), 13));
  body.add(text_at(kMargin, y + 70, target_line(r), 13, "start", kMuted));
  {
    Element status = svg::group("status");
    status.set("data-exit-code", r.exit_code);
    const std::string text = svg::fit_text(status_text(r), 12.5, kWidth - 2 * kMargin - 20);
    status.add(filled_rect(kMargin, y + 80, svg::text_width(text, 12.5) + 20, 22, status_colour(r))).set("rx", 4);
    status.add(text_at(kMargin + 10, y + 95, text, 12.5, "start", "#ffffff", true));
    body.add(std::move(status));
  }
  y += 116;
  for (auto& s : sections) {
    Element head = text_at(kMargin, y + 20, s.heading, 17, "start", kInk, true);
    head.set("class", "section-title");
    body.add(std::move(head));
    Element rule = svg::line(kMargin, y + 28, kWidth - kMargin, y + 28);
    rule.set("stroke", kGrid);
    body.add(std::move(rule));
    y += 40;
    Element placed = translated(0, y);
    placed.set("id", s.id);
    placed.add(std::move(s.figure.body));
    body.add(std::move(placed));
    y += s.figure.height + 16;
  }
  y = std::ceil(y);
  Element root = svg_root(y);
  root.set("data-family", to_string(r.config.family));
  root.add(filled_rect(0, 0, kWidth, y, "#ffffff"));
  root.add(std::move(body));
  return svg::document(std::move(root));
}

namespace {

constexpr std::string_view kCss =
    "body{font-family:-apple-system,'Segoe UI',Helvetica,Arial,sans-serif;color:#1f2328;background:#ffffff;"
    "margin:24px auto;max-width:1260px;padding:0 12px}"
    "h1{font-size:22px;margin:0 0 6px}"
    "h2{font-size:18px;margin:28px 0 10px;padding-bottom:4px;border-bottom:1px solid #d0d7de}"
    "h3{font-size:15px;margin:16px 0 6px}"
    "p.meta{margin:2px 0;color:#57606a;font-size:14px}"
    ".status{display:inline-block;margin:8px 0;padding:3px 10px;border-radius:4px;color:#ffffff;font-weight:bold}"
    "svg{display:block;max-width:100%;height:auto}"
    "table{border-collapse:collapse;font-size:13px;margin:6px 0 14px}"
    "th,td{border:1px solid #d0d7de;padding:3px 8px;text-align:left;vertical-align:top}"
    "th{background:#eaeef2}"
    "tr:nth-child(even) td{background:#f6f8fa}"
    "td.sev{font-weight:bold;color:#ffffff}"
    "td.error{background:#b42318 !important}"
    "td.warning{background:#b54708 !important}"
    "td.info{background:#475467 !important}"
    "td.pass{color:#067647;font-weight:bold}"
    "td.fail{color:#b42318;font-weight:bold}"
    "td.warn{color:#b54708;font-weight:bold}"
    "tr.missing td{background:#fbe9e7}"
    "code{font-family:monospace;font-size:12px}"
    "ul.notes{color:#57606a;font-size:13px}";

Element html_table(const std::vector<std::string>& header) {
  Element table("table");
  Element& tr = table.add(Element("tr"));
  for (const auto& h : header) tr.add(Element("th")).text(h);
  return table;
}

}  // namespace

std::string render_report_html(const PlanResult& r, const std::vector<ResultFile>& extras) {
  Element html("html");
  html.set("xmlns", "http://www.w3.org/1999/xhtml").set("lang", "en");
  {
    Element head("head");
    head.add(Element("meta")).set("charset", "utf-8");
    // Nothing may be fetched: a browser blocks (and reports) any load the page would attempt.
    head.add(Element("meta"))
        .set("http-equiv", "Content-Security-Policy")
        .set("content", "default-src 'none'; style-src 'unsafe-inline'; img-src data:");
    head.add(Element("title")).text("mla-plan report: " + r.config.source);
    head.add(Element("style")).add(Element::raw_node(std::string(kCss)));
    html.add(std::move(head));
  }
  Element body("body");
  body.add(Element("h1")).text("mla-plan report: " + r.config.source);
  body.add(Element("p")).set("class", "meta").text(model_line(r));
  body.add(Element("p")).set("class", "meta").text(target_line(r));
  body.add(Element("div"))
      .set("class", "status")
      .set("data-exit-code", r.exit_code)
      .set("style", "background:" + std::string(status_colour(r)))
      .text(status_text(r));

  for (auto& s : drawings(r)) {
    body.add(Element("h2")).set("id", s.id).text(s.heading);
    if (s.id == "backend") {
      // A table, not a drawing: the backend's lines, then one row per kernel shape.
      if (!r.layout) {
        body.add(Element("p")).text("No layout: no backend was chosen.");
        continue;
      }
      const Layout& l = *r.layout;
      const BackendInfo& b = backend_info(l.backend);
      Element& p = body.add(Element("p"));
      p.set("class", "backend").set("data-backend", b.key);
      p.add(Element("strong")).text(backend_heading(r));
      p.add(Element("span")).text(" (" + std::string(b.attention_class) + ", " + std::string(b.source) + ")");
      if (!l.backend_how.empty()) body.add(Element("p")).set("class", "meta").text("chosen: " + l.backend_how);
      body.add(Element("p")).set("class", "meta").text("decode path: " + std::string(b.decode_path));
      if (r.kernel_shapes.empty()) continue;
      std::vector<std::string> header(kKernelShapeColumns.begin(), kKernelShapeColumns.end());
      header.push_back("note");
      Element table = html_table(header);
      table.set("class", "kernel-shapes");
      for (const auto& x : r.kernel_shapes) {
        Element& tr = table.add(Element("tr"));
        tr.set("class", "kernel-shape " + std::string(to_string(x.status))).set("data-status", to_string(x.status));
        const auto cells = kernel_shape_cells(x);
        for (std::size_t c = 0; c + 1 < cells.size(); ++c) tr.add(Element("td")).text(cells[c]);
        tr.add(Element("td"))
            .set("class", x.status == ShapeStatus::available ? "pass"
                          : x.status == ShapeStatus::missing ? "fail"
                                                             : "warn")
            .text(cells.back());
        std::string note = x.note;
        if (!x.fix.empty()) note += (note.empty() ? "fix: " : "; fix: ") + x.fix;
        tr.add(Element("td")).text(note);
      }
      body.add(std::move(table));
      continue;
    }
    if (s.id == "kv-tiers") {
      // A table, not a drawing.
      const auto rows = kv_tier_rows(r);
      if (rows.empty()) {
        body.add(Element("p")).text("No KV-cache groups: no prefix cache, no host tier.");
        continue;
      }
      Element table = html_table({"what", "value"});
      table.set("class", "kv-tiers");
      for (const auto& [label, value] : rows) {
        Element& tr = table.add(Element("tr"));
        tr.add(Element("td")).text(label);
        tr.add(Element("td")).text(value);
      }
      body.add(std::move(table));
      continue;
    }
    Element root = svg_root(s.figure.height);
    root.set("xmlns", "http://www.w3.org/2000/svg");
    root.add(std::move(s.figure.body));
    body.add(std::move(root));
  }

  body.add(Element("h2")).set("id", "findings").text("Findings");
  std::vector<const Finding*> problems, notes;
  for (const auto& x : r.findings) (x.severity == Severity::info ? notes : problems).push_back(&x);
  if (problems.empty()) {
    body.add(Element("p")).set("class", "findings-none").text("No errors or warnings.");
  } else {
    Element table = html_table({"severity", "id", "message", "fix"});
    table.set("class", "findings");
    for (const auto* x : problems) {
      Element& tr = table.add(Element("tr"));
      tr.add(Element("td"))
          .set("class", "sev " + std::string(to_string(x->severity)))
          .text(std::string(to_string(x->severity)));
      tr.add(Element("td")).add(Element("code")).text(x->id);
      tr.add(Element("td")).text(x->message + (x->path.empty() ? "" : " (" + x->path + ")"));
      tr.add(Element("td")).text(x->fix);
    }
    body.add(std::move(table));
  }
  if (!notes.empty()) {
    body.add(Element("h3")).text("Notes (defaults applied, spellings normalised)");
    Element ul("ul");
    ul.set("class", "notes");
    for (const auto* x : notes) ul.add(Element("li")).text(x->message);
    body.add(std::move(ul));
  }

  for (const auto& e : extras) {
    body.add(Element("h2")).set("class", "results").text(e.title);
    std::string summary = e.flag + " " + e.path;
    for (const auto& [k, v] : e.summary) summary += " · " + k + " " + v;
    body.add(Element("p")).set("class", "meta").text(summary);
    if (e.tables.empty()) {
      body.add(Element("p")).text("No array of row objects under \"results\", \"matrix\" or \"rows\".");
    }
    for (const auto& t : e.tables) {
      body.add(Element("h3")).text(t.pointer + " (" + std::to_string(t.total_rows) + " rows)");
      Element table = html_table(t.columns);
      table.set("class", "result-table").set("data-pointer", t.pointer);
      for (const auto& row : t.rows) {
        Element& tr = table.add(Element("tr"));
        for (const auto& cell : row) {
          Element& td = tr.add(Element("td"));
          const auto colour = cell_colour(cell);
          if (colour == kPassColour) td.set("class", "pass");
          else if (colour == kErrorColour) td.set("class", "fail");
          td.text(cell);
        }
      }
      body.add(std::move(table));
      if (t.total_rows > static_cast<std::int64_t>(t.rows.size())) {
        body.add(Element("p"))
            .set("class", "meta")
            .text("... " + std::to_string(t.total_rows - static_cast<std::int64_t>(t.rows.size())) +
                  " more rows (the report lists the first " + std::to_string(t.rows.size()) + ")");
      }
    }
  }
  html.add(std::move(body));
  std::string out = "<!DOCTYPE html>\n";
  html.write(out);
  out += '\n';
  return out;
}

}  // namespace mlaplan::cli
