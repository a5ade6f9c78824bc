// The checkpoint's tensors from config.json alone. Rules: docs/weights.md, from the released
// checkpoints' tensor listings. Every size goes through checked 64-bit arithmetic.

#include "mlaplan/model/weights.hpp"

#include <algorithm>
#include <set>

#include "mlaplan/base/error.hpp"
#include "mlaplan/base/text.hpp"

namespace mlaplan {

std::string_view to_string(WeightPart p) {
  switch (p) {
    case WeightPart::embedding: return "embedding";
    case WeightPart::head: return "head";
    case WeightPart::attention: return "attention";
    case WeightPart::shared_experts: return "shared_experts";
    case WeightPart::routed_experts: return "routed_experts";
    case WeightPart::dense_ffn: return "dense_ffn";
    case WeightPart::compressor: return "compressor";
    case WeightPart::indexer: return "indexer";
    case WeightPart::mhc: return "mhc";
    case WeightPart::router: return "router";
    case WeightPart::norms: return "norms";
    case WeightPart::mtp: return "mtp";
    case WeightPart::engram: return "engram";
    case WeightPart::vision: return "vision";
  }
  return "?";
}

namespace {

struct DtypeName {
  WeightDtype dtype;
  std::string_view name;
  int bits;
};

constexpr DtypeName kDtypes[] = {
    {WeightDtype::BF16, "BF16", 16},      {WeightDtype::F32, "F32", 32},        {WeightDtype::F8_E4M3, "F8_E4M3", 8},
    {WeightDtype::F8_E8M0, "F8_E8M0", 8}, {WeightDtype::I8, "I8", 8},           {WeightDtype::I64, "I64", 64},
    {WeightDtype::F64, "F64", 64},        {WeightDtype::F16, "F16", 16},        {WeightDtype::F8_E5M2, "F8_E5M2", 8},
    {WeightDtype::I32, "I32", 32},        {WeightDtype::I16, "I16", 16},        {WeightDtype::U8, "U8", 8},
    {WeightDtype::U16, "U16", 16},        {WeightDtype::U32, "U32", 32},        {WeightDtype::U64, "U64", 64},
    {WeightDtype::BOOL, "BOOL", 8},       {WeightDtype::C64, "C64", 64},        {WeightDtype::F4, "F4", 4},
    {WeightDtype::F6_E2M3, "F6_E2M3", 6}, {WeightDtype::F6_E3M2, "F6_E3M2", 6},
};

const DtypeName* dtype_entry(WeightDtype d) {
  for (const auto& e : kDtypes) {
    if (e.dtype == d) return &e;
  }
  return nullptr;
}

}  // namespace

std::string_view to_string(WeightDtype d) {
  const DtypeName* e = dtype_entry(d);
  return e ? e->name : "?";
}

int dtype_bits(WeightDtype d) {
  const DtypeName* e = dtype_entry(d);
  return e ? e->bits : 8;
}

std::int64_t dtype_bytes(WeightDtype d) { return dtype_bits(d) % 8 == 0 ? dtype_bits(d) / 8 : 0; }

std::optional<WeightDtype> parse_weight_dtype(std::string_view name) {
  for (const auto& e : kDtypes) {
    if (e.name == name) return e.dtype;
  }
  return std::nullopt;
}

std::int64_t WeightsReport::total_bytes() const { return checked_add(main.bytes, draft.bytes, "checkpoint bytes"); }
std::int64_t WeightsReport::total_tensors() const {
  return checked_add(main.tensors, draft.tensors, "checkpoint tensors");
}
std::int64_t WeightsReport::total_params() const {
  return checked_add(main.params, draft.params, "checkpoint parameters");
}
std::int64_t TensorGroup::total_bytes() const {
  std::int64_t r = 0;
  if (__builtin_mul_overflow(bytes, count, &r)) checked_mul(bytes, count, "bytes of " + name);  // throws, naming it
  return r;
}

bool WeightsReport::estimated() const {
  for (std::size_t i = 0; i < kWeightPartCount; ++i) {
    if ((main_parts[i].estimated && main_parts[i].tensors > 0) ||
        (draft_parts[i].estimated && draft_parts[i].tensors > 0)) {
      return true;
    }
  }
  return false;
}

std::string WeightsReport::estimated_reason() const {
  std::string main_text;
  bool draft_estimated = false;
  for (std::size_t i = 0; i < kWeightPartCount; ++i) {
    if (main_parts[i].estimated && main_parts[i].tensors > 0) {
      main_text += (main_text.empty() ? "" : ", ") + std::string(to_string(static_cast<WeightPart>(i)));
    }
    if (draft_parts[i].estimated && draft_parts[i].tensors > 0) draft_estimated = true;
  }
  if (!draft_estimated) return main_text;
  return main_text + (main_text.empty() ? "" : "; ") + "draft stages";
}

namespace {

using Shape = std::vector<std::int64_t>;

/// How a linear layer is stored.
enum class Kind {
  bf16,     ///< no quantization_config: BF16 weight only
  fp8,      ///< F8_E4M3 weight + block scale (F8_E8M0 for ue8m0, F32 weight_scale_inv for V3.2)
  fp4,      ///< I8 [r, c/2] + F8_E8M0 [r, c/32]
  unknown,  ///< a scheme not known: not counted, report.known = false
};

class Builder {
 public:
  Builder(const ModelConfig& cfg, const WeightsOptions& opt, WeightsReport& r)
      : cfg_(cfg), c_(cfg.checkpoint), opt_(opt), r_(r) {
    r_.findings = c_.findings;
    r_.listed = opt.list_tensors;
    decide_kinds();
  }

