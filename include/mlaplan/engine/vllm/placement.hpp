#pragma once
// Where the checkpoint's bytes land on every GPU of a vLLM deployment: tensor parallelism (TP),
// attention data parallelism (DP), expert parallelism (EP = TP x DP with
// --enable-expert-parallel), pipeline stages (PP), the draft stages on the last stage, and V4.1's
// Engram tables on the GPU or offloaded to the host. Rules: docs/fit.md "Weights per GPU", from
// docs/fit.md section 2 (vLLM's DeepSeek-V4 model code). Every size is checked 64-bit.

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "mlaplan/model/config.hpp"
#include "mlaplan/base/error.hpp"
#include "mlaplan/model/weights.hpp"
#include "mlaplan/rules/request.hpp"

namespace mlaplan {

/// How one tensor is placed over the ranks of a stage.
enum class ShardKind {
  replicated,  ///< R: every rank holds all of it (norms, mHC, router, fused wq_a+wkv, compressors, indexer)
  tensor,      ///< S: split over the TP ranks (wq_b, wo_a, wo_b, attn_sink, shared experts, embedding, head)
  expert,      ///< E: split over TP x DP (EP, or the flattened TP group of the MoE without EP)
  host,        ///< offloaded: no GPU bytes (Engram with EngramPlacement::offload)
};
std::string_view to_string(ShardKind k);  ///< "replicated", "tensor", "expert", "host"

/// Bytes one GPU of a pipeline stage holds.
struct RankWeights {
  std::int64_t stage = 0;
  std::int64_t first_layer = 0;  ///< backbone layers of the stage, inclusive
  std::int64_t last_layer = 0;
  bool holds_embedding = false;                             ///< first stage
  bool holds_head = false;                                  ///< last stage (and the draft stages)
  std::array<std::int64_t, kWeightPartCount> part_bytes{};  ///< by WeightPart
  std::int64_t replicated_bytes = 0;                        ///< R
  std::int64_t tensor_bytes = 0;                            ///< S / TP
  std::int64_t expert_bytes = 0;                            ///< E / (TP x DP)
  /// Of expert_bytes: what vLLM's MXFP4 MoE kernels add by padding a rank's share of the
  /// intermediate size up to a multiple of 128 (experts tensor-sharded, EP off).
  std::int64_t expert_padding_bytes = 0;
  std::int64_t draft_bytes = 0;       ///< of the total, what the draft stages add
  std::int64_t host_bytes = 0;        ///< offloaded bytes of this rank (not in total_bytes)
  std::int64_t experts_per_rank = 0;  ///< routed experts a rank holds per MoE layer (EP on), else 0
  std::int64_t total_bytes = 0;       ///< on the GPU
};

/// The weights of every rank, and the rules vLLM applies to the layout.
struct Placement {
  ParallelLayout layout;
  std::vector<RankWeights> stages;  ///< one per PP stage; every TP / DP rank of a stage holds the same
  std::int64_t max_rank_bytes = 0;  ///< the largest stage's total
  std::int64_t limiting_stage = 0;  ///< the stage holding it
  /// Whole-model sums by kind (draft stages included when loaded), before any division.
  std::int64_t replicated_bytes = 0, tensor_bytes = 0, expert_bytes = 0, host_bytes = 0;
  /// What is not loaded at all: the vision tower with --language-model-only.
  std::int64_t skipped_bytes = 0;
  /// Draft stages' own copies of the embedding / head (V3.2's MTP layer stores them): vLLM's MTP
  /// proposer replaces them with the target's, so they are on no GPU (and in none of the sums above).
  std::int64_t shared_bytes = 0;
  std::int64_t local_query_heads = 0;   ///< num_attention_heads / TP
  std::int64_t padded_query_heads = 0;  ///< the kernel's head count (64 or 128); 0 when none fits
  bool estimated = false;               ///< the weights it places have estimated parts
  /// Layout rules (ids placement.*), errors reject the layout with the flag, the value, why and
  /// the sizes that work; infos report head padding and what each kind is.
  std::vector<Finding> findings;
  bool ok() const;  ///< no error finding
};

/// Places `weights` (compute_weights() of `cfg`, tensors listed; or a report from files) on
/// `layout`. Error(usage) for a size out of 1..LayoutLimits (a flag value), never for a rule: the
/// rules are findings (placement.tensor_parallel: TP above o_groups or not dividing them;
/// placement.shared_expert_block: MI / TP not a multiple of the FP8 block; placement.expert_parallel:
/// n_routed_experts not divisible by EP; placement.pipeline: more stages than layers; info
/// placement.head_padding). A TP size that does not divide the query heads is the rules'
/// (backend.tensor_parallel of rules.hpp), not repeated here: it is placed with the ceiling share.
Placement place_weights(const ModelConfig& cfg, const WeightsReport& weights, const ParallelLayout& layout);
/// The same with shard_kinds(weights, layout.engram) computed once by the caller (a search over
/// many layouts of one checkpoint places it many times).
Placement place_weights(const ModelConfig& cfg, const WeightsReport& weights, const ParallelLayout& layout,
                        const std::vector<ShardKind>& kinds);
/// shard_kind() of every group of `weights` under `engram`, in the order of weights.groups.
std::vector<ShardKind> shard_kinds(const WeightsReport& weights, EngramPlacement engram);

/// The kind of one tensor (by its part and name) under `engram`.
ShardKind shard_kind(const TensorInfo& t, EngramPlacement engram);
/// The same for a group of tensors.
ShardKind shard_kind(const TensorGroup& g, EngramPlacement engram);
/// Bytes one TP rank holds of one tensor of `g` when it is sharded by TP: ceil(bytes / tp); the
/// embedding and head split their vocab rows padded to a multiple of 64 (VocabParallelEmbedding),
/// Engram tables their rows.
std::int64_t tensor_bytes_per_rank(const TensorGroup& g, std::int64_t tp);

}  // namespace mlaplan
