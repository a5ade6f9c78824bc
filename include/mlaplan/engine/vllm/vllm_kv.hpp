#pragma once
// The KV cache vLLM builds for a DeepSeek sparse-MLA model, and the numbers it prints at start-up.
// Two planner generations are modelled (VllmKvGeneration):
// - generic_packed, vLLM 0.30 ("packed groups", vllm/v1/core/kv_cache_planning.py
//   _get_packed_kv_cache_groups, with the specs of vllm/v1/kv_cache_interface.py), the default;
// - packed_buckets, vLLM v0.25.0 (vllm/v1/core/kv_cache_utils.py group_and_unify_kv_cache_specs,
//   _get_kv_cache_groups_uniform_groups, _bucket_layers_by_page_size, _get_kv_cache_config_packed
//   alias _get_kv_cache_config_deepseek_v4, _max_memory_usage_bytes_from_groups,
//   get_max_concurrency_for_kv_cache_config).
// Each gives the KV-cache specs every layer registers, the groups they are packed into,
// bytes_per_block, the blocks one request reserves, and from an available byte count: num_blocks,
// `GPU KV cache size: N tokens`, `Maximum concurrency for L tokens per request: C.CCx`, and when
// it does not fit vLLM's own error with its estimated maximum model length. Rules: docs/fit.md
// section 4, "vLLM's KV cache".

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "mlaplan/model/config.hpp"
#include "mlaplan/cache/layout.hpp"
#include "mlaplan/model/topology.hpp"

