#pragma once
// The tensors of the checkpoint a config describes, from config.json alone: every tensor's name,
// safetensors dtype, shape and bytes, the part of the model it belongs to, and totals (bytes,
// tensor counts, parameter counts). Rules: docs/weights.md (from the released
// checkpoints' tensor listings). V4 (deepseek_v4) is exact to the byte
// on DeepSeek-V4-Flash; V4.1 and V3.2 parts that rest on uncertain facts are marked estimated.

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "mlaplan/model/config.hpp"

namespace mlaplan {

/// Which part of the model a tensor belongs to. A scale tensor is in the part of its weight.
enum class WeightPart {
  embedding,       ///< token embedding (embed.weight / embed_tokens)
  head,            ///< output head (head.weight / lm_head)
  attention,       ///< attention projections, their norms and sinks (not compressor, not indexer)
  shared_experts,  ///< shared expert FFN
  routed_experts,  ///< routed expert FFNs
  dense_ffn,       ///< dense FFN layers (V3.2's first_k_dense_replace layers)
  compressor,      ///< KV compressor (V4 / V4.1)
  indexer,         ///< sparse-attention indexer, with its own compressor
  mhc,             ///< manifold hyper-connections (hc_* tensors, V4 / V4.1)
  router,          ///< expert gate: weight, bias, hash table tid2eid
  norms,           ///< layer and final RMSNorms outside attention
  mtp,             ///< what only a draft (MTP) stage holds: e_proj, h_proj, enorm, hnorm, its head norm
  engram,          ///< V4.1 Engram embedding tables
  vision,          ///< V4.1 vision tower
};
inline constexpr std::size_t kWeightPartCount = 14;
std::string_view to_string(WeightPart p);

/// safetensors dtype spellings. The contract (compute_weights) uses the first six; the others are
/// what a checkpoint's files may hold (weights_from_files, include/mlaplan/model/checkpoint_weights.hpp):
/// every dtype safetensors defines.
enum class WeightDtype {
  BF16,
  F32,
  F8_E4M3,
  F8_E8M0,
  I8,
  I64,
  F64,
  F16,
  F8_E5M2,
  I32,
  I16,
  U8,
  U16,
  U32,
  U64,
  BOOL,
  C64,
  F4,
  F6_E2M3,
  F6_E3M2,  ///< sub-byte: elements packed, a tensor's bytes are elements x bits / 8
};
std::string_view to_string(WeightDtype d);
/// Bytes of one element; 0 for the sub-byte dtypes (F4, F6_E2M3, F6_E3M2: see dtype_bits).
std::int64_t dtype_bytes(WeightDtype d);
/// Bits of one element (F4: 4, BF16: 16).
int dtype_bits(WeightDtype d);
/// The dtype of a safetensors spelling ("BF16", "F8_E4M3", ...), or nullopt.
std::optional<WeightDtype> parse_weight_dtype(std::string_view name);

struct TensorInfo {
  std::string name;  ///< e.g. "layers.3.attn.wq_a.weight", "mtp.0.e_proj.scale"
  WeightDtype dtype = WeightDtype::BF16;
  std::vector<std::int64_t> shape;
  std::int64_t bytes = 0;
  std::int64_t params = 0;  ///< logical elements (an FP4 byte holds 2); 0 for a scale
  WeightPart part = WeightPart::attention;
  std::int64_t layer = -1;  ///< layer index (draft stage k: num_hidden_layers + k); -1 global
  bool draft = false;       ///< in a draft (MTP) stage
  bool scale = false;       ///< a quantisation scale
};

/// `count` tensors that differ only in an index: the name holds "{e}" where the index 0..count-1
/// goes ("layers.3.ffn.experts.{e}.w1.weight"); a single tensor has count 1 and no "{e}". Every
/// field but `name` and `count` is that of each tensor.
struct TensorGroup {
  std::string name;
  WeightDtype dtype = WeightDtype::BF16;
  std::vector<std::int64_t> shape;
  std::int64_t bytes = 0;   ///< of each tensor
  std::int64_t params = 0;  ///< of each tensor
  WeightPart part = WeightPart::attention;
  std::int64_t layer = -1;
  bool draft = false;
  bool scale = false;
  std::int64_t count = 1;
  std::int64_t total_bytes() const;  ///< bytes x count (checked)
};

/// Sums over one part (or one group of tensors).
struct PartTotals {
  std::int64_t bytes = 0;        ///< weights and scales
  std::int64_t scale_bytes = 0;  ///< of which scales
  std::int64_t tensors = 0;
  std::int64_t params = 0;
  bool estimated = false;  ///< some rule of this part rests on an uncertain fact (else derived)
};

struct WeightsOptions {
  /// List every tensor in WeightsReport::tensors. The totals are computed either way (a routed
  /// expert is summed as one tensor times n_routed_experts, never listed one by one to sum).
  bool list_tensors = true;
  /// Beyond this many tensors the list is left empty (listed = false); the totals stay exact.
  std::int64_t max_listed_tensors = 4'000'000;
};

struct WeightsReport {
  /// false when some scheme is not known (unknown quant_method, expert_dtype, ...): `reason`
  /// names the field and value; the totals then hold only the tensors that are known.
  bool known = true;
  std::string reason;
  bool listed = false;              ///< `tensors` holds every tensor
  std::vector<TensorInfo> tensors;  ///< main model first, then the draft stages
  /// The same tensors in groups (always filled, whatever `list_tensors` says): what placement
  /// and the comparison with files walk instead of 69,187 single tensors.
  std::vector<TensorGroup> groups;
  std::array<PartTotals, kWeightPartCount> main_parts{};   ///< main model by part
  std::array<PartTotals, kWeightPartCount> draft_parts{};  ///< draft stages by part
  PartTotals main;                                         ///< main model
  PartTotals draft;                                        ///< all draft (MTP) stages
  std::int64_t draft_stages = 0;
  /// Active parameters per token: every parameter of the main model except the embedding and
  /// Engram tables (a token reads a few rows of them), and of the routed experts of each MoE layer only
  /// num_experts_per_tok of n_routed_experts (each expert tensor times top_k). Draft stages are
  /// not counted. On V4-Flash: 13.27 B, DeepSeek's "13B activated".
  std::int64_t active_params = 0;
  std::vector<Finding> findings;  ///< defaults assumed, estimates made

  std::int64_t total_bytes() const;  ///< main + draft
  std::int64_t total_tensors() const;
  std::int64_t total_params() const;
  const PartTotals& part(WeightPart p) const { return main_parts[static_cast<std::size_t>(p)]; }
  /// true when any part of main or draft is estimated
  bool estimated() const;
  /// The estimated parts, for a label: "compressor, indexer, engram, vision; draft stages" ("" when none).
  std::string estimated_reason() const;
};

/// The parameter counts DeepSeek publishes for a released model, to print next to ours.
struct PublishedParams {
  std::string_view model;      ///< "DeepSeek-V4-Flash"
  double total_billions = 0;   ///< main model (draft stages apart)
  double active_billions = 0;  ///< activated per token
  std::string_view source;     ///< where the figures are published
};
/// The published figures of the released model whose architecture `cfg` has (family, hidden
/// size, backbone layers and routed experts all equal), or nullopt.
std::optional<PublishedParams> published_params(const ModelConfig& cfg);

/// Lists the checkpoint's tensors and sums them. Throws Error(invalid_config) when a size does not
/// fit in 64 bits (a config beyond any real checkpoint), never a wrapped number.
WeightsReport compute_weights(const ModelConfig& cfg, const WeightsOptions& options = {});

}  // namespace mlaplan
