#include "mlaplan/rules/backends.hpp"

#include <algorithm>
#include <array>
#include <cctype>

#include "mlaplan/base/error.hpp"
#include "mlaplan/base/suggest.hpp"
#include "mlaplan/base/text.hpp"

namespace mlaplan {
namespace {

// vLLM's texts (docs/rules.md gives the file of each).
constexpr std::string_view kFp8LayoutOnly =
    "DeepseekV4 fp8_ds_mla layout only supports fp8 kv-cache, got {d}. Please set --kv-cache-dtype fp8 or select a "
    "backend that supports bfloat16 KV cache.";
constexpr std::string_view kNvfp4NeedsFused =
    "nvfp4_ds_mla requires the FlashMLA fused attention layer (attention_config.dsv4_fused_attention).";
constexpr std::string_view kNvfp4Sm100 = "nvfp4_ds_mla needs SM100 (FlashMLA V4.1 fp8/fp4 sparse decode)";
constexpr std::string_view kNvfp4FlashMlaOnly = "nvfp4_ds_mla is a FlashMLA-only DeepSeek V4.1 KV cache format.";
constexpr std::string_view kNvfp4V41Only =
    "nvfp4_ds_mla is the DeepSeek V4.1 KV cache format; DeepSeek V4.0 and V3.2 "
    "store fp8_ds_mla";
constexpr std::string_view kFlashInferNoDsMla =
    "FLASHINFER_MLA_SPARSE_DSV4 SM10x uses the plain per-tensor FP8 KV layout, not fp8_ds_mla";
constexpr std::string_view kNotSupported = "kv_cache_dtype not supported";
constexpr std::string_view kFlashMlaNoDtype = "FlashMLA doesn't support {d}";
constexpr std::string_view kFusedNeedsLayout =
    "dsv4_fused_attention=True is unsupported: needs the fp8_ds_mla or "
    "nvfp4_ds_mla KV cache layout";

constexpr std::string_view kTritonNeedsDsMla = "TRITON_MLA_SPARSE_DSV41 requires fp8_ds_mla KV cache";
constexpr std::string_view kFlashMlaHeads =
    "DeepseekV4 FlashMLA does not support {n} heads (FP8 decode kernel requires h_q in {64, 128}).";

constexpr std::array<std::string_view, 7> kKvValues{"auto",     "bfloat16",   "fp8",         "fp8_e4m3",
                                                    "fp8_e5m2", "fp8_ds_mla", "nvfp4_ds_mla"};

constexpr std::string_view kMegaName = "FLASHMLA_MEGA_ATTN_DSV41";
constexpr std::string_view kTritonName = "TRITON_MLA_SPARSE_DSV41";

// Every name; the last two only where the release has them (release_has_backend_name).
constexpr std::array<std::string_view, 9> kBackendNames{
    "FLASHMLA_SPARSE_DSV41",
    "FLASHMLA_SPARSE_DSV4",
    "FLASHMLA_SPARSE",
    "FLASHINFER_MLA_SPARSE_DSV41",
    "FLASHINFER_MLA_SPARSE_DSV4",
    "FLASHINFER_MLA_SPARSE",
    "FLASHINFER_MLA_SPARSE_SM120",
    kMegaName,
    kTritonName,
};

using K = KvCacheDtype;

std::vector<BackendInfo> make_catalogue() {
  std::vector<BackendInfo> c;
  c.push_back(
      BackendInfo{BackendId::flashmla_sparse_dsv41,
                  "flashmla_sparse_dsv41",
                  "FLASHMLA_SPARSE_DSV41",
                  "",
                  "DeepseekV4FlashMLAAttention",
                  "vllm/models/deepseek_v4_1/nvidia/flashmla.py, sparse_mla.py",
                  {Family::deepseek_v41},
                  {9, 10},
                  {{"auto", K::fp8_ds_mla, {}, 0},
                   {"fp8", K::fp8_ds_mla, {}, 0},
                   {"fp8_ds_mla", K::fp8_ds_mla, {}, 0},
                   {"fp8_e4m3", K::fp8_ds_mla, {}, 0},
                   {"fp8_e5m2", K::fp8_ds_mla, {}, 0},
                   {"nvfp4_ds_mla", std::nullopt, kNvfp4NeedsFused, 0},
                   {"bfloat16", std::nullopt, kFp8LayoutOnly, 0}},
                  {64, 128},
                  "DeepseekV4 FlashMLA does not support {n} heads (FP8 decode kernel requires h_q in {64, 128}).",
                  "FlashMLA split-KV sparse decode, one tile-scheduler plan per layer type",
                  true,

                  false,

                  ""});
  c.push_back(BackendInfo{
      BackendId::flashmla_sparse_dsv41_fused,
      "flashmla_sparse_dsv41_fused",
      "FLASHMLA_SPARSE_DSV41",
      "fused",
      "DeepseekV4FlashMLAFusedAttention",
      "vllm/models/deepseek_v4_1/nvidia/flashmla_fused.py",
      {Family::deepseek_v41},
      {10},
      {{"auto", K::fp8_ds_mla, {}, 0},
       {"fp8", K::fp8_ds_mla, {}, 0},
       {"fp8_ds_mla", K::fp8_ds_mla, {}, 0},
       {"nvfp4_ds_mla", K::nvfp4_ds_mla, {}, 10},
       {"bfloat16", std::nullopt, kFusedNeedsLayout, 0},
       {"fp8_e4m3", std::nullopt, kFusedNeedsLayout, 0},
       {"fp8_e5m2", std::nullopt, kFusedNeedsLayout, 0}},
      {64, 128},
      "DeepseekV4 FlashMLA does not support {n} heads (FP8 decode kernel requires h_q in {64, 128}).",
      "FlashMLA fused sparse decode (Q RoPE, attention, inverse RoPE, FP8 cast in one kernel; no tile plan while "
      "decode tokens >= dsv4_fused_decode_min_tokens, default 0)",
      false,

      false,

      ""});
  c.push_back(BackendInfo{
      BackendId::flashinfer_mla_sparse_dsv41,
      "flashinfer_mla_sparse_dsv41",
      "FLASHINFER_MLA_SPARSE_DSV41",
      "SM10x",
      "DeepseekV4FlashInferMLAAttention",
      "vllm/models/deepseek_v4_1/nvidia/flashinfer_sparse.py",
      {Family::deepseek_v41},
      {10},
      {{"auto", K::bfloat16, {}, 0},
       {"bfloat16", K::bfloat16, {}, 0},
       {"fp8", K::fp8_e4m3, {}, 0},
       {"fp8_e4m3", K::fp8_e4m3, {}, 0},
       {"fp8_ds_mla", std::nullopt, kFlashInferNoDsMla, 0},
       {"nvfp4_ds_mla", std::nullopt, kNvfp4FlashMlaOnly, 0},
       {"fp8_e5m2", std::nullopt, kNotSupported, 0}},
      {8, 16, 32, 64, 128},
      "DeepseekV4 FlashInfer MLA Sparse does not support {n} heads (sparse MLA kernel requires h_q in {8, 16, 32, 64, "
      "128}).",
      "FlashInfer TRTLLM-gen sparse MLA decode over plain rows",
      false,

      false,

      ""});
  c.push_back(BackendInfo{
      BackendId::flashinfer_mla_sparse_sm120,
      "flashinfer_mla_sparse_sm120",
      "FLASHINFER_MLA_SPARSE_DSV41",
      "SM120 class",
      "DeepseekV4FlashInferSM120Attention",
      "vllm/models/deepseek_v4_1/nvidia/flashinfer_sparse.py",
      {Family::deepseek_v41, Family::deepseek_v4},
      {12},
      {{"auto", K::fp8_ds_mla, {}, 0},
       {"fp8", K::fp8_ds_mla, {}, 0},
       {"fp8_e4m3", K::fp8_ds_mla, {}, 0},
       {"fp8_ds_mla", K::fp8_ds_mla, {}, 0},
       {"nvfp4_ds_mla", std::nullopt, kNvfp4FlashMlaOnly, 0},
       {"bfloat16", std::nullopt, kNotSupported, 0},
       {"fp8_e5m2", std::nullopt, kNotSupported, 0}},
      {8, 16, 32, 64, 128},
      "DeepseekV4 FlashInfer MLA Sparse does not support {n} heads (sparse MLA kernel requires h_q in {8, 16, 32, 64, "
      "128}).",
      "FlashInfer SM120 sparse MLA decode over fp8_ds_mla pages of 64 rows",
      false,

      false,

      ""});
  c.push_back(
      BackendInfo{BackendId::flashmla_sparse_dsv4,
                  "flashmla_sparse_dsv4",
                  "FLASHMLA_SPARSE_DSV4",
                  "",
                  "DeepseekV4FlashMLAAttention (V4.0)",
                  "vllm/models/deepseek_v4/nvidia/flashmla.py",
                  {Family::deepseek_v4},
                  {9, 10},
                  {{"auto", K::fp8_ds_mla, {}, 0},
                   {"fp8", K::fp8_ds_mla, {}, 0},
                   {"fp8_ds_mla", K::fp8_ds_mla, {}, 0},
                   {"fp8_e4m3", K::fp8_ds_mla, {}, 0},
                   {"fp8_e5m2", K::fp8_ds_mla, {}, 0},
                   {"bfloat16", std::nullopt, kFp8LayoutOnly, 0},
                   {"nvfp4_ds_mla", std::nullopt, kNvfp4V41Only, 0}},
                  {64, 128},
                  "DeepseekV4 FlashMLA does not support {n} heads (FP8 decode kernel requires h_q in {64, 128}).",
                  "FlashMLA split-KV sparse decode, one tile-scheduler plan per layer type",
                  true,

                  false,

                  ""});
  c.push_back(BackendInfo{BackendId::flashmla_sparse,
                          "flashmla_sparse",
                          "FLASHMLA_SPARSE",
                          "",
                          "FlashMLASparseBackend",
                          "vllm/v1/attention/backends/mla/flashmla_sparse.py",
                          {Family::deepseek_v32},
                          {9, 10},
                          {{"auto", K::fp8_ds_mla, {}, 0},
                           {"fp8", K::fp8_ds_mla, {}, 0},
                           {"fp8_ds_mla", K::fp8_ds_mla, {}, 0},
                           {"bfloat16", std::nullopt, kFlashMlaNoDtype, 0},
                           {"fp8_e4m3", std::nullopt, kFlashMlaNoDtype, 0},
                           {"fp8_e5m2", std::nullopt, kFlashMlaNoDtype, 0},
                           {"nvfp4_ds_mla", std::nullopt, kNvfp4V41Only, 0}},
                          {64, 128},
                          "FlashMLA sparse does not support {n} heads (the decode kernel requires h_q in {64, 128}).",
                          "FlashMLA split-KV sparse decode over 656-byte rows, one tile-scheduler plan",
                          true,

                          false,

                          ""});
  // vLLM 0.31. Mega attention subclasses the FlashMLA class (its heads pad to 64 / 128, its blocks
  // are FlashMLA's); an unspecific --kv-cache-dtype becomes its packed record, nvfp4_ds_mla
  // (packed_kv_cache_dtype). Its decode takes no tile-scheduler metadata and has no fallback.
  c.push_back(
      BackendInfo{BackendId::flashmla_mega_attn_dsv41,
                  "flashmla_mega_attn_dsv41",
                  kMegaName,
                  "",
                  "DeepseekV4MegaAttnAttention",
                  "vllm/models/deepseek_v41/nvidia/flash_mla_mega_attn.py",
                  {Family::deepseek_v41},
                  {10},
                  {{"auto", K::nvfp4_ds_mla, {}, 0},
                   {"fp8", K::nvfp4_ds_mla, {}, 0},
                   {"fp8_e4m3", K::nvfp4_ds_mla, {}, 0},
                   {"fp8_e5m2", K::nvfp4_ds_mla, {}, 0},
                   {"fp8_ds_mla", K::fp8_ds_mla, {}, 0},
                   {"nvfp4_ds_mla", K::nvfp4_ds_mla, {}, 0},
                   {"bfloat16", std::nullopt, kFp8LayoutOnly, 0}},
                  {64, 128},
                  kFlashMlaHeads,
                  "FlashMLA mega attention (Q RoPE, sparse attention, inverse RoPE and the FP8 cast for wo_a in "
                  "one decode kernel; no tile-scheduler plan, no split-KV fallback)",
                  false,
                  false,
                  "0.31.0"});
  // Opt-in SM90 Triton backend: native 8 or 16 heads, FlashMLA's pages (its backend subclasses
  // the V4.1 FlashMLA backend), an empty tile scheduler.
  c.push_back(BackendInfo{BackendId::triton_mla_sparse_dsv41,
                          "triton_mla_sparse_dsv41",
                          kTritonName,
                          "",
                          "DeepseekV41TritonSparseAttention",
                          "vllm/models/deepseek_v41/nvidia/triton_sparse.py",
                          {Family::deepseek_v41},
                          {9},
                          {{"auto", K::fp8_ds_mla, {}, 0},
                           {"fp8", K::fp8_ds_mla, {}, 0},
                           {"fp8_ds_mla", K::fp8_ds_mla, {}, 0},
                           {"fp8_e4m3", std::nullopt, kTritonNeedsDsMla, 0},
                           {"fp8_e5m2", std::nullopt, kTritonNeedsDsMla, 0},
                           {"nvfp4_ds_mla", std::nullopt, kTritonNeedsDsMla, 0},
                           {"bfloat16", std::nullopt, kTritonNeedsDsMla, 0}},
                          {8, 16},
                          "TRITON_MLA_SPARSE_DSV41 requires 8 or 16 local heads",
                          "Triton small-head sparse decode over fp8_ds_mla pages, heads unpadded (no tile-scheduler "
                          "plan; mla-plan's small-head kernel runs the same unpadded shapes in verify and bench)",
                          false,
                          true,
                          "0.31.0"});
  return c;
}

const std::vector<BackendInfo>& catalogue() {
  static const std::vector<BackendInfo> c = make_catalogue();
  return c;
}

std::string upper(std::string_view s) {
  std::string out(s);
  for (auto& ch : out) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  return out;
}

std::string join_names(std::span<const std::string_view> names) {
  std::string s;
  for (auto n : names) {
    if (!s.empty()) s += ", ";
    s += n;
  }
  return s;
}

// The FlashMLA entry of a family (what vLLM falls back to off SM12x).
BackendId flashmla_of(Family f) {
  switch (f) {
    case Family::deepseek_v41: return BackendId::flashmla_sparse_dsv41;
    case Family::deepseek_v4: return BackendId::flashmla_sparse_dsv4;
    case Family::deepseek_v32: return BackendId::flashmla_sparse;
  }
  return BackendId::flashmla_sparse_dsv41;
}

std::string arch_words(const Target& t) { return t.cc.sm() + " (compute capability " + t.cc.str() + ")"; }

}  // namespace

std::string_view to_string(KvCacheDtype d) {
  switch (d) {
    case KvCacheDtype::fp8_ds_mla: return "fp8_ds_mla";
    case KvCacheDtype::nvfp4_ds_mla: return "nvfp4_ds_mla";
    case KvCacheDtype::bfloat16: return "bfloat16";
    case KvCacheDtype::fp8_e4m3: return "fp8_e4m3";
  }
  return "?";
}

std::span<const BackendInfo> backend_catalogue() { return catalogue(); }

bool release_has_backend_name(std::string_view name, const BackendReleaseRules& release) {
  if (name == kMegaName) return release.v41_mega_attention_default;
  if (name == kTritonName) return release.v41_triton_sm90;
  return std::find(kBackendNames.begin(), kBackendNames.end(), name) != kBackendNames.end();
}

std::string mega_attention_declines(const ModelConfig& cfg, const ComputeCapability& cc,
                                    std::int64_t tensor_parallel_size) {
  // vllm/models/deepseek_v41/nvidia/flash_mla_mega_attn.py: is_flashmla_mega_attn_supported and
  // DeepseekV4MegaAttnAttention.is_available_for, in their order.
  if (cc.major != 10) return "FlashMLA mega attention requires sm_10x GPUs.";
  const std::int64_t tp = std::max<std::int64_t>(tensor_parallel_size, 1);
  const std::int64_t heads = cfg.num_attention_heads;
  const std::int64_t groups = cfg.checkpoint.o_groups;
  const std::int64_t g = kMegaAttentionGroupHeads;
  const std::string on = "TP" + std::to_string(tp) + " on a " + std::to_string(heads) + "-head model";
  if (heads % tp != 0) return on + ": TP does not divide the heads";
  const std::int64_t local = heads / tp;
  const std::string leaves = on + " leaves " + std::to_string(local) + " heads per rank";
  if (groups <= 0 || groups % tp != 0) {
    return leaves + " and does not divide its " + std::to_string(std::max<std::int64_t>(groups, 0)) +
           " wo_a groups (o_groups); the kernel needs " + std::to_string(g) + " heads per wo_a group";
  }
  const std::int64_t local_groups = groups / tp;
  if (local % g != 0) return leaves + ", not a multiple of " + std::to_string(g);
  if (local / local_groups != g) {
    return leaves + " in " + std::to_string(local_groups) + " wo_a groups, " + std::to_string(local / local_groups) +
           " heads per group; the kernel needs " + std::to_string(g);
  }
  return {};
}

const BackendInfo& backend_info(BackendId id) {
  const auto i = static_cast<std::size_t>(id);
  if (i >= catalogue().size()) throw_internal("backend_info: unknown backend");
  return catalogue()[i];
}

std::string_view backend_vllm_name(BackendId id, std::optional<Family> family) {
  // One class serves V4.1 and V4.0 on SM12x; vLLM names it per family.
  if (id == BackendId::flashinfer_mla_sparse_sm120 && family == Family::deepseek_v4)
    return "FLASHINFER_MLA_SPARSE_DSV4";
  return backend_info(id).vllm_name;
}

std::string backend_title(BackendId id, std::optional<Family> family) {
  const auto& b = backend_info(id);
  std::string s(backend_vllm_name(id, family));
  if (!b.variant.empty()) s += " (" + std::string(b.variant) + ")";
  return s;
}

std::optional<BackendId> parse_backend_key(std::string_view key) {
  for (const auto& b : catalogue()) {
    if (b.key == key) return b.id;
  }
  return std::nullopt;
}

std::span<const std::string_view> kv_cache_dtype_values() { return kKvValues; }
std::span<const std::string_view> attention_backend_values() { return kBackendNames; }

std::string canonical_kv_cache_dtype(std::string_view value) {
  std::string lower(value);
  for (auto& ch : lower) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  for (auto v : kKvValues) {
    if (v == lower) return std::string(v);
  }
  const std::vector<std::string> all(kKvValues.begin(), kKvValues.end());
  throw_usage("--kv-cache-dtype: " + quoted(value) + " is not a kv-cache dtype; allowed: " + join_names(kKvValues) +
              did_you_mean_suffix(value, all));
}

KvResolution resolve_kv_cache_dtype(BackendId backend, std::string_view value, int cc_major) {
  const auto& b = backend_info(backend);
  for (const auto& r : b.kv_dtypes) {
    if (r.value != value) continue;
    KvResolution out;
    if (r.becomes && (r.only_cc_major == 0 || r.only_cc_major == cc_major)) {
      out.layout = r.becomes;
    } else if (r.becomes) {
      out.refusal = std::string(kNvfp4Sm100);
    } else {
      out.refusal = replace_all(r.refusal, "{d}", value);
    }
    return out;
  }
  throw_internal("resolve_kv_cache_dtype: value '" + std::string(value) + "' not in the table of " +
                 std::string(b.key));
}

std::optional<std::int64_t> padded_heads(BackendId backend, std::int64_t local_heads) {
  if (local_heads < 1) return std::nullopt;
  const auto& b = backend_info(backend);
  for (auto h : b.head_paddings) {
    if (b.exact_heads ? local_heads == h : local_heads <= h) return h;
  }
  return std::nullopt;
}

std::vector<std::int64_t> backend_block_sizes(BackendId backend, Family family, const ComputeCapability& cc) {
  switch (backend) {
    case BackendId::flashmla_sparse_dsv41: return {cc.major == 9 ? 64 : 128};
    case BackendId::flashmla_sparse_dsv41_fused:
    case BackendId::flashinfer_mla_sparse_dsv41: return {128};
    case BackendId::flashinfer_mla_sparse_sm120:
      // V4.0 keeps its 256-token block ("Setting kv cache block size to 256"); V4.1's pages hold
      // 64 states: 64 tokens at ratio 1, 128 at ratio 2 (get_supported_kernel_block_sizes).
      if (family == Family::deepseek_v4) return {256};
      return {kSm120PageStates, 2 * kSm120PageStates};
    case BackendId::flashmla_sparse_dsv4: return {256};
    case BackendId::flashmla_sparse: return {64};
    // Both subclass V4.1's FlashMLA backend and keep its get_supported_kernel_block_sizes (tokens
    // per page, not heads: DeepseekV41TritonSparseBackend overrides only the name, the builder and
    // the capability, which is 9.0 alone, so the Triton backend always gets 64; its heads are
    // get_padded_num_q_heads, the local 8 or 16 unpadded: head_paddings and exact_heads above).
    case BackendId::flashmla_mega_attn_dsv41:
    case BackendId::triton_mla_sparse_dsv41: return {cc.major == 9 ? 64 : 128};
  }
  return {64};
}

std::int64_t fixed_page_states(BackendId backend, Family family) {
  return backend == BackendId::flashinfer_mla_sparse_sm120 && family == Family::deepseek_v41 ? kSm120PageStates : 0;
}

std::int64_t backend_window_block(BackendId backend, Family family) {
  switch (family) {
    case Family::deepseek_v41: return backend == BackendId::flashinfer_mla_sparse_sm120 ? kSm120PageStates : 32;
    case Family::deepseek_v4: return 64;
    case Family::deepseek_v32: return 0;
  }
  return 0;
}

BackendChoice choose_backend(const ModelConfig& cfg, const Target& target,
                             const std::optional<std::string>& attention_backend, FusedAttention fused,
                             std::string_view kv_cache_dtype, std::int64_t tensor_parallel_size,
                             const BackendReleaseRules& release) {
  BackendChoice ch;
  const int major = target.cc.major;
  const std::string on = " on " + target.cc.sm();
  // vLLM 0.31's V4.1 selector (vllm/models/deepseek_v41/nvidia/model.py _select_dsv4_attn_cls).
  const bool selector31 = release.v41_mega_attention_default && cfg.family == Family::deepseek_v41;
  std::string name;
  if (attention_backend) {
    name = upper(*attention_backend);
    std::vector<std::string_view> known;
    for (auto n : kBackendNames) {
      if (release_has_backend_name(n, release)) known.push_back(n);
    }
    if (std::find(known.begin(), known.end(), name) == known.end()) {
      const std::string release_words =
          release.version.empty() ? "the vLLM release modelled" : "vLLM " + std::string(release.version);
      for (const auto& b : catalogue()) {
        if (b.vllm_name == name && !b.first_release.empty()) {
          throw_usage("--attention-backend: " + name + " is new in vLLM " + std::string(b.first_release) + "; " +
                      release_words + " does not have it; allowed: " + join_names(known));
        }
      }
      const std::vector<std::string> all(known.begin(), known.end());
      throw_usage("--attention-backend: " + quoted(*attention_backend) +
                  " is not a sparse-MLA attention backend vLLM selects for DeepSeek; allowed: " + join_names(known) +
                  did_you_mean_suffix(*attention_backend, all));
    }
    ch.by_default = false;
  }
  const std::string asked = attention_backend ? "--attention-backend " + name + on : "vLLM's default" + on;
  auto refuse = [&](BackendId closest, std::string id, std::string message, std::string fix) {
    ch.id = closest;
    ch.refusal_id = std::move(id);
    ch.refusal = std::move(message);
    ch.fix = std::move(fix);
    ch.how = asked;
    return ch;
  };

  const bool flashinfer_name = name == "FLASHINFER_MLA_SPARSE_DSV41" || name == "FLASHINFER_MLA_SPARSE_DSV4";
  const bool new_name = name == kMegaName || name == kTritonName;
  BackendId id = flashmla_of(cfg.family);
  switch (cfg.family) {
    case Family::deepseek_v41:
      if (name == "FLASHINFER_MLA_SPARSE" || name == "FLASHINFER_MLA_SPARSE_SM120") {
        return refuse(major == 12 ? BackendId::flashinfer_mla_sparse_sm120 : BackendId::flashinfer_mla_sparse_dsv41,
                      "backend.attention_backend",
                      name +
                          " is not a DeepSeek V4.1 attention backend. Use FLASHINFER_MLA_SPARSE_DSV41 for DeepSeek "
                          "V4.1 FlashInfer sparse MLA.",
                      "use --attention-backend FLASHINFER_MLA_SPARSE_DSV41");
      }
      if (name == kMegaName) {
        id = BackendId::flashmla_mega_attn_dsv41;
      } else if (name == kTritonName) {
        id = BackendId::triton_mla_sparse_dsv41;
      } else if (flashinfer_name || (!attention_backend && major == 12)) {
        id = major == 12 ? BackendId::flashinfer_mla_sparse_sm120 : BackendId::flashinfer_mla_sparse_dsv41;
      } else if (selector31 && !attention_backend && major == 10) {
        // Mega attention is the SM100 default where it is available; a topology it declines
        // falls through to FlashMLA.
        ch.mega_declined = mega_attention_declines(cfg, target.cc, tensor_parallel_size);
        id = ch.mega_declined.empty() ? BackendId::flashmla_mega_attn_dsv41 : BackendId::flashmla_sparse_dsv41;
      } else {
        id = BackendId::flashmla_sparse_dsv41;
      }
      break;
    case Family::deepseek_v4:
      if (name == "FLASHINFER_MLA_SPARSE" || name == "FLASHINFER_MLA_SPARSE_SM120" ||
          name == "FLASHINFER_MLA_SPARSE_DSV41" || name == "FLASHMLA_SPARSE_DSV41" || new_name) {
        return refuse(major == 12 ? BackendId::flashinfer_mla_sparse_sm120 : BackendId::flashmla_sparse_dsv4,
                      "backend.attention_backend",
                      name +
                          " is not a DeepSeek V4 attention backend; DeepSeek V4.0 runs on FLASHMLA_SPARSE_DSV4 "
                          "(sm90, sm100) or FLASHINFER_MLA_SPARSE_DSV4 (sm120)",
                      major == 12 ? "use --attention-backend FLASHINFER_MLA_SPARSE_DSV4"
                                  : "use --attention-backend FLASHMLA_SPARSE_DSV4");
      }
      if (name == "FLASHINFER_MLA_SPARSE_DSV4" || (!attention_backend && major == 12)) {
        if (major != 12) {
          return refuse(BackendId::flashmla_sparse_dsv4, "backend.attention_backend",
                        "FLASHINFER_MLA_SPARSE_DSV4 for DeepSeek V4.0 is modelled on SM12x only (the FlashInfer SM120 "
                        "class); target " +
                            target.id + " is " + arch_words(target),
                        "use --attention-backend FLASHMLA_SPARSE_DSV4");
        }
        id = BackendId::flashinfer_mla_sparse_sm120;
      }
      break;
    case Family::deepseek_v32:
      if (attention_backend && name != "FLASHMLA_SPARSE") {
        return refuse(BackendId::flashmla_sparse, "backend.attention_backend",
                      name +
                          " for DeepSeek V3.2 is not modelled: mla-plan plans V3.2 on vLLM's FlashMLA sparse "
                          "backend (FLASHMLA_SPARSE)",
                      "use --attention-backend FLASHMLA_SPARSE");
      }
      break;
  }

  const auto& info = backend_info(id);
  if (id == BackendId::triton_mla_sparse_dsv41 && !(major == 9 && target.cc.minor == 0)) {
    // DeepseekV41TritonSparseAttention.validate_config: capability exactly 9.0.
    return refuse(id, "backend.arch",
                  "TRITON_MLA_SPARSE_DSV41 requires SM90; target " + target.id + " is " + arch_words(target),
                  "use a compute capability 9.0 GPU (--gpu h200), or omit --attention-backend");
  }
  if (id == BackendId::flashmla_mega_attn_dsv41 && major != 10) {
    return refuse(
        id, "backend.arch",
        "FlashMLA mega attention requires sm_10x GPUs. Target " + target.id + " is " + arch_words(target) + ".",
        "use a compute capability 10.x GPU (--gpu b200), or omit --attention-backend");
  }
  if (std::find(info.cc_majors.begin(), info.cc_majors.end(), major) == info.cc_majors.end()) {
    std::string msg;
    std::string fix;
    if (id == BackendId::flashinfer_mla_sparse_dsv41) {
      msg = "FLASHINFER_MLA_SPARSE_DSV4 requires SM10x or SM12x; target " + target.id + " is " + arch_words(target);
      fix = "use a compute capability 10.x or 12.x GPU, or omit --attention-backend";
    } else {
      msg = "FlashMLA Sparse is only supported on Hopper and Blackwell DC devices; target " + target.id + " is " +
            arch_words(target) + ", supported: 9.x (sm90) and 10.x (sm100, sm103)";
      if (cfg.family == Family::deepseek_v32) {
        fix = "use a Hopper or Blackwell datacentre GPU (--gpu h200, --gpu b200)";
      } else if (major == 12) {
        fix = "omit --attention-backend: vLLM runs " +
              backend_title(BackendId::flashinfer_mla_sparse_sm120, cfg.family) + " on SM12x";
      } else {
        fix =
            "use a Hopper or Blackwell datacentre GPU (--gpu h200, --gpu b200), or an SM12x GPU with the FlashInfer "
            "backend (--gpu rtx-pro-6000)";
      }
    }
    if (!attention_backend && major != 12 && cfg.family != Family::deepseek_v32) {
      // No backend of the family runs on this arch (Ampere, Ada, ...): vLLM falls to FlashMLA.
      msg += "; FlashInfer's sparse MLA backend of DeepSeek V4 / V4.1 runs on 10.x and 12.x";
      fix = "use a Hopper, Blackwell datacentre or SM12x GPU (--gpu h200, --gpu b200, --gpu rtx-pro-6000)";
    }
    return refuse(id, "backend.arch", msg, fix);
  }
  if (id == BackendId::flashmla_mega_attn_dsv41 && attention_backend) {
    // Named, the class is built without asking is_available_for; its __init__ raises on the
    // heads. A TP that does not divide the heads is backend.tensor_parallel's.
    const std::int64_t tp = std::max<std::int64_t>(tensor_parallel_size, 1);
    const std::string why = mega_attention_declines(cfg, target.cc, tp);
    if (!why.empty() && cfg.num_attention_heads % tp == 0) {
      const std::int64_t local = cfg.num_attention_heads / tp;
      const std::string g = std::to_string(kMegaAttentionGroupHeads);
      const std::string text = local % kMegaAttentionGroupHeads != 0
                                   ? "mega attention needs the local head count (" + std::to_string(local) +
                                         ") to be a multiple of " + g + "."
                                   : "mega attention needs " + g + " heads per wo_a group.";
      std::vector<std::int64_t> ok;
      for (std::int64_t t = 1; t <= cfg.num_attention_heads; ++t) {
        if (mega_attention_declines(cfg, target.cc, t).empty()) ok.push_back(t);
      }
      std::string tps;
      for (auto t : ok) tps += (tps.empty() ? "" : ", ") + std::to_string(t);
      return refuse(id, "backend.query_heads", text + " (" + why + ")",
                    (ok.empty() ? std::string() : "use --tensor-parallel-size " + tps + ", or ") +
                        "omit --attention-backend (vLLM's default then runs FLASHMLA_SPARSE_DSV41)");
    }
  }

  if (selector31) {
    // The 0.31 selector has no fused FlashMLA class: FlashMLA is the split-KV class, and mega
    // attention is the fused kernel.
    if (fused != FusedAttention::auto_) {
      ch.fused_off_reason =
          "--dsv4-fused-attention has no effect: the DeepSeek V4.1 selector of " +
          (release.version.empty() ? std::string("this vLLM release") : "vLLM " + std::string(release.version)) +
          " has no fused FlashMLA class (" + std::string(kMegaName) + " runs the fused kernel)";
    }
  } else if (id == BackendId::flashmla_sparse_dsv41 && fused != FusedAttention::off) {
    // The fused FlashMLA path (V4.1 on SM100): attention_config.dsv4_fused_attention, None = auto.
    std::string reason;
    if (major != 10) {
      reason = "the fused sparse kernel is built for SM100 only; target " + target.id + " is " + target.cc.sm();
    } else if (cfg.checkpoint.o_groups <= 0 || cfg.num_attention_heads / cfg.checkpoint.o_groups != 8) {
      reason = "needs 8 heads per o_group";
    } else if (kv_cache_dtype != "auto" && kv_cache_dtype != "fp8" && kv_cache_dtype != "fp8_ds_mla" &&
               kv_cache_dtype != "nvfp4_ds_mla") {
      reason = "needs the fp8_ds_mla or nvfp4_ds_mla KV cache layout";
    }
    if (reason.empty()) {
      id = BackendId::flashmla_sparse_dsv41_fused;
    } else if (fused == FusedAttention::on) {
      return refuse(BackendId::flashmla_sparse_dsv41, "backend.fused_attention",
                    "dsv4_fused_attention=True is unsupported: " + reason, "omit --dsv4-fused-attention");
    } else {
      ch.fused_off_reason = "FlashMLA fused sparse attention disabled: " + reason;
    }
  } else if (fused == FusedAttention::on && id != BackendId::flashmla_sparse_dsv41) {
    return refuse(id, "backend.fused_attention",
                  "--dsv4-fused-attention true applies to the FlashMLA backend of DeepSeek V4.1 on SM100; the chosen "
                  "backend is " +
                      backend_title(id, cfg.family),
                  "omit --dsv4-fused-attention");
  }
  ch.id = id;
  ch.how = asked + (id == BackendId::flashmla_sparse_dsv41_fused && fused == FusedAttention::auto_
                        ? ", fused because attention_config.dsv4_fused_attention is unset and the kernel has the shape"
                        : "");
  if (!ch.mega_declined.empty()) ch.how += "; " + std::string(kMegaName) + " declined: " + ch.mega_declined;
  if (id == BackendId::flashmla_mega_attn_dsv41 && !attention_backend) {
    // vLLM's selector after 0.30 (PR #56935) makes it the SM100 default; which release first
    // carries that selector was not pinned (docs/vllm-releases.md).
    ch.how +=
        " (the first vLLM release with this default is not pinned: the selector of vLLM after 0.30, modelled as " +
        std::string(release.version.empty() ? "0.31.0" : release.version) +
        "; --vllm-version 0.30.0 plans 0.30's FlashMLA default)";
  }
  return ch;
}

}  // namespace mlaplan
