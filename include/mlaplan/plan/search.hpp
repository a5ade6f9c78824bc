#pragma once
// The layout search (docs/launch.md, "From GPUs to a command"): every layout vLLM can start on at
// most N GPUs of one kind (tensor x pipeline x data parallel, decode context parallel within the
// tensor group, expert parallel on or off, every attention backend of the family on the GPU, V4.1's
// Engram tables on the GPU or in host memory, the kv-cache dtypes the GPU's backend stores),
// each planned as make_plan_on() plans it, ranked by what the deployer asks for. A layout the
// search proposes is one whose own plan fits, with the same numbers.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "mlaplan/plan/plan.hpp"

namespace mlaplan {

/// What the search ranks by (--objective).
enum class SearchObjective {
  concurrency,  ///< the most concurrent requests of max_model_len (all DP engines)
  context,      ///< the longest max_model_len that still serves min_concurrency requests at once
  gpus,         ///< the fewest GPUs, then the most concurrency
};
std::string_view to_string(SearchObjective o);  ///< "concurrency", "context", "gpus"
/// concurrency | context | gpus; anything else Error(usage) naming --objective.
SearchObjective parse_search_objective(std::string_view text);

/// The dimensions the user fixed on the command line: the search keeps them as given.
struct SearchFixed {
  bool tensor_parallel = false;
  bool pipeline_parallel = false;
  bool data_parallel = false;
  bool context_parallel = false;
  bool expert_parallel = false;
  bool engram = false;
  bool kv_cache_dtype = false;
  bool attention_backend = false;
};

struct SearchOptions {
  std::int64_t gpus = 8;  ///< at most this many GPUs of the request's target
  SearchObjective objective = SearchObjective::concurrency;
  std::int64_t min_concurrency = 1;  ///< the context objective's (and --max-model-len auto's) requests at once
  SearchFixed fixed;
  std::int64_t runners_up = 4;  ///< fitting layouts listed after the best
};

/// One layout the search planned.
struct SearchCandidate {
  PlanRequest request;  ///< the request that plans it (make_plan_on), shared weights included
  std::int64_t tensor_parallel_size = 1;
  std::int64_t pipeline_parallel_size = 1;
  std::int64_t data_parallel_size = 1;
  std::int64_t decode_context_parallel_size = 1;
  bool expert_parallel = false;
  EngramPlacement engram = EngramPlacement::gpu;
  std::string kv_cache_dtype;  ///< as requested of vLLM
  /// --attention-backend asked of vLLM ("" its default); `backend` the one the plan runs.
  std::string attention_backend;
  std::string backend;
  std::int64_t gpus = 1;
  int exit_code = 0;
  bool fits = false;               ///< exit 0 with a decided fit
  double total_concurrency = 0.0;  ///< all DP engines
  std::int64_t max_model_len = 0;  ///< the plan's (the context objective: the longest that serves min_concurrency)
  std::int64_t weights_bytes_per_gpu = 0;
  std::string reason;          ///< why it does not fit or is refused ("" when it fits)
  std::string label() const;   ///< "TP 4 x DP 2, EP, Engram offload, fp8_ds_mla"
  std::string family() const;  ///< label() without the DP and PP sizes: what a rejected family is
};

/// A family of layouts none of which fits: one line of the search's answer.
struct RejectedFamily {
  std::string family;
  std::int64_t layouts = 0;  ///< layouts of the family planned
  std::string reason;        ///< the reason of the family's layout with the most GPUs
};

struct SearchResult {
  SearchOptions options;
  std::string target;                   ///< the GPU preset (or custom target) searched
  std::vector<SearchCandidate> ranked;  ///< layouts that fit, best first
  std::vector<RejectedFamily> rejected;
  std::int64_t planned = 0;  ///< layouts planned
};

/// Searches the layouts of `options.gpus` GPUs for `config`. `base` gives everything but the
/// searched dimensions (the target, max_model_len, the budget, the batch ...); the dimensions in
/// `options.fixed` keep base's values. Guards are not applied. Throws Error for a config or
/// checkpoint that cannot be planned at all (the same errors make_plan throws).
SearchResult search_layouts(const ModelConfig& config, const Topology& topology, const PlanRequest& base,
                            const SearchOptions& options);

/// The longest max_model_len (at most the config's max_position_embeddings) at which `request`
/// fits and serves `min_concurrency` requests at once over all DP engines; nothing when not even
/// one token does. A bisection over make_plan_on(): the concurrency falls as max_model_len grows.
std::optional<std::int64_t> longest_context(const ModelConfig& config, const Topology& topology,
                                            const PlanRequest& request, std::int64_t min_concurrency);

/// The deployer's question beyond one layout's plan.
struct PlanQuestion {
  std::optional<SearchOptions> search;  ///< search the layouts and plan the best
  std::string search_why;               ///< "--gpus 8", "no layout flag: one node of 8 x h200"
  bool max_model_len_auto = false;      ///< --max-model-len auto
  std::int64_t min_concurrency = 1;     ///< what auto (and the context objective) must serve
  bool extras = true;                   ///< the context sweep and the sensitivity notes
};

/// The answer: the plan of the layout given, or of the best layout the search found (of the
/// closest when none fits), at the longest max_model_len with auto, with its `vllm serve`
/// command, the search, the context sweep and the flags the concurrency is sensitive to.
/// Throws what make_plan throws.
Plan answer_question(const ModelConfig& config, const PlanRequest& request, const PlanQuestion& question);

}  // namespace mlaplan
