// The memory picture: the KV cache by part in both accountings, per token and per request (docs/report.md).

#include <algorithm>
#include <array>
#include <cmath>

#include "mlaplan/base/number_format.hpp"
#include "output/backend_text.hpp"
#include "report/figures.hpp"
#include "report/palette.hpp"

namespace mlaplan::cli::figures {
namespace {

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

}  // namespace

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
                      " x PP " + std::to_string(pl.pipeline_parallel_size) + "), vLLM " +
                      std::string(fit.release->version),
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
      // What does not fit is drawn past the GPU's memory, not clamped to it: the bar's scale is
      // the larger of the GPU and what it would have to hold.
      double need = 0;
      for (const auto& sg : segs) need += static_cast<double>(std::max<std::int64_t>(0, sg.bytes));
      const double scale = std::max(total, need);
      const double frame_w = kBarW * total / scale;
      Element frame = svg::rect(kBarX, y, frame_w, 22);
      frame.set("fill", "#ffffff").set("stroke", fit.fits ? std::string(kGrid) : std::string(kErrorColour));
      frame.set("stroke-width", fit.fits ? 1 : 2);
      cap.add(std::move(frame));
      double x = kBarX;
      std::vector<std::string> unlabelled;
      for (const auto& sg : segs) {
        if (sg.bytes <= 0) continue;
        const double w = kBarW * static_cast<double>(sg.bytes) / scale;
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
      if (need > total) {
        // The GPU's edge inside the bar, and by how much the rest overshoots it.
        Element edge = svg::rect(kBarX + frame_w - 1, y - 4, 2, 30);
        edge.set("fill", std::string(kErrorColour)).set("class", "overshoot");
        edge.set("data-overshoot", static_cast<std::int64_t>(need - total));
        edge.tooltip("GPU memory ends here; the rest overshoots it by " + fmt_bytes(need - total));
        cap.add(std::move(edge));
        unlabelled.push_back("past the GPU's " + fmt_bytes(total) + " by " + fmt_bytes(need - total));
      }
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

  // (d) max_model_len against concurrency on this layout (the plan's context sweep)
  if (!r.context_sweep.empty()) {
    g.add(text_at(kMargin, y + 12, "max_model_len against concurrency on this layout (all DP engines)", 13.5, "start",
                  kInk, true));
    y += 22;
    double top = 0;
    for (const auto& p : r.context_sweep) top = std::max(top, p.total_concurrency);
    for (const auto& p : r.context_sweep) {
      Element row = svg::group("sweep-point");
      row.set("data-max-model-len", p.max_model_len).set("data-fits", p.fits ? "true" : "false");
      row.set("data-concurrency", format_fixed(p.total_concurrency, 2));
      row.add(text_at(kBarX - 10, y + 12, format_grouped(p.max_model_len), 11.5, "end"));
      // Log scale: 1x at the left edge, the largest at the right (fewer than 1 request: no bar).
      const double w =
          p.fits && p.total_concurrency > 1 && top > 1 ? kBarW * std::log(p.total_concurrency) / std::log(top) : 0.0;
      if (w > 0) row.add(filled_rect(kBarX, y + 2, w, 12, "#55a868"));
      row.add(text_at(kBarX + w + 6, y + 12,
                      p.fits ? format_fixed(p.total_concurrency, 2) + "x" : std::string("does not fit"), 11, "start",
                      p.fits ? std::string(kInk) : std::string(kErrorColour)));
      g.add(std::move(row));
      y += 16;
    }
    y += 8;
  }
  f.height = y;
  return f;
}

}  // namespace mlaplan::cli::figures
