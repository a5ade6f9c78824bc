#pragma once
// The vLLM releases mla-plan models, as data: what changed between 0.25 and 0.31 that moves the
// DeepSeek V4 / V4.1 start-up numbers or the attention backend (the default
// gpu_memory_utilization, the async-scheduling default and when it turns off, the KV planner
// generation and its sliding-window reserve, CUDA-graph memory profiling, the V4.1 backend
// defaults, the start-up log's wording). One row per release, each fact with the vLLM source it
// was read from, and whether it is pinned to that release or carried over from a neighbour.
// docs/vllm-releases.md is the same table for people.

#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "mlaplan/engine/vllm/vllm_kv.hpp"
#include "mlaplan/rules/backends.hpp"

namespace mlaplan {

/// The KV planner generation (vllm_kv.hpp; docs/fit.md section 4).
using KvPlannerGeneration = VllmKvGeneration;
/// For people: "packed buckets (kv_cache_utils.py, v0.25)".
std::string_view kv_planner_title(KvPlannerGeneration g);

/// One modelled release.
struct VllmRelease {
  std::string_view version;   ///< "0.30.0"
  std::string_view released;  ///< "2026-09-22", "by 2026-08-26"
  /// The default --gpu-memory-utilization (vllm/config/cache.py).
  double gpu_memory_utilization;
  /// The CUDA-graph pool estimate is subtracted before the KV budget
  /// (VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS, default on since v0.21).
  bool cudagraph_profiling;
  /// Async scheduling is on when not asked for (no speculative method outside the allowlist,
  /// pipeline parallelism 1).
  bool async_default;
  /// Under pipeline parallelism the default turns async scheduling off (builds of 2025 did; no
  /// modelled release does: vllm/config/vllm.py has no PP condition in the default).
  bool async_off_with_pp;
  /// DeepSeek's MoE models run the V2 model runner (vllm/v1/worker/gpu/model_runner.py) by
  /// default; before it they run the V1 runner unless DSpark speculation forces V2. The V2 runner
  /// takes no CUDA-graph estimate off the KV budget (its graphs come out of the memory outside
  /// gpu_memory_utilization), and with async scheduling keeps PP + 1 batches in flight.
  bool model_runner_v2;
  KvPlannerGeneration planner;
  /// The planner generation was read from a log of this release; false: carried over from the
  /// nearest pinned release, and the other generation is computed beside it.
  bool planner_pinned;
  /// The sliding-window reserve counts the batches in flight (2 with async scheduling).
  bool reserve_counts_batches;
  /// "GPU KV cache size: N tokens, Maximum concurrency ..." on one line (else two lines).
  bool merged_kv_line;
  /// "Model loading took X GiB memory and T seconds" (the newer model runner) vs "X GiB and T seconds".
  bool loading_line_says_memory;
  /// DeepSeek V4.1 model definitions are in the release (>= 0.30.0; the deepseekv41-flash-0909
  /// image before it).
  bool supports_v41;
  /// V4.1 on SM100 defaults to FLASHMLA_MEGA_ATTN_DSV41 when it is available (nvfp4_ds_mla KV for
  /// an unspecific --kv-cache-dtype); else FlashMLA.
  bool v41_mega_attention_default;
  /// TRITON_MLA_SPARSE_DSV41 (SM90, 8 or 16 local heads, opt-in) can be named.
  bool v41_triton_sm90;
  /// Where the row's facts come from: vLLM files and logs, one line.
  std::string_view sources;
  /// What is not pinned to this release; "" when everything is.
  std::string_view unpinned;
};

/// The modelled releases, oldest first.
std::span<const VllmRelease> vllm_releases();
/// The newest modelled release (the default of --vllm-version).
const VllmRelease& newest_vllm_release();
/// "0.25.0, 0.25.1, 0.26.0, ..."
std::string vllm_release_list();

/// The release's facts the backend choice reads (choose_backend, LayoutOptions::release).
BackendReleaseRules backend_release_rules(const VllmRelease& release);

/// --vllm-version: "0.30", "0.30.0", "v0.30.0", "0.27" (the newest patch of 0.27 modelled).
/// Error(usage) naming --vllm-version, the value and the modelled releases otherwise.
const VllmRelease& find_vllm_release(std::string_view text);
/// find_vllm_release(), or the newest modelled release when `text` is empty (no --vllm-version).
const VllmRelease& vllm_release_or_newest(std::string_view text);

}  // namespace mlaplan
