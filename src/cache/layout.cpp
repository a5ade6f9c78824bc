#include "mlaplan/cache/layout.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <string>
#include <tuple>
#include <utility>

#include "mlaplan/base/number_format.hpp"
#include "mlaplan/rules/rules.hpp"
#include "mlaplan/base/suggest.hpp"
#include "mlaplan/base/text.hpp"

namespace mlaplan {
namespace {

constexpr std::int64_t kInt64Max = std::numeric_limits<std::int64_t>::max();

// V4.0 compressor states (vLLM's DeepSeek V4 compressor): fp32 kv state + score state of
// coff x head_dim each, coff = 2 at ratio 4 (overlapping windows) and 1 at ratio 128; a block of
// 4 rows at ratio 4 and 8 rows at ratio 128; the state spans coff x ratio tokens.
constexpr std::int64_t kV40StateBlockC4 = 4;
constexpr std::int64_t kV40StateBlockC128 = 8;
constexpr std::int64_t kV41RingMinRows = 8;

std::int64_t sat_add(std::int64_t a, std::int64_t b) {
  std::int64_t r = 0;
  return __builtin_add_overflow(a, b, &r) ? kInt64Max : r;
}
std::int64_t sat_mul(std::int64_t a, std::int64_t b) {
  std::int64_t r = 0;
  return __builtin_mul_overflow(a, b, &r) ? kInt64Max : r;
}

// Whole numbers in full, others as %g ("0.9", "nan").
std::string num_str(double x) {
  if (std::isfinite(x) && x == std::floor(x) && std::fabs(x) < 1e15) return format_fixed(x, 0);
  return format_general(x);
}

std::int64_t next_pow2(std::int64_t x) {
  std::int64_t p = 1;
  while (p < x) p *= 2;
  return p;
}

BytesPerToken reduced(std::int64_t num, std::int64_t den) {
  const std::int64_t g = std::gcd(num, den);
  return g > 1 ? BytesPerToken{num / g, den / g} : BytesPerToken{num, den};
}

BytesPerToken add(const BytesPerToken& a, const BytesPerToken& b) {
  const std::int64_t den = std::lcm(a.denominator, b.denominator);
  const std::int64_t x = checked_mul(a.numerator, den / a.denominator, "bytes per token");
  const std::int64_t y = checked_mul(b.numerator, den / b.denominator, "bytes per token");
  return reduced(checked_add(x, y, "bytes per token"), den);
}

CacheObject make_object(std::int64_t layer, CacheKind kind, CacheScope scope, RowFormatId fmt, std::int64_t ratio,
                        std::int64_t row_bytes, std::int64_t rows, std::int64_t tokens, std::int64_t alignment) {
  CacheObject c;
  c.layer = layer;
  c.kind = kind;
  c.scope = scope;
  c.format = fmt;
  c.format_name = std::string(row_format(fmt).name);
  c.compress_ratio = ratio;
  c.row_bytes = row_bytes;
  c.rows_per_page = rows;
  c.tokens_per_page = tokens;
  c.alignment = alignment < 1 ? 1 : alignment;
  c.unpadded_page_bytes = checked_mul(rows, row_bytes, "page bytes");
  c.page_bytes = padded_page_bytes(rows, row_bytes, c.alignment);
  return c;
}

// The cache objects of every layer, as vLLM allocates them (docs/layout-accounting.md).
// The window and compressed row formats of V4.1 for the resolved kv-cache layout.
std::pair<RowFormatId, RowFormatId> v41_formats(KvCacheDtype kv) {
  switch (kv) {
    case KvCacheDtype::fp8_ds_mla: return {RowFormatId::fp8_ds_mla_v4, RowFormatId::fp8_ds_mla_v4};
    case KvCacheDtype::nvfp4_ds_mla: return {RowFormatId::v41_fp8, RowFormatId::v41_fp4};
    case KvCacheDtype::bfloat16: return {RowFormatId::bf16, RowFormatId::bf16};
    case KvCacheDtype::fp8_e4m3: return {RowFormatId::fp8_per_tensor, RowFormatId::fp8_per_tensor};
  }
  return {RowFormatId::fp8_ds_mla_v4, RowFormatId::fp8_ds_mla_v4};
}

std::vector<CacheObject> build_objects(const ModelConfig& cfg, const Topology& topo, const ResolvedLayoutOptions& r,
                                       bool include_draft) {
  std::vector<CacheObject> objs;
  const auto& stage = r.stage_of_layer;
  const RowFormatId idx_fmt = r.idx == IndexerCacheDtype::fp8 ? RowFormatId::indexer_fp8 : RowFormatId::indexer_fp4;
  const std::int64_t window = std::max<std::int64_t>(cfg.sliding_window, 1);
  // At most 4 (V4.1), 5 (V4.0) or 2 (V3.2) objects per layer: no reallocation on the way.
  const std::size_t per_layer = cfg.family == Family::deepseek_v4 ? 5 : cfg.family == Family::deepseek_v41 ? 4 : 2;
  objs.reserve(topo.layers.size() * per_layer);
  // The notes of V4.0's compressor states (attention, indexer) for coff 1 and 2, made once.
  std::string v40_state_notes[2][2];
  if (cfg.family == Family::deepseek_v4) {
    const std::int64_t dims[2] = {geometry(RowFormatId::compressor_state).dims, geometry(idx_fmt).dims};
    const char* what[2] = {"attention", "indexer"};
    for (std::int64_t coff = 1; coff <= 2; ++coff) {
      for (int k = 0; k < 2; ++k) {
        v40_state_notes[coff - 1][k] = std::string(what[k]) + " compressor state: fp32 kv + score, " +
                                       std::to_string(coff) + " x " + std::to_string(dims[k]) + " each";
      }
    }
  }

  for (const Layer& l : topo.layers) {
    if (l.draft && !include_draft) continue;
    const std::size_t first = objs.size();
    switch (cfg.family) {
      case Family::deepseek_v41: {
        const auto [win_fmt, main_fmt] = v41_formats(r.kv);
        const FormatGeometry wg = geometry(win_fmt);
        CacheObject w = make_object(l.index, CacheKind::swa, CacheScope::per_request, win_fmt, 1, wg.row_bytes,
                                    r.window_block, r.window_block, wg.page_alignment);
        w.window_tokens = window;
        objs.push_back(std::move(w));
        if (l.is_kv_source) {
          const std::int64_t ratio = l.compress_ratio;
          const std::int64_t block = r.global_block(ratio);
          const std::int64_t rows = block / ratio;
          const FormatGeometry mg = geometry(main_fmt);
          objs.push_back(make_object(l.index, CacheKind::compressed, CacheScope::global, main_fmt, ratio, mg.row_bytes,
                                     rows, block, mg.page_alignment));
          if (l.owns_indexer_cache) {
            objs.push_back(make_object(l.index, CacheKind::indexer, CacheScope::global, idx_fmt, ratio,
                                       geometry(idx_fmt).row_bytes, rows, block, indexer_page_alignment(main_fmt)));
          }
          if (l.owns_compressor_state) {
            const std::int64_t ring = std::max(kV41RingMinRows, next_pow2(r.spec + 2));
            const FormatGeometry sg = geometry(RowFormatId::compressor_state);
            CacheObject s = make_object(l.index, CacheKind::compressor_state, CacheScope::per_request,
                                        RowFormatId::compressor_state, 1, sg.row_bytes, ring, ring, 1);
            s.window_tokens = ring;
            s.ring = true;
            s.note = "ring of max(8, next_pow2(speculative tokens + 2)) rows";
            objs.push_back(std::move(s));
          }
        }
        break;
      }
      case Family::deepseek_v4: {
        const RowFormatId f = RowFormatId::fp8_ds_mla_v4;
        const FormatGeometry g = geometry(f);
        CacheObject w = make_object(l.index, CacheKind::swa, CacheScope::per_request, f, 1, g.row_bytes, r.window_block,
                                    r.window_block, g.page_alignment);
        w.window_tokens = window;
        objs.push_back(std::move(w));
        if (l.is_kv_source) {
          const std::int64_t ratio = l.compress_ratio;
          const std::int64_t rows = r.block / ratio;
          objs.push_back(make_object(l.index, CacheKind::compressed, CacheScope::global, f, ratio, g.row_bytes, rows,
                                     r.block, g.page_alignment));
          if (l.owns_indexer_cache) {
            objs.push_back(make_object(l.index, CacheKind::indexer, CacheScope::global, idx_fmt, ratio,
                                       geometry(idx_fmt).row_bytes, rows, r.block, indexer_page_alignment(f)));
          }
          if (l.owns_compressor_state) {
            const std::int64_t coff = ratio == 4 ? 2 : 1;
            const std::int64_t block = ratio == 4 ? kV40StateBlockC4 : kV40StateBlockC128;
            const FormatGeometry sg = geometry(RowFormatId::compressor_state);
            // fp32 kv + score state of coff x dims values each.
            const std::int64_t main_row = 2 * coff * sg.dims * 4;
            CacheObject s = make_object(l.index, CacheKind::compressor_state, CacheScope::per_request,
                                        RowFormatId::compressor_state, 1, main_row, block, block, g.page_alignment);
            s.window_tokens = coff * ratio;
            s.note = v40_state_notes[coff - 1][0];
            objs.push_back(std::move(s));
            if (l.owns_indexer_cache) {
              const std::int64_t idx_row = 2 * coff * geometry(idx_fmt).dims * 4;
              CacheObject si = make_object(l.index, CacheKind::compressor_state, CacheScope::per_request,
                                           RowFormatId::compressor_state, 1, idx_row, block, block, g.page_alignment);
              si.window_tokens = coff * ratio;
              si.note = v40_state_notes[coff - 1][1];
              objs.push_back(std::move(si));
            }
          }
        }
        break;
      }
      case Family::deepseek_v32: {
        const RowFormatId f = RowFormatId::fp8_ds_mla_v32;
        const FormatGeometry g = geometry(f);
        CacheObject m = make_object(l.index, CacheKind::compressed, CacheScope::global, f, 1, g.row_bytes, r.block,
                                    r.block, g.page_alignment);
        m.note = "MLA latent cache (every token, ratio 1)";
        objs.push_back(std::move(m));
        objs.push_back(make_object(l.index, CacheKind::indexer, CacheScope::global, idx_fmt, 1,
                                   geometry(idx_fmt).row_bytes, r.block, r.block, indexer_page_alignment(f)));
        break;
      }
    }
    for (std::size_t i = first; i < objs.size(); ++i) {
      objs[i].draft = l.draft;
      objs[i].stage = stage[static_cast<std::size_t>(l.index)];
    }
  }
  return objs;
}

// Pages a per-request object holds for one request (vLLM's sliding-window bound).
std::int64_t request_pages(const CacheObject& o, std::int64_t tokens, std::int64_t in_flight) {
  if (o.ring) return 1;
  const std::int64_t held = std::min(sat_add(o.window_tokens - 1, in_flight), tokens);
  return ceil_div(held, o.tokens_per_page) + 1;
}

bool on_stage(const CacheObject& o, std::int64_t stage) { return stage < 0 || o.stage == stage; }

// The objects of one stage, pointing into Layout::objects.
using ObjectRefs = std::vector<const CacheObject*>;

const CacheObject& object_of(const CacheObject& o) { return o; }
const CacheObject& object_of(const CacheObject* o) { return *o; }

// Saturating: global pages and/or per-request pages of one request of `tokens` tokens.
// `objs` holds CacheObjects or pointers to them.
template <class Objects>
std::int64_t cost(const Objects& objs, std::int64_t stage, std::int64_t tokens, std::int64_t in_flight, bool global,
                  bool per_request, bool drafts_loaded) {
  std::int64_t sum = 0;
  for (const auto& ref : objs) {
    const CacheObject& o = object_of(ref);
    if (!on_stage(o, stage) || (o.draft && !drafts_loaded)) continue;
    if (o.scope == CacheScope::global && global) {
      sum = sat_add(sum, sat_mul(ceil_div(tokens, o.tokens_per_page), o.page_bytes));
    } else if (o.scope == CacheScope::per_request && per_request) {
      sum = sat_add(sum, sat_mul(request_pages(o, tokens, in_flight), o.page_bytes));
    }
  }
  return sum;
}

// Objects that count the same in a sum, with how many there are. A layout's objects take a
// handful of distinct shapes (one per kind and format), so sums over the groups cost O(shapes)
// instead of O(objects): check --matrix plans one config 22 times per TP size.
template <class Key>
struct Counted {
  Key key;
  std::int64_t count = 0;
};

// `keys` grouped: equal keys once, with their count. Groups are found by a linear search while
// they are few (always, for the layouts planned here); past 32 groups, by sorting.
template <class Key>
std::vector<Counted<Key>> group_counted(std::vector<Key> keys) {
  std::vector<Counted<Key>> groups;
  for (const auto& k : keys) {
    auto it = std::find_if(groups.begin(), groups.end(), [&](const Counted<Key>& g) { return g.key == k; });
    if (it != groups.end()) {
      ++it->count;
      continue;
    }
    if (groups.size() == 32) {
      groups.clear();
      std::sort(keys.begin(), keys.end());
      for (const auto& x : keys) {
        if (!groups.empty() && groups.back().key == x) ++groups.back().count;
        else groups.push_back(Counted<Key>{x, 1});
      }
      return groups;
    }
    groups.push_back(Counted<Key>{k, 1});
  }
  return groups;
}

// What account() reads of an object: scope, draft, row_bytes, compress_ratio, page_bytes,
// tokens_per_page, ring, rows_per_page, window_tokens.
using AccountKey = std::tuple<CacheScope, bool, std::int64_t, std::int64_t, std::int64_t, std::int64_t, bool,
                              std::int64_t, std::int64_t>;

// The two accountings over `objs` (CacheObjects or pointers to them), summed over groups of
// equal objects: the fractions are exact and the integers checked sums of non-negative terms,
// so the result is the one a sum object by object gives.
// Draft layers' objects count in the pages (the engine's accounting) only when the engine loads
// the draft stages (`drafts_loaded`: a speculative config); the rows (DeepSeek's) leave their
// global caches out either way.
template <class Objects>
Accounting account(const Objects& objs, std::int64_t mml, std::int64_t in_flight, bool drafts_loaded) {
  std::vector<AccountKey> keys;
  keys.reserve(objs.size());
  for (const auto& ref : objs) {
    const CacheObject& o = object_of(ref);
    keys.emplace_back(o.scope, o.draft, o.row_bytes, o.compress_ratio, o.page_bytes, o.tokens_per_page, o.ring,
                      o.rows_per_page, o.window_tokens);
  }
  auto bytes = [](std::int64_t a, std::int64_t b) { return checked_mul(a, b, "KV-cache bytes", ErrorKind::usage); };
  auto sum = [](std::int64_t a, std::int64_t b) { return checked_add(a, b, "KV-cache bytes", ErrorKind::usage); };
  Accounting a;
  std::int64_t global_page_bytes = 0;
  for (const auto& g : group_counted(std::move(keys))) {
    const auto& [scope, draft, row_bytes, compress_ratio, page_bytes, tokens_per_page, ring, rows_per_page,
                 window_tokens] = g.key;
    const std::int64_t n = g.count;
    const bool paged = !draft || drafts_loaded;
    if (scope == CacheScope::global) {
      if (!draft) {
        a.global_rows = add(a.global_rows, reduced(checked_mul(row_bytes, n, "bytes per token"), compress_ratio));
      }
      if (!paged) continue;
      a.global_pages = add(a.global_pages, reduced(checked_mul(page_bytes, n, "bytes per token"), tokens_per_page));
      global_page_bytes = sum(global_page_bytes, bytes(bytes(ceil_div(mml, tokens_per_page), page_bytes), n));
    } else {
      const std::int64_t rows = ring ? rows_per_page : std::min(window_tokens, mml);
      a.per_request_rows = sum(a.per_request_rows, bytes(bytes(rows, row_bytes), n));
      if (!paged) continue;
      const std::int64_t pages =
          ring ? 1 : ceil_div(std::min(sat_add(window_tokens - 1, in_flight), mml), tokens_per_page) + 1;
      a.per_request_pages = sum(a.per_request_pages, bytes(bytes(pages, page_bytes), n));
    }
  }
  a.total_rows = sum(a.global_rows.times_ceil(mml), a.per_request_rows);
  a.total_pages = sum(global_page_bytes, a.per_request_pages);
  return a;
}

// The objects of each pipeline stage, so that per-stage sums cost O(objects) in all instead of
// O(stages x objects): 4096 stages of one layer each plan as fast as one stage.
std::vector<ObjectRefs> objects_by_stage(const std::vector<CacheObject>& objs, std::size_t stages) {
  std::vector<ObjectRefs> out(stages);
  for (const auto& o : objs) out.at(static_cast<std::size_t>(o.stage)).push_back(&o);
  return out;
}

// request_bytes() over one stage's objects.
template <class Objects>
std::int64_t request_cost(const Objects& stage_objs, std::int64_t tokens, std::int64_t in_flight, bool drafts_loaded) {
  const std::int64_t c = cost(stage_objs, -1, tokens, in_flight, true, true, drafts_loaded);
  if (c == kInt64Max) {
    throw_usage("the KV cache of a " + std::to_string(tokens) + "-token request overflows 64-bit byte counts");
  }
  return c;
}

}  // namespace

// ---------------------------------------------------------------- small public helpers

std::string_view to_string(CacheKind k) {
  switch (k) {
    case CacheKind::swa: return "swa";
    case CacheKind::compressed: return "compressed";
    case CacheKind::indexer: return "indexer";
    case CacheKind::compressor_state: return "compressor_state";
  }
  return "?";
}

std::string_view to_string(CacheScope s) {
  switch (s) {
    case CacheScope::global: return "global";
    case CacheScope::per_request: return "per_request";
  }
  return "?";
}

std::string BytesPerToken::str() const {
  std::string s = std::to_string(numerator / denominator);
  std::int64_t rem = numerator % denominator;
  if (rem == 0) return s;
  if (denominator > (kInt64Max / 10)) return num_str(value());
  s += '.';
  for (int digits = 0; rem != 0 && digits < 18; ++digits) {
    rem *= 10;
    s += static_cast<char>('0' + rem / denominator);
    rem %= denominator;
  }
  return s;
}

std::int64_t BytesPerToken::times_ceil(std::int64_t tokens) const {
  return ceil_div(checked_mul(numerator, tokens, "KV-cache bytes", ErrorKind::usage), denominator);
}

// ---------------------------------------------------------------- checks and plan

Layout plan_layout(const ModelConfig& cfg, const Topology& topo, const Target& target, const LayoutOptions& options,
                   Strictness strictness) {
  const LayoutResolution resolution = resolve_layout_options(cfg, topo, target, options);
  if (strictness == Strictness::strict) throw_on_error(resolution.checks);
  throw_first_usage_error(resolution.checks);
  return plan_layout(cfg, topo, target, resolution);
}

Layout plan_layout(const ModelConfig& cfg, const Topology& topo, const Target& target,
                   const LayoutResolution& resolution) {
  const ResolvedLayoutOptions& r = resolution.options;
  if (!r.usable) throw_internal("plan_layout: a resolution that is not usable");

  Layout L;
  L.family = cfg.family;
  L.target = target;
  L.backend = r.backend.id;
  L.backend_how = r.backend.how;
  L.page_states = r.page_states;
  L.kv_cache_dtype = r.kv;
  L.kv_cache_dtype_requested = r.kv_cache_dtype_requested;
  L.indexer_cache_dtype = r.idx;
  L.block_size = r.block;
  L.block_size_default = r.block_default;
  L.window_block_size = r.window_block;
  L.sliding_window = cfg.family == Family::deepseek_v32 ? 0 : cfg.sliding_window;
  L.max_model_len = r.mml;
  L.max_model_len_default = r.mml_default;
  L.max_position_embeddings = cfg.max_position_embeddings;
  L.in_flight_tokens = r.in_flight;
  L.in_flight_tokens_default = r.in_flight_default;
  L.num_speculative_tokens = r.spec;
  L.include_draft_layers = r.include_draft_layers;
  L.objects = build_objects(cfg, topo, r, r.include_draft_layers);

  std::map<std::int64_t, std::vector<std::size_t>> by_page;
  for (std::size_t i = 0; i < L.objects.size(); ++i) by_page[L.objects[i].page_bytes].push_back(i);
  for (auto& [bytes, idx] : by_page) L.groups.push_back(PageGroup{bytes, std::move(idx)});

  L.window_reserve_tokens = r.in_flight;
  L.accounting = account(L.objects, r.mml, r.in_flight, r.parallel.load_draft_stages);
  static_cast<ParallelLayout&>(L.parallel) = r.parallel;
  const auto by_stage = objects_by_stage(L.objects, r.partition.size());
  std::int64_t first = 0;
  for (std::size_t s = 0; s < r.partition.size(); ++s) {
    Stage st;
    st.index = static_cast<std::int64_t>(s);
    st.first_layer = first;
    st.last_layer = first + r.partition[s] - 1;
    first += r.partition[s];
    if (s + 1 == r.partition.size() && r.include_draft_layers) st.num_draft_layers = cfg.num_draft_layers;
    st.accounting = account(by_stage[s], r.mml, r.in_flight, r.parallel.load_draft_stages);
    L.parallel.stages.push_back(st);
  }
  L.checks = resolution.checks;
  return L;
}

void account_for_engine(Layout& layout, std::int64_t window_reserve_tokens) {
  if (window_reserve_tokens < 1) throw_internal("account_for_engine: a window reserve below one token");
  layout.window_reserve_tokens = window_reserve_tokens;
  const bool drafts = layout.parallel.load_draft_stages;
  layout.accounting = account(layout.objects, layout.max_model_len, window_reserve_tokens, drafts);
  const auto by_stage = objects_by_stage(layout.objects, layout.parallel.stages.size());
  for (std::size_t s = 0; s < layout.parallel.stages.size(); ++s) {
    layout.parallel.stages[s].accounting = account(by_stage[s], layout.max_model_len, window_reserve_tokens, drafts);
  }
}

std::int64_t request_bytes(const Layout& layout, std::int64_t stage, std::int64_t tokens) {
  if (tokens < 0) throw_internal("request_bytes: negative token count");
  if (stage < 0) {
    return request_cost(layout.objects, tokens, layout.window_reserve_tokens, layout.parallel.load_draft_stages);
  }
  ObjectRefs objs;
  for (const auto& o : layout.objects) {
    if (on_stage(o, stage)) objs.push_back(&o);
  }
  return request_cost(objs, tokens, layout.window_reserve_tokens, layout.parallel.load_draft_stages);
}

// ---------------------------------------------------------------- bytes by cache kind

std::array<CacheKindBytes, kCacheKindCount> bytes_by_cache_kind(const Layout& layout) {
  std::array<CacheKindBytes, kCacheKindCount> parts{};
  const std::int64_t mml = layout.max_model_len;
  for (const auto& o : layout.objects) {
    const auto idx = static_cast<std::size_t>(o.kind);
    auto& p = parts[idx];
    const bool paged = !o.draft || layout.parallel.load_draft_stages;  // as account()
    if (o.scope == CacheScope::global) {
      if (!o.draft && o.compress_ratio > 0) {
        p.rows_per_token += static_cast<double>(o.row_bytes) / static_cast<double>(o.compress_ratio);
      }
      if (o.tokens_per_page > 0 && paged) {
        p.pages_per_token += static_cast<double>(o.page_bytes) / static_cast<double>(o.tokens_per_page);
        p.request_pages =
            checked_add(p.request_pages,
                        checked_mul(ceil_div(mml, o.tokens_per_page), o.page_bytes, "KV-cache bytes", ErrorKind::usage),
                        "KV-cache bytes", ErrorKind::usage);
      }
    } else {
      const std::int64_t rows = o.ring ? o.rows_per_page : std::min(o.window_tokens, mml);
      p.request_rows = checked_add(p.request_rows, checked_mul(rows, o.row_bytes, "KV-cache bytes", ErrorKind::usage),
                                   "KV-cache bytes", ErrorKind::usage);
      if (!paged) continue;
      std::int64_t pages = 1;
      if (!o.ring && o.tokens_per_page > 0) {
        const std::int64_t held =
            std::min(checked_add(o.window_tokens - 1, layout.window_reserve_tokens, "tokens", ErrorKind::usage), mml);
        pages = ceil_div(held, o.tokens_per_page) + 1;
      }
      p.request_pages =
          checked_add(p.request_pages, checked_mul(pages, o.page_bytes, "KV-cache bytes", ErrorKind::usage),
                      "KV-cache bytes", ErrorKind::usage);
    }
  }
  for (auto& p : parts) {
    p.request_rows += static_cast<std::int64_t>(std::ceil(p.rows_per_token * static_cast<double>(mml)));
  }
  return parts;
}

}  // namespace mlaplan
