#pragma once
// Flag groups shared by several subcommands: the target, the layout, capacity and the batch.
// Each group is a plain struct bound to a CLI11 subcommand by one function.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "flags/flag_values.hpp"
#include "mlaplan/cache/decode.hpp"
#include "mlaplan/cache/layout.hpp"
#include "mlaplan/engine/sglang/sglang.hpp"
#include "mlaplan/plan/plan.hpp"
#include "mlaplan/hardware/target.hpp"

namespace CLI {
class App;
}

namespace mlaplan::cli {

/// 1..LayoutLimits::max_parallel_size: --tensor/pipeline/data-parallel-size of every subcommand.
IntRange parallel_size_range();

/// --gpu, --arch, --num-sms, --gpu-memory-gib
struct TargetFlags {
  std::optional<std::string> gpu;
  std::optional<std::string> arch;
  std::optional<std::int64_t> num_sms;
  std::optional<double> memory_gib;
  TargetRequest request() const { return TargetRequest{gpu, arch, num_sms, memory_gib}; }
};
void bind_target_flags(CLI::App& sub, TargetFlags& f);

/// --kv-cache-dtype, --attention-backend, --dsv4-fused-attention, --indexer-cache-dtype,
/// --block-size, --max-model-len, --max-num-batched-tokens, --no-draft-layers,
/// --tensor/pipeline/data/decode-context-parallel-size
struct LayoutFlags {
  LayoutOptions options;
  bool no_draft_layers = false;
  std::string fused_attention = "auto";  ///< --dsv4-fused-attention auto | true | false
  bool max_model_len_auto = false;       ///< --max-model-len auto: the longest that fits
  LayoutOptions resolved(std::int64_t spec_tokens) const;
};
void bind_layout_flags(CLI::App& sub, LayoutFlags& f, bool with_kv_dtype = true);

/// Which parallel-layout flags were given (--tp, --pp, --dp, --dcp, --enable-expert-parallel,
/// --engram). Without any, plan, check and report answer for the layouts of one node (the
/// search); with --gpus, a given one fixes its dimension of the search.
struct LayoutGiven {
  bool tensor_parallel = false, pipeline_parallel = false, data_parallel = false, context_parallel = false,
       expert_parallel = false, engram = false;
  bool any() const {
    return tensor_parallel || pipeline_parallel || data_parallel || context_parallel || expert_parallel || engram;
  }
};
/// Fills `given` once `sub` is parsed.
void bind_layout_given(CLI::App& sub, LayoutGiven& given);

/// The fit flags: vLLM's budget (--gpu-memory-utilization, --kv-cache-memory-bytes, each term's
/// override, --enforce-eager) and deployment (--enable-expert-parallel, --engram, --max-num-seqs,
/// --no-async-scheduling, --no-checkpoint-files).
struct FitFlags {
  BudgetOptions budget;
  DeployOptions deploy;
  std::optional<double> kv_budget_gib;  ///< --kv-budget-gib: --kv-cache-memory-bytes in GiB
  bool enable_expert_parallel = false;  ///< --enable-expert-parallel (a parallel-layout flag)
  std::string engram = "offload";       ///< --engram (a parallel-layout flag; vLLM's default placement)
  bool no_async_scheduling = false;
  bool async_scheduling = false;        ///< --async-scheduling
  std::optional<std::string> from_log;  ///< --from-log FILE (plan): a vLLM start-up log
  bool no_checkpoint_files = false;
  bool no_prefix_caching = false;    ///< --no-enable-prefix-caching (vLLM's)
  bool language_model_only = false;  ///< --language-model-only (vLLM's)
  /// Where the model comes from (vLLM's flags): --revision of a Hugging Face repo id, the cache
  /// --download-dir, --hf-overrides (a JSON object merged into config.json).
  std::optional<std::string> revision, download_dir, hf_overrides;
  std::string indexer_tiling = "rows";                                   ///< --indexer-tiling rows | none
  std::int64_t indexer_logits_budget_mib = kVllmIndexerLogitsBudgetMib;  ///< --indexer-logits-budget-mib
  PrefillOptions resolved_prefill() const;
  /// The budget and deployment options; Error(usage) for --kv-budget-gib with --kv-cache-memory-bytes.
  BudgetOptions resolved_budget() const;
  DeployOptions resolved_deploy() const;
  /// Sets the parallel-layout flags this group binds (--enable-expert-parallel, --engram) on `layout`.
  void apply_to(LayoutOptions& layout) const;
};
void bind_fit_flags(CLI::App& sub, FitFlags& f);

/// --batch, --context-len, --context-lens (a list, or @FILE / @- read when the command runs),
/// --spec-tokens
struct BatchFlags {
  BatchOptions options;
  /// FILE of --context-lens @FILE ("-": standard input), until read_files() reads it.
  std::optional<std::string> context_lens_file;
  /// Reads the file of --context-lens @FILE into options.context_lens (with where each length
  /// came from) and forgets it: each command calls it once, before it plans (standard input can
  /// be read once). Error(invalid_config) when the file cannot be read (exit 2, as every input
  /// file); Error(usage) for a bad length, naming the file and the line (exit 1, as a bad length
  /// of the inline list).
  void read_files();
};
void bind_batch_flags(CLI::App& sub, BatchFlags& f);

/// --engine vllm | sglang | all, and SGLang's own flags (its names: --mem-fraction-static,
/// --max-running-requests, --chunked-prefill-size, --swa-prefix-tails ...; docs/sglang.md).
struct EngineFlags {
  std::string engine = "vllm";
  SglangOptions sglang;
};
void bind_engine_flags(CLI::App& sub, EngineFlags& f);

}  // namespace mlaplan::cli
