#include "mlaplan/engine/vllm/kv_tiers.hpp"

// Prefix caching and host offload over vLLM's KV-cache groups, modelled from vLLM's source (read,
// not copied):
//   vllm/v1/core/kv_cache_utils.py         resolve_kv_cache_block_sizes (scheduler / hash block sizes)
//   vllm/v1/core/kv_cache_coordinator.py   HybridKVCacheCoordinator.find_longest_cache_hit (hits on
//                                          scheduler-block boundaries, the EAGLE drop),
//                                          _validate_prefix_cache_retention_interval, the multi-module
//                                          MTP check of KVCacheCoordinator.__init__
//   vllm/v1/core/kv_cache_manager.py       get_computed_blocks (the lookup stops at num_tokens - 1)
//   vllm/v1/core/single_type_kv_cache_manager.py  SlidingWindowManager.find_longest_cache_hit,
//                                          _contiguous_blocks_for_hit, reachable_block_mask
//   vllm/v1/kv_cache_interface.py          prefix_cacheable (False for CircularBufferSpec)
//   vllm/config/vllm.py                    --kv-offloading-size -> cpu_bytes_to_use = size x 2^30
//   vllm/v1/kv_offload/cpu/spec.py         CPUOffloadingSpec: num_blocks = cpu_bytes_to_use //
//                                          (bytes per GPU block x block_size_factor x world_size)
//   vllm/distributed/kv_transfer/kv_connector/v1/offloading/config.py  the tokens_per_block %
//                                          tokens_per_hash assertion (vLLM issue 56871)
// docs/prefix-cache.md and docs/offload.md explain each number.

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "mlaplan/base/error.hpp"
#include "mlaplan/base/number_format.hpp"

