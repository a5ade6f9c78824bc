#include "mlaplan/engine/vllm/vllm_kv.hpp"

// vLLM 0.30's KV-cache planner, modelled from its source (read, not copied):
//   vllm/v1/kv_cache_interface.py      specs: page_size_bytes, _apply_alignment_padding,
//                                      FullAttentionSpec / SlidingWindowSpec.max_memory_usage_bytes
//                                      (max_admission_blocks_per_request), UniformTypeKVCacheSpecs.is_uniform_type
//   vllm/v1/core/kv_cache_planning.py  get_kv_cache_configs, _get_packed_kv_cache_groups, _approximate_gcd,
//                                      _project_kv_cache_groups_to_worker, _get_kv_cache_bytes_per_block,
//                                      _max_memory_usage_bytes_from_groups, _estimate_max_model_len_from_groups,
//                                      _check_enough_kv_cache_memory
//   vllm/v1/core/kv_cache_utils.py     get_max_concurrency_for_kv_cache_config, get_kv_cache_capacity,
//                                      update_kv_cache_capacity (the log line), generate_scheduler_kv_cache_config
// vLLM v0.25.0's planner (VllmKvGeneration::packed_buckets), modelled from its source (read, not copied):
//   vllm/v1/core/kv_cache_utils.py     get_kv_cache_groups, group_and_unify_kv_cache_specs,
//                                      _get_kv_cache_groups_uniform_groups, _approximate_gcd,
//                                      _bucket_layers_by_page_size, _get_kv_cache_config_packed
//                                      (alias _get_kv_cache_config_deepseek_v4), _project_kv_cache_groups_to_worker,
//                                      _max_memory_usage_bytes_from_groups, _check_enough_kv_cache_memory,
//                                      get_max_concurrency_for_kv_cache_config, get_kv_cache_configs (the two
//                                      log lines); public code index id 65950177089
//   vllm/v1/kv_cache_interface.py      UniformTypeKVCacheSpecs (page_size_bytes, max_memory_usage_bytes,
//                                      get_page_sizes, get_num_layer_tuples, max_memory_usage_pages),
//                                      SlidingWindowSpec.max_admission_blocks_per_request; id 55159087810
// The specs are built from mla-plan's own Layout objects (rows, pages, alignments), not re-derived.

#include <algorithm>
#include <limits>
#include <map>
#include <numeric>
#include <string>
#include <utility>

#include "mlaplan/base/error.hpp"
#include "mlaplan/base/number_format.hpp"