  // ---- context of the tensors that follow ----
  void at(std::int64_t layer, bool draft) {
    layer_ = layer;
    draft_ = draft;
  }
  void estimate(WeightPart p) {
    (draft_ ? r_.draft_parts : r_.main_parts)[static_cast<std::size_t>(p)].estimated = true;
  }

  /// One tensor, or `count` tensors whose names replace "{e}" with 0..count-1.
  void add(std::string name_in, WeightDtype dt, Shape shape_in, WeightPart part, bool scale = false,
           std::int64_t count = 1, std::int64_t elems_per_byte_unit = 1) {
    // The group owns the name and shape (moved, not copied: a config of thousands of layers adds
    // tens of thousands of groups); an overflow message names the tensor, built only when one occurs.
    TensorGroup& g = r_.groups.emplace_back();
    g.name = std::move(name_in);
    g.shape = std::move(shape_in);
    const std::string& name = g.name;
    const Shape& shape = g.shape;
    const auto mul = [&name](std::int64_t a, std::int64_t b, const char* what) {
      std::int64_t r = 0;
      if (__builtin_mul_overflow(a, b, &r)) return checked_mul(a, b, what + name);  // throws, naming the tensor
      return r;
    };
    std::int64_t bytes = 0, params = 0;
    try {
      std::int64_t elems = 1;
      for (auto d : shape) elems = mul(elems, d, "elements of ");
      bytes = mul(elems, dtype_bytes(dt), "bytes of ");
      params = scale ? 0 : mul(elems, elems_per_byte_unit, "parameters of ");
      PartTotals& pt = (draft_ ? r_.draft_parts : r_.main_parts)[static_cast<std::size_t>(part)];
      PartTotals& all = draft_ ? r_.draft : r_.main;
      const std::int64_t cb = mul(bytes, count, "bytes of ");
      const std::int64_t cp = mul(params, count, "parameters of ");
      for (PartTotals* t : {&pt, &all}) {
        t->bytes = checked_add(t->bytes, cb, "checkpoint bytes");
        if (scale) t->scale_bytes = checked_add(t->scale_bytes, cb, "checkpoint bytes");
        t->tensors = checked_add(t->tensors, count, "checkpoint tensors");
        t->params = checked_add(t->params, cp, "checkpoint parameters");
      }
      if (!draft_ && part != WeightPart::embedding && part != WeightPart::engram) {
        // Routed experts: top_k of n_routed_experts are active, i.e. count tensors times top_k / count.
        const std::int64_t active =
            part == WeightPart::routed_experts
                ? checked_mul(params, std::min(count, c_.num_experts_per_tok), "active parameters")
                : cp;
        r_.active_params = checked_add(r_.active_params, active, "active parameters");
      }
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::invalid_config) throw;
      overflow(name, dt, shape, count, e.what());
    }
    g.dtype = dt;
    g.bytes = bytes;
    g.params = params;
    g.part = part;
    g.layer = layer_;
    g.draft = draft_;
    g.scale = scale;
    g.count = count;
    if (!r_.listed) return;
    if (static_cast<std::int64_t>(r_.tensors.size()) + count > opt_.max_listed_tensors) {
      r_.listed = false;
      r_.tensors.clear();
      r_.tensors.shrink_to_fit();
      r_.findings.push_back(Finding{"weights.not_listed", Severity::info,
                                    "more than " + std::to_string(opt_.max_listed_tensors) +
                                        " tensors: the list is left out, the totals are exact",
                                    "", ""});
      return;
    }
    const auto brace = name.find("{e}");
    for (std::int64_t e = 0; e < count; ++e) {
      TensorInfo t;
      t.name = brace == std::string::npos ? name : name.substr(0, brace) + std::to_string(e) + name.substr(brace + 3);
      t.dtype = dt;
      t.shape = shape;
      t.bytes = bytes;
      t.params = params;
      t.part = part;
      t.layer = layer_;
      t.draft = draft_;
      t.scale = scale;
      r_.tensors.push_back(std::move(t));
    }
  }

