#include "mlaplan/engine/vllm/placement.hpp"

#include <algorithm>
#include <numeric>
#include <string_view>

#include "mlaplan/cache/layout.hpp"
#include "mlaplan/base/limits.hpp"
#include "mlaplan/base/number_format.hpp"
#include "mlaplan/base/text.hpp"

// Which tensor goes where, and the vLLM source each rule was read in:
// - vllm/model_executor/models/deepseek_v4.py (DeepseekV4Attention): fused_wqa_wkv is a
//   MergedColumnParallelLinear with disable_tp (replicated), q_norm / kv_norm RMSNorm (replicated),
//   wq_b and wo_a ColumnParallelLinear, wo_b RowParallelLinear, attn_sink sized by the local heads
//   (padded to at least 64 for FlashMLA; modelled as an even TP split, at most 256 B a layer off).
//   DeepseekV4MoE: the norm_gate (gate weight, bias, tid2eid) is not sharded; shared experts are a
//   DeepseekV4MLP (MergedColumnParallelLinear + RowParallelLinear: sharded by TP); routed experts a
//   FusedMoE over the flattened TP x DP group (n_routed / EP experts each with EP on).
//   VocabParallelEmbedding / ParallelLMHead: vocab rows padded to a multiple of 64, split by TP.
// - vllm/model_executor/layers/deepseek_v4_attention.py (DeepseekV4Indexer, via deepseek_v4.py and
//   docs/fit.md section 2): the indexer's wq_b and weights_proj are ReplicatedLinear ("no
//   tensor parallel, just replicated"); the compressors are replicated.
// - vllm/model_executor/models/deepseek_v4_mtp.py (DeepSeekV4MultiTokenPredictorLayer): e_proj and
//   h_proj are ReplicatedLinear; enorm / hnorm / shared_head.norm and hc_head_* are replicated; the
//   draft's mtp_block is a DeepseekV4DecoderLayer, so its tensors follow the rules above.
// - vllm/model_executor/models/deepseek_v2.py (V3.2): q_a_proj / kv_a_proj_with_mqa (fused_qkv_a_proj
//   with disable_tp) and their layernorms replicated; q_b_proj, kv_b_proj ColumnParallelLinear, o_proj
//   RowParallelLinear; dense MLP and shared experts (DeepseekV2MLP) sharded; the Indexer's wq_b, wk and
//   weights_proj ReplicatedLinear, k_norm replicated; the gate ReplicatedLinear. deepseek_mtp.py: eh_proj
//   is a plain nn.Linear (replicated); the MTP layer's own embed_tokens / shared_head.head copies are
//   replaced by the target's when the draft is loaded (vLLM's EAGLE/MTP proposer shares them), so
//   they are counted as shared, not placed.
// - Engram (V4.1) and the vision tower: not in the vLLM sources read. Engram on the GPU is taken as
//   sharded by TP like the embedding (users' reports; docs/fit.md section 2); the vision tower
//   as replicated on the first stage (assumed). Both set Placement::estimated.

namespace mlaplan {

namespace {

constexpr std::int64_t kVocabPadding = 64;  // vLLM's DEFAULT_VOCAB_PADDING_SIZE

/// A list of sizes in a message: bounded (join_bounded, kMessageMaxItems), "none" when empty.
std::string join(const std::vector<std::int64_t>& v) { return join_bounded(v, ", ", kMessageMaxItems, "none"); }

/// a x b, checked; the message (naming the tensor) is built only when it overflows.
std::int64_t group_mul(std::int64_t a, std::int64_t b, const TensorGroup& g) {
  std::int64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r)) checked_mul(a, b, "bytes per rank of " + g.name);
  return r;
}

bool contains(std::string_view s, std::string_view part) { return s.find(part) != std::string_view::npos; }

/// Attention tensors: the sharded ones by name, the rest (wq_a, wkv, q_a_proj, kv_a_proj_with_mqa,
/// q_norm, kv_norm and the layernorms) replicated.
ShardKind attention_kind(std::string_view name) {
  for (std::string_view s : {".wq_b.", ".wo_a.", ".wo_b.", ".attn_sink", ".q_b_proj.", ".kv_b_proj.", ".o_proj."}) {
    if (contains(name, s)) return ShardKind::tensor;
  }
  return ShardKind::replicated;
}