namespace mlaplan {

/// The planner generation modelled by default, for the output ("vLLM 0.30 packed KV-cache groups").
inline constexpr const char* kVllmKvPlannerName = "vLLM 0.30 packed KV-cache groups (kv_cache_planning.py)";

/// vLLM's KV-cache planner generations for DeepSeek V4 (the project's notes, "vLLM versions" section 6).
enum class VllmKvGeneration {
  /// vLLM v0.25.0 (kv_cache_utils.py): one group of every full (MLA) spec, sliding-window specs
  /// split into groups of num_layer_tuples layer tuples, their pages padded up to the nearest MLA
  /// page; bytes_per_block = the sum over page sizes of page x (its largest count in one group);
  /// R = max_num_batched_tokens (async scheduling and extra retained tokens not counted); the
  /// concurrency and the start-up check count "layer tuples" (VllmKvConfig::concurrency_blocks,
  /// VllmKvConfig::needed_bytes); no null block held back in the check; two log lines.
  packed_buckets,
  /// vLLM 0.30 (kv_cache_planning.py), the default.
  generic_packed,
};
std::string_view to_string(VllmKvGeneration g);  ///< "packed_buckets", "generic_packed"
/// The generation's planner for the output (kVllmKvPlannerName for generic_packed).
const char* vllm_kv_planner_name(VllmKvGeneration g);

/// The family of a spec, as the planner buckets them.
enum class VllmSpecKind {
  full,            ///< block-managed, grows with the history (compressed main, indexer keys, V3.2 MLA)
  sliding_window,  ///< SWA and compressor states: cdiv(min(W - 1 + R, L), block) + 1 blocks
  ring,            ///< V4.1 ratio-2 compressor ring: one block per request
};
std::string_view to_string(VllmSpecKind k);  ///< "full", "sliding_window", "ring"

/// One KV-cache spec one layer registers.
struct VllmKvSpec {
  std::int64_t layer = 0;
  bool draft = false;
  std::string what;  ///< "swa", "compressed", "indexer", "c4_state", "c4_indexer_state", "c128_state", "ring"
  VllmSpecKind kind = VllmSpecKind::full;
  std::int64_t block_size = 0;        ///< tokens per block (uncompressed)
  std::int64_t tokens_per_state = 1;  ///< compression ratio of a full spec
  std::int64_t sliding_window = 0;    ///< sliding_window specs
  std::int64_t row_bytes = 0;
  /// round_up((block / tokens_per_state) x row, alignment); packed_buckets: a sliding-window spec's
  /// page is then padded up to the nearest page of the full (MLA) group at or above it
  /// (page_size_padded, _get_kv_cache_groups_uniform_groups), e.g. 32,832 -> 37,440.
  std::int64_t page_bytes = 0;
  std::int64_t unpadded_page_bytes = 0;  ///< (block / tokens_per_state) x row: what a transfer copies
  std::int64_t alignment = 1;
};

/// What a packed group is, whatever stage holds its layers: the kind of its block table.
struct VllmKvGroupShape {
  VllmSpecKind kind = VllmSpecKind::full;
  std::int64_t block_size = 0;
  std::int64_t sliding_window = 0;  ///< window of a sliding_window group
  std::int64_t bytes = 0;           ///< sum of its specs' page bytes over the whole model
  /// packed_buckets: the largest count of one page size among its specs over the whole model
  /// (UniformTypeKVCacheSpecs.get_num_layer_tuples); 0 for generic_packed.
  std::int64_t layer_tuples = 0;
};

/// One packed group on one stage: layers whose specs share a block table.
struct VllmKvGroup {
  std::size_t index = 0;           ///< the group's number in the model's grouping (VllmKvConfig::all_groups)
  std::vector<std::size_t> specs;  ///< indices into VllmKvConfig::specs
  VllmSpecKind kind = VllmSpecKind::full;
  std::int64_t block_size = 0;
  std::int64_t bytes = 0;           ///< sum of its specs' page bytes on this stage
  std::int64_t sliding_window = 0;  ///< window of a sliding_window group
  std::int64_t layer_tuples = 0;    ///< packed_buckets: get_num_layer_tuples() on this stage; 0 otherwise
};

struct VllmKvOptions {
  VllmKvGeneration generation = VllmKvGeneration::generic_packed;  ///< the planner modelled
  bool speculative_decoding = false;  ///< draft layers register caches only with a speculative config
  /// vLLM 0.30's default: 2 batches in flight. packed_buckets: not part of the start-up reserve
  /// (R = max_num_batched_tokens), only of decode_request_blocks().
  bool async_scheduling = true;
  /// VllmConfig.max_concurrent_batches when the caller knows it (pipeline parallelism, the model
  /// runner); 0: 2 with async scheduling, 1 without.
  std::int64_t batches_in_flight = 0;
  std::int64_t max_num_batched_tokens = 8192;
  /// SlidingWindowSpec.extra_retained_tokens: extra_retained_tokens() of rules.hpp (K - 1 for
  /// multi-module MTP, 0 for DSpark and single-module MTP). packed_buckets: ignored (v0.25.0's
  /// SlidingWindowSpec has no such field).
  std::int64_t extra_retained_tokens = 0;
  /// --decode-context-parallel-size: full specs hold 1/DCP of a request's tokens on each rank
  /// (window specs and rings are whole on every rank); docs/fit.md "Decode context parallelism".
  /// packed_buckets: Error(unsupported) with sliding-window specs (v0.25.0 asserts DCP == 1 there).
  std::int64_t decode_context_parallel_size = 1;
};

/// vLLM's KV-cache layout of one pipeline stage.
struct VllmKvConfig {
  std::vector<VllmKvSpec> specs;
  /// The groups with a layer on this stage, by ascending index. vLLM keeps every group of the
  /// model in every worker's list (a group without a layer here keeps its block table, and a
  /// request reserves its blocks there too): those are all_groups; only the ones with specs here
  /// are listed, so that a plan of many stages holds each group once, not once per stage.
  std::vector<VllmKvGroup> groups;
  /// Every group of the model's grouping, in order: shared by the stages of one grouping.
  std::shared_ptr<const std::vector<VllmKvGroupShape>> all_groups;
  VllmKvGeneration generation = VllmKvGeneration::generic_packed;
  /// generic_packed: max over groups of their bytes, rounded to the alignment lcm.
  /// packed_buckets: sum over the page sizes on this stage of page x (the largest count of that
  /// page in one group) (_get_kv_cache_config_packed's total_num_bytes_per_block).
  std::int64_t bytes_per_block = 0;
  std::int64_t stage = 0;
  std::int64_t max_model_len = 0;
  /// R. generic_packed: extra + batches x max_num_batched_tokens; packed_buckets:
  /// max_num_batched_tokens (SlidingWindowSpec.max_admission_blocks_per_request of v0.25.0).
  std::int64_t retained_tokens = 0;
  std::int64_t blocks_per_request = 0;  ///< sum over groups of what one request of max_model_len reserves
  /// What vLLM divides num_blocks by for the concurrency it prints: concurrency_blocks(max_model_len).
  std::int64_t concurrency_blocks_per_request = 0;
  std::int64_t extra_retained_tokens = 0;  ///< the options' (part of retained_tokens); 0 for packed_buckets
  /// 2 with async scheduling, 1 without: part of retained_tokens for generic_packed; for both
  /// generations the batches decode_request_blocks() counts.
  std::int64_t batches_in_flight = 1;
  std::int64_t decode_context_parallel_size = 1;  ///< full groups: cdiv(cdiv(tokens, DCP), block) blocks per rank
  /// packed_buckets: sum of the distinct page sizes of group 0 (the full group) on this stage
  /// (the whole model's when no layer of it is here): layer_tuple_bytes. 0 for generic_packed.
  std::int64_t layer_tuple_bytes = 0;
  /// packed_buckets: the largest layer-tuple count of a group on this stage (a group without a
  /// layer here counts the whole model's): num_layer_tuples. 0 for generic_packed.
  std::int64_t num_layer_tuples = 0;
  /// The number of groups of the model's grouping (all_groups), on every stage.
  std::size_t group_count() const { return all_groups ? all_groups->size() : 0; }
  /// The group `index` of the grouping as it is on this stage; null when no layer here has a spec in it.
  const VllmKvGroup* group_on_stage(std::size_t index) const;
  /// Blocks one request of `tokens` reserves (sum over every group of the grouping, all_groups):
  /// the blocks of the shared pool it takes, for both generations.
  std::int64_t request_blocks(std::int64_t tokens) const;
  /// The blocks per request vLLM divides num_blocks by for its printed concurrency.
  /// generic_packed: request_blocks(). packed_buckets (get_max_concurrency_for_kv_cache_config):
  /// cdiv(sum over groups of blocks_g x pages_g, pages_0), pages_g the sum of group g's page bytes
  /// on this stage (the whole model's for a group without a layer here): the bytes of a request
  /// in units of group 0's bytes per block, not the pool blocks it takes.
  std::int64_t concurrency_blocks(std::int64_t tokens) const;
  /// The bytes vLLM's start-up check wants for one request of `tokens`. generic_packed:
  /// bytes_per_block x request_blocks(). packed_buckets (_max_memory_usage_bytes_from_groups):
  /// num_layer_tuples x layer_tuple_bytes x sum over groups of blocks_g; with a single group,
  /// blocks x its pages.
  std::int64_t needed_bytes(std::int64_t tokens) const;
  /// What the start-up check compares needed_bytes() with: available - bytes_per_block (one null
  /// block held back) for generic_packed, available for packed_buckets.
  std::int64_t check_bytes(std::int64_t available) const;
  /// Blocks a running request of `tokens` holds while it decodes `step_tokens` tokens a step
  /// (1 + speculative tokens): request_blocks() with the sliding windows' reserve of a decode step,
  /// extra_retained_tokens + batches_in_flight x step_tokens, where the start-up count reserves
  /// max_num_batched_tokens per batch (a prefill chunk): the scheduler frees a running request's
  /// blocks outside its window (SlidingWindowManager.remove_skipped_blocks).
  std::int64_t decode_request_blocks(std::int64_t tokens, std::int64_t step_tokens) const;
};

/// The layout of stage `stage` of `layout` as vLLM packs it. Error(internal) never for user input;
/// packed_buckets: Error(unsupported) for what v0.25.0 refuses (V4.1's ring specs, full caches of
/// several block sizes, a window page above every MLA page, DCP with windows).
VllmKvConfig vllm_kv_config(const ModelConfig& cfg, const Topology& topo, const Layout& layout, std::int64_t stage,
                            const VllmKvOptions& options);

/// vllm_kv_config() of every stage of `layout`, with one grouping of the whole model (what a
/// plan over many pipeline stages needs: the grouping is not repeated per stage).
std::vector<VllmKvConfig> vllm_kv_configs(const ModelConfig& cfg, const Topology& topo, const Layout& layout,
                                          const VllmKvOptions& options);

/// vLLM's start-up numbers for one engine (a DP rank: its PP stages share the count of blocks).
struct VllmKvNumbers {
  std::int64_t available_bytes = 0;  ///< per GPU (minimum over the stages' GPUs)
  std::int64_t num_blocks = 0;       ///< available // bytes_per_block, minimum over the stages
  std::int64_t limiting_stage = 0;
  std::int64_t max_model_len = 0;
  double concurrency = 0.0;                  ///< num_blocks / concurrency_blocks_per_request (of the first stage)
  std::int64_t gpu_kv_cache_tokens = 0;      ///< int(concurrency x max_model_len)
  bool fits = false;                         ///< vLLM's start-up check passes
  std::int64_t needed_bytes = 0;             ///< one request of max_model_len
  std::int64_t estimated_max_model_len = 0;  ///< the largest length the check passes (0: none)
  /// What vLLM prints when it fits. generic_packed, one line: "GPU KV cache size: 1,234 tokens,
  /// Maximum concurrency for 1,048,576 tokens per request: 1.23x". packed_buckets, two lines joined
  /// by '\n' (no trailing newline): "GPU KV cache size: 1,234 tokens\nMaximum concurrency for
  /// 1,048,576 tokens per request: 1.23x"; v0.25.0 logs them for every worker with info_once, so
  /// pipeline stages whose numbers differ add their lines after the first stage's (a line
  /// already printed is not repeated).
  std::string log_line;
  std::string error_message;  ///< vLLM's ValueError text when !fits
};

/// The numbers for `available_bytes` per GPU over `stages` (one VllmKvConfig per PP stage).
VllmKvNumbers vllm_kv_numbers(const std::vector<VllmKvConfig>& stages, std::int64_t available_bytes);
/// The same with the available bytes of each stage's GPUs (weights differ between stages).
VllmKvNumbers vllm_kv_numbers(const std::vector<VllmKvConfig>& stages,
                              const std::vector<std::int64_t>& available_bytes_per_stage);

}  // namespace mlaplan