  /// A linear layer `base` [r, c] stored as `kind` (weight + scale).
  void linear(const std::string& base, std::int64_t rows, std::int64_t cols, WeightPart part, Kind kind,
              std::int64_t count = 1) {
    switch (kind) {
      case Kind::bf16: add(base + ".weight", WeightDtype::BF16, {rows, cols}, part, false, count); return;
      case Kind::fp8:
        add(base + ".weight", WeightDtype::F8_E4M3, {rows, cols}, part, false, count);
        if (v32_scales_) {
          add(base + ".weight_scale_inv", WeightDtype::F32, {ceil_div(rows, block_r_), ceil_div(cols, block_c_)}, part,
              true, count);
        } else {
          add(base + ".scale", WeightDtype::F8_E8M0, {ceil_div(rows, block_r_), ceil_div(cols, block_c_)}, part, true,
              count);
        }
        return;
      case Kind::fp4:
        if (cols % 32 != 0) {
          unknown("an fp4 tensor " + base + " has " + std::to_string(cols) +
                  " columns, not a multiple of its 32-element scale groups");
          return;
        }
        add(base + ".weight", WeightDtype::I8, {rows, cols / 2}, part, false, count, 2);
        add(base + ".scale", WeightDtype::F8_E8M0, {rows, cols / 32}, part, true, count);
        return;
      case Kind::unknown: return;
    }
  }

  void unknown(const std::string& reason) {
    if (r_.known) r_.reason = reason;
    r_.known = false;
  }

  /// A size past 64 bits: the config, the tensor and the fields that size the checkpoint.
  [[noreturn]] void overflow(const std::string& name, WeightDtype dt, const Shape& shape, std::int64_t count,
                             const std::string& what) const {
    std::string dims;
    for (std::size_t i = 0; i < shape.size(); ++i) dims += (i ? ", " : "") + std::to_string(shape[i]);
    std::string fields = "num_hidden_layers " + std::to_string(cfg_.num_hidden_layers) + ", hidden_size " +
                         std::to_string(c_.hidden_size) + ", vocab_size " + std::to_string(c_.vocab_size) +
                         ", moe_intermediate_size " + std::to_string(c_.moe_intermediate_size) + ", n_routed_experts " +
                         std::to_string(c_.n_routed_experts) + ", q_lora_rank " + std::to_string(c_.q_lora_rank) +
                         ", num_attention_heads " + std::to_string(cfg_.num_attention_heads) + ", head_dim " +
                         std::to_string(cfg_.head_dim);
    if (cfg_.family == Family::deepseek_v32) fields += ", intermediate_size " + std::to_string(c_.intermediate_size);
    throw_config(printable(cfg_.file, kQuotedPathMaxBytes) + ": the checkpoint this config describes does not fit " +
                 "64-bit byte counts: tensor " + name + " (" + std::string(to_string(dt)) + " [" + dims + "]" +
                 (count > 1 ? " x " + std::to_string(count) : "") + "): " + what + "; its sizes come from the fields " +
                 (cfg_.field_prefix.empty() ? std::string() : "under " + cfg_.field_prefix + " ") + fields);
  }

  Kind linear_kind() const { return linear_; }
  Kind expert_kind() const { return expert_; }
  void set_v32_scales() { v32_scales_ = true; }

