#pragma once
// The sparse indexer's transient prefill workspace, which no start-up budget counts: for every
// prefill chunk each indexer layer scores the chunk's query rows against every compressed entry
// of the context so far, a dense fp32 [rows, entries] tensor (plus the V4.1 candidate path's bool
// masks), freed before the next layer. vLLM's profile run sees it only at the profile's context
// (max_num_batched_tokens tokens at most), so the long-context peak lands in what the budget
// leaves of the GPU. docs/prefill.md explains each formula and its source.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "mlaplan/model/config.hpp"
#include "mlaplan/model/topology.hpp"

namespace mlaplan {

/// How the engine tiles the scores of one chunk.
enum class IndexerTiling {
  rows,  ///< row tiles of at most the score budget (vLLM's split_indexer_prefill_chunks; SGLang after PR 40217)
  none,  ///< the whole chunk at once (SGLang's dense V4.1 prefill indexer before PR 40217)
};
std::string_view to_string(IndexerTiling t);  ///< "rows", "none"
/// rows | none; anything else Error(usage) naming --indexer-tiling.
IndexerTiling parse_indexer_tiling(std::string_view value);

/// vLLM's VLLM_SPARSE_INDEXER_MAX_LOGITS_MB default (vllm/envs.py): the fp32 scores of one tile.
inline constexpr std::int64_t kVllmIndexerLogitsBudgetMib = 512;

/// What the user chose (flags of plan, check and report).
struct PrefillOptions {
  IndexerTiling tiling = IndexerTiling::rows;                    ///< --indexer-tiling
  std::int64_t logits_budget_mib = kVllmIndexerLogitsBudgetMib;  ///< --indexer-logits-budget-mib (rows tiling)
};

/// One indexer layer shape: its entries per token and the bytes per scored element.
struct IndexerLayerShape {
  std::int64_t layer = 0;           ///< the first layer of this shape
  std::int64_t compress_ratio = 1;  ///< tokens per compressed entry (N = tokens / ratio)
  std::int64_t mask_bytes = 0;      ///< bool masks per element beside the 4 B score (V4.1 candidate path: 2)
  std::int64_t layers = 0;          ///< indexer layers of this shape
};

/// The transient's shape for one model: what an indexer layer allocates per chunk.
struct IndexerWorkspaceShape {
  std::vector<IndexerLayerShape> layers;  ///< distinct shapes (empty: no indexer)
  IndexerTiling tiling = IndexerTiling::rows;
  std::int64_t logits_budget_bytes = kVllmIndexerLogitsBudgetMib << 20;
  std::int64_t decode_context_parallel_size = 1;  ///< each rank scores its 1/DCP of the entries
};

/// The shapes of `cfg`'s indexer layers among backbone layers first..last (and the draft layers
/// with `with_draft`): V3.2 every dsa layer, ratio 1; V4.0 the c4a layers, ratio 4; V4.1 its index
/// sources at their own ratio, the candidate source and the index sources after it with 2 B of
/// masks per element. Error(usage) for a budget out of 1..2^20 MiB.
IndexerWorkspaceShape indexer_workspace_shape(const ModelConfig& cfg, const Topology& topo,
                                              const PrefillOptions& options, std::int64_t dcp, std::int64_t first_layer,
                                              std::int64_t last_layer, bool with_draft);

/// Compressed entries a rank scores at a context of `tokens`: floor(tokens / ratio) (vLLM's
/// compressed seq_lens), then cdiv(., DCP).
std::int64_t indexer_entries(std::int64_t tokens, std::int64_t compress_ratio, std::int64_t dcp);

/// The per-rank peak of one layer shape for a chunk of `chunk` tokens ending at a context of
/// `tokens` tokens: rows = min(chunk, tokens) x N entries x (4 + mask) B untiled; with row tiles
/// at most max(budget / 4 elements, one row of N) of them (an upper bound, monotone in `tokens`).
/// Error(usage) on int64 overflow.
std::int64_t indexer_layer_transient(const IndexerWorkspaceShape& shape, const IndexerLayerShape& layer,
                                     std::int64_t tokens, std::int64_t chunk);
/// The peak over the layers (one layer's scores are alive at a time).
std::int64_t indexer_transient(const IndexerWorkspaceShape& shape, std::int64_t tokens, std::int64_t chunk);

/// The transient against one GPU's headroom.
struct PrefillFit {
  IndexerWorkspaceShape shape;
  std::string engine;             ///< the behaviour modelled, for people
  std::int64_t stage = 0;         ///< the pipeline stage whose GPUs bind
  std::int64_t chunk_tokens = 0;  ///< max_num_batched_tokens
  std::int64_t max_model_len = 0;
  std::int64_t entries = 0;             ///< N per rank at max_model_len, the widest layer
  std::int64_t compress_ratio = 1;      ///< of the peak layer
  std::int64_t peak_layer = 0;          ///< the first layer of the peak shape
  std::int64_t peak_bytes = 0;          ///< per rank at max_model_len
  std::int64_t profile_bytes = 0;       ///< at the profile run's context (chunk tokens): what start-up saw
  std::int64_t total_bytes = 0;         ///< the GPU's memory
  std::int64_t budgeted_bytes = 0;      ///< weights + start-up terms + the KV cache vLLM allocates
  std::int64_t budget_slack_bytes = 0;  ///< requested - budgeted (< one block unless the KV bytes were given)
  std::int64_t headroom_bytes = 0;      ///< total - budgeted: where the transient lands
  bool fits = true;                     ///< peak_bytes <= headroom_bytes
  std::int64_t longest_prompt = 0;      ///< the longest prompt (<= max_model_len) whose peak fits; 0: none
  /// The largest chunk with which max_model_len fits; 0: none (one row is too wide); with
  /// `any_chunk` every chunk fits (the tiles bound the peak).
  std::int64_t safe_chunk = 0;
  bool any_chunk = false;
};

/// One pipeline stage's GPU as the prefill sees it.
struct PrefillStage {
  std::int64_t stage = 0;
  IndexerWorkspaceShape shape;       ///< its indexer layers
  std::int64_t total_bytes = 0;      ///< the GPU's memory
  std::int64_t requested_bytes = 0;  ///< ceil(total x gpu_memory_utilization)
  std::int64_t budgeted_bytes = 0;   ///< non-KV terms + num_blocks x bytes_per_block
};

/// The transient of every stage against its headroom; the binding stage's answer (the one whose
/// longest prompt is shortest). nullopt when no stage has an indexer layer.
std::optional<PrefillFit> fit_prefill(const std::vector<PrefillStage>& stages, std::int64_t chunk_tokens,
                                      std::int64_t max_model_len);

/// The behaviour modelled, in words: "row tiles of at most 512 MiB of fp32 scores (vLLM's
/// VLLM_SPARSE_INDEXER_MAX_LOGITS_MB, split_indexer_prefill_chunks)".
std::string indexer_tiling_words(const IndexerWorkspaceShape& shape);

}  // namespace mlaplan
