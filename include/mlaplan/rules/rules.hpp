#pragma once
// Every rule a config, a target, a backend and the flags are judged by, in one module
// (docs/rules.md): the flag values, vLLM's backend choice and its refusals, the model's shape, the
// parallel layout, speculative decoding, and the kernel shapes the engine will launch. Each result
// is a finding with a stable id, a severity, a message naming the value and what is allowed, and a
// fix where one exists. The layout (layout.hpp) is built from the options resolved here only.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "mlaplan/rules/backends.hpp"
#include "mlaplan/model/config.hpp"
#include "mlaplan/base/error.hpp"
#include "mlaplan/rules/request.hpp"
#include "mlaplan/hardware/target.hpp"
#include "mlaplan/model/topology.hpp"

namespace mlaplan {

/// One rule of the catalogue (for docs, `check --list-rules` and tests).
struct RuleInfo {
  std::string_view id;
  std::string_view summary;
};
/// Every rule id the module can report, in evaluation order.
const std::vector<RuleInfo>& rule_catalogue();

/// The draft model speculative decoding runs, read from the config.
enum class DraftMethod {
  none,    ///< no draft layers (num_nextn_predict_layers 0)
  mtp,     ///< MTP stages (V4.0 / V3.2 num_nextn_predict_layers without dspark_block_size)
  dspark,  ///< DSpark block drafter (V4.1's draft layers; V4.0 re-releases with dspark_block_size)
};
std::string_view to_string(DraftMethod m);  ///< "none", "mtp", "dspark"
DraftMethod draft_method(const ModelConfig& cfg);

/// vLLM's multi-module MTP (`SpeculativeConfig.use_multi_module_mtp`): MTP stages (not DSpark)
/// with min(draft layers, K) > 1, each stage drafting its own position.
bool multi_module_mtp(const ModelConfig& cfg, std::int64_t num_speculative_tokens);
/// vLLM's `num_prefill_lookahead_tokens` with the config's draft layers speculating K tokens: the
/// prefill tokens past a chunk the drafter reads, K for multi-module MTP, 1 for any other drafter
/// (DSpark, single-module MTP), 0 without speculative decoding (K 0 or no draft layers).
std::int64_t prefill_lookahead_tokens(const ModelConfig& cfg, std::int64_t num_speculative_tokens);
/// `SlidingWindowSpec.extra_retained_tokens` as vLLM's planner sets it on every sliding-window
/// spec: max(0, prefill_lookahead_tokens - 1), so K - 1 for multi-module MTP and 0 for DSpark
/// (docs/fit.md, section 4, has the sources).
std::int64_t extra_retained_tokens(const ModelConfig& cfg, std::int64_t num_speculative_tokens);

/// The options a layout is built from, after every rule.
struct ResolvedLayoutOptions {
  BackendChoice backend;
  KvCacheDtype kv = KvCacheDtype::fp8_ds_mla;
  IndexerCacheDtype idx = IndexerCacheDtype::fp8;
  std::int64_t block = 0;  ///< tokens per page of ratio-1 global caches
  bool block_default = true;
  std::int64_t page_states = 0;   ///< rows per page the backend fixes (SM120: 64), 0: block / ratio
  std::int64_t window_block = 0;  ///< window-cache tokens per page
  std::int64_t mml = 0;
  bool mml_default = true;
  std::int64_t in_flight = 0;
  bool in_flight_default = true;
  std::int64_t spec = 0;
  ParallelLayout parallel;                   ///< the sizes, with the local and padded heads (0: no kernel for them)
  std::vector<std::int64_t> partition;       ///< backbone layers per pipeline stage
  std::vector<std::int64_t> stage_of_layer;  ///< per layer (backbone then draft)
  std::string kv_cache_dtype_requested;      ///< --kv-cache-dtype as given (the layout shows it)
  bool include_draft_layers = true;          ///< the draft (MTP / DSpark) layers get their caches
  bool usable = true;                        ///< no usage error: a layout can be built