 private:
  void decide_kinds() {
    if (!c_.has_quantization_config) {
      linear_ = Kind::bf16;
      r_.findings.push_back(Finding{"weights.bf16", Severity::info,
                                    "no quantization_config: every linear weight is taken as BF16",
                                    "/quantization_config", ""});
    } else if (c_.quant_method != "fp8") {
      linear_ = Kind::unknown;
      unknown("quantization_config.quant_method = \"" + printable(c_.quant_method, 64) +
              "\" is not a scheme mla-plan knows (known: fp8); its tensors are not counted");
    } else if (!c_.fmt.empty() && c_.fmt != "e4m3") {
      linear_ = Kind::unknown;
      unknown("quantization_config.fmt = \"" + printable(c_.fmt, 64) + "\" is not known (known: e4m3)");
    } else if (cfg_.family != Family::deepseek_v32 && c_.scale_fmt != "ue8m0") {
      linear_ = Kind::unknown;
      unknown("quantization_config.scale_fmt = \"" + printable(c_.scale_fmt, 64) + "\" is not known for " +
              std::string(to_string(cfg_.family)) + " (known: ue8m0)");
    } else if (c_.weight_block_size.size() != 2) {
      linear_ = Kind::unknown;
      unknown("quantization_config.weight_block_size is missing; the fp8 scale shape follows from it");
    } else {
      linear_ = Kind::fp8;
      block_r_ = c_.weight_block_size[0];
      block_c_ = c_.weight_block_size[1];
    }
    if (c_.expert_dtype.empty()) {
      expert_ = linear_;
      if (cfg_.family != Family::deepseek_v32 && linear_ != Kind::unknown) {
        r_.findings.push_back(Finding{"weights.expert_dtype", Severity::warning,
                                      "no expert_dtype: routed experts are taken as stored like the other "
                                      "linear layers",
                                      "", ""});
      }
    } else if (c_.expert_dtype == "fp4") {
      expert_ = linear_ == Kind::unknown ? Kind::unknown : Kind::fp4;
    } else if (c_.expert_dtype == "fp8" && linear_ == Kind::fp8) {
      expert_ = Kind::fp8;
    } else {
      expert_ = Kind::unknown;
      unknown(c_.expert_dtype_pointer.substr(1) + " = \"" + printable(c_.expert_dtype, 64) +
              "\" is not a routed-expert storage mla-plan knows (known: fp4, fp8); routed experts are not counted");
    }
  }

