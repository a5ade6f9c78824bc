// The decode schedules: FlashMLA's tile-scheduler plan of each layer type as a chart (docs/report.md).

#include <algorithm>
#include <array>
#include <cmath>

#include "mlaplan/base/number_format.hpp"
#include "output/backend_text.hpp"
#include "report/figures.hpp"
#include "report/palette.hpp"

namespace mlaplan::cli::figures {
namespace {

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

}  // namespace

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

}  // namespace mlaplan::cli::figures
