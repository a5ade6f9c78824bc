#pragma once
// The whole plan of one config as one library call: config, target, backend rules, the KV-cache
// layout, the checkpoint's weights (from config.json, or from the safetensors headers when the
// model directory has them), their placement on every GPU, vLLM's start-up budget and KV-cache
// numbers (the fit answer), the decode batch and its tile schedules, the guards and the exit
// decision. `plan`, `check`, `report`, `verify`, `bench` and the fuzz target call make_plan();
// the command line only reads flags into a PlanRequest and renders the Plan.

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "mlaplan/engine/sglang/sglang.hpp"
#include "mlaplan/engine/vllm/budget.hpp"
#include "mlaplan/model/checkpoint_weights.hpp"
#include "mlaplan/model/config.hpp"
#include "mlaplan/cache/decode.hpp"
#include "mlaplan/engine/vllm/kv_tiers.hpp"
#include "mlaplan/cache/layout.hpp"
#include "mlaplan/engine/vllm/placement.hpp"
#include "mlaplan/engine/vllm/prefill.hpp"
#include "mlaplan/engine/vllm/release.hpp"
#include "mlaplan/rules/rules.hpp"
#include "mlaplan/cache/scheduler.hpp"
#include "mlaplan/hardware/target.hpp"
#include "mlaplan/model/topology.hpp"
#include "mlaplan/engine/vllm/vllm_kv.hpp"
#include "mlaplan/model/weights.hpp"

