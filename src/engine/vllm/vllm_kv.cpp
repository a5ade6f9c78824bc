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

}  // namespace

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
  // R: SlidingWindowSpec.extra_retained_tokens + the scheduler's in-flight tokens, max_num_batched_tokens
  // per batch and 2 batches in flight with async scheduling (max_concurrent_batches), 1 without.
  const std::int64_t batches =
      options.batches_in_flight > 0 ? options.batches_in_flight : (options.async_scheduling ? 2 : 1);
  const std::int64_t retained =
      sat_add(options.extra_retained_tokens, sat_mul(batches, options.max_num_batched_tokens));
  // One global grouping (get_kv_cache_configs), projected onto every worker in one pass
  // (_project_kv_cache_groups_to_worker). An empty projected group keeps its block table: vLLM
  // keeps it in the worker's (and the scheduler's) group list, so a request still reserves its
  // blocks there. bytes_per_block (_get_kv_cache_bytes_per_block) is the widest group's page
  // bytes, rounded up to the lcm of the specs' alignments.
  std::vector<std::int64_t> spec_stage;
  std::vector<VllmKvSpec> specs = all_specs(cfg, topo, layout, options, spec_stage);
  const std::vector<GlobalGroup> global = packed_groups(specs);
  std::vector<std::size_t> new_index(specs.size(), 0);
  for (std::size_t i = 0; i < specs.size(); ++i) {
    spec_stage[i] = std::clamp<std::int64_t>(spec_stage[i], 0, static_cast<std::int64_t>(nst) - 1);
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
  // The grouping, once for every stage.
  auto shapes = std::make_shared<std::vector<VllmKvGroupShape>>();
  shapes->reserve(global.size());
  for (const auto& g : global) shapes->push_back(VllmKvGroupShape{g.kind, g.block_size, g.window});
  const std::shared_ptr<const std::vector<VllmKvGroupShape>> all_groups = std::move(shapes);
  std::vector<std::int64_t> align_lcm(nst, 1);
  for (std::size_t s = 0; s < nst; ++s) {
    VllmKvConfig& out = outs[s];
    out.stage = static_cast<std::int64_t>(s);
    out.max_model_len = layout.max_model_len;
    out.retained_tokens = retained;
    out.extra_retained_tokens = options.extra_retained_tokens;
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
    std::int64_t widest = 0;
    for (const auto& g : out.groups) widest = std::max(widest, g.bytes);
    out.bytes_per_block = widest == 0 ? 0 : cdiv(widest, align_lcm[s]) * align_lcm[s];
    out.blocks_per_request = blocks_per_request;
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
    // get_kv_cache_configs: the check plans against usable blocks, available - one (null) block.
    const std::int64_t check = avail - c.bytes_per_block;
    const std::int64_t needed = sat_mul(c.bytes_per_block, c.blocks_per_request);
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
      auto fits_len = [&](std::int64_t len) { return sat_mul(c.bytes_per_block, c.request_blocks(len)) <= check; };
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
  const std::int64_t bpr = stages.front().blocks_per_request;
  n.concurrency = (any && bpr > 0) ? static_cast<double>(n.num_blocks) / static_cast<double>(bpr) : 0.0;
  n.gpu_kv_cache_tokens = static_cast<std::int64_t>(n.concurrency * static_cast<double>(n.max_model_len));
  if (n.fits) {
    n.log_line = "GPU KV cache size: " + format_grouped(n.gpu_kv_cache_tokens) + " tokens, Maximum concurrency for " +
                 format_grouped(n.max_model_len) + " tokens per request: " + format_fixed(n.concurrency, 2) + "x";
  }
  return n;
}

}  // namespace mlaplan
