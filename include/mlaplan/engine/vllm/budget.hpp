#pragma once
// vLLM's start-up memory budget of one GPU, term by term, as its v1 engine computes it
// (vllm/v1/worker/gpu_worker.py init_device / determine_available_memory,
// vllm/utils/mem_utils.py memory_profiling; defaults of vLLM 0.30): requested =
// ceil(total x gpu_memory_utilization), minus the weights, the load overhead, the profile run's
// activation peak, the non-torch memory and the CUDA-graph pool estimate; or
// --kv-cache-memory-bytes. Every term says whether it was measured, derived, estimated or given,
// and has a flag that overrides it. docs/fit.md explains each term and its source.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "mlaplan/engine/vllm/release.hpp"
#include "mlaplan/hardware/target.hpp"
#include "mlaplan/model/config.hpp"

namespace mlaplan {

/// The engine version whose defaults the budget follows.
inline constexpr std::string_view kVllmVersion = "0.30";
/// vLLM 0.30's default --gpu-memory-utilization (vllm/config/cache.py; 0.9 before).
inline constexpr double kVllmGpuMemoryUtilization = 0.92;

/// Where a figure comes from.
enum class TermSource {
  measured,   ///< read from a real run (a log, a device); named in `how`
  derived,    ///< computed exactly from the config, the checkpoint or the layout
  estimated,  ///< a model of the engine's behaviour; `how` says which
  given,      ///< a flag's value
};
std::string_view to_string(TermSource s);  ///< "measured", "derived", "estimated", "given"

/// One term of the budget.
struct BudgetTerm {
  std::string id;     ///< "weights", "load_overhead", "activation_peak", "non_torch", "cudagraph", "reserved"
  std::string label;  ///< for people: "weights", "load overhead", ...
  std::int64_t bytes = 0;
  TermSource source = TermSource::estimated;
  std::string how;   ///< how it was obtained, one line
  std::string flag;  ///< the flag that overrides it: "--weights-gib"
};

/// What the user gave (all optional; absent = vLLM 0.30's behaviour, estimated where it must be).
struct BudgetOptions {
  std::optional<double> gpu_memory_utilization;       ///< --gpu-memory-utilization, (0, 1], default 0.92
  std::optional<std::int64_t> kv_cache_memory_bytes;  ///< --kv-cache-memory-bytes: the KV bytes per GPU, no profiling
  std::optional<double> weights_gib;                  ///< --weights-gib: weights per GPU instead of the placed ones
  std::optional<double> load_overhead_gib;            ///< --load-overhead-gib
  std::optional<double> activation_gib;               ///< --activation-gib
  std::optional<double> non_torch_gib;                ///< --non-torch-gib
  std::optional<double> cudagraph_gib;                ///< --cudagraph-gib
  std::optional<double> reserved_gib;                 ///< --reserved-gib: anything else (other processes), default 0
  bool enforce_eager = false;                         ///< --enforce-eager: no CUDA graphs
};

/// The shapes the estimates use, for one GPU of one pipeline stage.
struct BudgetShape {
  std::int64_t weights_bytes = 0;  ///< placed weights of the rank (placement.hpp)
  TermSource weights_source = TermSource::derived;
  std::string weights_how;       ///< "derived from config.json (weights.hpp), placed for TP 2 x DP 1"
  std::int64_t layers = 0;       ///< layers on the rank (backbone of the stage + draft stages)
  std::int64_t local_heads = 0;  ///< attention heads per rank (num_attention_heads / TP)
  std::int64_t tensor_parallel_size = 1;
  std::int64_t data_parallel_size = 1;
  std::int64_t max_num_batched_tokens = 8192;  ///< the profile run's tokens
  std::int64_t max_num_seqs = 1024;            ///< the sampler's dummy batch
  std::int64_t num_speculative_tokens = 0;
  bool last_stage = true;                 ///< holds the head (logits, sampler)
  std::int64_t expert_parallel_size = 1;  ///< EP (1: experts TP-sharded)
  std::int64_t max_model_len = 0;         ///< sizes the V2-era indexer's logits buffer
  /// The release whose rules apply (default utilization, CUDA-graph profiling); never null.
  const VllmRelease* release = &newest_vllm_release();
  bool model_runner_v2 = true;  ///< the V2 model runner: no CUDA-graph estimate taken before the KV cache
};

/// vLLM's default --max-num-seqs for its OpenAI server on this GPU: 1024 with at least 70 GiB
/// (A100 excepted), else 256 (vllm/engine/arg_utils.py _set_default_args).
std::int64_t default_max_num_seqs(const Target& target);

/// The budget of one GPU.
struct Budget {
  std::int64_t total_bytes = 0;  ///< the GPU's memory as the CUDA runtime reports it
  TermSource total_source = TermSource::estimated;
  std::string total_how;  ///< which figure: the runtime's (measured, with its source) or the user's
  /// The total is nvidia-smi's or the vendor's figure, above what the runtime reports: every number
  /// that follows from it is an upper bound (a finding budget.memory_upper_bound says so).
  bool total_upper_bound = false;
  double gpu_memory_utilization = kVllmGpuMemoryUtilization;
  bool utilization_default = true;
  std::int64_t requested_bytes = 0;  ///< ceil(total x utilization)
  bool explicit_kv_bytes = false;    ///< --kv-cache-memory-bytes given
  std::vector<BudgetTerm> terms;     ///< what is taken before the KV cache, in vLLM's order
  std::int64_t non_kv_bytes = 0;     ///< sum of the terms
  std::int64_t available_bytes = 0;  ///< requested - non_kv (may be <= 0); or the given KV bytes
  std::vector<Finding> findings;     ///< weights not counted, estimates used
  const BudgetTerm* term(std::string_view id) const;
  std::int64_t weights_bytes() const;   ///< the "weights" term
  std::int64_t overhead_bytes() const;  ///< every other term: what start-up takes beside the weights
};

/// The budget of one GPU of `target` with `shape`. Error(usage) for bad option values (naming
/// the flag); every size is checked 64-bit.
Budget plan_budget(const ModelConfig& cfg, const Target& target, const BudgetShape& shape,
                   const BudgetOptions& options);

/// The activation peak of vLLM's profile run on one rank, estimated from the shapes (docs/fit.md
/// "The terms, per release"): hidden-state buffers, the attention projections of the local heads,
/// the MoE workspaces of the tokens' top-k experts (scaled per model runner), the sampler's logits
/// on the last stage, and on the V2 runner the sparse indexer's [tokens, max_model_len] fp8 logits.
struct ActivationParts {
  std::int64_t shapes = 0;
  std::int64_t sampler = 0;
  std::int64_t indexer = 0;
};
ActivationParts estimate_activation(const ModelConfig& cfg, const BudgetShape& shape);
std::int64_t estimate_activation_bytes(const ModelConfig& cfg, const BudgetShape& shape);
/// Non-torch memory of the profile run: cuBLAS, collectives, DP x EP all-to-all buffers, Engram.
std::int64_t estimate_non_torch_bytes(const ModelConfig& cfg, const BudgetShape& shape);
/// The V1 runner's CUDA-graph estimate: per layer, a fixed part and a part per captured token.
std::int64_t estimate_cudagraph_bytes(const ModelConfig& cfg, const BudgetShape& shape);
/// vLLM's default largest CUDA-graph capture size for the shape (2 x max_num_seqs x (1 + K), <= 512).
std::int64_t largest_capture_size(const BudgetShape& shape);

}  // namespace mlaplan
