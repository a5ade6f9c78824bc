#pragma once
// The KV-cache layout planner: which cache objects every layer owns on a target, their pages and
// block pools, the two bytes-per-token accountings (DeepSeek's rows, the engine's pages), what fits
// in a memory budget, and how tensor / pipeline / data parallelism act on it.
// docs/layout-accounting.md explains every number and where it comes from.

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "mlaplan/rules/backends.hpp"
#include "mlaplan/model/config.hpp"
#include "mlaplan/base/error.hpp"
#include "mlaplan/hardware/formats.hpp"
#include "mlaplan/base/limits.hpp"  // LayoutLimits: beyond them a layout flag is Error usage
#include "mlaplan/rules/request.hpp"
#include "mlaplan/rules/rules.hpp"
#include "mlaplan/hardware/target.hpp"
#include "mlaplan/model/topology.hpp"

namespace mlaplan {

// ---------------------------------------------------------------- cache objects

enum class CacheKind { swa, compressed, indexer, compressor_state };
/// global: grows with the request's history (block-managed, pages per token);
/// per_request: bounded per request (window caches, compressor states and rings).
enum class CacheScope { global, per_request };

inline constexpr std::size_t kCacheKindCount = 4;
std::string_view to_string(CacheKind k);   ///< "swa", "compressed", "indexer", "compressor_state"
std::string_view to_string(CacheScope s);  ///< "global", "per_request"

/// One cache a layer owns. V3.2's MLA latent cache is a "compressed" object with ratio 1.
struct CacheObject {
  std::int64_t layer = 0;
  CacheKind kind = CacheKind::swa;
  CacheScope scope = CacheScope::global;
  bool draft = false;      ///< owned by a draft layer
  std::int64_t stage = 0;  ///< pipeline stage holding the layer
  RowFormatId format = RowFormatId::fp8_ds_mla_v4;
  std::string format_name;          ///< row_format(format).name
  std::int64_t compress_ratio = 1;  ///< tokens per row (1 for window caches and states)
  std::int64_t row_bytes = 0;       ///< bytes of one row (V4.0 states: 2 x coff x dims fp32)
  std::int64_t rows_per_page = 0;
  std::int64_t tokens_per_page = 0;  ///< uncompressed tokens one page covers
  std::int64_t unpadded_page_bytes = 0;
  std::int64_t page_bytes = 0;  ///< unpadded rounded up to `alignment`
  std::int64_t alignment = 1;
  std::int64_t window_tokens = 0;  ///< per-request objects: tokens kept (window, state span, ring rows)
  bool ring = false;               ///< fixed ring: one page per request, not block-managed
  std::string note;                ///< what the object is, where it differs from its kind
};

/// Objects with equal page bytes share one block pool.
struct PageGroup {
  std::int64_t page_bytes = 0;
  std::vector<std::size_t> objects;  ///< indices into Layout::objects
};

/// An exact non-negative fraction of bytes per token (denominators are powers of two here).
struct BytesPerToken {
  std::int64_t numerator = 0;
  std::int64_t denominator = 1;
  double value() const { return static_cast<double>(numerator) / static_cast<double>(denominator); }
  /// Exact decimal: "3514.25", "890", "1827".
  std::string str() const;
  /// ceil(this x tokens), overflow-checked.
  std::int64_t times_ceil(std::int64_t tokens) const;
  bool operator==(const BytesPerToken& o) const { return numerator == o.numerator && denominator == o.denominator; }
};

/// The two accountings over a set of layers.
struct Accounting {
  /// DeepSeek's: sum over global owners of row_bytes / ratio; draft layers and windows excluded.
  BytesPerToken global_rows;
  /// The engine's: sum over global objects of page_bytes / tokens_per_page (draft owners only when
  /// the draft stages load: a speculative config).
  BytesPerToken global_pages;
  /// Per-request objects in rows: min(window, max_model_len) x row (rings: ring rows x row).
  std::int64_t per_request_rows = 0;
  /// Per-request objects in pages at max_model_len: (cdiv(min(W - 1 + R, max_model_len), block) +
  /// 1) pages per sliding object (R: Layout::window_reserve_tokens), one page per ring; draft
  /// layers' objects only when their stages load.
  std::int64_t per_request_pages = 0;
  /// One request at max_model_len: ceil(global_rows x max_model_len) + per_request_rows.
  std::int64_t total_rows = 0;
  /// One request at max_model_len: whole global pages + per_request_pages.
  std::int64_t total_pages = 0;
};

/// One pipeline stage: its backbone layers and, on the last stage, the draft layers.
struct Stage {
  std::int64_t index = 0;
  std::int64_t first_layer = 0;  ///< backbone, inclusive
  std::int64_t last_layer = 0;   ///< backbone, inclusive
  std::int64_t num_draft_layers = 0;
  Accounting accounting;
};

/// The resolution's parallel layout as it is, with the pipeline stages it cuts.
struct Parallelism : ParallelLayout {
  std::vector<Stage> stages;
};

/// The planned layout.
struct Layout {
  Family family = Family::deepseek_v41;
  Target target;
  BackendId backend = BackendId::flashmla_sparse_dsv41;  ///< the attention backend vLLM runs
  std::string backend_how;                               ///< how it was chosen, for people
  KvCacheDtype kv_cache_dtype = KvCacheDtype::fp8_ds_mla;
  std::string kv_cache_dtype_requested;  ///< as given ("auto")
  IndexerCacheDtype indexer_cache_dtype = IndexerCacheDtype::fp8;
  std::int64_t block_size = 0;  ///< tokens per page of ratio-1 global caches
  /// Rows per page the backend fixes (the SM120 class: 64; a ratio-r cache's page then covers
  /// 64 x r tokens); 0 when a page covers block_size tokens at every ratio.
  std::int64_t page_states = 0;
  bool block_size_default = true;
  std::int64_t window_block_size = 0;
  std::int64_t sliding_window = 0;
  std::int64_t max_model_len = 0;
  bool max_model_len_default = true;
  std::int64_t max_position_embeddings = 0;
  std::int64_t in_flight_tokens = 0;  ///< max_num_batched_tokens
  bool in_flight_tokens_default = true;
  /// The tokens past the window each sliding object's pages hold in the pages accounting: the
  /// layout's in_flight_tokens, until account_for_engine() sets the engine's reserve.
  std::int64_t window_reserve_tokens = 0;
  std::int64_t num_speculative_tokens = 0;
  bool include_draft_layers = true;
  std::vector<CacheObject> objects;  ///< by layer, then kind
  std::vector<PageGroup> groups;     ///< by page bytes, ascending
  Accounting accounting;             ///< all layers (one pipeline replica)
  Parallelism parallel;
  std::vector<LayoutCheck> checks;  ///< infos; in a lenient plan also the violations
};

enum class Strictness {
  strict,   ///< any error check throws (usage or unsupported)
  lenient,  ///< usage errors throw; backend violations are recorded in Layout::checks
};

/// The layout of a resolution (resolve_layout_options() or judge_request() of rules.hpp) as it is:
/// nothing is resolved or checked again; its checks are recorded in Layout::checks. Error(internal)
/// for a resolution that is not usable (make_plan throws its usage error before it gets here).
Layout plan_layout(const ModelConfig& cfg, const Topology& topo, const Target& target,
                   const LayoutResolution& resolution);
/// resolve_layout_options() then the layout of it: strict (the default) throws for any error
/// check, lenient for usage errors only. For callers that plan a layout alone (verify, bench).
Layout plan_layout(const ModelConfig& cfg, const Topology& topo, const Target& target, const LayoutOptions& options,
                   Strictness strictness = Strictness::strict);

/// The layout's accountings again with the engine's window reserve (vLLM's R: extra retained
/// tokens plus batches in flight x max_num_batched_tokens, as its KV planner counts it) in place of
/// in_flight_tokens; the pages count the draft layers' caches only when the draft stages load.
void account_for_engine(Layout& layout, std::int64_t window_reserve_tokens);

/// The accounting of one cache kind over a layout (the report's memory picture draws it).
struct CacheKindBytes {
  double rows_per_token = 0;       ///< global caches: DeepSeek's rows accounting (draft excluded)
  double pages_per_token = 0;      ///< global caches: the engine's pages accounting
  std::int64_t request_rows = 0;   ///< one request at max_model_len, rows accounting
  std::int64_t request_pages = 0;  ///< one request at max_model_len, pages accounting
};
/// Bytes by CacheKind (indexed by its value); the kinds sum to the layout's accounting (rows: up
/// to rounding of the per-token fractions). Error(usage) when a byte count overflows int64.
std::array<CacheKindBytes, kCacheKindCount> bytes_by_cache_kind(const Layout& layout);

/// Bytes one request of `tokens` tokens needs on pipeline stage `stage` (-1: all stages) in the
/// page accounting: whole global pages plus its windows, states and rings (windows capped at
/// `tokens`, as with a max_model_len of `tokens`). Error(usage) when it overflows int64.
std::int64_t request_bytes(const Layout& layout, std::int64_t stage, std::int64_t tokens);

}  // namespace mlaplan
