#pragma once
// SGLang as the second engine: what `sglang serve` (python -m sglang.launch_server) computes at
// start-up for DeepSeek V4 / V4.1, term by term. The default --mem-fraction-static and its
// reserve (python/sglang/srt/arg_groups/memory_hook.py), the KV byte budget
// (model_runner_kv_cache_mixin.py, _profile_available_bytes), the DeepSeek V4 pool configurator
// of the selected generation (model_executor/pool_configurator.py, DSV4PoolConfigurator), the
// request cap and the request table, the lines SGLang prints and its start-up errors in its own
// words. docs/sglang.md is the same for people, with the sources of every rule.
//
// The engine knows nothing of vLLM: the plan gives it the weights each rank loads (the
// checkpoint placed for SGLang's layout) and the GPU's memory.

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "mlaplan/hardware/target.hpp"
#include "mlaplan/model/config.hpp"
#include "mlaplan/model/topology.hpp"

namespace mlaplan {

/// One generation of SGLang's DeepSeek V4 pool configurator: its rules as data.
struct SglangGeneration {
  std::string_view id;      ///< "G1", "G2", "G3"
  std::string_view period;  ///< "builds of about May 2026"
  std::string_view source;  ///< where the rules were read
  /// L counts every compress_ratios entry, the MTP entry included (G1); else the stage's backbone
  /// layers only.
  bool layers_include_draft;
  /// The c128 compressor state is a fixed term sized from the request cap (G2, G3); else it is
  /// priced per SWA token in the bytes per full token (G1).
  bool c128_state_fixed;
  /// G3's coefficient-plus-bias model: only the layers owning compressed storage count, pages pad
  /// to 576-byte multiples, the c4 state is priced per SWA slot over the page (not the window),
  /// V4.1's ratio-1/2 pools and the ratio-2 state, and the SWA pool sized from the request cap
  /// (cap mode) unless --swa-full-tokens-ratio is given.
  bool owners_and_cap_mode;
  /// Speculative decoding scales the budget by L/(L+1) (G1); else the bytes per full token (and
  /// the SWA bytes per slot) by (L+1)/L.
  bool spec_scales_budget;
  /// Prints "Memory profiling: available_gpu_memory=..." (G1, G2).
  bool prints_memory_profiling;
  std::string_view log_prefix;  ///< "DSv4" (G1) or "DSV4"
  bool supports_v41;            ///< DeepseekV41ForCausalLM is served (G3)
  /// DSV4PoolConfigurator asserts that the speculative draft tokens fit the c4 / c128 state rings
  /// (_assert_ring_serves_draft_tokens; G2, G3).
  bool asserts_ring_draft_tokens;
};

/// Every modelled generation, oldest first; the newest is the default.
std::span<const SglangGeneration> sglang_generations();
const SglangGeneration& newest_sglang_generation();
/// "G1", "g2", "sglang@G3" (case-insensitive). Error(usage) naming --sglang-version, the value and
/// the generations.
const SglangGeneration& find_sglang_generation(std::string_view text);
/// "G1, G2, G3" for help texts.
std::string sglang_generation_list();

/// SGLang's flags (its names) and what the plan resolved for it.
struct SglangOptions {
  std::string generation;                            ///< --sglang-version (empty: the newest)
  std::optional<double> mem_fraction_static;         ///< --mem-fraction-static (default: memory_hook's)
  std::optional<std::int64_t> max_running_requests;  ///< --max-running-requests (V4 default 256)
  std::optional<std::int64_t> chunked_prefill_size;  ///< --chunked-prefill-size (default by GPU memory)
  std::optional<std::int64_t> max_prefill_tokens;    ///< --max-prefill-tokens (default 16384)
  std::optional<std::int64_t> max_total_tokens;      ///< --max-total-tokens (caps the full pool)
  std::optional<double> swa_full_tokens_ratio;       ///< --swa-full-tokens-ratio given: ratio mode
  std::optional<std::int64_t> swa_prefix_tails;      ///< --swa-prefix-tails (default 4 x requests)
  std::optional<std::int64_t> cuda_graph_max_bs;     ///< --cuda-graph-max-bs (default by GPU memory)
  std::optional<std::int64_t> page_size;             ///< --page-size (the dsv4 backend sets 256)
  std::string kv_cache_dtype = "auto";               ///< --kv-cache-dtype (SGLang's values)
  bool disable_radix_cache = false;                  ///< --disable-radix-cache
  bool disable_cuda_graph = false;                   ///< --disable-cuda-graph (decode and prefill graphs)
  bool disable_piecewise_cuda_graph = false;         ///< --disable-piecewise-cuda-graph (prefill graphs)
  bool disable_overlap_schedule = false;             ///< --disable-overlap-schedule
  bool enable_dp_attention = false;                  ///< --enable-dp-attention
  bool enable_two_batch_overlap = false;             ///< --enable-two-batch-overlap
  bool enable_hisparse = false;                      ///< --enable-hisparse
  std::string moe_a2a_backend = "none";              ///< --moe-a2a-backend (deepep adds 2 GiB)
  /// --speculative-algorithm: "" none, or EAGLE, EAGLE3, NEXTN, DSPARK, STANDALONE, NGRAM ...
  std::string speculative_algorithm;
  std::optional<std::int64_t> speculative_num_draft_tokens;   ///< --speculative-num-draft-tokens
  std::optional<std::int64_t> speculative_num_steps;          ///< --speculative-num-steps
  std::optional<std::int64_t> speculative_eagle_topk;         ///< --speculative-eagle-topk
  std::optional<std::int64_t> speculative_dspark_block_size;  ///< --speculative-dspark-block-size
  std::int64_t swa_eviction_interval = 128;                   ///< SGLANG_SWA_EVICTION_INTERVAL
  /// SGLANG_ENABLE_DSV41_ENGRAM_HOST_TABLE=1 (mla-plan's --engram offload): V4.1's Engram tables
  /// in host memory; SGLang's default keeps them on the GPU.
  bool engram_host_table = false;
  /// --free-before-load-gib: the free memory before loading (SGLang's pre_model_load_memory),
  /// measured; default: the GPU's total less the estimated context and communicator memory.
  std::optional<double> free_before_load_gib;
};

/// What the plan hands the engine: the layout and the weights each rank loads.
struct SglangInput {
  std::int64_t tp_size = 1;                 ///< --tp-size: the world size of one server
  std::int64_t dp_size = 1;                 ///< --dp-size: attention DP (with enable_dp_attention) or replicas
  std::int64_t pp_size = 1;                 ///< --pp-size
  std::int64_t ep_size = 1;                 ///< --ep-size
  std::int64_t context_len = 0;             ///< --context-length (default: the config's)
  std::int64_t num_speculative_tokens = 0;  ///< draft tokens beyond the first (for the note)
  /// Bytes of weights the fullest rank loads (draft weights included when speculative), and what
  /// they are; weights_known false: the checkpoint's bytes are not all known.
  std::int64_t weights_bytes = 0;
  std::string weights_how;
  bool weights_given = false;  ///< --weights-gib
  bool weights_known = true;
  std::optional<double> load_overhead_gib;  ///< --load-overhead-gib
  std::int64_t engram_bytes = 0;            ///< of weights_bytes, V4.1's Engram tables on this rank
};

/// A term of SGLang's start-up arithmetic.
struct SglangTerm {
  std::string id;    ///< "free_before_load", "weights", ...
  std::string what;  ///< for people
  std::int64_t bytes = 0;
  std::string source;  ///< "measured", "derived", "estimated", "given"
  std::string how;
};

/// The pools DSV4PoolConfigurator builds (per DP worker).
struct SglangPools {
  std::int64_t full = 0;  ///< max_total_num_tokens
  std::int64_t swa = 0;   ///< SWA slots
  std::int64_t c4 = 0;    ///< c4 pool (V4.1: the ratio-2 owners' compressed rows are not a separate printed pool)
  std::int64_t c128 = 0;
  std::int64_t c4_state = 0;
  std::int64_t c128_state = 0;        ///< as printed (G2, G3: 0 until the request cap is final)
  std::int64_t c128_state_final = 0;  ///< after finalize_with_max_running_requests
};

/// SGLang's answer for one layout on one GPU.
struct SglangFit {
  const SglangGeneration* generation = nullptr;  ///< never null once computed
  bool refused = false;                          ///< SGLang refuses the flags for this model (exit 3)
  std::string refusal;                           ///< SGLang's text
  bool decided = true;                           ///< false: the weights are not all known
  bool fits = false;                             ///< the server starts with a pool of at least one page
  std::string error;                             ///< SGLang's start-up error when it does not
  std::string verdict;                           ///< one line for people

