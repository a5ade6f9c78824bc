#pragma once
// What the user asks of a layout, before any rule: the flag values as given (LayoutOptions), the
// findings the rules return about them (LayoutCheck), and the vLLM defaults and splits the rules
// resolve them with. The rules (rules.hpp) turn a request into a resolution; the layout
// (layout.hpp) is built from that resolution only.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "mlaplan/rules/backends.hpp"
#include "mlaplan/model/config.hpp"
#include "mlaplan/base/error.hpp"
#include "mlaplan/hardware/target.hpp"
#include "mlaplan/model/topology.hpp"

namespace mlaplan {

// ---------------------------------------------------------------- dtypes, block sizes, heads

/// --indexer-cache-dtype.
enum class IndexerCacheDtype { fp8, fp4 };

std::string_view to_string(IndexerCacheDtype d);

/// The FlashMLA backends' resolution of --kv-cache-dtype, which mla-plan's kernels implement
/// (verify, bench): auto, fp8 and fp8_ds_mla are fp8_ds_mla; nvfp4_ds_mla; ignoring case, as
/// vLLM's values are everywhere; anything else Error(usage) listing them. Planning resolves the value per backend (backends.hpp).
KvCacheDtype parse_kv_cache_dtype(std::string_view value);
/// fp8 | fp4; anything else Error(usage).
IndexerCacheDtype parse_indexer_cache_dtype(std::string_view value);

/// vLLM's default max_num_batched_tokens for its OpenAI server on this GPU: 8192 with at least
/// 70 GiB of memory (A100 excepted), else 2048; 16384 with at least 160 GiB in the releases with
/// that tier (BackendReleaseRules::batch_tier_160gib, 0.28.0 on). The default in-flight tokens of
/// a request.
std::int64_t default_in_flight_tokens(const Target& target, const BackendReleaseRules& release);
/// Whether `target` is in vLLM's >= 160 GiB batch-defaults tier (the memory the runtime reports,
/// torch's total_memory, which get_device_total_memory reads).
bool vllm_160gib_gpu(const Target& target);
/// What vLLM's defaults for its OpenAI server (vllm/engine/arg_utils.py _set_default_args) count as
/// a large GPU: at least 70 GiB of memory, an A100 excepted.
bool vllm_large_gpu(const Target& target);
/// Local query heads padded for the FlashMLA decode kernel: 64 when <= 64, 128 when <= 128,
/// nothing above 128 (padded_heads() of backends.hpp gives every backend's).
std::optional<std::int64_t> padded_query_heads(std::int64_t local_heads);
/// vLLM's even split of `num_layers` backbone layers over `pp` stages: num_layers / pp each, the
/// remainder one extra layer each on the stages just before the last. Requires 1 <= pp <= num_layers.
std::vector<std::int64_t> pipeline_partition(std::int64_t num_layers, std::int64_t pp);

// ---------------------------------------------------------------- options and checks

/// Where V4.1's Engram embedding tables are kept.
enum class EngramPlacement {
  gpu,      ///< on the GPU, sharded by TP like the embedding (the default)
  offload,  ///< in host memory (cpu_offload): no GPU bytes
};
std::string_view to_string(EngramPlacement p);  ///< "gpu", "offload"

/// The one parallel layout of a plan: the sizes as vLLM's flags give them and, once the rules
/// resolved them (ResolvedLayoutOptions::parallel), the query heads each rank runs. The layout
/// (Layout::parallel), the placement, the budget and the fit take it as it is.
struct ParallelLayout {
  std::int64_t tensor_parallel_size = 1;          ///< --tensor-parallel-size
  std::int64_t data_parallel_size = 1;            ///< --data-parallel-size (attention DP)
  std::int64_t pipeline_parallel_size = 1;        ///< --pipeline-parallel-size
  std::int64_t decode_context_parallel_size = 1;  ///< --decode-context-parallel-size
  bool enable_expert_parallel = false;            ///< --enable-expert-parallel
  /// Draft (MTP / DSpark) stages are loaded (vLLM loads them only with a speculative config).
  bool load_draft_stages = false;
  /// --engram: vLLM keeps V4.1's Engram tables in host memory by default (VLLM_PLE_CPU_OFFLOAD).
  EngramPlacement engram = EngramPlacement::offload;
  /// --language-model-only (vLLM's): the vision tower is not loaded (no modality is served).
  bool language_model_only = false;
  std::int64_t local_query_heads = 0;  ///< num_attention_heads / TP; 0 until resolved
  /// The backend's kernel head count (FlashMLA 64 / 128, FlashInfer 8..128, TRITON_MLA_SPARSE_DSV41
  /// 8 / 16 unpadded); 0: none.
  std::int64_t padded_query_heads = 0;
  std::int64_t gpus() const;                  ///< TP x DP x PP (checked)
  std::int64_t expert_parallel_size() const;  ///< TP x DP with EP on, else 1
};

/// What the user asked for. Strings are the flag values as given; optional fields take defaults.
struct LayoutOptions {
  std::string kv_cache_dtype = "auto";           ///< --kv-cache-dtype (vLLM's values; the backend resolves it)
  std::optional<std::string> attention_backend;  ///< --attention-backend (vLLM's name); default: vLLM's choice
  FusedAttention fused_attention = FusedAttention::auto_;  ///< --dsv4-fused-attention
  std::int64_t decode_context_parallel_size = 1;           ///< --decode-context-parallel-size
  std::int64_t cp_kv_cache_interleave_size = 1;            ///< --cp-kv-cache-interleave-size (with DCP)
  std::string indexer_cache_dtype = "fp8";                 ///< --indexer-cache-dtype
  std::optional<std::int64_t> block_size;                  ///< --block-size (default: backend's for the arch)
  std::optional<std::int64_t> max_model_len;               ///< --max-model-len (default: max_position_embeddings)
  std::optional<std::int64_t>
      in_flight_tokens;  ///< tokens one request may schedule in a step (vLLM's max_num_batched_tokens); default default_in_flight_tokens()
  std::int64_t num_speculative_tokens = 0;  ///< sizes the V4.1 compressor-state ring; the draft's window width
  bool include_draft_layers = true;         ///< give draft (MTP / DSpark) layers their caches
  std::int64_t tensor_parallel_size = 1;
  std::int64_t pipeline_parallel_size = 1;
  std::int64_t data_parallel_size = 1;
  bool enable_expert_parallel = false;                ///< --enable-expert-parallel
  EngramPlacement engram = EngramPlacement::offload;  ///< --engram gpu | offload (vLLM's default: offload)
  bool language_model_only = false;                   ///< --language-model-only: no vision tower
  /// The vLLM release's backend facts (engine/vllm/release.hpp gives them per release); the
  /// default is the releases before 0.31.
  BackendReleaseRules release;
};

/// One check result: a finding plus the exit-code kind it carries when its severity is error
/// (usage for bad flag values, unsupported for backend rules). Infos record defaults applied.
struct LayoutCheck {
  Finding finding;
  ErrorKind kind = ErrorKind::unsupported;
};

/// Throws Error(kind, message) for the first error-severity check; does nothing otherwise.
void throw_on_error(const std::vector<LayoutCheck>& checks);
/// Throws Error(usage) for the first usage error among `checks` (LayoutCheck or RuleResult: a
/// finding and the kind it carries); does nothing otherwise.
template <class Checks>
void throw_first_usage_error(const Checks& checks) {
  for (const auto& c : checks) {
    if (c.finding.severity == Severity::error && c.kind == ErrorKind::usage) throw_usage(c.finding.message);
  }
}

}  // namespace mlaplan