  /// Tokens per page of a global cache of ratio `ratio` (>= 1).
  std::int64_t global_block(std::int64_t ratio) const { return page_states > 0 ? page_states * ratio : block; }
};

/// Resolves the layout flags: usage errors for bad values, the backend vLLM would run and every
/// backend, model-shape, parallel and speculative rule (errors: unsupported), the defaults applied
/// (infos). Never throws for user values except an unknown --kv-cache-dtype / --attention-backend
/// spelling, which is recorded as a usage check too.
struct LayoutResolution {
  ResolvedLayoutOptions options;
  std::vector<LayoutCheck> checks;
};
LayoutResolution resolve_layout_options(const ModelConfig& cfg, const Topology& topo, const Target& target,
                                        const LayoutOptions& options);

/// The flag values among resolve_layout_options()'s checks, which need no target (kv and indexer dtypes, TP,
/// PP, DP, speculative tokens, block size, max_model_len, in-flight tokens): Error(usage) for the
/// first bad one. verify and bench check them before they look for a GPU.
void check_layout_flags(const ModelConfig& cfg, const Topology& topo, const LayoutOptions& options);

// ---------------------------------------------------------------- kernel shapes

enum class ShapeStatus {
  available,  ///< the backend has this instantiation on the target
  missing,    ///< it does not: the engine fails at start-up or in CUDA-graph capture
  unknown,    ///< depends on the library version (the note says which)
};
std::string_view to_string(ShapeStatus s);  ///< "available", "missing", "unknown"

/// One kernel instantiation the engine launches for the planned layout.
struct KernelShape {
  std::string phase;                   ///< "decode" or "prefill"
  std::string kernel;                  ///< the library's kernel, for people
  std::vector<LayerType> layer_types;  ///< the layer types that launch it
  bool draft = false;                  ///< launched by the draft model's layers
  std::int64_t local_heads = 0;        ///< query heads per rank after TP
  std::int64_t kernel_heads = 0;       ///< what the kernel runs (padded); 0: none
  std::int64_t d_qk = 0;
  std::int64_t d_v = 0;
  std::int64_t topk = 0;             ///< main index width
  std::int64_t extra_topk = 0;       ///< extra (compressed) index width, 0: none
  std::int64_t page_rows = 0;        ///< main cache rows per page
  std::int64_t extra_page_rows = 0;  ///< extra cache rows per page, 0: none
  std::string kv_layout;             ///< "fp8_ds_mla", ...
  ShapeStatus status = ShapeStatus::available;
  std::string note;  ///< why missing / unknown, or how a width is derived
  std::string fix;   ///< when not available
};

/// Every instantiation the engine needs for the resolved options (decode and prefill, backbone
/// and draft), with the backend's verdict. Empty when the options are not usable.
std::vector<KernelShape> kernel_shapes(const ModelConfig& cfg, const Topology& topo, const Target& target,
                                       const ResolvedLayoutOptions& options);
/// resolve_layout_options() then kernel_shapes(); empty when the flags are not usable.
std::vector<KernelShape> kernel_shapes(const ModelConfig& cfg, const Topology& topo, const Target& target,
                                       const LayoutOptions& options);
/// The width of a DSpark draft's non-causal window indices: cdiv(window + n, 64) x 64 (vLLM's
/// get_dspark_swa_index_width; one version aligned to 128, another to 512).
std::int64_t dspark_window_width(std::int64_t window, std::int64_t num_speculative_tokens);

// ---------------------------------------------------------------- all rules

/// What the rules are evaluated against besides the config: the model dtype the engine would run
/// (the config's unless overridden) and the layout flags.
struct RuleOptions {
  std::optional<std::string> dtype;  ///< --dtype; default: the config's dtype
  LayoutOptions layout;
};

/// A finding with the exit-code kind it carries when its severity is error.
struct RuleResult {
  Finding finding;
  ErrorKind kind = ErrorKind::unsupported;
};

/// Every rule's verdict on one request, with the one resolution the layout, placement, budget and
/// fit are built from (make_plan resolves a request once).
struct RulesVerdict {
  LayoutResolution resolution;      ///< resolve_layout_options() of the layout flags; its checks are in `results`
  std::vector<RuleResult> results;  ///< evaluate_rules()
  std::vector<KernelShape> shapes;  ///< kernel_shapes() of the resolved options
};
/// evaluate_rules() keeping the resolution and the kernel shapes. Never throws for user values.
RulesVerdict judge_request(const ModelConfig& cfg, const Topology& topo, const Target& target,
                           const RuleOptions& options);

/// Evaluates every rule: resolve_layout_options()'s checks, the model's shape and the kernel
/// shapes (a missing one is an error, an unknown one a warning); `shapes`, when given, receives
/// kernel_shapes() of the resolved options. Never throws for user values: bad flag values come
/// back as usage errors.
std::vector<RuleResult> evaluate_rules(const ModelConfig& cfg, const Topology& topo, const Target& target,
                                       const RuleOptions& options, std::vector<KernelShape>* shapes = nullptr);

/// The exit code of a set of results: 0 when no error, else the most severe kind among the errors.
int rules_exit_code(const std::vector<RuleResult>& results);

}  // namespace mlaplan