  // The resolved flags.
  std::string architecture;      ///< "DeepseekV4ForCausalLM" / "DeepseekV41ForCausalLM"
  std::int64_t gpu_mem_mib = 0;  ///< the capacity memory_hook reads (torch's total, MiB)
  double mem_fraction_static = 0.0;
  bool fraction_default = true;
  std::vector<SglangTerm> reserve;  ///< the default fraction's reserve terms, MiB as bytes
  std::int64_t reserve_mib = 0;
  std::int64_t chunked_prefill_size = 0;  ///< engine-wide
  std::int64_t chunk_per_rank = 0;        ///< divided by DP under DP attention
  std::int64_t max_prefill_tokens = 16384;
  std::int64_t cuda_graph_max_bs = 0;
  std::int64_t page_size = 256;
  std::int64_t requested_running_requests = 256;  ///< engine-wide, as set (V4: 256 when unset)
  std::int64_t attn_dp_size = 1;
  std::int64_t attn_tp_size = 1;
  std::int64_t workers = 1;            ///< DP workers (attention DP) or replicas, each with its own pools
  std::int64_t draft_tokens = 0;       ///< speculative_num_draft_tokens (0: none)
  std::vector<std::string> overrides;  ///< what SGLang's V4 overrides print (section 4 of docs/sglang.md)
  std::vector<std::string> notes;      ///< assumptions and flags changed