  const ModelConfig& cfg_;
  const CheckpointFields& c_;
  const WeightsOptions& opt_;
  WeightsReport& r_;
  Kind linear_ = Kind::bf16;
  Kind expert_ = Kind::bf16;
  std::int64_t block_r_ = 128;
  std::int64_t block_c_ = 128;
  bool v32_scales_ = false;
  std::int64_t layer_ = -1;
  bool draft_ = false;
};

using P = WeightPart;
constexpr auto BF16 = WeightDtype::BF16;
constexpr auto F32 = WeightDtype::F32;

// ------------------------------------------------------------------------------------------
// V4 / V4.1

/// Compressor overlap factor: 2 when the ratio is 4 (overlapping windows), else 1 [C for V4].
std::int64_t coff(std::int64_t ratio) { return ratio == 4 ? 2 : 1; }

void v4_layer(Builder& b, const ModelConfig& cfg, const std::string& p, std::int64_t i, bool has_compressor,
              bool has_indexer, std::int64_t experts) {
  const CheckpointFields& c = cfg.checkpoint;
  const std::int64_t H = c.hidden_size, m = c.hc_mult, nh = cfg.num_attention_heads, hd = cfg.head_dim;
  const std::int64_t ql = c.q_lora_rank, og = c.o_groups, ol = c.o_lora_rank, MI = c.moe_intermediate_size;
  const std::int64_t E = experts;
  // Draft stages past the ratios the config reader kept are window-only (ratio 0).
  const std::int64_t ratio =
      i < static_cast<std::int64_t>(cfg.compress_ratios.size()) ? cfg.compress_ratios[static_cast<std::size_t>(i)] : 0;
  const Kind k8 = b.linear_kind();
  b.add(p + "attn_norm.weight", BF16, {H}, P::norms);
  b.add(p + "ffn_norm.weight", BF16, {H}, P::norms);
  const std::int64_t mix = checked_mul(2 + m, m, "hc_mult");
  const std::int64_t mh = checked_mul(m, H, "hc_mult x hidden_size");
  for (const char* x : {"attn", "ffn"}) {
    b.add(p + "hc_" + x + "_fn", F32, {mix, mh}, P::mhc);
    b.add(p + "hc_" + x + "_scale", F32, {3}, P::mhc);
    b.add(p + "hc_" + x + "_base", F32, {mix}, P::mhc);
  }
  b.add(p + "attn.q_norm.weight", BF16, {ql}, P::attention);
  b.add(p + "attn.kv_norm.weight", BF16, {hd}, P::attention);
  b.add(p + "attn.attn_sink", F32, {nh}, P::attention);
  const std::int64_t q_out = checked_mul(nh, hd, "num_attention_heads x head_dim");
  const std::int64_t o_mid = checked_mul(og, ol, "o_groups x o_lora_rank");
  b.linear(p + "attn.wq_a", ql, H, P::attention, k8);
  b.linear(p + "attn.wq_b", q_out, ql, P::attention, k8);
  b.linear(p + "attn.wkv", hd, H, P::attention, k8);
  b.linear(p + "attn.wo_a", o_mid, q_out / og, P::attention, k8);
  b.linear(p + "attn.wo_b", H, o_mid, P::attention, k8);
  b.add(p + "ffn.gate.weight", BF16, {E, H}, P::router);
  if (i >= c.num_hash_layers) {
    b.add(p + "ffn.gate.bias", F32, {E}, P::router);
  } else {
    b.add(p + "ffn.gate.tid2eid", WeightDtype::I64, {c.vocab_size, c.num_experts_per_tok}, P::router);
  }
  if (c.n_shared_experts > 0) {
    const std::int64_t SI = checked_mul(MI, c.n_shared_experts, "shared expert width");
    b.linear(p + "ffn.shared_experts.w1", SI, H, P::shared_experts, k8);
    b.linear(p + "ffn.shared_experts.w2", H, SI, P::shared_experts, k8);
    b.linear(p + "ffn.shared_experts.w3", SI, H, P::shared_experts, k8);
  }
  // Checkpoint order interleaves w1, w2, w3 per expert; the names are what matter.
  b.linear(p + "ffn.experts.{e}.w1", MI, H, P::routed_experts, b.expert_kind(), E);
  b.linear(p + "ffn.experts.{e}.w2", H, MI, P::routed_experts, b.expert_kind(), E);
  b.linear(p + "ffn.experts.{e}.w3", MI, H, P::routed_experts, b.expert_kind(), E);
  if (has_compressor && ratio > 0) {
    const std::int64_t w = checked_mul(coff(ratio), hd, "compressor width");
    b.add(p + "attn.compressor.ape", F32, {ratio, w}, P::compressor);
    b.add(p + "attn.compressor.wkv.weight", BF16, {w, H}, P::compressor);
    b.add(p + "attn.compressor.wgate.weight", BF16, {w, H}, P::compressor);
    b.add(p + "attn.compressor.norm.weight", BF16, {hd}, P::compressor);
  }
  if (has_indexer && ratio > 0) {
    const std::int64_t ihd = cfg.index_head_dim, inh = cfg.index_n_heads;
    const std::int64_t w = checked_mul(coff(ratio), ihd, "indexer compressor width");
    b.linear(p + "attn.indexer.wq_b", checked_mul(inh, ihd, "index_n_heads x index_head_dim"), ql, P::indexer, k8);
    b.add(p + "attn.indexer.weights_proj.weight", BF16, {inh, H}, P::indexer);
    b.add(p + "attn.indexer.compressor.ape", F32, {ratio, w}, P::indexer);
    b.add(p + "attn.indexer.compressor.wkv.weight", BF16, {w, H}, P::indexer);
    b.add(p + "attn.indexer.compressor.wgate.weight", BF16, {w, H}, P::indexer);
    b.add(p + "attn.indexer.compressor.norm.weight", BF16, {ihd}, P::indexer);
  }
}

void hc_head(Builder& b, const CheckpointFields& c, const std::string& p) {
  b.add(p + "hc_head_fn", F32, {c.hc_mult, checked_mul(c.hc_mult, c.hidden_size, "hc_mult x hidden_size")}, P::mhc);
  b.add(p + "hc_head_scale", F32, {1}, P::mhc);
  b.add(p + "hc_head_base", F32, {c.hc_mult}, P::mhc);
}

void build_v4(Builder& b, const ModelConfig& cfg, WeightsReport& r) {
  const CheckpointFields& c = cfg.checkpoint;
  const bool v41 = cfg.family == Family::deepseek_v41;
  const std::int64_t H = c.hidden_size, n = cfg.num_hidden_layers;
  b.at(-1, false);
  b.add("embed.weight", BF16, {c.vocab_size, H}, P::embedding);
  b.add("head.weight", BF16, {c.vocab_size, H}, P::head);
  b.add("norm.weight", BF16, {H}, P::norms);
  if (!v41) hc_head(b, c, "");
  const std::set<std::int64_t> kv_src(cfg.kv_source_layer_ids.begin(), cfg.kv_source_layer_ids.end());
  const std::set<std::int64_t> idx_src(cfg.index_source_layer_ids.begin(), cfg.index_source_layer_ids.end());
  for (std::int64_t i = 0; i < n; ++i) {
    b.at(i, false);
    const std::int64_t ratio = cfg.compress_ratios[static_cast<std::size_t>(i)];
    const bool comp = v41 ? kv_src.count(i) > 0 : ratio > 0;
    const bool idx = v41 ? idx_src.count(i) > 0 : ratio == 4;
    v4_layer(b, cfg, "layers." + std::to_string(i) + ".", i, comp, idx, c.n_routed_experts);
  }
  if (v41) {
    // Compressor and indexer shapes for ratios 1 and 2 follow V4's rule (coff 1): not in a listing.
    b.at(-1, false);
    b.estimate(P::compressor);
    b.estimate(P::indexer);
    for (std::size_t k = 0; k < c.engram_layer_ids.size(); ++k) {
      const std::int64_t id = c.engram_layer_ids[k], rows = c.engram_num_embeddings[k];
      b.at(id, false);
      const std::string p = "layers." + std::to_string(id) + ".engram.embed";
      b.add(p + ".weight", WeightDtype::F8_E4M3, {rows, c.engram_head_dim}, P::engram);
      b.add(p + ".scale", WeightDtype::F8_E8M0, {rows, ceil_div(c.engram_head_dim, 32)}, P::engram, true);
    }
    b.at(-1, false);
    if (!c.engram_layer_ids.empty()) {
      b.estimate(P::engram);  // the tables only; Engram's small projections are not listed
      r.findings.push_back(Finding{"weights.estimated", Severity::info,
                                   "Engram: only the embedding tables are counted (their projections are not "
                                   "in the contract)",
                                   cfg.field_prefix + "/engram_layer_ids", ""});
    }
    if (c.has_vision) {
      // A ViT: patch embedding, per layer qkv + proj (with biases) + SwiGLU MLP + 2 norms, and a
      // projector from downsample_ratio^2 patches to hidden_size. Shapes assumed, not listed [U].
      b.estimate(P::vision);
      const std::int64_t vh = c.vision_hidden_size, vi = c.vision_intermediate_size, ps = c.vision_patch_size;
      b.add("vision.patch_embed.weight", BF16, {vh, checked_mul(3, checked_mul(ps, ps, "patch"), "patch")}, P::vision);
      for (std::int64_t l = 0; l < c.vision_layers; ++l) {
        const std::string p = "vision.blocks." + std::to_string(l) + ".";
        b.add(p + "norm1.weight", BF16, {vh}, P::vision);
        b.add(p + "norm2.weight", BF16, {vh}, P::vision);
        b.add(p + "attn.qkv.weight", BF16, {checked_mul(3, vh, "vision qkv"), vh}, P::vision);
        b.add(p + "attn.qkv.bias", BF16, {checked_mul(3, vh, "vision qkv")}, P::vision);
        b.add(p + "attn.proj.weight", BF16, {vh, vh}, P::vision);
        b.add(p + "attn.proj.bias", BF16, {vh}, P::vision);
        b.add(p + "mlp.w1.weight", BF16, {vi, vh}, P::vision);
        b.add(p + "mlp.w2.weight", BF16, {vh, vi}, P::vision);
        b.add(p + "mlp.w3.weight", BF16, {vi, vh}, P::vision);
      }
      const std::int64_t ds = c.vision_downsample_ratio;
      b.add("vision.projector.weight", BF16, {H, checked_mul(vh, checked_mul(ds, ds, "downsample"), "projector")},
            P::vision);
    }
  }
  // Draft stages: V4.0's list longer than the layers says how many; else (and always for V4.1, whose
  // list is padded to num_nextn_predict_layers) num_nextn_predict_layers.
  std::int64_t stages = cfg.num_draft_layers;
  if (cfg.family != Family::deepseek_v41 && c.compress_ratios_entries > n && c.compress_ratios_entries - n != stages) {
    r.findings.push_back(Finding{"weights.draft_stages", Severity::info,
                                 "compress_ratios has " + std::to_string(c.compress_ratios_entries) + " entries for " +
                                     std::to_string(n) + " layers: the checkpoint holds " +
                                     std::to_string(c.compress_ratios_entries - n) +
                                     " draft stages (num_nextn_predict_layers says " + std::to_string(stages) + ")",
                                 cfg.field_prefix + "/compress_ratios", ""});
    stages = c.compress_ratios_entries - n;
  }
  r.draft_stages = stages;
  for (std::int64_t k = 0; k < stages; ++k) {
    const std::int64_t i = n + k;
    b.at(i, true);
    const std::string p = "mtp." + std::to_string(k) + ".";
    // ratio 0: no compressor, no indexer. V4.1's DSpark stages route over dspark_n_routed_experts.
    const std::int64_t E = v41 && c.dspark_n_routed_experts > 0 ? c.dspark_n_routed_experts : c.n_routed_experts;
    v4_layer(b, cfg, p, i, false, false, E);
    b.linear(p + "e_proj", H, H, P::mtp, b.linear_kind());
    b.linear(p + "h_proj", H, H, P::mtp, b.linear_kind());
    b.add(p + "enorm.weight", BF16, {H}, P::mtp);
    b.add(p + "hnorm.weight", BF16, {H}, P::mtp);
    b.add(p + "norm.weight", BF16, {H}, P::mtp);
    if (!v41) hc_head(b, c, p);
  }
  // The draft scheme decides whether the draft stages are exact: plain MTP stages are in the
  // listing the V4 rules reproduce to the byte; DSpark stages (V4.1, and V4.0 re-releases with a
  // dspark_block_size) add small heads the contract does not list (within about 1% [C, U]).
  const bool dspark = v41 || cfg.dspark_block_size > 0;
  if (dspark && stages > 0) {
    for (std::size_t p = 0; p < kWeightPartCount; ++p) r.draft_parts[p].estimated = true;
    r.findings.push_back(Finding{"weights.estimated", Severity::info,
                                 std::string(v41 ? "V4.1 draft stages are counted as plain MTP stages with "
                                                   "dspark_n_routed_experts routed experts"
                                                 : "DSpark draft stages (dspark_block_size) are counted as plain "
                                                   "MTP stages") +
                                     "; DSpark's extra heads are not listed",
                                 cfg.field_prefix + "/num_nextn_predict_layers", ""});
  }
}

// ------------------------------------------------------------------------------------------
// V3.2

void v32_layer(Builder& b, const ModelConfig& cfg, const std::string& p, std::int64_t i) {
  const CheckpointFields& c = cfg.checkpoint;
  const std::int64_t H = c.hidden_size, nh = cfg.num_attention_heads, ql = c.q_lora_rank;
  const std::int64_t kvl = cfg.kv_lora_rank, rope = cfg.qk_rope_head_dim, nope = c.qk_nope_head_dim;
  const std::int64_t vd = c.v_head_dim, MI = c.moe_intermediate_size, E = c.n_routed_experts;
  const Kind k8 = b.linear_kind();
  b.add(p + "input_layernorm.weight", BF16, {H}, P::norms);
  b.add(p + "post_attention_layernorm.weight", BF16, {H}, P::norms);
  b.linear(p + "self_attn.q_a_proj", ql, H, P::attention, k8);
  b.add(p + "self_attn.q_a_layernorm.weight", BF16, {ql}, P::attention);
  b.linear(p + "self_attn.q_b_proj", checked_mul(nh, nope + rope, "q_b_proj"), ql, P::attention, k8);
  b.linear(p + "self_attn.kv_a_proj_with_mqa", kvl + rope, H, P::attention, k8);
  b.add(p + "self_attn.kv_a_layernorm.weight", BF16, {kvl}, P::attention);
  b.linear(p + "self_attn.kv_b_proj", checked_mul(nh, nope + vd, "kv_b_proj"), kvl, P::attention, k8);
  b.linear(p + "self_attn.o_proj", H, checked_mul(nh, vd, "o_proj"), P::attention, k8);
  const std::int64_t inh = cfg.index_n_heads, ihd = cfg.index_head_dim;
  b.linear(p + "self_attn.indexer.wq_b", checked_mul(inh, ihd, "indexer wq_b"), ql, P::indexer, k8);
  b.linear(p + "self_attn.indexer.wk", ihd, H, P::indexer, k8);
  b.add(p + "self_attn.indexer.k_norm.weight", BF16, {ihd}, P::indexer);
  b.add(p + "self_attn.indexer.k_norm.bias", BF16, {ihd}, P::indexer);
  b.add(p + "self_attn.indexer.weights_proj.weight", BF16, {inh, H}, P::indexer);
  if (i < c.first_k_dense_replace) {
    const std::int64_t I = c.intermediate_size;
    b.linear(p + "mlp.gate_proj", I, H, P::dense_ffn, k8);
    b.linear(p + "mlp.up_proj", I, H, P::dense_ffn, k8);
    b.linear(p + "mlp.down_proj", H, I, P::dense_ffn, k8);
    return;
  }
  b.add(p + "mlp.gate.weight", BF16, {E, H}, P::router);
  b.add(p + "mlp.gate.e_score_correction_bias", F32, {E}, P::router);
  if (c.n_shared_experts > 0) {
    const std::int64_t SI = checked_mul(MI, c.n_shared_experts, "shared expert width");
    b.linear(p + "mlp.shared_experts.gate_proj", SI, H, P::shared_experts, k8);
    b.linear(p + "mlp.shared_experts.up_proj", SI, H, P::shared_experts, k8);
    b.linear(p + "mlp.shared_experts.down_proj", H, SI, P::shared_experts, k8);
  }
  b.linear(p + "mlp.experts.{e}.gate_proj", MI, H, P::routed_experts, b.expert_kind(), E);
  b.linear(p + "mlp.experts.{e}.up_proj", MI, H, P::routed_experts, b.expert_kind(), E);
  b.linear(p + "mlp.experts.{e}.down_proj", H, MI, P::routed_experts, b.expert_kind(), E);
}

void build_v32(Builder& b, const ModelConfig& cfg, WeightsReport& r) {
  const CheckpointFields& c = cfg.checkpoint;
  const std::int64_t H = c.hidden_size, n = cfg.num_hidden_layers;
  b.set_v32_scales();
  b.at(-1, false);
  b.add("model.embed_tokens.weight", BF16, {c.vocab_size, H}, P::embedding);
  b.add("model.norm.weight", BF16, {H}, P::norms);
  b.add("lm_head.weight", BF16, {c.vocab_size, H}, P::head);
  for (std::int64_t i = 0; i < n; ++i) {
    b.at(i, false);
    v32_layer(b, cfg, "model.layers." + std::to_string(i) + ".", i);
  }
  r.draft_stages = cfg.num_draft_layers;
  for (std::int64_t k = 0; k < cfg.num_draft_layers; ++k) {
    const std::int64_t i = n + k;
    b.at(i, true);
    const std::string p = "model.layers." + std::to_string(i) + ".";
    v32_layer(b, cfg, p, i);
    b.add(p + "embed_tokens.weight", BF16, {c.vocab_size, H}, P::embedding);  // its own copy
    b.add(p + "enorm.weight", BF16, {H}, P::mtp);
    b.add(p + "hnorm.weight", BF16, {H}, P::mtp);
    b.linear(p + "eh_proj", H, checked_mul(2, H, "eh_proj"), P::mtp, b.linear_kind());
    b.add(p + "shared_head.norm.weight", BF16, {H}, P::mtp);
    b.add(p + "shared_head.head.weight", BF16, {c.vocab_size, H}, P::head);  // its own copy
  }
  // docs/weights.md: V3/V3.2 totals are derived only, not checked against a listing [U].
  for (std::size_t p = 0; p < kWeightPartCount; ++p) r.main_parts[p].estimated = r.draft_parts[p].estimated = true;
  r.findings.push_back(Finding{"weights.estimated", Severity::info,
                               "deepseek_v32: the tensor list follows V3's layout plus an indexer per layer; "
                               "not checked against a released listing",
                               "", ""});
}

}  // namespace