namespace mlaplan {

struct LaunchCommand;  // launch.hpp
struct SearchResult;   // search.hpp

/// Where the weights came from.
enum class WeightsSource {
  config,  ///< derived from config.json (weights.hpp)
  files,   ///< the safetensors headers of the model directory
  flag,    ///< --weights-gib
};
std::string_view to_string(WeightsSource s);  ///< "config", "files", "flag"

/// A model directory whose safetensors files are not the whole checkpoint (a download in
/// progress, a Git LFS checkout without the weights): its files are not used as the weights; the
/// fit takes the weights derived from config.json, and the plan fails with the error finding
/// checkpoint.incomplete (exit 2). docs/fit.md, "An incomplete checkpoint".
struct IncompleteCheckpoint {
  std::string dir;
  std::string reason;                 ///< what is missing: shards, tensors, bytes
  std::vector<MissingShard> missing;  ///< the first CheckpointLimits::max_missing_listed, by name
  std::int64_t missing_count = 0;     ///< shards missing
  std::int64_t expected_files = 0;    ///< shards the index names or the numbering says (0: not known)
  std::int64_t missing_tensors = 0;   ///< tensors the index maps to the missing shards
  std::int64_t files = 0;             ///< shard files read whole
  std::int64_t files_tensors = 0;     ///< their tensors
  std::int64_t files_bytes = 0;       ///< their tensors' bytes
  std::optional<std::int64_t> index_total_size;
  std::int64_t contract_exact_main_bytes = 0;  ///< FileWeights::contract_exact_main_bytes
  /// The error finding checkpoint.incomplete (its message names the directory and the reason).
  Finding finding() const;
};

/// Deployment flags beyond the layout's (vLLM's names).
struct DeployOptions {
  /// --vllm-version: the release whose rules apply (release.hpp); empty: the newest modelled.
  std::string vllm_version;
  /// --async-scheduling / --no-async-scheduling; none: the release's default.
  std::optional<bool> async_scheduling;
  std::optional<std::int64_t> max_num_seqs;  ///< --max-num-seqs (default: vLLM's for the GPU)
  bool read_checkpoint_files = true;         ///< use the directory's safetensors headers when present
  /// --prefix-cache-retention-interval: tokens between the sliding-window checkpoints the prefix
  /// cache keeps (vLLM's default 0: only the replay boundary and shared-prefix junctions).
  std::int64_t prefix_cache_retention_interval = 0;
  /// --kv-offloading-size: GiB of host memory for the native KV offloading connector, over the
  /// engine's workers (vLLM's flag); none: no host tier.
  std::optional<double> kv_offloading_size_gib;
  /// Prefix caching (vLLM's default on; --no-enable-prefix-caching): off, the plan has no prefix
  /// cache tier (the KV memory is the same).
  bool prefix_caching = true;
};

/// What `check` asserts of a plan (CI guards). A failed guard is an error finding and exit 4.
struct PlanGuards {
  std::optional<double> max_global_bytes_per_token;  ///< --max-global-bytes-per-token
  bool guard_rows = false;                           ///< --guard-accounting rows (default pages)
  std::optional<std::int64_t> min_concurrency;       ///< --min-concurrency: vLLM's concurrency, all DP engines
  /// --require-batch-fits: the decode batch fits one engine's KV cache (fit.decode_batch is then
  /// the error guard.decode_batch).
  bool batch_fits = false;
  /// --require-prefill-fits: the indexer's transient prefill peak at max_model_len fits the headroom
  /// (fit.prefill_transient is then the error guard.prefill_transient).
  bool prefill_fits = false;
  /// --require-prompt-len N: a prompt of N tokens prefills within the headroom (guard.prompt_len).
  std::optional<std::int64_t> prompt_len;
  /// --prefix-hit-prompt-len N: a prompt of N tokens can hit the prefix cache (guard.prefix_hit).
  std::optional<std::int64_t> prefix_hit_prompt_len;
  /// --require-margin-gib X: the fit's spare memory is at least X GiB (guard.margin).
  std::optional<double> margin_gib;
  /// --min-offload-tokens N: the host tier of --kv-offloading-size holds N tokens of history and
  /// vLLM starts the connector (guard.offload_tokens).
  std::optional<std::int64_t> min_offload_tokens;
};
/// The flags of the guards `g` gives ("--guard-accounting" when it is rows), in the order of the
/// guard table apply_guards() runs (one entry per guard, src/plan/plan.cpp).
std::vector<std::string> given_guard_flags(const PlanGuards& g);

/// The placements of one checkpoint's weights by parallel layout, for the plans of one config
/// that share its weights (`check --matrix` plans a config on every GPU preset and kv dtype, and
/// the placement depends on the layout alone: 24 cells of a V4.1 config per layout place it once).
/// Bound to the weights and shard kinds of the first call (a call with others is a bug, exit 70).
/// Not thread-safe: one memo per thread.
class PlacementMemo {
 public:
  /// place_weights(cfg, weights, layout, kinds), computed on the first call for `layout`.
  const Placement& place(const ModelConfig& cfg, const WeightsReport& weights, const ParallelLayout& layout,
                         const std::vector<ShardKind>& kinds);