ShardKind kind_of(WeightPart part, std::string_view name, EngramPlacement engram) {
  switch (part) {
    case WeightPart::embedding:
    case WeightPart::head:
    case WeightPart::shared_experts:
    case WeightPart::dense_ffn: return ShardKind::tensor;
    case WeightPart::routed_experts: return ShardKind::expert;
    case WeightPart::attention: return attention_kind(name);
    case WeightPart::engram: return engram == EngramPlacement::offload ? ShardKind::host : ShardKind::tensor;
    case WeightPart::compressor:
    case WeightPart::indexer:
    case WeightPart::mhc:
    case WeightPart::router:
    case WeightPart::norms:
    case WeightPart::mtp:
    case WeightPart::vision: return ShardKind::replicated;
  }
  return ShardKind::replicated;
}

void check_size(std::int64_t v, const char* flag) {
  if (v < 1 || v > LayoutLimits::max_parallel_size) {
    throw_usage(std::string(flag) + " " + std::to_string(v) + " is out of range: allowed 1 to " +
                std::to_string(LayoutLimits::max_parallel_size));
  }
}

Finding error(std::string id, std::string message, std::string path, std::string fix) {
  return Finding{std::move(id), Severity::error, std::move(message), std::move(path), std::move(fix)};
}

}  // namespace

std::string_view to_string(ShardKind k) {
  switch (k) {
    case ShardKind::replicated: return "replicated";
    case ShardKind::tensor: return "tensor";
    case ShardKind::expert: return "expert";
    case ShardKind::host: return "host";
  }
  return "?";
}

bool Placement::ok() const {
  return std::none_of(findings.begin(), findings.end(), [](const Finding& f) { return f.severity == Severity::error; });
}

ShardKind shard_kind(const TensorInfo& t, EngramPlacement engram) { return kind_of(t.part, t.name, engram); }
ShardKind shard_kind(const TensorGroup& g, EngramPlacement engram) { return kind_of(g.part, g.name, engram); }

std::int64_t tensor_bytes_per_rank(const TensorGroup& g, std::int64_t tp) {
  if (tp == 1) return g.bytes;
  if ((g.part == WeightPart::embedding || g.part == WeightPart::head) && !g.shape.empty() && g.shape[0] > 0 &&
      g.bytes % g.shape[0] == 0) {
    // Vocab-parallel: rows padded to a multiple of 64, then split evenly (vLLM asserts it divides).
    const std::int64_t rows = ceil_div(g.shape[0], kVocabPadding);  // rows / 64 <= int64 max / 64: no overflow
    return group_mul(ceil_div(group_mul(rows, kVocabPadding, g), tp), g.bytes / g.shape[0], g);
  }
  if (g.part == WeightPart::engram && !g.shape.empty() && g.shape[0] > 0 && g.bytes % g.shape[0] == 0) {
    return group_mul(ceil_div(g.shape[0], tp), g.bytes / g.shape[0], g);
  }
  return ceil_div(g.bytes, tp);
}

std::vector<ShardKind> shard_kinds(const WeightsReport& weights, EngramPlacement engram) {
  std::vector<ShardKind> kinds;
  kinds.reserve(weights.groups.size());
  for (const TensorGroup& g : weights.groups) kinds.push_back(kind_of(g.part, g.name, engram));
  return kinds;
}

Placement place_weights(const ModelConfig& cfg, const WeightsReport& weights, const ParallelLayout& layout) {
  return place_weights(cfg, weights, layout, shard_kinds(weights, layout.engram));
}