std::optional<PublishedParams> published_params(const ModelConfig& cfg) {
  struct Known {
    Family family;
    std::int64_t hidden, layers, experts;
    PublishedParams p;
  };
  static const Known kKnown[] = {
      {Family::deepseek_v4,
       4096,
       43,
       256,
       {"DeepSeek-V4-Flash", 284, 13, "DeepSeek's model card: 284B total, 13B activated"}},
      {Family::deepseek_v32,
       7168,
       61,
       256,
       {"DeepSeek-V3 / V3.2", 671, 37, "DeepSeek's model card: 671B main model (+14B MTP), 37B activated"}},
  };
  for (const auto& k : kKnown) {
    if (cfg.family == k.family && cfg.checkpoint.hidden_size == k.hidden && cfg.num_hidden_layers == k.layers &&
        cfg.checkpoint.n_routed_experts == k.experts) {
      return k.p;
    }
  }
  return std::nullopt;
}

WeightsReport compute_weights(const ModelConfig& cfg, const WeightsOptions& options) {
  WeightsReport r;
  r.groups.reserve(static_cast<std::size_t>(cfg.total_layers()) * 48 + 16);
  Builder b(cfg, options, r);
  switch (cfg.family) {
    case Family::deepseek_v4:
    case Family::deepseek_v41: build_v4(b, cfg, r); break;
    case Family::deepseek_v32: build_v32(b, cfg, r); break;
  }
  return r;
}

}  // namespace mlaplan