namespace mlaplan {
namespace {

std::int64_t cdiv(std::int64_t a, std::int64_t b) { return a / b + (a % b != 0 ? 1 : 0); }

std::int64_t checked_lcm(std::int64_t a, std::int64_t b) {
  const std::int64_t g = std::gcd(a, b);
  return checked_mul(a / g, b, "the scheduler block size (lcm of the group block sizes)", ErrorKind::usage);
}

// Blocks of [shift, n) that reachable_block_mask keeps as segment tails: the last `need` blocks of
// every `per_segment`-block segment, counted from block `shift`.
std::int64_t segment_tail_blocks(std::int64_t n, std::int64_t per_segment, std::int64_t need, std::int64_t shift) {
  const std::int64_t m = std::max<std::int64_t>(0, n - shift);
  return (m / per_segment) * need + std::max<std::int64_t>(0, m % per_segment - (per_segment - need));
}

bool in_segment_tail(std::int64_t i, std::int64_t per_segment, std::int64_t need, std::int64_t shift) {
  return i >= shift && (i - shift) % per_segment >= per_segment - need;
}

// Blocks one finished prompt of `tokens` leaves cached in a sliding-window group
// (SlidingWindowManager.reachable_block_mask over the blocks cache_blocks registers). `interval`:
// nullopt dense (a tail per scheduler block), 0 the replay boundary only, N a tail per N tokens.
std::int64_t sliding_cached_blocks(std::int64_t tokens, std::int64_t block, std::int64_t need, bool eagle,
                                   std::int64_t sched, std::optional<std::int64_t> interval) {
  // cache_blocks registers the scheduler-aligned prefix, one block more in a draft group.
  const std::int64_t aligned = tokens / sched * sched;
  std::int64_t n = aligned / block;
  if (eagle) n = std::min(tokens / block, n + 1);
  if (n <= 0) return 0;
  const std::int64_t shift = eagle ? 1 : 0;
  const std::int64_t segment = interval ? *interval : sched;
  std::int64_t count = 0;
  std::int64_t per_segment = 0;
  if (segment > 0) {
    per_segment = segment / block;
    if (need >= per_segment) return n;  // every block is reachable
    count = segment_tail_blocks(n, per_segment, need, shift);
  }
  if (interval) {
    // The replay boundary of the prompt (its last token): the `need` blocks ending there.
    const std::int64_t boundary = (tokens - 1) / sched * sched;
    const std::int64_t end = boundary / block + shift;
    for (std::int64_t j = std::max<std::int64_t>(0, end - need); j < std::min(n, end); ++j) {
      if (per_segment == 0 || !in_segment_tail(j, per_segment, need, shift)) ++count;
    }
  }
  return std::min(count, n);
}

/// Tokens one block of group `g` covers: block x DCP for attention specs (each DCP rank stores
/// every DCP-th token: vLLM's resolve_kv_cache_block_sizes, and the offloading spec's
/// gpu_block_size), the block itself for the V4.1 ring, which is no attention spec.
std::int64_t group_block_tokens(const VllmKvGroupShape& g, std::int64_t dcp) {
  return g.kind == VllmSpecKind::ring ? g.block_size
                                      : checked_mul(g.block_size, dcp, "the block size x DCP", ErrorKind::usage);
}

/// What the stages hold of each group of the grouping, in one pass over their groups.
struct GroupSums {
  std::vector<std::int64_t> specs;                 ///< specs over all stages
  std::vector<bool> draft;                         ///< a draft layer's spec in it
  std::vector<std::int64_t> unpadded_block_bytes;  ///< over all stages, x tp
};

GroupSums group_sums(const std::vector<VllmKvConfig>& stages, std::int64_t tp) {
  const std::size_t n = stages.front().group_count();
  GroupSums sums{std::vector<std::int64_t>(n, 0), std::vector<bool>(n, false), std::vector<std::int64_t>(n, 0)};
  for (const auto& st : stages) {
    for (const auto& g : st.groups) {
      if (g.index >= n) throw_internal("kv tiers: a stage's group past the grouping");
      std::int64_t stage_bytes = 0;
      for (auto si : g.specs) {
        stage_bytes = checked_add(stage_bytes, st.specs[si].unpadded_page_bytes, "host bytes", ErrorKind::usage);
        if (st.specs[si].draft) sums.draft[g.index] = true;
      }
      sums.specs[g.index] += static_cast<std::int64_t>(g.specs.size());
      sums.unpadded_block_bytes[g.index] =
          checked_add(sums.unpadded_block_bytes[g.index], checked_mul(stage_bytes, tp, "host bytes", ErrorKind::usage),
                      "host bytes", ErrorKind::usage);
    }
  }
  return sums;
}

}  // namespace

PrefixHitRule prefix_hit_rule(const std::vector<PrefixGroupBlock>& groups, bool speculative) {
  if (groups.empty()) throw_internal("prefix_hit_rule: no KV-cache group");
  PrefixHitRule r;
  r.scheduler_block_size = 1;
  std::int64_t hash = 0;
  bool any_eagle = false;
  for (const auto& g : groups) {
    if (g.block_size < 1) throw_internal("prefix_hit_rule: a group of block size < 1");
    r.scheduler_block_size = checked_lcm(r.scheduler_block_size, g.block_size);
    if (g.cacheable) hash = std::gcd(hash, g.block_size);
    any_eagle = any_eagle || (g.cacheable && g.eagle);
  }
  r.hash_block_size = hash > 0 ? hash : r.scheduler_block_size;
  if (speculative) {
    // KVCacheCoordinator: the groups holding draft layers get the drop; all of them when none does.
    for (const auto& g : groups) {
      if (g.cacheable && (g.eagle || !any_eagle)) r.eagle_drop_tokens = std::max(r.eagle_drop_tokens, g.block_size);
    }
  }
  r.min_hit_tokens = r.scheduler_block_size;
  r.min_hit_prompt_len =
      checked_add(checked_add(r.scheduler_block_size, r.eagle_drop_tokens, "the prefix hit length", ErrorKind::usage),
                  1, "the prefix hit length", ErrorKind::usage);
  return r;
}

std::int64_t prefix_hit_tokens(const PrefixHitRule& rule, std::int64_t prompt_len) {
  // get_computed_blocks looks up at most num_tokens - 1 tokens; a draft group must match its block
  // past the hit; hits are multiples of the scheduler block.
  const std::int64_t room = prompt_len - 1 - rule.eagle_drop_tokens;
  if (rule.scheduler_block_size < 1 || room < rule.scheduler_block_size) return 0;
  return room / rule.scheduler_block_size * rule.scheduler_block_size;
}

PrefixCachePlan plan_prefix_cache(const VllmKvConfig& kv, const PrefixCacheOptions& o) {
  return plan_prefix_cache(std::vector<VllmKvConfig>{kv}, o);
}

PrefixCachePlan plan_prefix_cache(const std::vector<VllmKvConfig>& stages, const PrefixCacheOptions& o) {
  if (stages.empty() || stages.front().group_count() == 0) throw_internal("plan_prefix_cache: no KV-cache group");
  if (o.retention_interval < 0) {
    throw_usage("--prefix-cache-retention-interval: '" + std::to_string(o.retention_interval) +
                "' is out of range; allowed 0 and above");
  }
  const VllmKvConfig& kv = stages.front();
  const std::int64_t dcp = std::max<std::int64_t>(kv.decode_context_parallel_size, 1);
  PrefixCachePlan p;
  p.speculative = o.speculative;
  p.retention_interval = o.retention_interval;
  p.max_model_len = kv.max_model_len;
  std::vector<PrefixGroupBlock> blocks;
  const GroupSums sums = group_sums(stages, 1);
  for (std::size_t gi = 0; gi < kv.group_count(); ++gi) {
    const VllmKvGroupShape& g = (*kv.all_groups)[gi];
    PrefixCacheGroup pg;
    pg.group = gi;
    pg.kind = g.kind;
    pg.block_size = group_block_tokens(g, dcp);
    pg.sliding_window = g.sliding_window;
    pg.specs = sums.specs[gi];
    pg.cacheable = g.kind != VllmSpecKind::ring;
    pg.eagle = o.speculative && sums.draft[gi];
    blocks.push_back(PrefixGroupBlock{pg.block_size, pg.cacheable, pg.eagle});
    p.groups.push_back(pg);
  }
  p.rule = prefix_hit_rule(blocks, o.speculative);
  const std::int64_t sched = p.rule.scheduler_block_size;
  const bool any_eagle = std::any_of(p.groups.begin(), p.groups.end(), [](const auto& g) { return g.eagle; });
  const bool any_sliding = std::any_of(p.groups.begin(), p.groups.end(),
                                       [](const auto& g) { return g.kind == VllmSpecKind::sliding_window; });

  // The start-up checks of KVCacheCoordinator.__init__.
  const std::int64_t r = o.retention_interval;
  bool retention_ok = true;
  if (!any_sliding && r != 0) {
    retention_ok = false;
    p.refusals.push_back(
        "prefix_cache_retention_interval is set but this model has no sliding-window or Mamba KV cache group, so "
        "retention has no effect. Set it to 0 (it only applies to sliding-window and Mamba attention).");
  } else if (any_sliding && r % sched != 0) {
    retention_ok = false;
    p.refusals.push_back("prefix_cache_retention_interval (" + std::to_string(r) +
                         ") must be non-negative and a multiple of scheduler_block_size (" + std::to_string(sched) +
                         ").");
  }
  if (o.speculative && o.multi_module_draft && sched < o.num_speculative_tokens) {
    p.refusals.push_back(
        "Multi-module MTP with prefix caching requires scheduler_block_size (=" + std::to_string(sched) +
        ") >= num_speculative_tokens (=" + std::to_string(o.num_speculative_tokens) + ").");
  }

  const std::int64_t L = kv.max_model_len;
  for (auto& g : p.groups) {
    const bool eagle_lookup = o.speculative && g.cacheable && (g.eagle || !any_eagle);
    switch (g.kind) {
      case VllmSpecKind::full: {
        std::int64_t n = L / sched * sched / g.block_size;
        if (eagle_lookup) n = std::min(L / g.block_size, n + 1);
        g.cached_blocks = g.dense_cached_blocks = n;
        break;
      }
      case VllmSpecKind::sliding_window: {
        g.hit_blocks = cdiv(std::max<std::int64_t>(g.sliding_window - 1, 0), g.block_size) + (eagle_lookup ? 1 : 0);
        g.dense_cached_blocks = sliding_cached_blocks(L, g.block_size, g.hit_blocks, eagle_lookup, sched, std::nullopt);
        // A refused interval starts no engine: the dense figure stands for "not known better".
        g.cached_blocks = retention_ok ? sliding_cached_blocks(L, g.block_size, g.hit_blocks, eagle_lookup, sched, r)
                                       : g.dense_cached_blocks;
        break;
      }
      case VllmSpecKind::ring: break;  // not prefix-cacheable: never registered
    }
    p.cached_blocks_per_prompt =
        checked_add(p.cached_blocks_per_prompt, g.cached_blocks, "cached blocks", ErrorKind::usage);
    p.dense_cached_blocks_per_prompt =
        checked_add(p.dense_cached_blocks_per_prompt, g.dense_cached_blocks, "cached blocks", ErrorKind::usage);
  }
  p.cached_bytes_per_prompt =
      checked_mul(p.cached_blocks_per_prompt, kv.bytes_per_block, "cached bytes per prompt", ErrorKind::usage);
  return p;
}

HostOffloadPlan plan_host_offload(const std::vector<VllmKvConfig>& stages, std::int64_t tp,
                                  std::optional<double> size_gib) {
  if (stages.empty() || stages.front().group_count() == 0) throw_internal("plan_host_offload: no KV-cache group");
  if (tp < 1) throw_internal("plan_host_offload: tensor_parallel_size < 1");
  const VllmKvConfig& kv = stages.front();
  HostOffloadPlan h;
  h.workers = checked_mul(tp, static_cast<std::int64_t>(stages.size()), "workers", ErrorKind::usage);
  h.max_model_len = kv.max_model_len;
  const std::int64_t L = kv.max_model_len;
  const std::int64_t dcp = std::max<std::int64_t>(kv.decode_context_parallel_size, 1);
  std::int64_t hash = 0;
  const GroupSums sums = group_sums(stages, tp);
  for (std::size_t gi = 0; gi < kv.group_count(); ++gi) {
    const VllmKvGroupShape& g = (*kv.all_groups)[gi];
    HostOffloadGroup hg;
    hg.group = gi;
    hg.kind = g.kind;
    hg.block_size = group_block_tokens(g, dcp);  // tokens_per_block
    hg.offloaded = g.kind != VllmSpecKind::ring;
    hg.unpadded_block_bytes = sums.unpadded_block_bytes[gi];
    if (hg.offloaded) hash = std::gcd(hash, hg.block_size);
    std::int64_t blocks = 0;
    if (g.kind == VllmSpecKind::full) {
      // With DCP a block of every rank covers block x DCP tokens of the history.
      blocks = cdiv(L, hg.block_size);
      hg.bytes_per_token = static_cast<double>(hg.unpadded_block_bytes) / static_cast<double>(hg.block_size);
      h.bytes_per_token += hg.bytes_per_token;
    } else if (g.kind == VllmSpecKind::sliding_window) {
      // The window's blocks before the prompt's end: what a hit from the host tier needs.
      blocks = std::min(cdiv(L, g.block_size), cdiv(std::max<std::int64_t>(g.sliding_window - 1, 1), g.block_size));
    }
    hg.request_slots = blocks;
    hg.request_bytes = checked_mul(blocks, hg.unpadded_block_bytes, "host bytes per request", ErrorKind::usage);
    h.request_slots = checked_add(h.request_slots, blocks, "host slots per request", ErrorKind::usage);
    h.request_bytes = checked_add(h.request_bytes, hg.request_bytes, "host bytes per request", ErrorKind::usage);
    h.groups.push_back(hg);
  }
  // resolve_kv_cache_block_sizes with a connector: the gcd of the prefix-cacheable groups' blocks
  // (one group: its block). build_offloading_config then asserts it divides every group's block.
  h.tokens_per_hash = h.groups.size() == 1 ? h.groups.front().block_size : (hash > 0 ? hash : 1);
  for (const auto& hg : h.groups) {
    if (hg.block_size % h.tokens_per_hash != 0) {
      h.refused_group = hg.group;
      h.refusal = "tokens_per_block=" + std::to_string(hg.block_size) +
                  " not divisible by tokens_per_hash=" + std::to_string(h.tokens_per_hash) +
                  ". Hybrid models (e.g. Mamba+Attention) need --enable-prefix-caching to align block sizes.";
      break;
    }
  }
  // One host slot holds one group's GPU block: the packed block's bytes on every worker
  // (CPUOffloadingSpec: total GPU KV bytes // num_blocks x block_size_factor (1) x world_size).
  h.slot_bytes = checked_mul(kv.bytes_per_block, h.workers, "host slot bytes", ErrorKind::usage);
  if (size_gib) {
    const double bytes = *size_gib * 1073741824.0;
    if (!(std::isfinite(bytes) && bytes >= 1.0 && bytes <= 1125899906842624.0)) {
      // (the CLI refuses such a value as typed, flag_values.hpp; this names it for other callers)
      throw_usage("--kv-offloading-size: '" + format_general(*size_gib) +
                  "' is out of range; allowed 2^-30 (1 byte) up to 1048576 GiB");
    }
    h.size_gib = *size_gib;
    h.budget_bytes = static_cast<std::int64_t>(bytes);  // int(cpu_bytes_to_use)
    if (h.slot_bytes > 0) {
      h.host_slots = *h.budget_bytes / h.slot_bytes;
      // History tokens of the full groups: slots per lcm-of-blocks tokens, over the slots.
      std::int64_t lc = 1;
      bool any_full = false;
      for (const auto& hg : h.groups) {
        if (hg.kind == VllmSpecKind::full) {
          lc = checked_lcm(lc, hg.block_size);
          any_full = true;
        }
      }
      if (any_full) {
        std::int64_t per_lc = 0;
        for (const auto& hg : h.groups) {
          if (hg.kind == VllmSpecKind::full) per_lc += lc / hg.block_size;
        }
        // slots x lc / per_lc without the product: whole groups of per_lc slots, then the rest.
        const std::int64_t whole = checked_mul(*h.host_slots / per_lc, lc, "tokens held", ErrorKind::usage);
        h.tokens_held = checked_add(whole, (*h.host_slots % per_lc) * lc / per_lc, "tokens held", ErrorKind::usage);
      }
      if (h.request_slots > 0) h.requests_held = *h.host_slots / h.request_slots;
    }
  }
  return h;
}

}  // namespace mlaplan
