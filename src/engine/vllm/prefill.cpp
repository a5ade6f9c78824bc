// The sparse indexer's transient prefill workspace (include/mlaplan/engine/vllm/prefill.hpp). Formulas and
// sources: docs/prefill.md (vLLM's vllm/v1/attention/backends/mla/indexer.py
// split_indexer_prefill_chunks; SGLang issue 35201 and PRs 39187, 40217).

#include "mlaplan/engine/vllm/prefill.hpp"

#include <algorithm>

#include "mlaplan/base/error.hpp"
#include "mlaplan/base/number_format.hpp"

namespace mlaplan {

namespace {

constexpr std::int64_t kScoreBytes = 4;  // DeepGEMM's fp8(_fp4)_mqa_logits write fp32 scores
/// The V4.1 candidate path's bool masks: the pieces and the combined mask coexist during torch.cat
/// (SGLang PR 40217: "6 * T * N bytes" = 4 scores + 1 + 1).
constexpr std::int64_t kCandidateMaskBytes = 2;
constexpr std::int64_t kMaxBudgetMib = std::int64_t{1} << 20;

std::int64_t mul(std::int64_t a, std::int64_t b) {
  return checked_mul(a, b, "the indexer's prefill workspace", ErrorKind::usage);
}

/// The largest n in 1 .. hi with fits(n), for a fits that holds up to some n and not above it; 0
/// when fits(1) does not hold.
template <class Fits>
std::int64_t largest_fitting(std::int64_t hi, Fits fits) {
  if (fits(hi)) return hi;
  if (!fits(1)) return 0;
  std::int64_t lo = 1;  // fits(lo) holds, fits(hi) does not
  while (hi - lo > 1) {
    const std::int64_t mid = lo + (hi - lo) / 2;
    (fits(mid) ? lo : hi) = mid;
  }
  return lo;
}

}  // namespace

std::string_view to_string(IndexerTiling t) {
  switch (t) {
    case IndexerTiling::rows: return "rows";
    case IndexerTiling::none: return "none";
  }
  return "?";
}

IndexerTiling parse_indexer_tiling(std::string_view value) {
  if (value == "rows") return IndexerTiling::rows;
  if (value == "none") return IndexerTiling::none;
  throw_usage("--indexer-tiling: '" + std::string(value) + "' is not known; allowed: rows, none");
}

IndexerWorkspaceShape indexer_workspace_shape(const ModelConfig& cfg, const Topology& topo,
                                              const PrefillOptions& options, std::int64_t dcp, std::int64_t first_layer,
                                              std::int64_t last_layer, bool with_draft) {
  if (options.logits_budget_mib < 1 || options.logits_budget_mib > kMaxBudgetMib) {
    throw_usage("--indexer-logits-budget-mib: '" + std::to_string(options.logits_budget_mib) +
                "' is out of range; allowed 1.." + std::to_string(kMaxBudgetMib));
  }
  IndexerWorkspaceShape s;
  s.tiling = options.tiling;
  s.logits_budget_bytes = options.logits_budget_mib << 20;
  s.decode_context_parallel_size = std::max<std::int64_t>(dcp, 1);
  const auto candidate = topo.candidate_source();
  for (const auto& l : topo.layers) {
    const bool here = l.draft ? with_draft : (l.index >= first_layer && l.index <= last_layer);
    if (!here) continue;
    std::int64_t ratio = 0;
    if (cfg.family == Family::deepseek_v32) {
      ratio = l.type == LayerType::dsa ? 1 : 0;  // every MLA layer runs the indexer over its tokens
    } else if (cfg.family == Family::deepseek_v4) {
      ratio = l.type == LayerType::c4a ? 4 : 0;  // the C4 indexer on the ratio-4 layers
    } else if (l.is_index_source && l.compress_ratio > 0) {
      ratio = l.compress_ratio;  // V4.1: an index source scores its own compressed entries
    }
    if (ratio <= 0) continue;
    // V4.1's two-level selection: the candidate source and the index layers after it build bool
    // masks of the chunk's [rows, entries] (SGLang PR 40217; vLLM's mask lifetime is not pinned).
    const std::int64_t mask = (candidate && !l.draft && l.index >= *candidate) ? kCandidateMaskBytes : 0;
    auto it = std::find_if(s.layers.begin(), s.layers.end(), [&](const IndexerLayerShape& x) {
      return x.compress_ratio == ratio && x.mask_bytes == mask;
    });
    if (it == s.layers.end()) {
      s.layers.push_back(IndexerLayerShape{l.index, ratio, mask, 1});
    } else {
      ++it->layers;
    }
  }
  return s;
}

std::int64_t indexer_entries(std::int64_t tokens, std::int64_t compress_ratio, std::int64_t dcp) {
  if (tokens <= 0 || compress_ratio <= 0) return 0;
  return ceil_div(tokens / compress_ratio, std::max<std::int64_t>(dcp, 1));
}

std::int64_t indexer_layer_transient(const IndexerWorkspaceShape& shape, const IndexerLayerShape& layer,
                                     std::int64_t tokens, std::int64_t chunk) {
  const std::int64_t n = indexer_entries(tokens, layer.compress_ratio, shape.decode_context_parallel_size);
  if (n == 0 || chunk <= 0) return 0;
  const std::int64_t per_element = kScoreBytes + layer.mask_bytes;
  const std::int64_t untiled = mul(mul(std::min(chunk, tokens), n), per_element);
  if (shape.tiling == IndexerTiling::none) return untiled;
  // vLLM: max_q = max(1, max_logits_elems // N) rows a tile, M x N x 4 <= budget; a tile holds at
  // most budget / 4 elements, or one row when a row alone is wider.
  const std::int64_t tile = mul(std::max(shape.logits_budget_bytes / kScoreBytes, n), per_element);
  return std::min(untiled, tile);
}

std::int64_t indexer_transient(const IndexerWorkspaceShape& shape, std::int64_t tokens, std::int64_t chunk) {
  std::int64_t peak = 0;
  for (const auto& l : shape.layers) peak = std::max(peak, indexer_layer_transient(shape, l, tokens, chunk));
  return peak;
}

std::string indexer_tiling_words(const IndexerWorkspaceShape& shape) {
  if (shape.tiling == IndexerTiling::none) {
    return "untiled: a chunk's scores at once (SGLang's dense prefill indexer before PR 40217)";
  }
  const std::int64_t mib = shape.logits_budget_bytes >> 20;
  return "row tiles of at most " + format_grouped(mib) + " MiB of fp32 scores" +
         (mib == kVllmIndexerLogitsBudgetMib
              ? std::string(" (vLLM's split_indexer_prefill_chunks, VLLM_SPARSE_INDEXER_MAX_LOGITS_MB)")
              : std::string(" (--indexer-logits-budget-mib; SGLang PR 40217 uses 2,048)"));
}

std::optional<PrefillFit> fit_prefill(const std::vector<PrefillStage>& stages, std::int64_t chunk_tokens,
                                      std::int64_t max_model_len) {
  std::optional<PrefillFit> best;
  for (const auto& st : stages) {
    if (st.shape.layers.empty()) continue;
    PrefillFit f;
    f.shape = st.shape;
    f.engine = indexer_tiling_words(st.shape);
    f.stage = st.stage;
    f.chunk_tokens = chunk_tokens;
    f.max_model_len = max_model_len;
    bool first = true;
    for (const auto& l : st.shape.layers) {
      const std::int64_t b = indexer_layer_transient(st.shape, l, max_model_len, chunk_tokens);
      if (first || b > f.peak_bytes) {
        f.peak_bytes = b;
        f.peak_layer = l.layer;
        f.compress_ratio = l.compress_ratio;
        f.entries = indexer_entries(max_model_len, l.compress_ratio, st.shape.decode_context_parallel_size);
        first = false;
      }
    }
    f.profile_bytes = indexer_transient(st.shape, std::min(chunk_tokens, max_model_len), chunk_tokens);
    f.total_bytes = st.total_bytes;
    f.budgeted_bytes = st.budgeted_bytes;
    f.budget_slack_bytes = st.requested_bytes - st.budgeted_bytes;
    f.headroom_bytes = st.total_bytes - st.budgeted_bytes;
    f.fits = f.peak_bytes <= f.headroom_bytes;
    // Both bounds grow with the prompt and with the chunk (each is monotone): the longest prompt,
    // and the largest chunk that makes max_model_len safe, by bisection.
    f.longest_prompt = f.fits ? max_model_len : largest_fitting(max_model_len, [&](std::int64_t tokens) {
      return indexer_transient(st.shape, tokens, chunk_tokens) <= f.headroom_bytes;
    });
    f.safe_chunk = largest_fitting(max_model_len, [&](std::int64_t chunk) {
      return indexer_transient(st.shape, max_model_len, chunk) <= f.headroom_bytes;
    });
    f.any_chunk = f.safe_chunk == max_model_len;
    if (!best || f.longest_prompt < best->longest_prompt ||
        (f.longest_prompt == best->longest_prompt &&
         f.headroom_bytes - f.peak_bytes < best->headroom_bytes - best->peak_bytes)) {
      best = std::move(f);
    }
  }
  return best;
}

}  // namespace mlaplan
