#pragma once
// What vLLM's KV-cache groups (vllm_kv.hpp) mean for the two tiers beyond the GPU's working set:
// the GPU prefix cache (which prompts can hit, how long a hit is, what one cached prompt keeps)
// and the host tier of the native KV offloading connector (--kv-offloading-size: bytes per token,
// tokens a budget holds, and the start-up refusal of groups whose blocks are smaller than the
// hash block). Modelled from vLLM's source; docs/prefix-cache.md and docs/offload.md give every
// formula with the file and function it comes from.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "mlaplan/engine/vllm/vllm_kv.hpp"

namespace mlaplan {

// ---------------------------------------------------------------- prefix caching

/// One KV-cache group as the prefix-cache rule sees it.
struct PrefixGroupBlock {
  std::int64_t block_size = 0;  ///< tokens per block
  bool cacheable = true;        ///< KVCacheSpec.prefix_cacheable (false: the V4.1 ring, CircularBufferSpec)
  bool eagle = false;           ///< holds draft (MTP / DSpark) layers: KVCacheGroupSpec.is_eagle_group
};

/// The hit granularity of a set of groups (kv_cache_utils.py resolve_kv_cache_block_sizes,
/// kv_cache_coordinator.py HybridKVCacheCoordinator.find_longest_cache_hit).
struct PrefixHitRule {
  std::int64_t scheduler_block_size = 0;  ///< lcm of every group's block size: hits are multiples of it
  std::int64_t hash_block_size = 0;       ///< gcd of the prefix-cacheable groups' block sizes
  /// Tokens a draft (EAGLE-style) group must match past the hit and then drops: the largest block
  /// of the groups holding draft layers (every group when none does); 0 without speculative decoding.
  std::int64_t eagle_drop_tokens = 0;
  std::int64_t min_hit_tokens = 0;      ///< the shortest hit: scheduler_block_size
  std::int64_t min_hit_prompt_len = 0;  ///< shortest prompt that can hit: S + drop + 1 (the last token is recomputed)
};

/// The rule for `groups` (at least one; block sizes >= 1). Error(usage) when the lcm overflows.
PrefixHitRule prefix_hit_rule(const std::vector<PrefixGroupBlock>& groups, bool speculative);

/// Tokens a repeat of a cached prompt of `prompt_len` tokens reuses: the largest multiple of S
/// that, with the draft drop, stays below the prompt's last token; 0 when none does.
std::int64_t prefix_hit_tokens(const PrefixHitRule& rule, std::int64_t prompt_len);

/// One group's part in prefix caching.
struct PrefixCacheGroup {
  std::size_t group = 0;  ///< index into VllmKvConfig::groups
  VllmSpecKind kind = VllmSpecKind::full;
  std::int64_t block_size = 0;
  std::int64_t sliding_window = 0;
  std::int64_t specs = 0;
  bool cacheable = true;
  bool eagle = false;
  /// Sliding windows: contiguous blocks a hit needs before its boundary, cdiv(W - 1, block), +1
  /// for a draft group (SlidingWindowManager._contiguous_blocks_for_hit); 0 for other kinds.
  std::int64_t hit_blocks = 0;
  /// Blocks one finished prompt of max_model_len leaves cached in this group under the retention
  /// interval (SlidingWindowManager.reachable_block_mask); every block for a full group, 0 for a ring.
  std::int64_t cached_blocks = 0;
  std::int64_t dense_cached_blocks = 0;  ///< the same with dense retention (every block)
};

struct PrefixCacheOptions {
  bool speculative = false;  ///< draft layers loaded (their groups drop a block)
  std::int64_t num_speculative_tokens = 0;
  bool multi_module_draft = false;      ///< multi-module MTP (multi_module_mtp() of rules.hpp; not DSpark)
  std::int64_t retention_interval = 0;  ///< --prefix-cache-retention-interval (vLLM's default 0)
};

/// Prefix caching over one engine's groups.
struct PrefixCachePlan {
  PrefixHitRule rule;
  bool speculative = false;
  std::int64_t retention_interval = 0;
  std::int64_t max_model_len = 0;
  std::vector<PrefixCacheGroup> groups;
  std::int64_t cached_blocks_per_prompt = 0;        ///< sum over groups, one prompt of max_model_len
  std::int64_t dense_cached_blocks_per_prompt = 0;  ///< the same with dense retention
  std::int64_t cached_bytes_per_prompt = 0;         ///< x bytes_per_block
  /// vLLM's start-up refusals (empty when it starts): the retention interval is not a multiple of
  /// the scheduler block, or multi-module MTP speculates more tokens than the scheduler block.
  std::vector<std::string> refusals;
};

/// Prefix caching over `stages` (one VllmKvConfig per PP stage: the groups are global, the
/// stages' specs say which groups hold draft layers; blocks and bytes are stage 0's). Error(usage)
/// for a negative retention interval or an overflow.
PrefixCachePlan plan_prefix_cache(const std::vector<VllmKvConfig>& stages, const PrefixCacheOptions& options);
/// The same for one stage.
PrefixCachePlan plan_prefix_cache(const VllmKvConfig& kv, const PrefixCacheOptions& options);

// ---------------------------------------------------------------- host offload

struct HostOffloadGroup {
  std::size_t group = 0;
  VllmSpecKind kind = VllmSpecKind::full;
  std::int64_t block_size = 0;
  bool offloaded = true;                  ///< prefix-cacheable (the connector skips the others)
  std::int64_t unpadded_block_bytes = 0;  ///< one block, all of the engine's workers (unpadded pages)
  double bytes_per_token = 0;             ///< full groups: unpadded_block_bytes / block_size
  std::int64_t request_bytes = 0;         ///< one request of max_model_len, unpadded
  std::int64_t request_slots = 0;         ///< host slots one request of max_model_len takes
};

struct HostOffloadPlan {
  std::int64_t workers = 1;  ///< TP x PP of one engine (parallel_config.world_size)
  std::int64_t max_model_len = 0;
  std::vector<HostOffloadGroup> groups;
  double bytes_per_token = 0;        ///< unpadded, full groups, all workers: what the transfers move
  std::int64_t request_bytes = 0;    ///< one request of max_model_len, unpadded, all workers
  std::int64_t slot_bytes = 0;       ///< bytes_per_block x workers: one host slot (one group's block)
  std::int64_t request_slots = 0;    ///< slots one request of max_model_len takes
  std::int64_t tokens_per_hash = 0;  ///< resolve_kv_cache_block_sizes with a connector
  /// vLLM's start-up refusal (offloading config.py): a group's tokens_per_block not divisible by
  /// tokens_per_hash. Empty when the connector starts.
  std::string refusal;
  std::optional<std::size_t> refused_group;
  // With --kv-offloading-size:
  std::optional<double> size_gib;
  std::optional<std::int64_t> budget_bytes;   ///< cpu_bytes_to_use = size x 2^30
  std::optional<std::int64_t> host_slots;     ///< cpu_bytes_to_use // slot_bytes
  std::optional<std::int64_t> tokens_held;    ///< history tokens of the full groups the slots hold
  std::optional<std::int64_t> requests_held;  ///< requests of max_model_len the slots hold
};

/// The host tier of `stages` (one VllmKvConfig per PP stage; stage 0's block and the sum of every
/// stage's bytes) for `tensor_parallel_size` ranks per stage. Error(usage) for a size <= 0 or
/// past 2^50 bytes, or an overflow.
HostOffloadPlan plan_host_offload(const std::vector<VllmKvConfig>& stages, std::int64_t tensor_parallel_size,
                                  std::optional<double> kv_offloading_size_gib);

}  // namespace mlaplan