  // The budget.
  std::vector<SglangTerm> terms;  ///< free before load, weights, load growth, after load, static share
  std::int64_t free_before_load_bytes = 0;
  std::int64_t available_after_load_bytes = 0;
  std::int64_t budget_bytes = 0;     ///< int(rest_GiB x 2^30)
  double min_viable_fraction = 0.0;  ///< 1 - available / pre

  // The configurator.
  std::int64_t layers = 0;                                                    ///< L
  std::int64_t layers_c4 = 0, layers_c128 = 0, layers_c2 = 0, layers_c1 = 0;  ///< owners (G3) or ratio entries
  std::int64_t ring_c4 = 0, ring_c128 = 0, ring_c2 = 0;
  double bytes_per_full_token = 0.0;
  double bytes_per_swa_token = 0.0;  ///< G3
  std::string swa_mode;              ///< "cap", "ratio (default)", "ratio (explicit)"
  double swa_ratio = 0.1;
  std::int64_t swa_cap_tokens = 0;   ///< cap mode: request cap + headroom, page-aligned
  std::int64_t swa_request_cap = 0;  ///< cap mode: the request cap before the headroom
  std::int64_t swa_prefix_tails = 0;
  std::int64_t swa_per_request = 0;
  std::int64_t c128_state_fixed = 0, c2_state_fixed = 0, swa_fixed = 0;
  std::int64_t fixed_bytes = 0;
  std::int64_t sizing_running_requests = 0;  ///< per worker, what the fixed terms were sized for
  SglangPools pools;
  std::optional<std::int64_t> profiled_full;  ///< with --max-total-tokens: the profiled count

  // After the pools.
  std::int64_t max_running_requests = 0;  ///< per worker, after resolve_max_num_reqs
  bool running_requests_reduced = false;
  std::int64_t request_table_bytes = 0;     ///< (requests + 1) x context_len x 4
  std::int64_t outside_budget_bytes = 0;    ///< free before load x (1 - fraction)
  std::int64_t left_after_pools_bytes = 0;  ///< outside budget - request table: for graphs and activations
  std::int64_t context_len = 0;
  double requests_at_context = 0.0;        ///< full / context_len, per worker
  std::int64_t swa_requests = 0;           ///< running requests the SWA pool admits (window + page each)
  double total_requests_at_context = 0.0;  ///< x workers
  /// Requests of context_len served at once over the workers: the full pool's, capped by the
  /// request cap (what the layout search, the sweep and check rank SGLang's layouts by).
  double served_requests() const {
    return (static_cast<double>(max_running_requests) < requests_at_context ? static_cast<double>(max_running_requests)
                                                                            : requests_at_context) *
           static_cast<double>(workers);
  }
  std::int64_t total_tokens = 0;  ///< full x workers

  std::vector<std::string> log_lines;                      ///< what SGLang prints, in order
  std::vector<std::string> warnings;                       ///< SGLang's warnings and mla-plan's
  std::vector<std::string> suggestions;                    ///< what would start instead
  std::vector<std::vector<std::string>> suggestion_flags;  ///< each as SGLang flags
};

/// The default --mem-fraction-static memory_hook.py computes, with its reserve terms.
struct SglangFraction {
  double fraction = 0.0;
  std::int64_t reserve_mib = 0;
  std::vector<SglangTerm> terms;
  std::int64_t chunked_prefill_size = 0;
  std::int64_t cuda_graph_max_bs = 0;
};
SglangFraction sglang_default_fraction(std::int64_t gpu_mem_mib, std::int64_t tp_size, std::int64_t pp_size,
                                       std::int64_t dp_size, const SglangOptions& o);

/// The pools of a budget (DSV4PoolConfigurator.calculate_pool_sizes), filling the configurator
/// fields of `fit` (its resolved flags must be set). Throws nothing: SGLang's errors go to
/// fit.error.
void sglang_configure_pools(const ModelConfig& cfg, const Topology& topo, const SglangGeneration& g,
                            const SglangOptions& o, std::int64_t budget_bytes, SglangFit& fit);

/// SGLang's whole start-up for one layout on `target`.
SglangFit sglang_fit(const ModelConfig& cfg, const Topology& topo, const Target& target, const SglangInput& in,
                     const SglangOptions& o);

}  // namespace mlaplan
