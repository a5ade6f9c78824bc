// The sparse indexer's transient prefill workspace over the prompt length (docs/report.md).

#include <algorithm>
#include <array>
#include <cmath>

#include "mlaplan/base/number_format.hpp"
#include "output/backend_text.hpp"
#include "report/figures.hpp"
#include "report/palette.hpp"

namespace mlaplan::cli::figures {
namespace {

// ------------------------------------------------------------------ prefill workspace

constexpr double kPrefillPlotH = 130;

/// The sparse indexer's transient prefill peak per GPU over the prompt length, against what the
/// budget leaves of the GPU (docs/prefill.md): where the curve crosses the headroom line is the
/// longest prompt that prefills.

}  // namespace

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

}  // namespace mlaplan::cli::figures
