#pragma once
// A decode step of a config: the batch (requests, context lengths, speculative tokens) and the
// tile-scheduler plan of each layer type for it, with the inputs vLLM's DeepSeek V4/V4.1 decode
// path gives FlashMLA (docs/scheduler.md, "Plans from a config").

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "mlaplan/model/config.hpp"
#include "mlaplan/cache/decode_mode.hpp"
#include "mlaplan/cache/layout.hpp"
#include "mlaplan/base/limits.hpp"  // BatchLimits: beyond them a batch flag is Error usage
#include "mlaplan/cache/scheduler.hpp"
#include "mlaplan/model/topology.hpp"

namespace mlaplan {

/// The batch flags: --batch N --context-len L (uniform), or --context-lens a,b,c (or @FILE);
/// --spec-tokens K.
struct BatchOptions {
  std::optional<std::int64_t> batch;
  std::optional<std::int64_t> context_len;
  std::vector<std::int64_t> context_lens;
  std::int64_t spec_tokens = 0;
  /// --context-lens read from a file: how messages name it ("--context-lens @lens.txt") and the
  /// line (1-based) of each entry of context_lens. Empty for the inline list, whose entries
  /// messages name --context-lens[i].
  std::string context_lens_source;
  std::vector<std::int64_t> context_lens_lines;
};

/// Default batch when no batch flag is given: 64 requests at min(4096, max_model_len) tokens.
inline constexpr std::int64_t kDefaultBatch = 64;
inline constexpr std::int64_t kDefaultContextLen = 4096;

/// One decode step. A request of context length L decodes its token at position L - 1; with K
/// speculative tokens it contributes 1 + K decode tokens at positions L - 1 .. L - 1 + K, each its
/// own row of the batch (b = requests x (1 + K)).
struct DecodeBatch {
  std::vector<std::int64_t> context_lens;  ///< per request
  std::int64_t spec_tokens = 0;
  std::vector<std::int64_t> positions;  ///< per decode token
  bool defaulted = false;               ///< no batch flag was given
  std::string description;              ///< for people: "64 requests x 4096 tokens"
};

/// Where the max_model_len given to make_decode_batch() came from: its messages say so.
enum class MaxModelLenSource {
  value,           ///< a value of the caller: "max_model_len 100"
  flag,            ///< --max-model-len: "--max-model-len 100"
  config_default,  ///< no --max-model-len: the config's max_position_embeddings
};

/// Validates the flags against max_model_len (the last position must be < max_model_len) and
/// expands the batch. Error(usage) naming the flag, the value and what is allowed, and where
/// max_model_len came from (`source`).
DecodeBatch make_decode_batch(const BatchOptions& options, std::int64_t max_model_len,
                              MaxModelLenSource source = MaxModelLenSource::value);

/// The plan of one layer type for one decode step, with the inputs it was made from.
struct LayerTypeSchedule {
  LayerType type = LayerType::swaonly;
  std::int64_t num_layers = 0;  ///< layers sharing this plan
  SchedInput input;             ///< kernel, num_sms, h_q, lengths, extra lengths
  SchedPlan plan;
  std::int64_t topk = 0;             ///< main index width
  std::int64_t page_block_size = 0;  ///< main cache rows per page
  std::int64_t extra_topk = 0;       ///< 0 when there is no extra cache
  std::int64_t extra_page_block_size = 0;
  std::string note;       ///< how the inputs were derived, where not obvious
  DecodeModeChoice mode;  ///< how mla-plan's decode kernels run this step
};

/// The tile scheduler of the decode kernel the target runs for `padded_heads` query heads (the
/// heads the backend's kernel runs, decode_heads()): sm90-sparse on compute capability 9.x for 64
/// and 128, and for 8 and 16 (mla-plan's small-head kernel, run unpadded as
/// TRITON_MLA_SPARSE_DSV41 runs them on 9.0: sm90-sparse's partitions, each covering every head);
/// sm100-head64 / sm100-head128 on 10.x; nullopt elsewhere (no sparse kernel for the shape).
std::optional<SchedKernel> decode_kernel_for(const ComputeCapability& cc, std::int64_t padded_heads);

/// One plan per layer type present, for the heads the backend's kernel runs
/// (LayoutParallel::padded_query_heads: 8 or 16 unpadded for TRITON_MLA_SPARSE_DSV41). Empty when
/// the target has no sparse decode kernel for them or the heads cannot be padded (the layout's
/// checks say why). FlashMLA's plans where the backend runs FlashMLA; for another backend they are
/// what mla-plan's kernels run the same step on (verify), not the engine's own work.
std::vector<LayerTypeSchedule> plan_decode_schedules(const ModelConfig& cfg, const Topology& topo, const Layout& layout,
                                                     const DecodeBatch& batch);

}  // namespace mlaplan
