// The prefix cache and the host offload tier, as a table (docs/report.md).

#include <algorithm>
#include <array>
#include <cmath>

#include "mlaplan/base/number_format.hpp"
#include "output/backend_text.hpp"
#include "report/figures.hpp"
#include "report/palette.hpp"

namespace mlaplan::cli::figures {
namespace {

// ------------------------------------------------------------------ kv tiers (a table)

/// The prefix cache and the host offload tier in rows of (what, value): docs/prefix-cache.md,
/// docs/offload.md. Empty when the plan has none.

}  // namespace

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

}  // namespace mlaplan::cli::figures