 private:
  const WeightsReport* weights_ = nullptr;
  const std::vector<ShardKind>* kinds_ = nullptr;
  std::deque<std::pair<ParallelLayout, Placement>> placed_;  ///< a deque: what place() returned stays valid
};

/// Whose start-up the plan answers as (--engine).
enum class EngineChoice { vllm, sglang, all };
std::string_view to_string(EngineChoice e);               ///< "vllm", "sglang", "all"
EngineChoice parse_engine_choice(std::string_view text);  ///< Error(usage) naming --engine

struct PlanRequest {
  TargetRequest target;
  EngineChoice engine = EngineChoice::vllm;  ///< --engine
  SglangOptions sglang;                      ///< SGLang's flags (with engine sglang or all)
  /// A target already resolved (verify and bench: the detected device); replaces `target`.
  std::optional<Target> resolved_target;
  LayoutOptions layout;  ///< num_speculative_tokens is taken from batch.spec_tokens
  BatchOptions batch;
  BudgetOptions budget;
  DeployOptions deploy;
  PrefillOptions prefill;  ///< the indexer's prefill tiling (--indexer-tiling, --indexer-logits-budget-mib)
  PlanGuards guards;
  std::optional<std::string> dtype;  ///< --dtype
  bool schedules = true;             ///< plan the decode tile schedules (check does not need them)
  bool suggestions = true;           ///< when it does not fit, search what would (check --matrix does not)
  /// Only what decides the fit and the exit code (the layout search, the sweep): no decode batch,
  /// no prefill workspace, no decode-context-parallel comparison. Without guards the exit code is
  /// the same, but for a batch the plan's own make_decode_batch() would refuse (exit 1).
  bool fit_only = false;
  /// The checkpoint's weights when the caller has them already (check --matrix plans one config
  /// many times): used instead of reading them; `weights_source` / `weights_how` say where from.
  std::shared_ptr<const WeightsReport> weights;
  WeightsSource weights_source = WeightsSource::config;
  std::string weights_how;
  /// shard_kinds(*weights, deploy.engram), when the caller has it (one per group of `weights`).
  std::shared_ptr<const std::vector<ShardKind>> shard_kinds;
  /// With `weights` and `shard_kinds`: placements shared with the caller's other plans of them.
  std::shared_ptr<PlacementMemo> placements;
  /// With `weights`: the incomplete checkpoint they stand in for (load_plan_weights() found it).
  std::shared_ptr<const IncompleteCheckpoint> incomplete_checkpoint;
};

/// One pipeline stage's GPUs: their weights, budget and vLLM's KV layout.
struct StageFit {
  RankWeights weights;
  Budget budget;
  VllmKvConfig kv;
};

/// One way to lay the same KV cache over the GPUs, for the decode-context-parallel comparison.
struct KvParallelOption {
  std::string label;  ///< "TP 8", "TP 8 x DCP 2", "DP attention: DP 8, TP 1, EP 8"
  std::int64_t tensor_parallel_size = 1;
  std::int64_t data_parallel_size = 1;
  std::int64_t decode_context_parallel_size = 1;
  bool computed = false;           ///< false: the layout is rejected (note says why)
  bool fits = false;               ///< vLLM's start-up check passes
  std::int64_t request_bytes = 0;  ///< per rank, one request of max_model_len: bytes_per_block x blocks
  std::int64_t blocks_per_request = 0;
  std::int64_t num_blocks = 0;     ///< per engine
  double concurrency = 0.0;        ///< per engine
  std::int64_t engines = 1;        ///< DP engines
  double total_concurrency = 0.0;  ///< x engines
  std::string note;
};

/// --decode-context-parallel-size D > 1: the full (block-managed) caches are sharded over the D
/// ranks of each DCP group while window caches, compressor states and rings stay whole on every
/// rank; next to it the same GPUs with plain TP and with DP attention.
struct ContextParallelFit {
  std::int64_t decode_context_parallel_size = 1;
  std::int64_t interleave_size = 1;       ///< --cp-kv-cache-interleave-size
  bool refused = false;                   ///< vLLM refuses the combination (the findings backend.dcp_*)
  std::string refusal;                    ///< the engine's reason
  std::vector<KvParallelOption> options;  ///< plain TP, TP x DCP (the plan's), DP attention
};

/// How far a fit is from not fitting (docs/fit.md, "The margin"): the KV memory beyond one
/// request of max_model_len on the limiting GPU, beside the estimated terms of its budget and
/// their stated uncertainty.
struct FitMargin {
  std::int64_t spare_bytes = 0;        ///< available KV bytes minus one request's (vLLM's check)
  std::int64_t estimated_bytes = 0;    ///< the budget terms that are estimates, summed
  std::int64_t uncertainty_bytes = 0;  ///< what those estimates may be off by (fit_margin())
  bool borderline = false;             ///< spare_bytes < uncertainty_bytes
};

/// The fit answer.
struct Fit {
  WeightsSource weights_source = WeightsSource::config;
  std::string weights_how;                       ///< "derived from config.json" / "N safetensors headers in DIR"
  std::shared_ptr<const WeightsReport> weights;  ///< the whole checkpoint (tensors not listed); never null
  std::optional<FileWeights> files;              ///< with WeightsSource::files: the comparison with the contract
  /// The model directory's checkpoint when it is incomplete: its files are not the weights.
  std::shared_ptr<const IncompleteCheckpoint> incomplete_checkpoint;
  Placement placement;
  std::vector<StageFit> stages;
  VllmKvNumbers vllm;                ///< per engine (a DP rank)
  std::int64_t engines = 1;          ///< DP engines, each with its own KV cache
  double total_concurrency = 0.0;    ///< vllm.concurrency x engines
  std::int64_t total_kv_tokens = 0;  ///< vllm.gpu_kv_cache_tokens x engines
  bool speculative = false;          ///< draft stages loaded, their caches registered
  /// The vLLM release whose rules the fit follows (--vllm-version, default the newest); never null.
  const VllmRelease* release = &newest_vllm_release();
  bool async_scheduling = true;  ///< as resolved: the flag, or the release's default
  bool async_default = true;     ///< async_scheduling is the release's default, not a flag
  /// The model runner: V2 where the release runs it for DeepSeek's MoE models or DSpark forces it.
  bool model_runner_v2 = true;
  /// Batches in flight (VllmConfig.max_concurrent_batches): 2 with async scheduling, 1 without;
  /// under PP > 1 the pipeline depth, plus one with async scheduling on the V2 runner.
  std::int64_t batches_in_flight = 2;
  /// With a release whose planner generation is not pinned: vLLM's numbers under the other
  /// generation, for the same budget.
  std::optional<VllmKvNumbers> other_generation;
  /// vLLM refuses the release for this model (V4.1 before 0.30.0): the message; "" otherwise.
  std::string release_refusal;
  bool fits = false;
  /// false when the weights are not all known (a scheme not known, no files, no --weights-gib):
  /// then `fits` is false, the numbers count only the known tensors, and no exit code is set
  /// for the fit (a warning says why; a --min-concurrency guard fails).
  bool decided = true;
  /// true when no attention backend of the family runs on the target (backend.arch): vLLM stops
  /// before it budgets memory, so there is no fit (decided false, no suggestions of more of the
  /// same GPU); the numbers are what the layout would need.
  bool no_backend = false;
  /// true when vLLM refuses the configuration (a rule, a placement rule or a KV-tier check that
  /// exits 3, or any other error finding that decides the exit code before the fit does): a
  /// refused configuration has no fit, so `fits` and `decided` are false, the verdict says
  /// "refused: <why>" and no "would fit" is searched (docs/fit.md, "The answer").
  bool refused = false;
  std::string refusal;  ///< with `refused`: the refusal that decides the exit code
  std::string verdict;  ///< one line for people
  /// When !fits: vLLM's error, or (--kv-cache-memory-bytes, which vLLM does not check against the
  /// GPU) why the given KV cache and the rest exceed the GPU's memory.
  std::string error_message;
  std::vector<std::string> suggestions;  ///< when !fits: what would fit instead
  /// The suggestions as flags (argv form, mla-plan's and vLLM's names alike), one per suggestion.
  std::vector<std::vector<std::string>> suggestion_flags;
  std::optional<FitMargin> margin;  ///< with a decided fit that fits
  /// The weights of the largest GPU alone exceed its memory: vLLM fails while loading them.
  bool weights_exceed_gpu = false;
  std::optional<ContextParallelFit> context_parallel;  ///< with --decode-context-parallel-size > 1
  /// Prefix caching over the groups (kv_tiers.hpp); absent when the layout has no KV-cache group.
  /// With prefix caching off (--no-enable-prefix-caching) it is still computed, and unused.
  std::optional<PrefixCachePlan> prefix_cache;
  bool prefix_caching = true;  ///< vLLM runs the prefix cache (DeployOptions::prefix_caching)
  /// Finished prompts of max_model_len the GPU prefix cache holds at once (num_blocks over the
  /// blocks one keeps cached); absent where the fit does not say how many blocks there are.
  std::optional<std::int64_t> prefix_prompts_cached;
  /// The host tier of the native offloading connector (kv_tiers.hpp): bytes per token always,
  /// capacity with --kv-offloading-size; absent when the layout has no KV-cache group.
  std::optional<HostOffloadPlan> host_offload;
};

/// The decode batch against one engine's KV cache as vLLM's scheduler holds it: every request
/// of the step keeps its blocks at once, VllmKvConfig::decode_request_blocks() of its context
/// length plus its speculative tokens (the full caches' blocks of its history, its window's of
/// the sliding-window caches), out of num_blocks less the one null block vLLM's block pool keeps.
/// The batch is what one engine (one DP rank) runs, as the decode schedules are.
struct BatchKvFit {
  std::int64_t requests = 0;
  std::int64_t tokens = 0;             ///< sum over the requests of context length + speculative tokens
  std::int64_t blocks = 0;             ///< the blocks they hold at once
  std::int64_t usable_blocks = 0;      ///< num_blocks - 1
  std::int64_t cache_tokens = 0;       ///< vLLM's "GPU KV cache size" of one engine
  std::int64_t requests_that_fit = 0;  ///< of the batch's requests, the most that fit at once (the shortest first)
  bool fits = true;                    ///< blocks <= usable_blocks
};

/// The decode batch against the fit's KV cache, or nothing when the fit does not say how large
/// it is (the weights not all known, no memory for it, the layout rejected): then nothing is
/// claimed.
std::optional<BatchKvFit> fit_decode_batch(const Fit& fit, const DecodeBatch& batch);

/// Everything one config's plan computed.
/// A real vLLM start-up log set against the plan of the same flags (`plan --from-log FILE`).
struct LogCheckRow {
  std::string what;               ///< "weights as loaded", "Available KV cache memory", ...
  std::string unit;               ///< "GiB", "tokens", "x"
  std::optional<double> planned;  ///< this plan's figure (the model's, before the log's terms)
  std::optional<double> logged;   ///< the log's
  std::size_t line = 0;           ///< the log's line (0: derived from several)
  bool disagrees = false;         ///< off by more than the tolerance (max(0.25 GiB, 5%); 1% for tokens)
};
struct LogCheck {
  std::string file;
  std::string vllm_version;  ///< as the log prints it, or ""
  bool model_runner_v2 = false;
  std::vector<LogCheckRow> rows;
  std::vector<std::string> applied;  ///< the measured terms the final plan takes ("--weights-gib 75.64 (...)")
  std::vector<std::string> notes;    ///< flags that differ between the log and the plan, unreadable lines
};

struct Plan {
  ModelConfig config;
  Topology topology;
  Target target;
  std::optional<Layout> layout;       ///< absent when the flags make no layout possible
  std::optional<Fit> fit;             ///< with a layout
  std::optional<LogCheck> log_check;  ///< plan --from-log
  /// --engine sglang | all: SGLang's start-up for the same GPUs and layout (sglang.hpp), with the
  /// layout and weights it was given.
  std::optional<SglangFit> sglang;
  std::optional<SglangInput> sglang_input;
  EngineChoice engine = EngineChoice::vllm;
  DecodeBatch batch;
  std::optional<BatchKvFit> batch_fit;  ///< the batch against the KV cache, when the fit is decided
  /// The indexer's transient prefill peak against the headroom, when the fit fits and the model
  /// has an indexer (docs/prefill.md).
  std::optional<PrefillFit> prefill;
  /// FlashMLA's tile-scheduler plans, one per layer type; empty when the backend is not FlashMLA.
  std::vector<LayerTypeSchedule> schedules;
  std::vector<KernelShape> kernel_shapes;  ///< every kernel instantiation the engine launches
  std::vector<RuleResult> rules;           ///< backend rules on the target
  std::vector<Finding> findings;           ///< config, rules, placement, budget, guards
  /// The `vllm serve` command of this plan (launch.hpp); set by answer_question() (search.hpp).
  std::shared_ptr<const LaunchCommand> launch;
  /// The SGLang launch command (with --engine sglang | all; set with `launch`).
  std::shared_ptr<const LaunchCommand> sglang_launch;
  /// The layout search this plan is the answer of (search.hpp); null when the layout was given.
  std::shared_ptr<const SearchResult> search;
  std::string search_why;  ///< why the layouts were searched: "--gpus 8", "no layout flag: one node of 8 x h200"
  /// --max-model-len auto: the longest that served the requests asked for (absent otherwise).
  std::optional<std::int64_t> auto_max_model_len;
  std::int64_t auto_min_concurrency = 0;  ///< the requests at once it was asked to serve
  /// Concurrency against max_model_len on this layout (answer_question()).
  struct ContextPoint {
    std::int64_t max_model_len = 0;
    bool fits = false;
    double total_concurrency = 0.0;
  };
  std::vector<ContextPoint> context_sweep;
  /// A flag whose other value changes the concurrency by more than 10% (answer_question()).
  struct Sensitivity {
    std::vector<std::string> flags;  ///< the flag and its other value, argv form
    bool fits = false;
    double total_concurrency = 0.0;
    double change = 0.0;  ///< relative to the plan's total concurrency (0.25: 25% more)
  };
  std::vector<Sensitivity> sensitivity;
  int exit_code = 0;         ///< 0, 2 (an incomplete checkpoint), 3 (unsupported) or 4 (does not fit / a guard failed)
  std::string exit_message;  ///< the error line for a non-zero exit_code
};

/// The checkpoint's weights as make_plan() takes them: `request.weights` when given; else the
/// safetensors headers of config.model_dir when it has them (and request.deploy allows it), else
/// compute_weights(config); --weights-gib makes the source "flag". An incomplete checkpoint (its
/// CheckpointFiles::incomplete_reason(), or its main model short of the contract's exact parts:
/// FileWeights::shortfall_reason()) is not used: the weights are compute_weights(config)'s and
/// `incomplete` says why. Error(invalid_config) for a broken checkpoint file.
struct PlanWeights {
  std::shared_ptr<const WeightsReport> report;
  WeightsSource source = WeightsSource::config;
  std::string how;
  std::optional<FileWeights> files;  ///< with WeightsSource::files: the comparison with the contract
  std::shared_ptr<const IncompleteCheckpoint> incomplete;  ///< the directory's checkpoint, when incomplete
};
PlanWeights load_plan_weights(const ModelConfig& config, const PlanRequest& request);

/// Loads `path` (a config.json, a model directory, a Hugging Face cache repository or snapshot)
/// and plans it. Throws Error for an unreadable / invalid config or checkpoint (exit 2) and bad
/// request values (exit 1); backend violations, layout rules and shortfalls are in the Plan.
Plan make_plan(const std::string& path, const PlanRequest& request);
/// The same for a config already loaded (its `source` names the directory whose files are read).
Plan make_plan(ModelConfig config, const PlanRequest& request);
/// make_plan() of `config` with `topology` = build_topology(config), without copying either:
/// the result's config and topology are left empty (check --matrix plans one config many times).
Plan make_plan_on(const ModelConfig& config, const Topology& topology, const PlanRequest& request);

/// The finding of vLLM refusing every backend for the request (an arch no backend of the family
/// runs on, an --attention-backend that is not the family's), or nullptr. The layout then holds
/// the closest entry, for a lenient plan: outputs say it is refused rather than run.
const Finding* backend_refusal(const Plan& plan);

/// The fit of `layout` for `request` alone (make_plan's fit step; check --matrix calls it per
/// layout). `weights` is the checkpoint's (compute_weights or from files).
Fit plan_fit(const ModelConfig& config, const Topology& topology, const Layout& layout,
             std::shared_ptr<const WeightsReport> weights, WeightsSource source, const std::string& weights_how,
             const PlanRequest& request);

}  // namespace mlaplan