namespace mlaplan {
namespace {

constexpr std::int64_t kInt64Max = std::numeric_limits<std::int64_t>::max();
constexpr double kGiB = 1073741824.0;

std::int64_t cdiv(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }
// cdiv of non-negative a without the overflow of a + b - 1 (a may be a saturated kInt64Max).
std::int64_t cdiv_sat(std::int64_t a, std::int64_t b) { return a / b + (a % b != 0 ? 1 : 0); }
std::int64_t sat_add(std::int64_t a, std::int64_t b) {
  std::int64_t r = 0;
  return __builtin_add_overflow(a, b, &r) ? kInt64Max : r;
}
std::int64_t sat_mul(std::int64_t a, std::int64_t b) {
  std::int64_t r = 0;
  return __builtin_mul_overflow(a, b, &r) ? kInt64Max : r;
}

// vllm.utils.mem_utils.format_gib: GiB with two decimals.
std::string gib(std::int64_t bytes) { return format_fixed(static_cast<double>(bytes) / kGiB, 2); }

// Blocks one request of `tokens` tokens reserves in a group of this kind (the max over a uniform-type
// group's specs is the same for all of them: equal block size, equal window).
// full:  FullAttentionSpec.max_memory_usage_bytes = cdiv(L, block) pages (DCP/PCP = 1 here).
// sliding_window: SlidingWindowSpec.max_admission_blocks_per_request = cdiv(min(W - 1 + R, L), block) + 1.
// ring:  one page per request (the V4.1 compressor ring, a request-scoped state like MambaSpec's 1 page).
// With decode context parallelism over `dcp` ranks a full spec holds cdiv(tokens, dcp) tokens per
// rank (FullAttentionSpec.max_memory_usage_bytes: "each dcp rank only need save max_model_len //
// dcp_world_size tokens locally"); window specs and rings stay whole on every rank.
std::int64_t kind_blocks(VllmSpecKind kind, std::int64_t block, std::int64_t window, std::int64_t retained,
                         std::int64_t tokens, std::int64_t dcp = 1) {
  switch (kind) {
    case VllmSpecKind::full: return cdiv(cdiv(tokens, std::max<std::int64_t>(dcp, 1)), block);
    case VllmSpecKind::sliding_window: return cdiv(std::min(sat_add(window - 1, retained), tokens), block) + 1;
    case VllmSpecKind::ring: return 1;
  }
  return 0;
}

// kv_cache_planning.py _approximate_gcd: the d in [lower_bound, max] with the least round-up padding,
// ties to the larger d.
std::int64_t approximate_gcd(const std::vector<std::int64_t>& values, std::int64_t lower_bound) {
  const std::int64_t min_d = std::max<std::int64_t>(1, lower_bound);
  const std::int64_t max_d = *std::max_element(values.begin(), values.end());
  if (min_d > max_d) return min_d;
  std::int64_t best_d = min_d;
  std::int64_t best_pad = -1;
  for (std::int64_t d = min_d; d <= max_d; ++d) {
    std::int64_t pad = 0;
    for (auto x : values) pad += (d - x % d) % d;
    if (best_pad < 0 || pad < best_pad || (pad == best_pad && d > best_d)) {
      best_pad = pad;
      best_d = d;
    }
  }
  return best_d;
}

// One bucket: specs of one family, block size (and window), as UniformTypeKVCacheSpecs.is_uniform_type
// accepts them; layers listed per page size in the order the page sizes first appear.
struct Bucket {
  VllmSpecKind kind = VllmSpecKind::full;
  std::int64_t block_size = 0;
  std::int64_t window = 0;
  std::vector<std::int64_t> pages;                // distinct page sizes, first-seen order
  std::vector<std::vector<std::size_t>> by_page;  // spec indices per page size
  std::size_t count = 0;
  bool balanced() const {
    for (const auto& v : by_page) {
      if (v.size() != by_page.front().size()) return false;
    }
    return true;
  }
  std::int64_t max_layers_per_page() const {
    std::size_t m = 0;
    for (const auto& v : by_page) m = std::max(m, v.size());
    return static_cast<std::int64_t>(m);
  }
  // Page bytes of the widest of n groups it splits into.
  std::int64_t widest_group_bytes(std::int64_t n) const {
    std::int64_t b = 0;
    for (std::size_t i = 0; i < pages.size(); ++i) {
      b += cdiv(static_cast<std::int64_t>(by_page[i].size()), n) * pages[i];
    }
    return b;
  }
};

bool same_bucket(const Bucket& b, const VllmKvSpec& s) {
  return b.kind == s.kind && b.block_size == s.block_size &&
         (s.kind != VllmSpecKind::sliding_window || b.window == s.sliding_window);
}

// Every spec vLLM registers for the whole model (all stages), in registration order (by layer, then kind).
std::vector<VllmKvSpec> all_specs(const ModelConfig& cfg, const Topology& topo, const Layout& layout,
                                  const VllmKvOptions& options, std::vector<std::int64_t>& stage_of_spec) {
  std::vector<VllmKvSpec> specs;
  specs.reserve(layout.objects.size());
  stage_of_spec.reserve(layout.objects.size());
  std::map<std::int64_t, int> states_seen;  // compressor states per layer so far (V4: attention, then indexer)
  for (const CacheObject& o : layout.objects) {
    // Draft layers (MTP / DSpark) are built, and register caches, only with a speculative config.
    if (o.draft && !options.speculative_decoding) continue;
    VllmKvSpec s;
    s.layer = o.layer;
    s.draft = o.draft;
    s.block_size = o.tokens_per_page;
    s.tokens_per_state = o.compress_ratio;
    s.row_bytes = o.row_bytes;
    // Page = round_up((block / tokens_per_state) x row, alignment): the Layout's page_bytes is exactly
    // that (kv_cache_interface.py _apply_alignment_padding, storage_block_size x row).
    s.page_bytes = o.page_bytes;
    s.unpadded_page_bytes = o.unpadded_page_bytes;
    s.alignment = o.alignment;
    switch (o.kind) {
      case CacheKind::swa:
        s.what = "swa";
        s.kind = VllmSpecKind::sliding_window;
        s.sliding_window = o.window_tokens;
        break;
      case CacheKind::compressed:
        s.what = "compressed";
        s.kind = VllmSpecKind::full;
        break;
      case CacheKind::indexer:
        s.what = "indexer";
        s.kind = VllmSpecKind::full;
        break;
      case CacheKind::compressor_state: {
        if (o.ring) {
          s.what = "ring";
          s.kind = VllmSpecKind::ring;
          break;
        }
        // V4.0 states: SlidingWindowMLASpec of window coff x ratio (8 at ratio 4, 128 at ratio 128).
        s.kind = VllmSpecKind::sliding_window;
        s.sliding_window = o.window_tokens;
        const std::size_t li = static_cast<std::size_t>(o.layer);
        const std::int64_t ratio = li < topo.layers.size() ? topo.layers[li].compress_ratio : 0;
        const int seen = states_seen[o.layer]++;
        if (ratio == 4) s.what = seen == 0 ? "c4_state" : "c4_indexer_state";
        else s.what = "c" + std::to_string(ratio) + "_state";
        break;
      }
    }
    (void)cfg;
    specs.push_back(std::move(s));
    stage_of_spec.push_back(o.stage);
  }
  return specs;
}

// A group of the global grouping, before projection onto a worker.
struct GlobalGroup {
  VllmSpecKind kind = VllmSpecKind::full;
  std::int64_t block_size = 0;
  std::int64_t window = 0;
  std::vector<std::size_t> specs;
};

// kv_cache_planning.py _get_packed_kv_cache_groups (and the single-page-size paths before it).
std::vector<GlobalGroup> packed_groups(const std::vector<VllmKvSpec>& specs) {
  std::vector<GlobalGroup> groups;
  if (specs.empty()) return groups;
  // Greedy buckets in registration order.
  std::vector<Bucket> buckets;
  for (std::size_t i = 0; i < specs.size(); ++i) {
    const VllmKvSpec& s = specs[i];
    auto it = std::find_if(buckets.begin(), buckets.end(), [&](const Bucket& b) { return same_bucket(b, s); });
    if (it == buckets.end()) {
      Bucket b;
      b.kind = s.kind;
      b.block_size = s.block_size;
      b.window = s.sliding_window;
      buckets.push_back(std::move(b));
      it = std::prev(buckets.end());
    }
    auto p = std::find(it->pages.begin(), it->pages.end(), s.page_bytes);
    if (p == it->pages.end()) {
      it->pages.push_back(s.page_bytes);
      it->by_page.emplace_back();
      p = std::prev(it->pages.end());
    }
    it->by_page[static_cast<std::size_t>(p - it->pages.begin())].push_back(i);
    ++it->count;
  }

  // One bucket with a uniform spec type: get_kv_cache_groups puts all layers in one group
  // (_get_kv_cache_groups_uniform_spec / _uniform_type) before the packed path is tried.
  if (buckets.size() == 1) {
    GlobalGroup g{buckets[0].kind, buckets[0].block_size, buckets[0].window, {}};
    for (std::size_t i = 0; i < specs.size(); ++i) g.specs.push_back(i);
    groups.push_back(std::move(g));
    return groups;
  }

  // Repeats per group: balanced buckets mixing page sizes stay whole (a floor); the repeats are an
  // approximate gcd of every balanced bucket's layers per page size.
  std::int64_t min_repeats = 0;
  std::vector<std::int64_t> balanced_counts;
  for (const auto& b : buckets) {
    if (!b.balanced()) continue;
    balanced_counts.push_back(b.max_layers_per_page());
    if (b.pages.size() > 1) min_repeats = std::max(min_repeats, b.max_layers_per_page());
  }
  const bool have_repeats = min_repeats > 0;
  const std::int64_t repeats = have_repeats ? approximate_gcd(balanced_counts, min_repeats) : 0;

  // "State" buckets are split to fit the block the others already need (vLLM does this for its
  // request-scoped state buckets, MambaSpec; docs/fit.md section 4: rings, and the
  // sliding-window buckets when there is no repeat pattern).
  auto is_state = [&](const Bucket& b) {
    return b.kind == VllmSpecKind::ring || (!have_repeats && b.kind == VllmSpecKind::sliding_window);
  };
  auto groups_for = [&](const Bucket& b) -> std::int64_t {
    return (have_repeats && b.balanced()) ? cdiv(b.max_layers_per_page(), repeats) : 1;
  };
  std::int64_t anchor = 0;
  for (const auto& b : buckets) {
    const std::int64_t n = is_state(b) ? static_cast<std::int64_t>(b.count) : groups_for(b);
    anchor = std::max(anchor, b.widest_group_bytes(n));
  }

  for (const auto& b : buckets) {
    std::int64_t n = groups_for(b);
    if (anchor > 0 && is_state(b)) {
      const std::int64_t per_block = std::max<std::int64_t>(anchor / b.pages.front(), 1);
      n = std::max(n, cdiv(static_cast<std::int64_t>(b.count), per_block));
    }
    if (n == 1) {  // the whole bucket in one group, in registration order
      GlobalGroup g{b.kind, b.block_size, b.window, {}};
      g.specs.reserve(b.count);
      // Each page size's list is in registration order: merge them (a sort of the whole was
      // the costliest step of a large config's grouping).
      for (const auto& v : b.by_page) {
        const auto mid = static_cast<std::ptrdiff_t>(g.specs.size());
        g.specs.insert(g.specs.end(), v.begin(), v.end());
        std::inplace_merge(g.specs.begin(), g.specs.begin() + mid, g.specs.end());
      }
      if (!g.specs.empty()) groups.push_back(std::move(g));
      continue;
    }
    // Pattern repeats: the j-th layer of every page size. (vLLM zips the page-size lists; for a
    // bucket that is not balanced the shorter lists just end early here, so no layer is dropped.)
    std::vector<std::vector<std::size_t>> pattern;
    for (std::size_t j = 0; j < static_cast<std::size_t>(b.max_layers_per_page()); ++j) {
      std::vector<std::size_t> rep;
      for (const auto& v : b.by_page) {
        if (j < v.size()) rep.push_back(v[j]);
      }
      pattern.push_back(std::move(rep));
    }
    // Group i takes repeats i, i + n, i + 2n, ... (pattern_repeats[i::num_groups]).
    for (std::int64_t i = 0; i < n; ++i) {
      GlobalGroup g{b.kind, b.block_size, b.window, {}};
      for (std::size_t j = static_cast<std::size_t>(i); j < pattern.size(); j += static_cast<std::size_t>(n)) {
        for (auto idx : pattern[j]) g.specs.push_back(idx);
      }
      if (!g.specs.empty()) groups.push_back(std::move(g));
    }
  }
  return groups;
}

// The largest count of one page size among `specs` (UniformTypeKVCacheSpecs.get_num_layer_tuples:
// Counter(page sizes).most_common(1)).
template <class Specs, class PageOf>
std::int64_t most_common_page_count(const Specs& specs, PageOf page_of) {
  std::vector<std::pair<std::int64_t, std::int64_t>> counts;  // (page, count), few distinct pages
  std::int64_t best = 0;
  for (const auto& x : specs) {
    const std::int64_t p = page_of(x);
    auto it = std::find_if(counts.begin(), counts.end(), [&](const auto& c) { return c.first == p; });
    if (it == counts.end()) {
      counts.emplace_back(p, 0);
      it = std::prev(counts.end());
    }
    best = std::max(best, ++it->second);
  }
  return best;
}

// vLLM v0.25.0's grouping (kv_cache_utils.py get_kv_cache_groups): one spec type -> one group;
// otherwise group_and_unify_kv_cache_specs (every full/MLA spec in group 0, sliding-window specs
// bucketed by (block_size, sliding_window) in first-seen order) and
// _get_kv_cache_groups_uniform_groups (layer tuples). Pads the pages of the sliding-window specs in
// `specs` as vLLM does (page_size_padded set on the spec objects).
std::vector<GlobalGroup> bucket_groups(std::vector<VllmKvSpec>& specs) {
  std::vector<GlobalGroup> groups;
  if (specs.empty()) return groups;
  for (const auto& s : specs) {
    if (s.kind == VllmSpecKind::ring) {
      throw_unsupported(
          "vLLM 0.25's packed-buckets KV planner has no compressor-ring spec (DeepSeek V4.1 needs vLLM 0.30 or newer)");
    }
  }
  // is_kv_cache_spec_uniform / UniformTypeKVCacheSpecs.from_specs of every layer: one group.
  const bool one_type = std::all_of(specs.begin(), specs.end(), [&](const VllmKvSpec& s) {
    return s.kind == specs.front().kind && s.block_size == specs.front().block_size &&
           (s.kind != VllmSpecKind::sliding_window || s.sliding_window == specs.front().sliding_window);
  });
  if (one_type) {
    GlobalGroup g{specs.front().kind, specs.front().block_size, specs.front().sliding_window, {}};
    for (std::size_t i = 0; i < specs.size(); ++i) g.specs.push_back(i);
    groups.push_back(std::move(g));
    return groups;
  }
  // group_and_unify_kv_cache_specs: the full specs form one UniformTypeKVCacheSpecs (asserted to
  // exist and to share one block size); the sliding-window specs one per (block, window).
  GlobalGroup full{VllmSpecKind::full, 0, 0, {}};
  std::vector<GlobalGroup> windows;
  for (std::size_t i = 0; i < specs.size(); ++i) {
    const VllmKvSpec& s = specs[i];
    if (s.kind == VllmSpecKind::full) {
      if (full.specs.empty()) full.block_size = s.block_size;
      if (s.block_size != full.block_size) {
        throw_unsupported(
            "vLLM 0.25's packed-buckets KV planner needs one block size for every full (MLA) cache; got " +
            std::to_string(full.block_size) + " and " + std::to_string(s.block_size));
      }
      full.specs.push_back(i);
      continue;
    }
    auto it = std::find_if(windows.begin(), windows.end(), [&](const GlobalGroup& w) {
      return w.block_size == s.block_size && w.window == s.sliding_window;
    });
    if (it == windows.end()) {
      windows.push_back(GlobalGroup{VllmSpecKind::sliding_window, s.block_size, s.sliding_window, {}});
      it = std::prev(windows.end());
    }
    it->specs.push_back(i);
  }
  if (full.specs.empty()) {
    throw_unsupported("vLLM 0.25's packed-buckets KV planner needs a full (MLA) cache besides the sliding windows");
  }
  auto page_of = [&](std::size_t i) { return specs[i].page_bytes; };
  // Layer tuples: an approximate gcd of every group's tuple count (its most common page size's
  // count, before any padding), at least group 0's.
  std::vector<std::int64_t> tuples{most_common_page_count(full.specs, page_of)};
  for (const auto& w : windows) tuples.push_back(most_common_page_count(w.specs, page_of));
  const std::int64_t num_layer_tuples = approximate_gcd(tuples, tuples.front());
  // The distinct pages of the full group: each sliding-window page is padded up to the smallest of
  // them at or above it.
  std::vector<std::int64_t> full_pages;
  for (auto i : full.specs) {
    if (std::find(full_pages.begin(), full_pages.end(), specs[i].page_bytes) == full_pages.end()) {
      full_pages.push_back(specs[i].page_bytes);
    }
  }
  groups.push_back(std::move(full));
  for (const auto& w : windows) {
    std::vector<std::pair<std::int64_t, std::vector<std::size_t>>> per_size;  // padded page -> layers, first seen
    for (auto i : w.specs) {
      std::int64_t candidate = -1;
      for (auto p : full_pages) {
        if (p >= specs[i].page_bytes && (candidate < 0 || p < candidate)) candidate = p;
      }
      if (candidate < 0) {
        throw_unsupported("vLLM 0.25's packed-buckets KV planner: a sliding-window page of " +
                          format_grouped(specs[i].page_bytes) + " B exceeds every full (MLA) page");
      }
      specs[i].page_bytes = candidate;
      auto it = std::find_if(per_size.begin(), per_size.end(), [&](const auto& e) { return e.first == candidate; });
      if (it == per_size.end()) {
        per_size.emplace_back(candidate, std::vector<std::size_t>{});
        it = std::prev(per_size.end());
      }
      it->second.push_back(i);
    }
    const std::size_t per_page = per_size.front().second.size();
    for (const auto& e : per_size) {
      if (e.second.size() != per_page) {
        throw_unsupported(
            "vLLM 0.25's packed-buckets KV planner needs as many layers of every page size in one "
            "sliding-window group");
      }
    }
    // cdiv(layers per page size, num_layer_tuples) groups; group i takes the layer tuples i, i + n, ...
    // (layer_tuples[i::num_tuple_groups], a tuple being one layer of each page size).
    const auto n = static_cast<std::size_t>(cdiv(static_cast<std::int64_t>(per_page), num_layer_tuples));
    for (std::size_t gi = 0; gi < n; ++gi) {
      GlobalGroup g{w.kind, w.block_size, w.window, {}};
      for (std::size_t j = gi; j < per_page; j += n) {
        for (const auto& e : per_size) g.specs.push_back(e.second[j]);
      }
      if (!g.specs.empty()) groups.push_back(std::move(g));
    }
  }
  return groups;
}

}  // namespace

std::string_view to_string(VllmKvGeneration g) {
  switch (g) {
    case VllmKvGeneration::packed_buckets: return "packed_buckets";
    case VllmKvGeneration::generic_packed: return "generic_packed";
  }
  return "?";
}

const char* vllm_kv_planner_name(VllmKvGeneration g) {
  return g == VllmKvGeneration::packed_buckets ? "vLLM 0.25 packed KV-cache buckets (kv_cache_utils.py)"
                                               : kVllmKvPlannerName;
}

std::string_view to_string(VllmSpecKind k) {
  switch (k) {
    case VllmSpecKind::full: return "full";
    case VllmSpecKind::sliding_window: return "sliding_window";
    case VllmSpecKind::ring: return "ring";
  }
  return "?";
}

const VllmKvGroup* VllmKvConfig::group_on_stage(std::size_t index) const {
  const auto it = std::lower_bound(groups.begin(), groups.end(), index,
                                   [](const VllmKvGroup& g, std::size_t i) { return g.index < i; });
  return it != groups.end() && it->index == index ? &*it : nullptr;
}

std::int64_t VllmKvConfig::request_blocks(std::int64_t tokens) const {
  std::int64_t sum = 0;
  if (!all_groups) return sum;
  for (const auto& g : *all_groups) {
    sum = sat_add(sum, kind_blocks(g.kind, g.block_size, g.sliding_window, retained_tokens, tokens,
                                   decode_context_parallel_size));
  }
  return sum;
}

std::int64_t VllmKvConfig::decode_request_blocks(std::int64_t tokens, std::int64_t step_tokens) const {
  const std::int64_t reserve = sat_add(extra_retained_tokens, sat_mul(batches_in_flight, step_tokens));
  std::int64_t sum = 0;
  if (!all_groups) return sum;
  for (const auto& g : *all_groups) {
    sum = sat_add(sum,
                  kind_blocks(g.kind, g.block_size, g.sliding_window, reserve, tokens, decode_context_parallel_size));
  }
  return sum;
}

std::int64_t VllmKvConfig::concurrency_blocks(std::int64_t tokens) const {
  if (generation == VllmKvGeneration::generic_packed) return request_blocks(tokens);
  // get_max_concurrency_for_kv_cache_config: N x sum over groups of max_memory_usage_bytes
  // (blocks x the group's pages), over N x group 0's page_size_bytes, N (the most layers in one
  // group) cancelling in the cdiv. A group without a layer on this worker keeps the whole model's
  // spec (_project_kv_cache_groups_to_worker), and so its pages.
  if (!all_groups || all_groups->empty()) return 0;
  std::int64_t bytes = 0;
  std::int64_t first = 0;
  for (std::size_t i = 0; i < all_groups->size(); ++i) {
    const VllmKvGroupShape& g = (*all_groups)[i];
    const VllmKvGroup* here = group_on_stage(i);
    const std::int64_t pages = here ? here->bytes : g.bytes;
    if (i == 0) first = pages;
    const std::int64_t b =
        kind_blocks(g.kind, g.block_size, g.sliding_window, retained_tokens, tokens, decode_context_parallel_size);
    bytes = sat_add(bytes, sat_mul(b, pages));
  }
  return first > 0 ? cdiv_sat(bytes, first) : 0;
}

std::int64_t VllmKvConfig::needed_bytes(std::int64_t tokens) const {
  if (generation == VllmKvGeneration::generic_packed) return sat_mul(bytes_per_block, request_blocks(tokens));
  if (!all_groups || all_groups->empty()) return 0;
  // _max_memory_usage_bytes_from_groups. One UniformTypeKVCacheSpecs group: the sum over its specs
  // of blocks x page (the other single-group paths give the same).
  if (all_groups->size() == 1) {
    const VllmKvGroupShape& g = all_groups->front();
    const VllmKvGroup* here = group_on_stage(0);
    return sat_mul(
        kind_blocks(g.kind, g.block_size, g.sliding_window, retained_tokens, tokens, decode_context_parallel_size),
        here ? here->bytes : g.bytes);
  }
  // Several groups (DeepSeek V4): every group reserves num_layer_tuples x layer_tuple_bytes per block.
  std::int64_t sum = 0;
  for (const auto& g : *all_groups) {
    sum = sat_add(sum, kind_blocks(g.kind, g.block_size, g.sliding_window, retained_tokens, tokens,
                                   decode_context_parallel_size));
  }
  return sat_mul(sat_mul(num_layer_tuples, layer_tuple_bytes), sum);
}

std::int64_t VllmKvConfig::check_bytes(std::int64_t available) const {
  // generic_packed (get_kv_cache_configs of 0.30) plans against usable blocks: one null block
  // held back; v0.25.0's _check_enough_kv_cache_memory compares with the available bytes.
  return generation == VllmKvGeneration::generic_packed ? available - bytes_per_block : available;
}

VllmKvConfig vllm_kv_config(const ModelConfig& cfg, const Topology& topo, const Layout& layout, std::int64_t stage,
                            const VllmKvOptions& options) {
  const std::int64_t num_stages = static_cast<std::int64_t>(layout.parallel.stages.size());
  if (stage < 0 || stage >= std::max<std::int64_t>(num_stages, 1)) {
    throw_internal("vllm_kv_config: stage " + std::to_string(stage) + " of " + std::to_string(num_stages));
  }
  // Grouping is global (get_kv_cache_configs groups the whole model, then projects the groups
  // onto each worker): one stage's layout is that stage of all of them.
  return vllm_kv_configs(cfg, topo, layout, options)[static_cast<std::size_t>(stage)];
}

std::vector<VllmKvConfig> vllm_kv_configs(const ModelConfig& cfg, const Topology& topo, const Layout& layout,
                                          const VllmKvOptions& options) {
  if (options.max_num_batched_tokens < 1 || options.extra_retained_tokens < 0) {
    throw_internal("vllm_kv_configs: max_num_batched_tokens < 1 or extra_retained_tokens < 0");
  }
  const std::size_t nst = std::max<std::size_t>(layout.parallel.stages.size(), 1);
  std::vector<VllmKvConfig> outs(nst);
  const bool buckets = options.generation == VllmKvGeneration::packed_buckets;
  // R: SlidingWindowSpec.extra_retained_tokens + the scheduler's in-flight tokens, max_num_batched_tokens
  // per batch and 2 batches in flight with async scheduling (max_concurrent_batches), 1 without.
  // v0.25.0 (max_admission_blocks_per_request(max_num_batched_tokens, max_model_len)): R =
  // max_num_batched_tokens, whatever the scheduling.
  const std::int64_t batches =
      options.batches_in_flight > 0 ? options.batches_in_flight : (options.async_scheduling ? 2 : 1);
  const std::int64_t extra = buckets ? 0 : options.extra_retained_tokens;
  const std::int64_t retained =
      buckets ? options.max_num_batched_tokens : sat_add(extra, sat_mul(batches, options.max_num_batched_tokens));
  // One global grouping (get_kv_cache_configs), projected onto every worker in one pass
  // (_project_kv_cache_groups_to_worker). An empty projected group keeps its block table: vLLM
  // keeps it in the worker's (and the scheduler's) group list, so a request still reserves its
  // blocks there. bytes_per_block (_get_kv_cache_bytes_per_block) is the widest group's page
  // bytes, rounded up to the lcm of the specs' alignments.
  std::vector<std::int64_t> spec_stage;
  std::vector<VllmKvSpec> specs = all_specs(cfg, topo, layout, options, spec_stage);
  if (buckets && options.decode_context_parallel_size > 1 &&
      std::any_of(specs.begin(), specs.end(),
                  [](const VllmKvSpec& s) { return s.kind == VllmSpecKind::sliding_window; })) {
    // v0.25.0's SlidingWindowSpec.max_memory_usage_bytes asserts decode_context_parallel_size == 1.
    throw_unsupported(
        "vLLM 0.25 refuses decode context parallelism with sliding-window caches (\"DCP not support "
        "sliding window.\")");
  }
  const std::vector<GlobalGroup> global = buckets ? bucket_groups(specs) : packed_groups(specs);
  std::vector<std::size_t> new_index(specs.size(), 0);
  for (std::size_t i = 0; i < specs.size(); ++i) {
    spec_stage[i] = std::clamp<std::int64_t>(spec_stage[i], 0, static_cast<std::int64_t>(nst) - 1);
  }
  // The grouping, once for every stage.
  auto shapes = std::make_shared<std::vector<VllmKvGroupShape>>();
  shapes->reserve(global.size());
  for (const auto& g : global) {
    VllmKvGroupShape sh{g.kind, g.block_size, g.window};
    for (auto i : g.specs) sh.bytes = sat_add(sh.bytes, specs[i].page_bytes);
    if (buckets) sh.layer_tuples = most_common_page_count(g.specs, [&](std::size_t i) { return specs[i].page_bytes; });
    shapes->push_back(sh);
  }
  // layer_tuple_bytes of the whole model: the distinct pages of group 0 (get_page_sizes).
  std::vector<std::int64_t> group0_pages;
  if (buckets && !global.empty()) {
    for (auto i : global.front().specs) {
      if (std::find(group0_pages.begin(), group0_pages.end(), specs[i].page_bytes) == group0_pages.end()) {
        group0_pages.push_back(specs[i].page_bytes);
      }
    }
  }
  if (nst == 1) {
    for (std::size_t i = 0; i < specs.size(); ++i) new_index[i] = i;
    outs[0].specs = std::move(specs);
  } else {
    for (std::size_t i = 0; i < specs.size(); ++i) {
      const auto s = static_cast<std::size_t>(spec_stage[i]);
      new_index[i] = outs[s].specs.size();
      outs[s].specs.push_back(std::move(specs[i]));
    }
  }
  const std::shared_ptr<const std::vector<VllmKvGroupShape>> all_groups = std::move(shapes);
  std::vector<std::int64_t> align_lcm(nst, 1);
  for (std::size_t s = 0; s < nst; ++s) {
    VllmKvConfig& out = outs[s];
    out.stage = static_cast<std::int64_t>(s);
    out.max_model_len = layout.max_model_len;
    out.retained_tokens = retained;
    out.generation = options.generation;
    out.extra_retained_tokens = extra;
    out.batches_in_flight = batches;
    out.decode_context_parallel_size = std::max<std::int64_t>(options.decode_context_parallel_size, 1);
    out.all_groups = all_groups;
  }
  // Each stage lists the groups it has a spec in, by ascending index (the outer loop's order).
  for (std::size_t gi = 0; gi < global.size(); ++gi) {
    for (auto i : global[gi].specs) {
      const auto s = static_cast<std::size_t>(spec_stage[i]);
      std::vector<VllmKvGroup>& stage_groups = outs[s].groups;
      if (stage_groups.empty() || stage_groups.back().index != gi) {
        VllmKvGroup pg;
        pg.index = gi;
        pg.kind = global[gi].kind;
        pg.block_size = global[gi].block_size;
        pg.sliding_window = global[gi].window;
        stage_groups.push_back(std::move(pg));
      }
      VllmKvGroup& pg = stage_groups.back();
      const VllmKvSpec& spec = outs[s].specs[new_index[i]];  // the spec, moved to its stage
      pg.specs.push_back(new_index[i]);
      pg.bytes = sat_add(pg.bytes, spec.page_bytes);
      align_lcm[s] = std::lcm(align_lcm[s], std::max<std::int64_t>(spec.alignment, 1));
    }
  }
  // A request reserves the blocks of every group on every stage: the same count on each.
  const std::int64_t blocks_per_request = outs[0].request_blocks(layout.max_model_len);
  for (std::size_t s = 0; s < nst; ++s) {
    VllmKvConfig& out = outs[s];
    out.blocks_per_request = blocks_per_request;
    if (!buckets) {
      std::int64_t widest = 0;
      for (const auto& g : out.groups) widest = std::max(widest, g.bytes);
      out.bytes_per_block = widest == 0 ? 0 : cdiv(widest, align_lcm[s]) * align_lcm[s];
      out.concurrency_blocks_per_request = blocks_per_request;
      continue;
    }
    // _bucket_layers_by_page_size / _get_kv_cache_config_packed: one slot per page size and index
    // within a group; the slots of one page size are as many as its largest count in one group.
    std::vector<std::pair<std::int64_t, std::int64_t>> slots;  // (page, slots)
    for (auto& g : out.groups) {
      std::vector<std::pair<std::int64_t, std::int64_t>> counts;  // (page, count in this group)
      for (auto i : g.specs) {
        const std::int64_t p = out.specs[i].page_bytes;
        auto it = std::find_if(counts.begin(), counts.end(), [&](const auto& e) { return e.first == p; });
        if (it == counts.end()) {
          counts.emplace_back(p, 0);
          it = std::prev(counts.end());
        }
        ++it->second;
      }
      for (const auto& [p, k] : counts) {
        g.layer_tuples = std::max(g.layer_tuples, k);
        const auto page = p;  // (a structured binding is not captured by lambdas before clang 16)
        auto it = std::find_if(slots.begin(), slots.end(), [&](const auto& e) { return e.first == page; });
        if (it == slots.end()) slots.emplace_back(p, k);
        else it->second = std::max(it->second, k);
      }
    }
    out.bytes_per_block = 0;
    for (const auto& [p, k] : slots) out.bytes_per_block = sat_add(out.bytes_per_block, sat_mul(p, k));
    // _max_memory_usage_bytes_from_groups on this worker's projected groups: group 0's distinct
    // pages and the largest tuple count, a group without a layer here keeping the whole model's spec.
    const VllmKvGroup* g0 = out.group_on_stage(0);
    std::vector<std::int64_t> pages0;
    if (g0 != nullptr) {
      for (auto i : g0->specs) {
        const std::int64_t p = out.specs[i].page_bytes;
        if (std::find(pages0.begin(), pages0.end(), p) == pages0.end()) pages0.push_back(p);
      }
    } else {
      pages0 = group0_pages;
    }
    out.layer_tuple_bytes = 0;
    for (auto p : pages0) out.layer_tuple_bytes = sat_add(out.layer_tuple_bytes, p);
    out.num_layer_tuples = 0;
    for (std::size_t gi = 0; gi < out.group_count(); ++gi) {
      const VllmKvGroup* here = out.group_on_stage(gi);
      out.num_layer_tuples = std::max(out.num_layer_tuples, here ? here->layer_tuples : (*all_groups)[gi].layer_tuples);
    }
    out.concurrency_blocks_per_request = out.concurrency_blocks(layout.max_model_len);
  }
  return outs;
}

VllmKvNumbers vllm_kv_numbers(const std::vector<VllmKvConfig>& stages, std::int64_t available_bytes) {
  return vllm_kv_numbers(stages, std::vector<std::int64_t>(stages.size(), available_bytes));
}

VllmKvNumbers vllm_kv_numbers(const std::vector<VllmKvConfig>& stages,
                              const std::vector<std::int64_t>& available_bytes_per_stage) {
  if (stages.empty() || stages.size() != available_bytes_per_stage.size()) {
    throw_internal("vllm_kv_numbers: one available byte count per stage needed");
  }
  VllmKvNumbers n;
  n.max_model_len = stages.front().max_model_len;
  n.available_bytes = *std::min_element(available_bytes_per_stage.begin(), available_bytes_per_stage.end());
  n.fits = true;
  for (std::size_t s = 0; s < stages.size(); ++s) {
    const VllmKvConfig& c = stages[s];
    const std::int64_t avail = available_bytes_per_stage[s];
    if (c.bytes_per_block <= 0) continue;  // a worker without KV-cache layers: no check
    // get_kv_cache_configs (0.30): the check plans against usable blocks, available - one (null)
    // block; v0.25.0 against the available bytes (check_bytes).
    const std::int64_t check = c.check_bytes(avail);
    const std::int64_t needed = c.needed_bytes(c.max_model_len);
    if (!n.fits) continue;
    n.needed_bytes = std::max(n.needed_bytes, needed);  // vLLM raises for the first worker that fails
    if (check <= 0) {
      n.fits = false;
      n.needed_bytes = needed;
      n.estimated_max_model_len = 0;
      n.error_message =
          "No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing "
          "the engine (this flag also controls CPU memory reservation on the CPU backend, despite its name). See "
          "https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details.";
      continue;
    }
    if (needed > check) {
      n.fits = false;
      n.needed_bytes = needed;
      // _estimate_max_model_len_from_groups: binary search over [1, max_model_len] of the same check.
      auto fits_len = [&](std::int64_t len) { return c.needed_bytes(len) <= check; };
      std::int64_t z = 0;
      if (fits_len(1)) {
        std::int64_t lo = 1, hi = c.max_model_len;
        z = 1;
        while (lo <= hi) {
          const std::int64_t mid = lo + (hi - lo) / 2;
          if (fits_len(mid)) {
            z = mid;
            lo = mid + 1;
          } else {
            hi = mid - 1;
          }
        }
      }
      n.estimated_max_model_len = z;
      std::string msg = "To serve at least one request with the model's max seq len (" +
                        std::to_string(c.max_model_len) + "), (" + gib(needed) +
                        " GiB KV cache is needed, which is larger than the available KV cache memory (" + gib(check) +
                        " GiB). ";
      if (z > 0)
        msg += "Based on the available memory, the estimated maximum model length is " + std::to_string(z) + ". ";
      msg +=
          "Try increasing `gpu_memory_utilization` (which also controls CPU memory on the CPU backend) or "
          "decreasing `max_model_len` when initializing the engine. See "
          "https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details.";
      n.error_message = msg;
    }
  }
  if (n.fits) {
    // The estimate when it fits: the longest length the check passes on every worker (<= max_model_len).
    n.estimated_max_model_len = n.max_model_len;
  }

  // num_blocks = available // bytes_per_block per worker; every worker is then cut to the minimum.
  bool any = false;
  for (std::size_t s = 0; s < stages.size(); ++s) {
    const VllmKvConfig& c = stages[s];
    if (c.bytes_per_block <= 0) continue;
    const std::int64_t nb = std::max<std::int64_t>(available_bytes_per_stage[s], 0) / c.bytes_per_block;
    if (!any || nb < n.num_blocks) {
      n.num_blocks = nb;
      n.limiting_stage = c.stage;
    }
    any = true;
  }
  // Concurrency: the engine core logs it from the scheduler's config, generate_scheduler_kv_cache_config
  // = worker 0's config with the common (minimum) num_blocks. Its groups are all the global groups
  // (empty projections included), so the blocks per request are the whole model's group list, the
  // same on every worker: concurrency = min num_blocks / (sum over groups of their blocks).
  // v0.25.0 logs from each worker's own config (get_kv_cache_configs, after num_blocks is cut to
  // the minimum); its concurrency (get_max_concurrency_for_kv_cache_config) counts the worker's
  // pages, so it is taken per stage, the first stage's being the engine's.
  auto concurrency_of = [&](const VllmKvConfig& c) {
    const std::int64_t bpr = c.concurrency_blocks_per_request;
    return (any && bpr > 0) ? static_cast<double>(n.num_blocks) / static_cast<double>(bpr) : 0.0;
  };
  n.concurrency = concurrency_of(stages.front());
  n.gpu_kv_cache_tokens = static_cast<std::int64_t>(n.concurrency * static_cast<double>(n.max_model_len));
  if (!n.fits) return n;
  const std::string len = format_grouped(n.max_model_len);
  if (stages.front().generation == VllmKvGeneration::generic_packed) {
    n.log_line = "GPU KV cache size: " + format_grouped(n.gpu_kv_cache_tokens) + " tokens, Maximum concurrency for " +
                 len + " tokens per request: " + format_fixed(n.concurrency, 2) + "x";
    return n;
  }
  // Two lines, each logged with info_once: a stage whose line reads the same adds nothing.
  std::vector<std::string> lines;
  auto log_once = [&](std::string line) {
    if (std::find(lines.begin(), lines.end(), line) == lines.end()) lines.push_back(std::move(line));
  };
  for (const VllmKvConfig& c : stages) {
    if (c.group_count() == 0) continue;
    const double conc = concurrency_of(c);
    const auto tokens = static_cast<std::int64_t>(conc * static_cast<double>(n.max_model_len));
    log_once("GPU KV cache size: " + format_grouped(tokens) + " tokens");
    log_once("Maximum concurrency for " + len + " tokens per request: " + format_fixed(conc, 2) + "x");
  }
  for (std::size_t i = 0; i < lines.size(); ++i) n.log_line += (i > 0 ? "\n" : "") + lines[i];
  return n;
}

}  // namespace mlaplan
