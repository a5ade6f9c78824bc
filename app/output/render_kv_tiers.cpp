// The prefix cache and the host offload tier of a plan (include/mlaplan/engine/vllm/kv_tiers.hpp) in the
// text output of `plan` and in its --json object "kv_tiers"; docs/prefix-cache.md and
// docs/offload.md explain the numbers.

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <locale>
#include <sstream>

#include "cli/commands.hpp"
#include "output/json_out.hpp"
#include "mlaplan/base/number_format.hpp"
#include "mlaplan/base/text.hpp"

namespace mlaplan::cli {

namespace {

std::string kind_word(VllmSpecKind k) {
  switch (k) {
    case VllmSpecKind::full: return "full";
    case VllmSpecKind::sliding_window: return "sliding window";
    case VllmSpecKind::ring: return "ring";
  }
  return "?";
}

// Bytes per token: whole numbers grouped, fractions with two decimals.
std::string bytes_text(double v) {
  const double r = std::round(v);
  if (std::fabs(v - r) < 1e-9 && r < 9.0e15) return format_grouped(static_cast<std::int64_t>(r));
  return format_fixed(v, 2);
}

std::string plural(std::int64_t n, const std::string& one, const std::string& many) {
  return format_grouped(n) + " " + (n == 1 ? one : many);
}

}  // namespace

std::string render_kv_tiers_text(const PlanResult& r, bool details) {
  if (!r.fit || !r.fit->prefix_cache || !r.fit->host_offload) return {};
  const Fit& f = *r.fit;
  const PrefixCachePlan& pc = *f.prefix_cache;
  const HostOffloadPlan& ho = *f.host_offload;
  const PrefixHitRule& rule = pc.rule;
  std::ostringstream o;
  o.imbue(std::locale::classic());
  o << "\nkv tiers (vLLM " << f.release->version << "'s prefix cache and native KV offloading connector):\n";
  // Prefix cache: the hit rule and what one cached prompt keeps.
  if (!f.prefix_caching) o << "  prefix cache: OFF (--no-enable-prefix-caching); with it on:\n";
  o << "  prefix cache: hits in multiples of " << format_grouped(rule.scheduler_block_size)
    << " tokens; the shortest prompt that hits is " << format_grouped(rule.min_hit_prompt_len) << " tokens";
  if (rule.eagle_drop_tokens > 0)
    o << " (with the draft's " << format_grouped(rule.eagle_drop_tokens) << "-token drop)";
  o << "; a cached prompt of " << format_grouped(pc.max_model_len) << " tokens keeps "
    << format_grouped(pc.cached_blocks_per_prompt) << " blocks (" << format_gib(pc.cached_bytes_per_prompt)
    << " per GPU)";
  if (f.prefix_prompts_cached) o << ", " << format_grouped(*f.prefix_prompts_cached) << " at once";
  o << " (retention interval " << format_grouped(pc.retention_interval) << ")\n";
  for (const auto& m : pc.refusals) o << "    vLLM refuses to start: " << printable(m) << "\n";
  // Host tier: bytes per token always, the capacity with a budget, the refusal.
  o << "  host tier: " << bytes_text(ho.bytes_per_token) << " B per token of history over "
    << plural(ho.workers, "worker", "workers");
  if (ho.size_gib) {
    o << "; --kv-offloading-size " << format_general(*ho.size_gib) << " holds " << format_grouped(*ho.host_slots)
      << " host blocks";
    if (ho.tokens_held) o << ", " << format_grouped(*ho.tokens_held) << " tokens";
    if (ho.requests_held) o << ", " << plural(*ho.requests_held, "request", "requests") << " of max_model_len";
  } else {
    o << "; no --kv-offloading-size";
  }
  if (!ho.refusal.empty()) {
    o << "; vLLM's connector " << (ho.size_gib ? "refuses" : "would refuse") << " group " << *ho.refused_group
      << " (of groups 0.." << ho.groups.size() - 1 << ", tokens_per_block=" << ho.groups[*ho.refused_group].block_size
      << " not divisible by tokens_per_hash=" << ho.tokens_per_hash << ")";
  }
  o << "\n";
  if (details) {
    std::int64_t sliding = 0, rings = 0, window_min = 0, window_max = 0;
    for (const auto& g : pc.groups) {
      if (g.kind == VllmSpecKind::ring) ++rings;
      if (g.kind == VllmSpecKind::sliding_window) {
        window_min = sliding == 0 ? g.hit_blocks : std::min(window_min, g.hit_blocks);
        window_max = std::max(window_max, g.hit_blocks);
        ++sliding;
      }
    }
    o << "    on a hit the full groups give their whole history";
    if (sliding > 0) {
      o << ", " << plural(sliding, "sliding-window group", "sliding-window groups") << " only the last "
        << (window_min == window_max ? format_grouped(window_max)
                                     : format_grouped(window_min) + " to " + format_grouped(window_max))
        << (window_max == 1 ? " block" : " blocks") << " before it (the window)";
    }
    if (rings > 0) o << "; " << plural(rings, "ring group is", "ring groups are") << " never cached";
    o << "\n    dense retention would keep " << format_grouped(pc.dense_cached_blocks_per_prompt)
      << " blocks per cached prompt; the host tier moves " << format_gib(ho.request_bytes) << " per request of "
      << format_grouped(ho.max_model_len) << " tokens (unpadded pages) into host blocks of "
      << format_grouped(ho.slot_bytes) << " B\n";
    if (!ho.refusal.empty()) o << "    the connector's assertion: " << printable(ho.refusal) << "\n";
    char line[256];
    std::snprintf(line, sizeof line, "    %5s  %-14s %6s %6s %9s %6s %9s %14s %14s %12s %14s\n", "group", "kind",
                  "block", "specs", "cacheable", "draft", "hit needs", "cached blocks", "dense blocks", "host B/blk",
                  "host B/request");
    o << line;
    for (std::size_t i = 0; i < pc.groups.size(); ++i) {
      const auto& g = pc.groups[i];
      const HostOffloadGroup* hg = i < ho.groups.size() ? &ho.groups[i] : nullptr;
      std::snprintf(line, sizeof line, "    %5zu  %-14s %6lld %6lld %9s %6s %9s %14s %14s %12s %14s\n", g.group,
                    kind_word(g.kind).c_str(), static_cast<long long>(g.block_size), static_cast<long long>(g.specs),
                    g.cacheable ? "yes" : "no", g.eagle ? "yes" : "no",
                    g.kind == VllmSpecKind::sliding_window ? (std::to_string(g.hit_blocks) + " blk").c_str()
                    : g.kind == VllmSpecKind::full         ? "all"
                                                           : "-",
                    format_grouped(g.cached_blocks).c_str(), format_grouped(g.dense_cached_blocks).c_str(),
                    hg ? format_grouped(hg->unpadded_block_bytes).c_str() : "-",
                    hg ? format_grouped(hg->request_bytes).c_str() : "-");
      o << line;
    }
    o << "    (scheduler block " << format_grouped(rule.scheduler_block_size) << ", hash block "
      << format_grouped(rule.hash_block_size) << " with prefix caching, tokens_per_hash "
      << format_grouped(ho.tokens_per_hash)
      << " with the offloading connector; docs/prefix-cache.md, docs/offload.md)\n";
  }
  return o.str();
}

nlohmann::ordered_json kv_tiers_json(const Fit& f) {
  if (!f.prefix_cache || !f.host_offload) return nullptr;
  const PrefixCachePlan& pc = *f.prefix_cache;
  const HostOffloadPlan& ho = *f.host_offload;
  ojson groups = ojson::array();
  for (std::size_t i = 0; i < pc.groups.size(); ++i) {
    const auto& g = pc.groups[i];
    ojson x = {{"group", g.group},
               {"kind", std::string(to_string(g.kind))},
               {"block_size", g.block_size},
               {"specs", g.specs},
               {"prefix_cacheable", g.cacheable},
               {"draft", g.eagle},
               {"hit_blocks", g.hit_blocks},
               {"cached_blocks", g.cached_blocks},
               {"dense_cached_blocks", g.dense_cached_blocks}};
    if (i < ho.groups.size()) {
      const auto& hg = ho.groups[i];
      x["offloaded"] = hg.offloaded;
      x["host_block_bytes"] = hg.unpadded_block_bytes;
      x["host_bytes_per_token"] = hg.bytes_per_token;
      x["host_request_bytes"] = hg.request_bytes;
      x["host_request_blocks"] = hg.request_slots;
    }
    groups.push_back(std::move(x));
  }
  auto opt = [](const auto& v) -> ojson { return v ? ojson(*v) : ojson(nullptr); };
  ojson j;
  j["prefix_cache"] = {{"enabled", f.prefix_caching},
                       {"scheduler_block_size", pc.rule.scheduler_block_size},
                       {"hash_block_size", pc.rule.hash_block_size},
                       {"speculative", pc.speculative},
                       {"eagle_drop_tokens", pc.rule.eagle_drop_tokens},
                       {"min_hit_tokens", pc.rule.min_hit_tokens},
                       {"min_hit_prompt_len", pc.rule.min_hit_prompt_len},
                       {"retention_interval", pc.retention_interval},
                       {"max_model_len", pc.max_model_len},
                       {"cached_blocks_per_prompt", pc.cached_blocks_per_prompt},
                       {"dense_cached_blocks_per_prompt", pc.dense_cached_blocks_per_prompt},
                       {"cached_bytes_per_prompt", pc.cached_bytes_per_prompt},
                       {"prompts_cached", opt(f.prefix_prompts_cached)},
                       {"refusals", pc.refusals}};
  j["host_offload"] = {{"workers", ho.workers},
                       {"bytes_per_token", ho.bytes_per_token},
                       {"request_bytes", ho.request_bytes},
                       {"host_block_bytes", ho.slot_bytes},
                       {"request_blocks", ho.request_slots},
                       {"tokens_per_hash", ho.tokens_per_hash},
                       {"refusal", ho.refusal.empty() ? ojson(nullptr) : ojson(ho.refusal)},
                       {"refused_group", opt(ho.refused_group)},
                       {"kv_offloading_size_gib", opt(ho.size_gib)},
                       {"budget_bytes", opt(ho.budget_bytes)},
                       {"host_blocks", opt(ho.host_slots)},
                       {"tokens_held", opt(ho.tokens_held)},
                       {"requests_held", opt(ho.requests_held)}};
  j["groups"] = std::move(groups);
  return j;
}

}  // namespace mlaplan::cli
