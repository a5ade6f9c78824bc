#pragma once
// The KV cache vLLM builds for a DeepSeek sparse-MLA model, and the numbers it prints at start-up.
// Modelled: vLLM 0.30's generic planner ("packed groups", vllm/v1/core/kv_cache_planning.py
// _get_packed_kv_cache_groups, with the specs of vllm/v1/kv_cache_interface.py): the KV-cache
// specs every layer registers, the groups they are packed into, bytes_per_block, the blocks one
// request reserves, and from an available byte count: num_blocks, `GPU KV cache size: N tokens`,
// `Maximum concurrency for L tokens per request: C.CCx`, and when it does not fit vLLM's own
// error with its estimated maximum model length. Rules: docs/fit.md "vLLM's KV cache", from
// docs/fit.md section 4.

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

/// The planner generation modelled, for the output ("vLLM 0.30 packed KV-cache groups").
inline constexpr const char* kVllmKvPlannerName = "vLLM 0.30 packed KV-cache groups (kv_cache_planning.py)";

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
  std::int64_t page_bytes = 0;           ///< round_up((block / tokens_per_state) x row, alignment)
  std::int64_t unpadded_page_bytes = 0;  ///< (block / tokens_per_state) x row: what a transfer copies
  std::int64_t alignment = 1;
};

/// What a packed group is, whatever stage holds its layers: the kind of its block table.
struct VllmKvGroupShape {
  VllmSpecKind kind = VllmSpecKind::full;
  std::int64_t block_size = 0;
  std::int64_t sliding_window = 0;  ///< window of a sliding_window group
};

/// One packed group on one stage: layers whose specs share a block table.
struct VllmKvGroup {
  std::size_t index = 0;           ///< the group's number in the model's grouping (VllmKvConfig::all_groups)
  std::vector<std::size_t> specs;  ///< indices into VllmKvConfig::specs
  VllmSpecKind kind = VllmSpecKind::full;
  std::int64_t block_size = 0;
  std::int64_t bytes = 0;           ///< sum of its specs' page bytes on this stage
  std::int64_t sliding_window = 0;  ///< window of a sliding_window group
};

struct VllmKvOptions {
  bool speculative_decoding = false;  ///< draft layers register caches only with a speculative config
  bool async_scheduling = true;       ///< vLLM 0.30's default: 2 batches in flight
  /// VllmConfig.max_concurrent_batches when the caller knows it (pipeline parallelism, the model
  /// runner); 0: 2 with async scheduling, 1 without.
  std::int64_t batches_in_flight = 0;
  std::int64_t max_num_batched_tokens = 8192;
  /// SlidingWindowSpec.extra_retained_tokens: extra_retained_tokens() of rules.hpp (K - 1 for
  /// multi-module MTP, 0 for DSpark and single-module MTP).
  std::int64_t extra_retained_tokens = 0;
  /// --decode-context-parallel-size: full specs hold 1/DCP of a request's tokens on each rank
  /// (window specs and rings are whole on every rank); docs/fit.md "Decode context parallelism".
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
  std::int64_t bytes_per_block = 0;  ///< max over groups of their bytes, rounded to the alignment lcm
  std::int64_t stage = 0;
  std::int64_t max_model_len = 0;
  std::int64_t retained_tokens = 0;               ///< R = extra + batches x max_num_batched_tokens
  std::int64_t blocks_per_request = 0;            ///< sum over groups of what one request of max_model_len reserves
  std::int64_t extra_retained_tokens = 0;         ///< the options' (part of retained_tokens)
  std::int64_t batches_in_flight = 1;             ///< 2 with async scheduling (part of retained_tokens)
  std::int64_t decode_context_parallel_size = 1;  ///< full groups: cdiv(cdiv(tokens, DCP), block) blocks per rank
  /// The number of groups of the model's grouping (all_groups), on every stage.
  std::size_t group_count() const { return all_groups ? all_groups->size() : 0; }
  /// The group `index` of the grouping as it is on this stage; null when no layer here has a spec in it.
  const VllmKvGroup* group_on_stage(std::size_t index) const;
  /// Blocks one request of `tokens` reserves (sum over every group of the grouping, all_groups).
  std::int64_t request_blocks(std::int64_t tokens) const;
  /// Blocks a running request of `tokens` holds while it decodes `step_tokens` tokens a step
  /// (1 + speculative tokens): request_blocks() with the sliding windows' reserve of a decode step,
  /// extra_retained_tokens + batches_in_flight x step_tokens, where the start-up count reserves
  /// max_num_batched_tokens per batch (a prefill chunk): the scheduler frees a running request's
  /// blocks outside its window (SlidingWindowManager.remove_skipped_blocks).
  std::int64_t decode_request_blocks(std::int64_t tokens, std::int64_t step_tokens) const;
};

/// The layout of stage `stage` of `layout` as vLLM packs it. Error(internal) never for user input.
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
  double concurrency = 0.0;                  ///< num_blocks / blocks_per_request (the limiting stage)
  std::int64_t gpu_kv_cache_tokens = 0;      ///< int(concurrency x max_model_len)
  bool fits = false;                         ///< vLLM's start-up check passes
  std::int64_t needed_bytes = 0;             ///< one request of max_model_len
  std::int64_t estimated_max_model_len = 0;  ///< the largest length the check passes (0: none)
  std::string
      log_line;  ///< "GPU KV cache size: 1,234 tokens, Maximum concurrency for 1,048,576 tokens per request: 1.23x"
  std::string error_message;  ///< vLLM's ValueError text when !fits
};

/// The numbers for `available_bytes` per GPU over `stages` (one VllmKvConfig per PP stage).
VllmKvNumbers vllm_kv_numbers(const std::vector<VllmKvConfig>& stages, std::int64_t available_bytes);
/// The same with the available bytes of each stage's GPUs (weights differ between stages).
VllmKvNumbers vllm_kv_numbers(const std::vector<VllmKvConfig>& stages,
                              const std::vector<std::int64_t>& available_bytes_per_stage);

}  // namespace mlaplan