Placement place_weights(const ModelConfig& cfg, const WeightsReport& weights, const ParallelLayout& layout,
                        const std::vector<ShardKind>& kinds) {
  if (kinds.size() != weights.groups.size()) throw_internal("place_weights: one shard kind per tensor group");
  check_size(layout.tensor_parallel_size, "--tensor-parallel-size");
  check_size(layout.data_parallel_size, "--data-parallel-size");
  check_size(layout.pipeline_parallel_size, "--pipeline-parallel-size");

  Placement pl;
  pl.layout = layout;
  const std::int64_t tp = layout.tensor_parallel_size, dp = layout.data_parallel_size;
  const std::int64_t pp = layout.pipeline_parallel_size;
  const std::int64_t moe_group = checked_mul(tp, dp, "TP x DP", ErrorKind::usage);
  const std::int64_t ep = layout.expert_parallel_size();
  const CheckpointFields& c = cfg.checkpoint;
  const std::int64_t P = LayoutLimits::max_parallel_size;
  const std::string& fp = cfg.field_prefix;

  // ---- layout rules
  const std::int64_t heads = cfg.num_attention_heads;
  const bool v4 = cfg.family != Family::deepseek_v32;
  const std::int64_t block = c.weight_block_size.empty() ? 0 : c.weight_block_size[0];
  const std::int64_t shared_width =
      c.n_shared_experts > 0 ? checked_mul(c.moe_intermediate_size, c.n_shared_experts, "shared expert width") : 0;
  auto tp_ok = [&](std::int64_t t) {
    if (heads % t != 0) return false;
    if (v4 && c.o_groups > 0 && c.o_groups % t != 0) return false;
    if (block > 0 && shared_width > 0 && (shared_width % t != 0 || (shared_width / t) % block != 0)) return false;
    return true;
  };
  std::vector<std::int64_t> tp_allowed;
  for (std::int64_t t = 1; t <= P && t <= std::max<std::int64_t>(heads, 1); ++t) {
    if (tp_ok(t)) tp_allowed.push_back(t);
  }
  const std::string tp_fix = "use --tensor-parallel-size " + join(tp_allowed) +
                             " (and --data-parallel-size for more GPUs: DP attention keeps every head on each rank)";
  const std::string tp_flag = "--tensor-parallel-size " + std::to_string(tp);
  // A TP size that does not divide the query heads is the rules' to refuse (backend.tensor_parallel,
  // vLLM's own message); the placement of it is the ceiling share per rank, and the sizes it allows
  // (tp_allowed) divide the heads.
  if (v4 && c.o_groups > 0 && c.o_groups % tp != 0) {
    const std::string why = tp > c.o_groups ? " is above o_groups " : " does not divide o_groups ";
    pl.findings.push_back(error("placement.tensor_parallel",
                                tp_flag + why + std::to_string(c.o_groups) +
                                    ": wo_a runs o_groups / TP output groups per rank, which must be a whole "
                                    "number of at least 1; allowed: " +
                                    join(tp_allowed),
                                fp + "/o_groups", tp_fix));
  }
  if (block > 0 && shared_width > 0 && (shared_width % tp != 0 || (shared_width / tp) % block != 0)) {
    const std::string per_rank = shared_width % tp == 0
                                     ? std::to_string(shared_width / tp)
                                     : format_fixed(static_cast<double>(shared_width) / static_cast<double>(tp), 2);
    pl.findings.push_back(error(
        "placement.shared_expert_block",
        tp_flag + " gives the shared experts " + per_rank + " of " + std::to_string(shared_width) +
            " columns per rank (moe_intermediate_size x n_shared_experts / TP), not a multiple of the FP8 block " +
            std::to_string(block) +
            " (quantization_config.weight_block_size[0]): the block-quantised weight "
            "cannot be split and vLLM fails to load it; allowed: " +
            join(tp_allowed),
        fp + "/moe_intermediate_size", tp_fix));
  }
  if (layout.enable_expert_parallel && c.n_routed_experts > 0 && c.n_routed_experts % ep != 0) {
    std::vector<std::int64_t> ep_allowed;
    for (std::int64_t e = 1; e <= c.n_routed_experts && e <= P; ++e) {
      if (c.n_routed_experts % e == 0) ep_allowed.push_back(e);
    }
    pl.findings.push_back(error("placement.expert_parallel",
                                "--enable-expert-parallel with --tensor-parallel-size " + std::to_string(tp) +
                                    " x --data-parallel-size " + std::to_string(dp) + " = EP " + std::to_string(ep) +
                                    " does not divide n_routed_experts " + std::to_string(c.n_routed_experts) +
                                    ": each EP rank holds n_routed_experts / EP whole experts; "
                                    "allowed EP sizes (TP x DP): " +
                                    join(ep_allowed),
                                fp + "/n_routed_experts",
                                "choose TP x DP among " + join(ep_allowed) + ", or drop --enable-expert-parallel"));
  }
  const std::int64_t layers = cfg.num_hidden_layers;
  if (pp > layers) {
    pl.findings.push_back(error(
        "placement.pipeline",
        "--pipeline-parallel-size " + std::to_string(pp) + " is above num_hidden_layers " + std::to_string(layers) +
            ": every stage needs at least one layer; allowed: 1 to " + std::to_string(std::min(layers, P)),
        fp + "/num_hidden_layers", "use --pipeline-parallel-size " + std::to_string(std::min(layers, P)) + " or less"));
  }

  pl.local_query_heads = ceil_div(heads, tp);
  pl.padded_query_heads = padded_query_heads(pl.local_query_heads).value_or(0);
  if (pp > layers) return pl;  // no partition to place on

  // ---- stages
  const std::vector<std::int64_t> parts = pipeline_partition(layers, pp);
  std::vector<std::int64_t> stage_of(static_cast<std::size_t>(layers), 0);
  pl.stages.resize(static_cast<std::size_t>(pp));
  for (std::int64_t s = 0, first = 0; s < pp; ++s) {
    RankWeights& r = pl.stages[static_cast<std::size_t>(s)];
    r.stage = s;
    r.first_layer = first;
    r.last_layer = first + parts[static_cast<std::size_t>(s)] - 1;
    r.holds_embedding = s == 0;
    r.holds_head = s == pp - 1;
    if (layout.enable_expert_parallel && c.n_routed_experts > 0) r.experts_per_rank = ceil_div(c.n_routed_experts, ep);
    for (std::int64_t l = r.first_layer; l <= r.last_layer; ++l) stage_of[static_cast<std::size_t>(l)] = s;
    first = r.last_layer + 1;
  }

  // vLLM's MXFP4 MoE kernels (Marlin on SM90, DeepGEMM / TRTLLM / CUTLASS on SM100: vllm/model_executor/
  // layers/fused_moe/oracle/mxfp4.py mxfp4_round_up_hidden_size_and_intermediate_size) round a rank's
  // share of an expert's intermediate size up to a multiple of 128 when the experts are tensor-
  // sharded: V4.1-Flash's 2304 at TP 4 is 576 per rank, allocated as 640 (+1/9 of the experts).
  constexpr std::int64_t kMxfp4IntermediateAlign = 128;
  std::int64_t rank_intermediate = 0, padded_intermediate = 0;
  if (!layout.enable_expert_parallel && c.expert_dtype == "fp4" && c.moe_intermediate_size > 0 && moe_group > 1 &&
      c.moe_intermediate_size % moe_group == 0) {
    rank_intermediate = c.moe_intermediate_size / moe_group;
    padded_intermediate = ceil_div(rank_intermediate, kMxfp4IntermediateAlign) * kMxfp4IntermediateAlign;
  }
  pl.estimated = weights.estimated();
  for (std::size_t gi = 0; gi < weights.groups.size(); ++gi) {
    const TensorGroup& g = weights.groups[gi];
    if (g.draft && !layout.load_draft_stages) continue;
    const std::int64_t total = g.total_bytes();
    if (layout.language_model_only && g.part == WeightPart::vision) {
      // --language-model-only: vLLM serves no modality, so the vision tower is never built.
      pl.skipped_bytes = checked_add(pl.skipped_bytes, total, "skipped bytes");
      continue;
    }
    if (g.draft && (g.part == WeightPart::embedding || g.part == WeightPart::head)) {
      // The MTP layer's own embedding / head copy (V3.2): replaced by the target's.
      pl.shared_bytes = checked_add(pl.shared_bytes, total, "shared draft bytes");
      continue;
    }
    std::int64_t s = pp - 1;  // draft stages, head, final norm, hc_head
    if (!g.draft && g.layer >= 0 && g.layer < layers) {
      s = stage_of[static_cast<std::size_t>(g.layer)];
    } else if (!g.draft && (g.part == WeightPart::embedding || g.part == WeightPart::vision)) {
      s = 0;
    }
    RankWeights& r = pl.stages[static_cast<std::size_t>(s)];
    const ShardKind kind = kinds[gi];
    if (g.part == WeightPart::vision || g.part == WeightPart::engram) pl.estimated = true;
    std::int64_t per_rank = 0;
    switch (kind) {
      case ShardKind::replicated:
        per_rank = total;
        pl.replicated_bytes = checked_add(pl.replicated_bytes, total, "replicated bytes");
        r.replicated_bytes = checked_add(r.replicated_bytes, per_rank, "replicated bytes");
        break;
      case ShardKind::tensor:
        per_rank = group_mul(tensor_bytes_per_rank(g, tp), g.count, g);
        pl.tensor_bytes = checked_add(pl.tensor_bytes, total, "tensor-parallel bytes");
        r.tensor_bytes = checked_add(r.tensor_bytes, per_rank, "tensor-parallel bytes");
        break;
      case ShardKind::expert:
        // EP on: whole experts per rank; off: every expert split over the flattened TP x DP group.
        per_rank = layout.enable_expert_parallel && g.count > 1 ? group_mul(g.bytes, ceil_div(g.count, ep), g)
                                                                : ceil_div(total, moe_group);
        if (!layout.enable_expert_parallel && padded_intermediate > rank_intermediate && rank_intermediate > 0 &&
            g.part == WeightPart::routed_experts) {
          // The MXFP4 MoE kernels allocate each rank's slice of every expert at the padded
          // intermediate size (mxfp4_round_up_hidden_size_and_intermediate_size).
          const std::int64_t padded = static_cast<std::int64_t>(static_cast<long double>(per_rank) *
                                                                static_cast<long double>(padded_intermediate) /
                                                                static_cast<long double>(rank_intermediate));
          r.expert_padding_bytes = checked_add(r.expert_padding_bytes, padded - per_rank, "expert padding");
          per_rank = padded;
        }
        pl.expert_bytes = checked_add(pl.expert_bytes, total, "expert bytes");
        r.expert_bytes = checked_add(r.expert_bytes, per_rank, "expert bytes");
        break;
      case ShardKind::host: {
        const std::int64_t share = group_mul(tensor_bytes_per_rank(g, tp), g.count, g);
        pl.host_bytes = checked_add(pl.host_bytes, total, "host bytes");
        r.host_bytes = checked_add(r.host_bytes, share, "host bytes");
        continue;
      }
    }
    auto& pb = r.part_bytes[static_cast<std::size_t>(g.part)];
    pb = checked_add(pb, per_rank, "part bytes");
    if (g.draft) r.draft_bytes = checked_add(r.draft_bytes, per_rank, "draft bytes");
    r.total_bytes = checked_add(r.total_bytes, per_rank, "bytes per rank");
  }
  for (const RankWeights& r : pl.stages) {
    if (r.total_bytes > pl.max_rank_bytes) {
      pl.max_rank_bytes = r.total_bytes;
      pl.limiting_stage = r.stage;
    }
  }

  std::string summary =
      "R " + format_gib(pl.replicated_bytes, 3) + " on every rank (norms, mHC, router, wq_a + wkv, " +
      "compressors, indexer), S " + format_gib(pl.tensor_bytes, 3) + " split over TP " + std::to_string(tp) +
      " (wq_b, wo_a, wo_b, attn_sink, shared experts, embedding, head), E " + format_gib(pl.expert_bytes, 3) +
      " split over TP x DP " + std::to_string(moe_group) +
      (layout.enable_expert_parallel
           ? " (expert parallel: " + std::to_string(pl.stages.front().experts_per_rank) + " experts per rank)"
           : " (tensor-sharded experts)");
  if (pl.host_bytes > 0) summary += "; " + format_gib(pl.host_bytes, 3) + " of Engram tables offloaded to host memory";
  if (pl.skipped_bytes > 0) {
    summary += "; the vision tower (" + format_gib(pl.skipped_bytes, 3) + ") is not loaded (--language-model-only)";
  }
  if (pl.shared_bytes > 0) {
    summary += "; the draft's own embedding / head copies (" + format_gib(pl.shared_bytes, 3) + ") share the target's";
  }
  pl.findings.push_back(Finding{"placement.kinds", Severity::info, summary, "", ""});
  if (padded_intermediate > rank_intermediate && !pl.stages.empty()) {
    std::int64_t most = 0;
    for (const auto& st : pl.stages) most = std::max(most, st.expert_padding_bytes);
    pl.findings.push_back(
        Finding{"placement.moe_padding", Severity::info,
                "vLLM's MXFP4 MoE kernels pad each GPU's share of an expert, moe_intermediate_size " +
                    std::to_string(c.moe_intermediate_size) + " / " + std::to_string(moe_group) + " = " +
                    std::to_string(rank_intermediate) + ", up to " + std::to_string(padded_intermediate) +
                    " (a multiple of 128): " + format_gib(most) + " per GPU beyond the checkpoint's bytes",
                "", "--enable-expert-parallel keeps whole experts per GPU, unpadded"});
  }
  return pl;
}

}  // namespace mlaplan
