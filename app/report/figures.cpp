// What the report's figures draw with (figures.hpp): text and shape helpers.

#include "report/figures.hpp"

#include <cmath>
#include <numbers>

#include "mlaplan/base/number_format.hpp"
#include "output/backend_text.hpp"
#include "report/palette.hpp"

namespace mlaplan::cli::figures {

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

Element text_at(double x, double y, std::string text, double size, std::string_view anchor, std::string_view fill,
                bool bold) {
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

Element swatch(std::string_view fill, double w, double h) {
  Element r = filled_rect(0, 0, w, h, fill);
  r.set("stroke", "#8c959f").set("stroke-width", 0.5);
  return r;
}

}  // namespace mlaplan::cli::figures
