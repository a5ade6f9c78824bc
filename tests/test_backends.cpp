// The attention-backend catalogue (src/rules/backends.cpp) and the rules that read it (src/rules/rules.cpp):
// what each backend does with every --kv-cache-dtype value, its head paddings, block sizes and
// pages, vLLM's default per arch and --attention-backend / --dsv4-fused-attention, the layout the
// backend implies, speculative decoding, the kernel shapes and their statuses. Expected values are
// written out or derived here from the config's fields, never read back from the code under test.
// The facts: shared/docs/backend-rules.md ("Beyond the seed's backend") and vLLM's
// vllm/models/deepseek_v4_1/nvidia/{model,flashmla_fused,flashinfer_sparse}.py.

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <functional>
#include <iterator>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "mlaplan/rules/backends.hpp"
#include "mlaplan/rules/head_padding.hpp"
#include "mlaplan/model/config.hpp"
#include "mlaplan/base/error.hpp"
#include "mlaplan/cache/layout.hpp"
#include "mlaplan/engine/vllm/release.hpp"
#include "mlaplan/plan/plan.hpp"
#include "mlaplan/plan/search.hpp"
#include "mlaplan/rules/rules.hpp"
#include "mlaplan/hardware/target.hpp"
#include "mlaplan/model/topology.hpp"
#include "rule_testing.hpp"

using namespace mlaplan;

namespace {

// ------------------------------------------------------------------ helpers

using testing_rules::config_path;
using testing_rules::errors;
using testing_rules::eval;
using testing_rules::find;
using testing_rules::gpu;
using testing_rules::released;

/// The released config `name` with `edit` applied to its attention fields (text_config for V4.1).
ModelConfig edited(const std::string& name, const std::function<void(nlohmann::json&)>& edit) {
  std::ifstream in(config_path(name));
  REQUIRE(in.good());
  nlohmann::json j = nlohmann::json::parse(std::string(std::istreambuf_iterator<char>(in), {}));
  edit(j.contains("text_config") ? j["text_config"] : j);
  return parse_config(j.dump(), name);
}

std::vector<RuleResult> all_of_id(const std::vector<RuleResult>& rs, const std::string& id) {
  std::vector<RuleResult> out;
  for (const auto& r : rs) {
    if (r.finding.id == id) out.push_back(r);
  }
  return out;
}

BackendChoice choose(const ModelConfig& cfg, const std::string& g, std::optional<std::string> name = std::nullopt,
                     FusedAttention fused = FusedAttention::auto_, const std::string& kv = "auto") {
  return choose_backend(cfg, gpu(g), name, fused, kv);
}

LayoutResolution resolve(const ModelConfig& cfg, const std::string& g, const LayoutOptions& o = {}) {
  return resolve_layout_options(cfg, build_topology(cfg), gpu(g), o);
}

template <class F>
void require_usage_error(F&& f, const std::string& message) {
  try {
    f();
    FAIL("no error; expected: " << message);
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::usage);
    CHECK(std::string(e.what()) == message);
  }
}

const ModelConfig& v41() {
  static const ModelConfig c = released("deepseek-v4.1-flash.json");
  return c;
}
const ModelConfig& v40() {
  static const ModelConfig c = released("deepseek-v4-flash.json");
  return c;
}
const ModelConfig& v32() {
  static const ModelConfig c = released("deepseek-v3.2.json");
  return c;
}

constexpr std::int64_t round_up(std::int64_t v, std::int64_t m) { return (v + m - 1) / m * m; }
constexpr std::int64_t cdiv(std::int64_t v, std::int64_t m) { return (v + m - 1) / m; }

}  // namespace

// =================================================================== 1. kv dtypes per backend

namespace {

constexpr const char* kFp8LayoutOnly =
    "DeepseekV4 fp8_ds_mla layout only supports fp8 kv-cache, got {d}. Please set --kv-cache-dtype fp8 or select a "
    "backend that supports bfloat16 KV cache.";
constexpr const char* kNvfp4NeedsFused =
    "nvfp4_ds_mla requires the FlashMLA fused attention layer (attention_config.dsv4_fused_attention).";
constexpr const char* kNvfp4FlashMlaOnly = "nvfp4_ds_mla is a FlashMLA-only DeepSeek V4.1 KV cache format.";
constexpr const char* kNvfp4V41Only =
    "nvfp4_ds_mla is the DeepSeek V4.1 KV cache format; DeepSeek V4.0 and V3.2 store fp8_ds_mla";
constexpr const char* kFlashInferNoDsMla =
    "FLASHINFER_MLA_SPARSE_DSV4 SM10x uses the plain per-tensor FP8 KV layout, not fp8_ds_mla";
constexpr const char* kNotSupported = "kv_cache_dtype not supported";
constexpr const char* kFusedNeedsLayout =
    "dsv4_fused_attention=True is unsupported: needs the fp8_ds_mla or nvfp4_ds_mla KV cache layout";

std::string with_d(std::string text, const std::string& d) {
  const auto at = text.find("{d}");
  if (at != std::string::npos) text.replace(at, 3, d);
  return text;
}

struct KvCase {
  std::string value;
  std::optional<KvCacheDtype> layout;
  std::string refusal;  // with {d}
};

void check_kv_table(BackendId b, int cc_major, const std::vector<KvCase>& cases) {
  // Every value vLLM's --kv-cache-dtype takes is in the table, accepted or refused.
  REQUIRE(cases.size() == kv_cache_dtype_values().size());
  for (const auto& c : cases) {
    INFO(backend_title(b) << " cc " << cc_major << " --kv-cache-dtype " << c.value);
    const auto r = resolve_kv_cache_dtype(b, c.value, cc_major);
    CHECK(r.layout == c.layout);
    CHECK(r.refusal == (c.layout ? std::string() : with_d(c.refusal, c.value)));
  }
}

}  // namespace

TEST_CASE("kv dtypes: what every value becomes on each backend, or vLLM's refusal", "[backends]") {
  using K = KvCacheDtype;
  // FlashMLA split-KV (V4.1): every fp8 spelling stores fp8_ds_mla (_resolve_dsv4_kv_cache_dtype
  // writes fp8_ds_mla back for any value starting with fp8); nvfp4 needs the fused layer.
  check_kv_table(BackendId::flashmla_sparse_dsv41, 9,
                 {{"auto", K::fp8_ds_mla, ""},
                  {"fp8", K::fp8_ds_mla, ""},
                  {"fp8_ds_mla", K::fp8_ds_mla, ""},
                  {"nvfp4_ds_mla", std::nullopt, kNvfp4NeedsFused},
                  {"bfloat16", std::nullopt, kFp8LayoutOnly},
                  {"fp8_e4m3", K::fp8_ds_mla, ""},
                  {"fp8_e5m2", K::fp8_ds_mla, ""}});
  // The fused path: nvfp4_ds_mla on SM100; other layouts are refused with dsv4_fused_attention's text.
  check_kv_table(BackendId::flashmla_sparse_dsv41_fused, 10,
                 {{"auto", K::fp8_ds_mla, ""},
                  {"fp8", K::fp8_ds_mla, ""},
                  {"fp8_ds_mla", K::fp8_ds_mla, ""},
                  {"nvfp4_ds_mla", K::nvfp4_ds_mla, ""},
                  {"bfloat16", std::nullopt, kFusedNeedsLayout},
                  {"fp8_e4m3", std::nullopt, kFusedNeedsLayout},
                  {"fp8_e5m2", std::nullopt, kFusedNeedsLayout}});
  // Off SM100 the fused table's nvfp4 row is the SM100 refusal.
  CHECK(resolve_kv_cache_dtype(BackendId::flashmla_sparse_dsv41_fused, "nvfp4_ds_mla", 9).refusal ==
        "nvfp4_ds_mla needs SM100 (FlashMLA V4.1 fp8/fp4 sparse decode)");
  CHECK_FALSE(resolve_kv_cache_dtype(BackendId::flashmla_sparse_dsv41_fused, "nvfp4_ds_mla", 12).layout);
  // FlashInfer SM10x (TRTLLM-gen): auto is bf16 plain rows, fp8 is per-tensor e4m3 plain rows.
  check_kv_table(BackendId::flashinfer_mla_sparse_dsv41, 10,
                 {{"auto", K::bfloat16, ""},
                  {"bfloat16", K::bfloat16, ""},
                  {"fp8", K::fp8_e4m3, ""},
                  {"fp8_e4m3", K::fp8_e4m3, ""},
                  {"fp8_ds_mla", std::nullopt, kFlashInferNoDsMla},
                  {"nvfp4_ds_mla", std::nullopt, kNvfp4FlashMlaOnly},
                  {"fp8_e5m2", std::nullopt, kNotSupported}});
  // The SM120 class stores fp8_ds_mla (use_fp8_ds_mla_layout = True) for every fp8 spelling.
  check_kv_table(BackendId::flashinfer_mla_sparse_sm120, 12,
                 {{"auto", K::fp8_ds_mla, ""},
                  {"fp8", K::fp8_ds_mla, ""},
                  {"fp8_e4m3", K::fp8_ds_mla, ""},
                  {"fp8_ds_mla", K::fp8_ds_mla, ""},
                  {"nvfp4_ds_mla", std::nullopt, kNvfp4FlashMlaOnly},
                  {"bfloat16", std::nullopt, kNotSupported},
                  {"fp8_e5m2", std::nullopt, kNotSupported}});
  check_kv_table(BackendId::flashmla_sparse_dsv4, 9,
                 {{"auto", K::fp8_ds_mla, ""},
                  {"fp8", K::fp8_ds_mla, ""},
                  {"fp8_ds_mla", K::fp8_ds_mla, ""},
                  {"bfloat16", std::nullopt, kFp8LayoutOnly},
                  {"fp8_e4m3", K::fp8_ds_mla, ""},
                  {"fp8_e5m2", K::fp8_ds_mla, ""},
                  {"nvfp4_ds_mla", std::nullopt, kNvfp4V41Only}});
  check_kv_table(BackendId::flashmla_sparse, 10,
                 {{"auto", K::fp8_ds_mla, ""},
                  {"fp8", K::fp8_ds_mla, ""},
                  {"fp8_ds_mla", K::fp8_ds_mla, ""},
                  {"bfloat16", std::nullopt, "FlashMLA doesn't support {d}"},
                  {"fp8_e4m3", std::nullopt, "FlashMLA doesn't support {d}"},
                  {"fp8_e5m2", std::nullopt, "FlashMLA doesn't support {d}"},
                  {"nvfp4_ds_mla", std::nullopt, kNvfp4V41Only}});
  // A value outside vLLM's list is a bug in the caller (the CLI canonicalises first).
  CHECK_THROWS_AS(resolve_kv_cache_dtype(BackendId::flashmla_sparse_dsv41, "int8", 9), Error);
  CHECK(canonical_kv_cache_dtype("FP8_DS_MLA") == "fp8_ds_mla");
  CHECK(std::string(to_string(KvCacheDtype::fp8_e4m3)) == "fp8_e4m3");
  CHECK(std::string(to_string(KvCacheDtype::bfloat16)) == "bfloat16");
}

TEST_CASE("kv dtypes through evaluate_rules: whole messages and fixes per backend", "[backends]") {
  struct Case {
    const char* gpu;
    std::optional<std::string> backend;
    FusedAttention fused;
    const char* kv;
    std::string message;
    std::string fix;
  };
  const std::string fi10 = " on FLASHINFER_MLA_SPARSE_DSV41 (SM10x))";
  const std::string sm120 = " on FLASHINFER_MLA_SPARSE_DSV41 (SM120 class))";
  {
    // fp8_e4m3 on B200: the fused path is off for that spelling, and split-KV FlashMLA stores it as
    // fp8_ds_mla.
    RuleOptions o;
    o.layout.kv_cache_dtype = "fp8_e4m3";
    const auto rs = eval(v41(), gpu("b200"), o);
    CHECK(errors(rs) == 0);
    const auto r = resolve_layout_options(v41(), build_topology(v41()), gpu("b200"), o.layout);
    CHECK(r.options.backend.id == BackendId::flashmla_sparse_dsv41);
    CHECK(r.options.kv == KvCacheDtype::fp8_ds_mla);
  }
  const std::vector<Case> cases = {
      {"b200", std::string("FLASHINFER_MLA_SPARSE_DSV41"), FusedAttention::auto_, "fp8_ds_mla",
       std::string(kFlashInferNoDsMla) + " (--kv-cache-dtype fp8_ds_mla" + fi10,
       "use --kv-cache-dtype auto, bfloat16, fp8, fp8_e4m3"},
      {"b200", std::string("FLASHINFER_MLA_SPARSE_DSV41"), FusedAttention::auto_, "nvfp4_ds_mla",
       std::string(kNvfp4FlashMlaOnly) + " (--kv-cache-dtype nvfp4_ds_mla" + fi10,
       "use --kv-cache-dtype auto, bfloat16, fp8, fp8_e4m3"},
      {"b200", std::string("FLASHINFER_MLA_SPARSE_DSV41"), FusedAttention::auto_, "fp8_e5m2",
       "kv_cache_dtype not supported (--kv-cache-dtype fp8_e5m2" + fi10,
       "use --kv-cache-dtype auto, bfloat16, fp8, fp8_e4m3"},
      {"rtx-pro-6000", std::nullopt, FusedAttention::auto_, "nvfp4_ds_mla",
       std::string(kNvfp4FlashMlaOnly) + " (--kv-cache-dtype nvfp4_ds_mla" + sm120,
       "use --kv-cache-dtype auto, fp8, fp8_e4m3, fp8_ds_mla"},
      {"rtx-pro-6000", std::nullopt, FusedAttention::auto_, "bfloat16",
       "kv_cache_dtype not supported (--kv-cache-dtype bfloat16" + sm120,
       "use --kv-cache-dtype auto, fp8, fp8_e4m3, fp8_ds_mla"},
      // nvfp4_ds_mla on B200 with the fused layer switched off: vLLM's text alone.
      {"b200", std::nullopt, FusedAttention::off, "nvfp4_ds_mla", kNvfp4NeedsFused,
       "leave --dsv4-fused-attention unset (the fused path stores nvfp4_ds_mla), or use --kv-cache-dtype "
       "fp8_ds_mla"},
      // bfloat16 on B200: the fused path is off for that layout; split-KV FlashMLA refuses it.
      {"b200", std::nullopt, FusedAttention::auto_, "bfloat16",
       with_d(kFp8LayoutOnly, "bfloat16") + " (--kv-cache-dtype bfloat16 on FLASHMLA_SPARSE_DSV41)",
       "use --kv-cache-dtype auto, fp8, fp8_e4m3, fp8_e5m2, fp8_ds_mla"},
  };
  for (const auto& c : cases) {
    INFO(c.gpu << " " << c.backend.value_or("(default)") << " --kv-cache-dtype " << c.kv);
    RuleOptions o;
    o.layout.attention_backend = c.backend;
    o.layout.fused_attention = c.fused;
    o.layout.kv_cache_dtype = c.kv;
    const auto rs = eval(v41(), gpu(c.gpu), o);
    const auto r = find(rs, "backend.kv_cache_dtype");
    REQUIRE(r);
    CHECK(r->kind == ErrorKind::unsupported);
    CHECK(r->finding.message == c.message);
    CHECK(r->finding.fix == c.fix);
    CHECK(rules_exit_code(rs) == 3);
  }
  {
    RuleOptions o;
    o.layout.kv_cache_dtype = "bfloat16";
    const auto rs = eval(v41(), gpu("b200"), o);
    const auto info = find(rs, "backend.fused_attention", Severity::info);
    REQUIRE(info);
    CHECK(info->finding.message ==
          "FlashMLA fused sparse attention disabled: needs the fp8_ds_mla or nvfp4_ds_mla KV cache layout");
  }
  // V4.0 and V3.2 have no nvfp4 layout; V3.2's FlashMLA refuses bfloat16 with its own text.
  {
    RuleOptions o;
    o.layout.kv_cache_dtype = "nvfp4_ds_mla";
    const auto r = find(eval(v40(), gpu("b200"), o), "backend.kv_cache_dtype");
    REQUIRE(r);
    CHECK(r->finding.message ==
          std::string(kNvfp4V41Only) + " (--kv-cache-dtype nvfp4_ds_mla on FLASHMLA_SPARSE_DSV4)");
    o.layout.kv_cache_dtype = "bfloat16";
    const auto v = find(eval(v32(), gpu("h200"), o), "backend.kv_cache_dtype");
    REQUIRE(v);
    CHECK(v->finding.message == "FlashMLA doesn't support bfloat16 (--kv-cache-dtype bfloat16 on FLASHMLA_SPARSE)");
    CHECK(v->finding.fix == "use --kv-cache-dtype auto, fp8, fp8_ds_mla");
  }
  // Accepted values: no kv finding, and an info names what a spelling became.
  struct Ok {
    const char* gpu;
    std::optional<std::string> backend;
    const char* kv;
    KvCacheDtype layout;
    std::string info;  // "" when the value is already the layout's name
  };
  const std::vector<Ok> ok = {
      {"b200", std::string("FLASHINFER_MLA_SPARSE_DSV41"), "auto", KvCacheDtype::bfloat16,
       "--kv-cache-dtype auto resolves to bfloat16 on FLASHINFER_MLA_SPARSE_DSV41 (SM10x)"},
      {"b200", std::string("FLASHINFER_MLA_SPARSE_DSV41"), "fp8", KvCacheDtype::fp8_e4m3,
       "--kv-cache-dtype fp8 resolves to fp8_e4m3 on FLASHINFER_MLA_SPARSE_DSV41 (SM10x)"},
      {"b200", std::string("FLASHINFER_MLA_SPARSE_DSV41"), "bfloat16", KvCacheDtype::bfloat16, ""},
      {"rtx-pro-6000", std::nullopt, "auto", KvCacheDtype::fp8_ds_mla,
       "--kv-cache-dtype auto resolves to fp8_ds_mla on FLASHINFER_MLA_SPARSE_DSV41 (SM120 class)"},
      {"rtx-pro-6000", std::nullopt, "fp8_e4m3", KvCacheDtype::fp8_ds_mla,
       "--kv-cache-dtype fp8_e4m3 resolves to fp8_ds_mla on FLASHINFER_MLA_SPARSE_DSV41 (SM120 class)"},
      {"b200", std::nullopt, "auto", KvCacheDtype::fp8_ds_mla,
       "--kv-cache-dtype auto resolves to fp8_ds_mla on FLASHMLA_SPARSE_DSV41 (fused)"},
      {"b200", std::nullopt, "nvfp4_ds_mla", KvCacheDtype::nvfp4_ds_mla, ""},
  };
  for (const auto& c : ok) {
    INFO(c.gpu << " " << c.backend.value_or("(default)") << " --kv-cache-dtype " << c.kv);
    RuleOptions o;
    o.layout.attention_backend = c.backend;
    o.layout.kv_cache_dtype = c.kv;
    const auto rs = eval(v41(), gpu(c.gpu), o);
    CHECK(errors(rs) == 0);
    LayoutOptions lo = o.layout;
    CHECK(resolve(v41(), c.gpu, lo).options.kv == c.layout);
    const auto info = find(rs, "layout.kv_cache_dtype", Severity::info);
    if (c.info.empty()) {
      CHECK_FALSE(info);
    } else {
      REQUIRE(info);
      CHECK(info->finding.message == c.info);
    }
  }
}

TEST_CASE("head paddings per backend", "[backends]") {
  // FlashInfer (>= 0.6.14) pads to {8, 16, 32, 64, 128}; FlashMLA to {64, 128}.
  for (auto b : {BackendId::flashinfer_mla_sparse_dsv41, BackendId::flashinfer_mla_sparse_sm120}) {
    INFO(backend_title(b));
    CHECK(padded_heads(b, 1) == 8);
    CHECK(padded_heads(b, 8) == 8);
    CHECK(padded_heads(b, 9) == 16);
    CHECK(padded_heads(b, 16) == 16);
    CHECK(padded_heads(b, 20) == 32);
    CHECK(padded_heads(b, 33) == 64);
    CHECK(padded_heads(b, 128) == 128);
    CHECK_FALSE(padded_heads(b, 129));
    CHECK_FALSE(padded_heads(b, 0));
  }
  for (auto b : {BackendId::flashmla_sparse_dsv41, BackendId::flashmla_sparse_dsv41_fused,
                 BackendId::flashmla_sparse_dsv4, BackendId::flashmla_sparse}) {
    INFO(backend_title(b));
    CHECK(padded_heads(b, 8) == 64);
    CHECK(padded_heads(b, 20) == 64);
    CHECK(padded_heads(b, 64) == 64);
    CHECK(padded_heads(b, 65) == 128);
    CHECK(padded_heads(b, 128) == 128);
    CHECK_FALSE(padded_heads(b, 129));
    CHECK_FALSE(padded_heads(b, -1));
  }
  // The refusal above 128 heads is FlashInfer's own text on FlashInfer.
  const auto wide = edited("deepseek-v4.1-flash.json", [](nlohmann::json& t) {
    t["num_attention_heads"] = 256;
    t["o_groups"] = 32;
  });
  RuleOptions o;
  o.layout.attention_backend = "FLASHINFER_MLA_SPARSE_DSV41";
  const auto r = find(eval(wide, gpu("b200"), o), "backend.query_heads");
  REQUIRE(r);
  CHECK(r->finding.message ==
        "DeepseekV4 FlashInfer MLA Sparse does not support 256 heads (sparse MLA kernel requires h_q in {8, 16, 32, "
        "64, 128}). --tensor-parallel-size 1 leaves 256 query heads per rank (at most 128; fewer are padded to 8, "
        "16, 32, 64, 128)");
  CHECK(r->finding.fix == "use --tensor-parallel-size 2 or more");
}

TEST_CASE("block sizes, window blocks and page states per backend", "[backends]") {
  const ComputeCapability sm90{9, 0}, sm100{10, 0}, sm120{12, 0};
  using V = std::vector<std::int64_t>;
  // FlashMLA V4.1: 64 on the SM90 family, 128 otherwise; the fused path and FlashInfer SM10x: 128.
  CHECK(backend_block_sizes(BackendId::flashmla_sparse_dsv41, Family::deepseek_v41, sm90) == V{64});
  CHECK(backend_block_sizes(BackendId::flashmla_sparse_dsv41, Family::deepseek_v41, sm100) == V{128});
  CHECK(backend_block_sizes(BackendId::flashmla_sparse_dsv41_fused, Family::deepseek_v41, sm100) == V{128});
  CHECK(backend_block_sizes(BackendId::flashinfer_mla_sparse_dsv41, Family::deepseek_v41, sm100) == V{128});
  // SM120, V4.1: pages of 64 states, so ratio-1 pages hold 64 tokens and ratio-2 pages 128.
  CHECK(backend_block_sizes(BackendId::flashinfer_mla_sparse_sm120, Family::deepseek_v41, sm120) == V{64, 128});
  // SM120, V4.0: "Setting kv cache block size to 256".
  CHECK(backend_block_sizes(BackendId::flashinfer_mla_sparse_sm120, Family::deepseek_v4, sm120) == V{256});
  CHECK(backend_block_sizes(BackendId::flashmla_sparse_dsv4, Family::deepseek_v4, sm90) == V{256});
  CHECK(backend_block_sizes(BackendId::flashmla_sparse, Family::deepseek_v32, sm100) == V{64});

  CHECK(fixed_page_states(BackendId::flashinfer_mla_sparse_sm120, Family::deepseek_v41) == 64);
  CHECK(fixed_page_states(BackendId::flashinfer_mla_sparse_sm120, Family::deepseek_v4) == 0);
  for (const auto& b : backend_catalogue()) {
    if (b.id != BackendId::flashinfer_mla_sparse_sm120) CHECK(fixed_page_states(b.id, b.families.front()) == 0);
  }
  CHECK(backend_window_block(BackendId::flashmla_sparse_dsv41, Family::deepseek_v41) == 32);
  CHECK(backend_window_block(BackendId::flashmla_sparse_dsv41_fused, Family::deepseek_v41) == 32);
  CHECK(backend_window_block(BackendId::flashinfer_mla_sparse_dsv41, Family::deepseek_v41) == 32);
  CHECK(backend_window_block(BackendId::flashinfer_mla_sparse_sm120, Family::deepseek_v41) == 64);
  CHECK(backend_window_block(BackendId::flashinfer_mla_sparse_sm120, Family::deepseek_v4) == 64);
  CHECK(backend_window_block(BackendId::flashmla_sparse_dsv4, Family::deepseek_v4) == 64);
  CHECK(backend_window_block(BackendId::flashmla_sparse, Family::deepseek_v32) == 0);

  // Resolved options: the ratio-r block of SM120 is 64 x r; elsewhere the block at every ratio.
  const auto sm = resolve(v41(), "rtx-pro-6000").options;
  CHECK(sm.block == 64);
  CHECK(sm.page_states == 64);
  CHECK(sm.window_block == 64);
  CHECK(sm.global_block(1) == 64);
  CHECK(sm.global_block(2) == 128);
  const auto fi = resolve(v41(), "b200",
                          [] {
                            LayoutOptions o;
                            o.attention_backend = "FLASHINFER_MLA_SPARSE_DSV41";
                            return o;
                          }())
                      .options;
  CHECK(fi.block == 128);
  CHECK(fi.page_states == 0);
  CHECK(fi.window_block == 32);
  CHECK(fi.global_block(2) == 128);

  // --block-size: the SM120 class takes 64 or 128 (its pages stay 64 states); anything else is
  // vLLM's "No common block size" refusal.
  RuleOptions o;
  o.layout.block_size = 256;
  const auto r = find(eval(v41(), gpu("rtx-pro-6000"), o), "backend.block_size");
  REQUIRE(r);
  CHECK(r->finding.message ==
        "No common block size for 256 between kv_manager=[256] and backend=[64, 128] (--block-size: "
        "FLASHINFER_MLA_SPARSE_DSV41 (SM120 class) for deepseek_v41 on sm120 uses 64, 128)");
  CHECK(r->finding.fix == "omit --block-size");
  o.layout.block_size = 128;
  CHECK_FALSE(find(eval(v41(), gpu("rtx-pro-6000"), o), "backend.block_size"));
  CHECK(resolve(v41(), "rtx-pro-6000", o.layout).options.global_block(1) == 64);
  o.layout.block_size = 64;
  const auto fi64 = [] {
    RuleOptions x;
    x.layout.block_size = 64;
    x.layout.attention_backend = "FLASHINFER_MLA_SPARSE_DSV41";
    return x;
  }();
  const auto f = find(eval(v41(), gpu("b200"), fi64), "backend.block_size");
  REQUIRE(f);
  CHECK_THAT(f->finding.message, Catch::StartsWith("No common block size for 64 between kv_manager=[64] and "
                                                   "backend=[128]"));
  const auto v4 = find(eval(v40(), gpu("rtx-pro-6000"), o), "backend.block_size");
  REQUIRE(v4);
  CHECK_THAT(v4->finding.message,
             Catch::StartsWith("No common block size for 64 between kv_manager=[64] and backend=[256]"));
}

TEST_CASE("the catalogue: keys, names, classes and titles", "[backends]") {
  REQUIRE(backend_catalogue().size() == kBackendCount);
  for (std::size_t i = 0; i < kBackendCount; ++i) {
    const auto& b = backend_catalogue()[i];
    CHECK(static_cast<std::size_t>(b.id) == i);
    CHECK(parse_backend_key(b.key) == b.id);
    CHECK(&backend_info(b.id) == &b);
    CHECK_FALSE(b.source.empty());
    CHECK(b.kv_dtypes.size() == kv_cache_dtype_values().size());
    CHECK(std::is_sorted(b.head_paddings.begin(), b.head_paddings.end()));
  }
  CHECK_FALSE(parse_backend_key("FLASHMLA_SPARSE_DSV41"));  // keys, not vLLM's names
  CHECK(backend_title(BackendId::flashmla_sparse_dsv41) == "FLASHMLA_SPARSE_DSV41");
  CHECK(backend_title(BackendId::flashmla_sparse_dsv41_fused) == "FLASHMLA_SPARSE_DSV41 (fused)");
  CHECK(backend_title(BackendId::flashinfer_mla_sparse_dsv41) == "FLASHINFER_MLA_SPARSE_DSV41 (SM10x)");
  CHECK(backend_title(BackendId::flashinfer_mla_sparse_sm120) == "FLASHINFER_MLA_SPARSE_DSV41 (SM120 class)");
  CHECK(backend_info(BackendId::flashinfer_mla_sparse_sm120).attention_class == "DeepseekV4FlashInferSM120Attention");
  CHECK(backend_info(BackendId::flashinfer_mla_sparse_dsv41).attention_class == "DeepseekV4FlashInferMLAAttention");
  CHECK(backend_info(BackendId::flashmla_sparse_dsv41_fused).attention_class == "DeepseekV4FlashMLAFusedAttention");
  CHECK(backend_info(BackendId::flashmla_sparse_dsv41).tile_plans);
  CHECK_FALSE(backend_info(BackendId::flashmla_sparse_dsv41_fused).tile_plans);
  CHECK(backend_info(BackendId::flashinfer_mla_sparse_dsv41).cc_majors == std::vector<int>{10});
  CHECK(backend_info(BackendId::flashmla_sparse_dsv41).cc_majors == std::vector<int>{9, 10});
}

// =================================================================== 2. the choice per arch

TEST_CASE("vLLM's default backend per arch and family", "[backends]") {
  struct Case {
    const ModelConfig* cfg;
    const char* gpu;
    BackendId id;
    const char* how;
  };
  const char* fused_how = ", fused because attention_config.dsv4_fused_attention is unset and the kernel has the shape";
  const std::vector<Case> cases = {
      {&v41(), "h200", BackendId::flashmla_sparse_dsv41, "vLLM's default on sm90"},
      {&v41(), "h100", BackendId::flashmla_sparse_dsv41, "vLLM's default on sm90"},
      {&v41(), "h20", BackendId::flashmla_sparse_dsv41, "vLLM's default on sm90"},
      // V4.1-Flash: 64 heads over 8 o_groups = 8 heads per group, the fused kernel's shape.
      {&v41(), "b200", BackendId::flashmla_sparse_dsv41_fused, "vLLM's default on sm100"},
      {&v41(), "gb200", BackendId::flashmla_sparse_dsv41_fused, "vLLM's default on sm100"},
      {&v41(), "b300", BackendId::flashmla_sparse_dsv41_fused, "vLLM's default on sm103"},
      {&v41(), "rtx-pro-6000", BackendId::flashinfer_mla_sparse_sm120, "vLLM's default on sm120"},
      {&v41(), "rtx5090", BackendId::flashinfer_mla_sparse_sm120, "vLLM's default on sm120"},
      {&v41(), "gb10", BackendId::flashinfer_mla_sparse_sm120, "vLLM's default on sm121"},
      {&v40(), "h200", BackendId::flashmla_sparse_dsv4, "vLLM's default on sm90"},
      {&v40(), "b200", BackendId::flashmla_sparse_dsv4, "vLLM's default on sm100"},
      {&v40(), "rtx-pro-6000", BackendId::flashinfer_mla_sparse_sm120, "vLLM's default on sm120"},
      {&v40(), "gb10", BackendId::flashinfer_mla_sparse_sm120, "vLLM's default on sm121"},
      {&v32(), "h200", BackendId::flashmla_sparse, "vLLM's default on sm90"},
      {&v32(), "b200", BackendId::flashmla_sparse, "vLLM's default on sm100"},
  };
  for (const auto& c : cases) {
    INFO(to_string(c.cfg->family) << " on " << c.gpu);
    const auto ch = choose(*c.cfg, c.gpu);
    CHECK(ch.id == c.id);
    CHECK(ch.by_default);
    CHECK(ch.refusal.empty());
    CHECK(ch.refusal_id.empty());
    CHECK(ch.how == std::string(c.how) + (c.id == BackendId::flashmla_sparse_dsv41_fused ? fused_how : ""));
    CHECK(errors(eval(*c.cfg, gpu(c.gpu))) == 0);
  }
  // V3.2 has no backend on SM12x or Ampere: FlashMLA's refusal.
  for (const auto g : {"rtx-pro-6000", "gb10", "a100"}) {
    INFO("V3.2 on " << g);
    const Target t = gpu(g);
    const auto ch = choose(v32(), g);
    CHECK(ch.id == BackendId::flashmla_sparse);
    CHECK(ch.refusal_id == "backend.arch");
    CHECK(ch.refusal == "FlashMLA Sparse is only supported on Hopper and Blackwell DC devices; target " +
                            std::string(g) + " is " + t.cc.sm() + " (compute capability " + t.cc.str() +
                            "), supported: 9.x (sm90) and 10.x (sm100, sm103)");
    CHECK(ch.fix == "use a Hopper or Blackwell datacentre GPU (--gpu h200, --gpu b200)");
    const auto r = find(eval(v32(), t), "backend.arch");
    REQUIRE(r);
    CHECK(r->finding.message == ch.refusal);
  }
  // V4.1 on Ampere: no backend of the family runs there.
  const auto a = choose(v41(), "a100");
  CHECK(a.refusal_id == "backend.arch");
  CHECK(a.refusal ==
        "FlashMLA Sparse is only supported on Hopper and Blackwell DC devices; target a100 is sm80 (compute "
        "capability 8.0), supported: 9.x (sm90) and 10.x (sm100, sm103); FlashInfer's sparse MLA backend of DeepSeek "
        "V4 / V4.1 runs on 10.x and 12.x");
  CHECK(a.fix == "use a Hopper, Blackwell datacentre or SM12x GPU (--gpu h200, --gpu b200, --gpu rtx-pro-6000)");
}

TEST_CASE("attention backend values (--attention-backend)", "[backends]") {
  // FlashInfer's V4.1 name: the TRTLLM-gen class on SM10x, the SM120 class on SM12x.
  const auto b = choose(v41(), "b200", std::string("FLASHINFER_MLA_SPARSE_DSV41"));
  CHECK(b.id == BackendId::flashinfer_mla_sparse_dsv41);
  CHECK_FALSE(b.by_default);
  CHECK(b.refusal.empty());
  CHECK(b.how == "--attention-backend FLASHINFER_MLA_SPARSE_DSV41 on sm100");
  CHECK(choose(v41(), "rtx-pro-6000", std::string("FLASHINFER_MLA_SPARSE_DSV41")).id ==
        BackendId::flashinfer_mla_sparse_sm120);
  CHECK(choose(v41(), "b200", std::string("FLASHINFER_MLA_SPARSE_DSV4")).id == BackendId::flashinfer_mla_sparse_dsv41);
  // On SM90 the FlashInfer backend's supports_combination refuses the arch.
  const auto h = choose(v41(), "h200", std::string("FLASHINFER_MLA_SPARSE_DSV41"));
  CHECK(h.refusal_id == "backend.arch");
  CHECK(h.refusal ==
        "FLASHINFER_MLA_SPARSE_DSV4 requires SM10x or SM12x; target h200 is sm90 (compute capability 9.0)");
  CHECK(h.fix == "use a compute capability 10.x or 12.x GPU, or omit --attention-backend");
  {
    RuleOptions o;
    o.layout.attention_backend = "FLASHINFER_MLA_SPARSE_DSV41";
    const auto rs = eval(v41(), gpu("h200"), o);
    const auto r = find(rs, "backend.arch");
    REQUIRE(r);
    CHECK(r->finding.message == h.refusal);
    CHECK(rules_exit_code(rs) == 3);
  }
  // The generic FlashInfer names are refused for V4.1 with vLLM's text.
  for (const std::string name : {"FLASHINFER_MLA_SPARSE", "FLASHINFER_MLA_SPARSE_SM120"}) {
    for (const auto g : {"b200", "rtx-pro-6000"}) {
      INFO(name << " on " << g);
      const auto ch = choose(v41(), g, name);
      CHECK(ch.refusal_id == "backend.attention_backend");
      CHECK(ch.refusal == name +
                              " is not a DeepSeek V4.1 attention backend. Use FLASHINFER_MLA_SPARSE_DSV41 for "
                              "DeepSeek V4.1 FlashInfer sparse MLA.");
      CHECK(ch.fix == "use --attention-backend FLASHINFER_MLA_SPARSE_DSV41");
      RuleOptions o;
      o.layout.attention_backend = name;
      const auto r = find(eval(v41(), gpu(g), o), "backend.attention_backend");
      REQUIRE(r);
      CHECK(r->finding.message == ch.refusal);
    }
  }
  // vLLM's names are case-insensitive; FlashMLA's name is the split-KV class (fused when unset on SM100).
  const auto lower = choose(v41(), "h200", std::string("flashmla_sparse_dsv41"));
  CHECK(lower.id == BackendId::flashmla_sparse_dsv41);
  CHECK(lower.refusal.empty());
  CHECK(lower.how == "--attention-backend FLASHMLA_SPARSE_DSV41 on sm90");
  CHECK(choose(v41(), "b200", std::string("FlashMLA_Sparse_DSV41")).id == BackendId::flashmla_sparse_dsv41_fused);
  // A name that is no backend: a usage error with the nearest name.
  const std::string allowed =
      "allowed: FLASHMLA_SPARSE_DSV41, FLASHMLA_SPARSE_DSV4, FLASHMLA_SPARSE, FLASHINFER_MLA_SPARSE_DSV41, "
      "FLASHINFER_MLA_SPARSE_DSV4, FLASHINFER_MLA_SPARSE, FLASHINFER_MLA_SPARSE_SM120";
  require_usage_error([] { choose(v41(), "h200", std::string("FLASHMLA_SPARSE_DSV42")); },
                      "--attention-backend: 'FLASHMLA_SPARSE_DSV42' is not a sparse-MLA attention backend vLLM "
                      "selects for DeepSeek; " +
                          allowed + "; did you mean 'FLASHMLA_SPARSE_DSV41' or 'FLASHMLA_SPARSE_DSV4'?");
  require_usage_error([] { choose(v41(), "h200", std::string("flashmla_sparse_dvs41")); },
                      "--attention-backend: 'flashmla_sparse_dvs41' is not a sparse-MLA attention backend vLLM "
                      "selects for DeepSeek; " +
                          allowed + "; did you mean 'FLASHMLA_SPARSE_DSV41'?");
  require_usage_error([] { choose(v41(), "h200", std::string("dsv41")); },
                      "--attention-backend: 'dsv41' is not a sparse-MLA attention backend vLLM selects for DeepSeek; " +
                          allowed + "; did you mean 'FLASHMLA_SPARSE_DSV41' or 'FLASHINFER_MLA_SPARSE_DSV41'?");
  require_usage_error([] { choose(v41(), "h200", std::string("TRITON_MLA")); },
                      "--attention-backend: 'TRITON_MLA' is not a sparse-MLA attention backend vLLM selects for "
                      "DeepSeek; " +
                          allowed);
  {
    RuleOptions o;
    o.layout.attention_backend = "FLASHMLA_SPARSE_DSV42";
    const auto rs = eval(v41(), gpu("h200"), o);
    const auto r = find(rs, "layout.attention_backend");
    REQUIRE(r);
    CHECK(r->kind == ErrorKind::usage);
    CHECK_THAT(r->finding.message, Catch::EndsWith("did you mean 'FLASHMLA_SPARSE_DSV41' or 'FLASHMLA_SPARSE_DSV4'?"));
    CHECK(rules_exit_code(rs) == 1);
    CHECK_FALSE(resolve(v41(), "h200", o.layout).options.usable);
  }
  // V4.0 and V3.2 take their own names only.
  const auto v4 = choose(v40(), "h200", std::string("FLASHINFER_MLA_SPARSE_DSV41"));
  CHECK(v4.refusal_id == "backend.attention_backend");
  CHECK(v4.refusal ==
        "FLASHINFER_MLA_SPARSE_DSV41 is not a DeepSeek V4 attention backend; DeepSeek V4.0 runs on "
        "FLASHMLA_SPARSE_DSV4 (sm90, sm100) or FLASHINFER_MLA_SPARSE_DSV4 (sm120)");
  CHECK(choose(v40(), "rtx-pro-6000", std::string("FLASHINFER_MLA_SPARSE_DSV4")).id ==
        BackendId::flashinfer_mla_sparse_sm120);
  CHECK(choose(v40(), "b200", std::string("FLASHINFER_MLA_SPARSE_DSV4")).refusal_id == "backend.attention_backend");
  CHECK(choose(v40(), "b200", std::string("FLASHMLA_SPARSE_DSV4")).id == BackendId::flashmla_sparse_dsv4);
  CHECK(choose(v32(), "b200", std::string("FLASHMLA_SPARSE")).id == BackendId::flashmla_sparse);
  CHECK(choose(v32(), "b200", std::string("FLASHINFER_MLA_SPARSE")).refusal_id == "backend.attention_backend");
}

TEST_CASE("the fused FlashMLA path (--dsv4-fused-attention) and its shape", "[backends]") {
  // On: vLLM raises on anything but SM100.
  const auto h = choose(v41(), "h200", std::nullopt, FusedAttention::on);
  CHECK(h.refusal_id == "backend.fused_attention");
  CHECK(h.refusal ==
        "dsv4_fused_attention=True is unsupported: the fused sparse kernel is built for SM100 only; "
        "target h200 is sm90");
  CHECK(h.fix == "omit --dsv4-fused-attention");
  {
    RuleOptions o;
    o.layout.fused_attention = FusedAttention::on;
    const auto r = find(eval(v41(), gpu("h200"), o), "backend.fused_attention");
    REQUIRE(r);
    CHECK_THAT(r->finding.message, Catch::StartsWith("dsv4_fused_attention=True is unsupported: "));
  }
  const auto on = choose(v41(), "b200", std::nullopt, FusedAttention::on);
  CHECK(on.id == BackendId::flashmla_sparse_dsv41_fused);
  CHECK(on.how == "vLLM's default on sm100");
  // Off on B200: the split-KV kernel with tile plans, no info.
  const auto off = choose(v41(), "b200", std::nullopt, FusedAttention::off);
  CHECK(off.id == BackendId::flashmla_sparse_dsv41);
  CHECK(off.refusal.empty());
  CHECK(off.fused_off_reason.empty());
  {
    RuleOptions o;
    o.layout.fused_attention = FusedAttention::off;
    const auto rs = eval(v41(), gpu("b200"), o);
    CHECK(errors(rs) == 0);
    CHECK_FALSE(find(rs, "backend.fused_attention", Severity::info));
    CHECK(resolve(v41(), "b200", o.layout).options.block == 128);
  }
  // 16 heads over 8 o_groups (2 per group): not the fused kernel's shape, so auto falls back.
  const auto narrow = edited("deepseek-v4.1-flash.json", [](nlohmann::json& t) {
    t["num_attention_heads"] = 16;
    t["o_groups"] = 8;
  });
  const auto n = choose(narrow, "b200");
  CHECK(n.id == BackendId::flashmla_sparse_dsv41);
  CHECK(n.fused_off_reason == "FlashMLA fused sparse attention disabled: needs 8 heads per o_group");
  {
    const auto rs = eval(narrow, gpu("b200"));
    const auto i = find(rs, "backend.fused_attention", Severity::info);
    REQUIRE(i);
    CHECK(i->finding.message == "FlashMLA fused sparse attention disabled: needs 8 heads per o_group");
    CHECK(errors(rs) == 0);
  }
  const auto n_on = choose(narrow, "b200", std::nullopt, FusedAttention::on);
  CHECK(n_on.refusal == "dsv4_fused_attention=True is unsupported: needs 8 heads per o_group");
  // A layout the fused kernel does not take, with the flag on.
  const auto bf = choose(v41(), "b200", std::nullopt, FusedAttention::on, "bfloat16");
  CHECK(bf.refusal == "dsv4_fused_attention=True is unsupported: needs the fp8_ds_mla or nvfp4_ds_mla KV cache layout");
  // The flag names the FlashMLA V4.1 path; with another backend it is refused.
  const auto fi = choose(v41(), "b200", std::string("FLASHINFER_MLA_SPARSE_DSV41"), FusedAttention::on);
  CHECK(fi.refusal_id == "backend.fused_attention");
  CHECK(fi.refusal ==
        "--dsv4-fused-attention true applies to the FlashMLA backend of DeepSeek V4.1 on SM100; the "
        "chosen backend is FLASHINFER_MLA_SPARSE_DSV41 (SM10x)");
  CHECK(choose(v40(), "b200", std::nullopt, FusedAttention::on).refusal ==
        "--dsv4-fused-attention true applies to the FlashMLA backend of DeepSeek V4.1 on SM100; the chosen backend "
        "is FLASHMLA_SPARSE_DSV4");
  // nvfp4_ds_mla needs the fused layer: off -> vLLM's refusal.
  RuleOptions o;
  o.layout.kv_cache_dtype = "nvfp4_ds_mla";
  o.layout.fused_attention = FusedAttention::off;
  const auto r = find(eval(v41(), gpu("b200"), o), "backend.kv_cache_dtype");
  REQUIRE(r);
  CHECK(r->finding.message == kNvfp4NeedsFused);
  // Where the fused path is off because of the model's shape, leaving the flag unset does not help.
  o.layout.fused_attention = FusedAttention::auto_;
  const auto rn = find(eval(narrow, gpu("b200"), o), "backend.kv_cache_dtype");
  REQUIRE(rn);
  CHECK(rn->finding.message == kNvfp4NeedsFused);
  CHECK(rn->finding.fix ==
        "use --kv-cache-dtype fp8_ds_mla (FlashMLA fused sparse attention disabled: needs 8 heads per o_group)");
}

// =================================================================== 3. the layout follows the backend

namespace {

Topology topo_of(const ModelConfig& c) { return build_topology(c); }

/// The first backbone object of `kind` with compress ratio `ratio`.
const CacheObject& first(const Layout& L, CacheKind kind, std::int64_t ratio) {
  for (const auto& o : L.objects) {
    if (o.kind == kind && o.compress_ratio == ratio && !o.draft) return o;
  }
  FAIL("no " << to_string(kind) << " object of ratio " << ratio);
  throw std::logic_error("unreachable");
}

Layout plan_of(const ModelConfig& cfg, const std::string& g, LayoutOptions o = {}) {
  const auto t = topo_of(cfg);
  return plan_layout(cfg, t, gpu(g), o);
}

struct Owners {
  std::int64_t c1 = 0, c2 = 0, idx1 = 0, idx2 = 0;  // backbone + draft kv sources by ratio
  std::int64_t c1_backbone = 0, c2_backbone = 0, idx1_backbone = 0, idx2_backbone = 0;
};

Owners owners(const ModelConfig& cfg) {
  Owners w;
  for (const auto& l : topo_of(cfg).layers) {
    if (!l.is_kv_source) continue;
    const bool r1 = l.compress_ratio == 1;
    (r1 ? w.c1 : w.c2) += 1;
    if (!l.draft) (r1 ? w.c1_backbone : w.c2_backbone) += 1;
    if (l.owns_indexer_cache) {
      (r1 ? w.idx1 : w.idx2) += 1;
      if (!l.draft) (r1 ? w.idx1_backbone : w.idx2_backbone) += 1;
    }
  }
  return w;
}

}  // namespace

TEST_CASE("layout: FlashInfer SM10x stores plain rows in pages aligned to 512", "[backends][layout]") {
  const Owners w = owners(v41());
  REQUIRE(w.c1 > 0);
  REQUIRE(w.c2 > 0);
  REQUIRE(w.idx1 + w.idx2 > 0);
  struct Case {
    const char* kv;
    RowFormatId fmt;
    std::int64_t row;
  };
  for (const Case c :
       {Case{"auto", RowFormatId::bf16, 1024}, Case{"bfloat16", RowFormatId::bf16, 1024},
        Case{"fp8", RowFormatId::fp8_per_tensor, 512}, Case{"fp8_e4m3", RowFormatId::fp8_per_tensor, 512}}) {
    INFO("--kv-cache-dtype " << c.kv);
    LayoutOptions o;
    o.attention_backend = "FLASHINFER_MLA_SPARSE_DSV41";
    o.kv_cache_dtype = c.kv;
    const Layout L = plan_of(v41(), "b200", o);
    CHECK(L.backend == BackendId::flashinfer_mla_sparse_dsv41);
    CHECK(L.block_size == 128);
    CHECK(L.window_block_size == 32);
    CHECK(L.page_states == 0);
    // Window pages: 32 tokens x row, already a multiple of 512 (32 x 1024 = 32,768; 32 x 512 = 16,384).
    const auto& win = first(L, CacheKind::swa, 1);
    CHECK(win.format == c.fmt);
    CHECK(win.row_bytes == c.row);
    CHECK(win.rows_per_page == 32);
    CHECK(win.alignment == 512);
    CHECK(win.page_bytes == 32 * c.row);
    // Compressed pages of block 128: 128 rows at ratio 1, 64 rows at ratio 2.
    const auto& c1 = first(L, CacheKind::compressed, 1);
    CHECK(c1.format == c.fmt);
    CHECK(c1.rows_per_page == 128);
    CHECK(c1.tokens_per_page == 128);
    CHECK(c1.page_bytes == 128 * c.row);  // 131,072 (bf16) or 65,536 (fp8)
    const auto& c2 = first(L, CacheKind::compressed, 2);
    CHECK(c2.rows_per_page == 64);
    CHECK(c2.tokens_per_page == 128);
    CHECK(c2.page_bytes == 64 * c.row);
    // Indexer pages next to plain rows align to 512, not 576:
    // ratio 1: 128 x 132 = 16,896 = 33 x 512; ratio 2: 64 x 132 = 8,448 -> 17 x 512 = 8,704.
    std::int64_t idx1 = 0, idx2 = 0;
    for (const auto& x : L.objects) {
      if (x.kind != CacheKind::indexer) continue;
      CHECK(x.alignment == 512);
      if (x.compress_ratio == 1) {
        CHECK(x.page_bytes == 16896);
        idx1 = x.page_bytes;
      } else {
        CHECK(x.page_bytes == 8704);
        idx2 = x.page_bytes;
      }
    }
    // The engine's bytes per token: page bytes / tokens per page over the global objects.
    const std::int64_t den = 128;
    const std::int64_t pages_num = w.c1 * 128 * c.row + w.c2 * 64 * c.row + w.idx1 * idx1 + w.idx2 * idx2;
    CHECK(L.accounting.global_pages.value() == Approx(static_cast<double>(pages_num) / den));
    // DeepSeek's rows: row / ratio over the backbone owners (the indexer row is 132 bytes).
    const double rows = static_cast<double>(w.c1_backbone * c.row) + static_cast<double>(w.c2_backbone * c.row) / 2 +
                        static_cast<double>(w.idx1_backbone * 132) + static_cast<double>(w.idx2_backbone * 132) / 2;
    CHECK(L.accounting.global_rows.value() == Approx(rows));
  }
  // The same model on B200's default (fused FlashMLA): 584-byte rows in pages aligned to 576.
  const Layout F = plan_of(v41(), "b200");
  CHECK(F.backend == BackendId::flashmla_sparse_dsv41_fused);
  const auto& fw = first(F, CacheKind::swa, 1);
  CHECK(fw.row_bytes == 584);
  CHECK(fw.page_bytes == 19008);                                  // 32 x 584 = 18,688 -> 33 x 576
  CHECK(first(F, CacheKind::compressed, 1).page_bytes == 74880);  // 128 x 584 = 74,752 -> 130 x 576
  CHECK(first(F, CacheKind::indexer, 1).page_bytes == 17280);     // 128 x 132 = 16,896 -> 30 x 576
}

TEST_CASE("layout: the SM120 class's pages of 64 states", "[backends][layout]") {
  const Layout L = plan_of(v41(), "rtx-pro-6000");
  CHECK(L.backend == BackendId::flashinfer_mla_sparse_sm120);
  CHECK(L.kv_cache_dtype == KvCacheDtype::fp8_ds_mla);
  CHECK(L.page_states == 64);
  CHECK(L.block_size == 64);
  CHECK(L.window_block_size == 64);
  // 64 rows x 584 B = 37,376 -> a multiple of 576: 65 x 576 = 37,440, at every kind of main cache.
  const auto& win = first(L, CacheKind::swa, 1);
  CHECK(win.rows_per_page == 64);
  CHECK(win.tokens_per_page == 64);
  CHECK(win.row_bytes == 584);
  CHECK(win.page_bytes == 37440);
  const auto& c1 = first(L, CacheKind::compressed, 1);
  CHECK(c1.rows_per_page == 64);
  CHECK(c1.tokens_per_page == 64);
  CHECK(c1.page_bytes == 37440);
  const auto& c2 = first(L, CacheKind::compressed, 2);
  CHECK(c2.rows_per_page == 64);
  CHECK(c2.tokens_per_page == 128);
  CHECK(c2.page_bytes == 37440);
  // Indexer pages of 64 rows: 64 x 132 = 8,448 -> 15 x 576 = 8,640, ratio 1 and 2 alike.
  for (const auto& x : L.objects) {
    if (x.kind != CacheKind::indexer) continue;
    CHECK(x.rows_per_page == 64);
    CHECK(x.tokens_per_page == 64 * x.compress_ratio);
    CHECK(x.page_bytes == 8640);
  }
  const Owners w = owners(v41());
  // Bytes per token: 37,440 / 64 per ratio-1 source, 37,440 / 128 per ratio-2 source, and so on.
  // In 128ths of a byte: 37,440 x 2 per ratio-1 source, 37,440 per ratio-2 source; indexers alike.
  const std::int64_t pages128 = w.c1 * 37440 * 2 + w.c2 * 37440 + w.idx1 * 8640 * 2 + w.idx2 * 8640;
  CHECK(L.accounting.global_pages.value() == Approx(static_cast<double>(pages128) / 128));
  // V4.0 on SM120 keeps its block of 256 (window pages of 64).
  const Layout V = plan_of(v40(), "rtx-pro-6000");
  CHECK(V.backend == BackendId::flashinfer_mla_sparse_sm120);
  CHECK(V.block_size == 256);
  CHECK(V.page_states == 0);
  CHECK(first(V, CacheKind::compressed, 4).rows_per_page == 64);
  CHECK(first(V, CacheKind::compressed, 128).rows_per_page == 2);
}

TEST_CASE("fit: the GPU KV cache follows the backend's rows on B200", "[backends][plan]") {
  auto fit_of = [](std::optional<std::string> backend, const std::string& kv) {
    PlanRequest r;
    r.target.gpu = "b200";
    r.layout.tensor_parallel_size = 8;
    r.layout.attention_backend = std::move(backend);
    r.layout.kv_cache_dtype = kv;
    r.deploy.vllm_version = "0.30.0";  // 0.30's default on B200: fused FlashMLA
    r.schedules = false;
    r.suggestions = false;
    return make_plan(config_path("deepseek-v4.1-flash.json"), r);
  };
  const Plan flashmla = fit_of(std::nullopt, "auto");                  // fused, 584-byte rows
  const Plan fi_bf16 = fit_of("FLASHINFER_MLA_SPARSE_DSV41", "auto");  // 1,024-byte rows
  const Plan fi_fp8 = fit_of("FLASHINFER_MLA_SPARSE_DSV41", "fp8");    // 512-byte rows
  for (const Plan* p : {&flashmla, &fi_bf16, &fi_fp8}) {
    REQUIRE(p->fit);
    CHECK(p->fit->fits);
    CHECK(p->exit_code == 0);
  }
  CHECK(flashmla.layout->backend == BackendId::flashmla_sparse_dsv41_fused);
  CHECK(fi_bf16.layout->backend == BackendId::flashinfer_mla_sparse_dsv41);
  CHECK(fi_bf16.layout->kv_cache_dtype == KvCacheDtype::bfloat16);
  CHECK(fi_fp8.layout->kv_cache_dtype == KvCacheDtype::fp8_e4m3);
  // Bytes per token order the backends: 512 < 584 < 1,024-byte rows.
  const double bpt_fp8 = fi_fp8.layout->accounting.global_pages.value();
  const double bpt_mla = flashmla.layout->accounting.global_pages.value();
  const double bpt_bf16 = fi_bf16.layout->accounting.global_pages.value();
  CHECK(bpt_fp8 < bpt_mla);
  CHECK(bpt_mla < bpt_bf16);
  // Same weights, so the same memory for the cache; more bytes per token, fewer tokens.
  CHECK(fi_bf16.fit->vllm.available_bytes == flashmla.fit->vllm.available_bytes);
  CHECK(fi_fp8.fit->vllm.gpu_kv_cache_tokens > flashmla.fit->vllm.gpu_kv_cache_tokens);
  CHECK(flashmla.fit->vllm.gpu_kv_cache_tokens > fi_bf16.fit->vllm.gpu_kv_cache_tokens);
  // bf16 rows are 1,024 / 584 of FlashMLA's: the token count drops by about that factor (within the
  // window pages' share).
  const double ratio = static_cast<double>(flashmla.fit->vllm.gpu_kv_cache_tokens) /
                       static_cast<double>(fi_bf16.fit->vllm.gpu_kv_cache_tokens);
  CHECK(ratio > 1.5);
  CHECK(ratio < 1024.0 / 584.0 + 0.1);
}

// =================================================================== 4. speculative decoding

TEST_CASE("spec: DSpark below dspark_block_size warns, PP and DCP are refused", "[backends][spec]") {
  CHECK(draft_method(v41()) == DraftMethod::dspark);
  CHECK(draft_method(v40()) == DraftMethod::mtp);
  CHECK(draft_method(v32()) == DraftMethod::mtp);
  CHECK(std::string(to_string(DraftMethod::dspark)) == "dspark");
  {
    RuleOptions o;
    o.layout.num_speculative_tokens = 3;
    const auto rs = eval(v41(), gpu("h200"), o);
    const auto w = find(rs, "spec.dspark_block_size", Severity::warning);
    REQUIRE(w);
    CHECK(w->finding.message ==
          "--spec-tokens 3 is below dspark_block_size 5. vLLM versions disagree: one refuses it (\"DSpark requires "
          "num_speculative_tokens >= dspark_block_size (5); got 3. Smaller values produce incorrect output.\"), later "
          "ones dropped the check");
    CHECK(w->finding.fix == "use --spec-tokens 5");
    CHECK(w->finding.path == "/text_config/dspark_block_size");
    CHECK(errors(rs) == 0);
    o.layout.num_speculative_tokens = 5;
    CHECK_FALSE(find(eval(v41(), gpu("h200"), o), "spec.dspark_block_size", Severity::warning));
  }
  {
    // PP 2 keeps V4.1-Flash's sharing groups whole (PP 3 does not: its message lists 1, 2).
    RuleOptions o;
    o.layout.pipeline_parallel_size = 3;
    const auto cut = find(eval(v41(), gpu("h200"), o), "backend.pipeline_cut");
    REQUIRE(cut);
    CHECK_THAT(cut->finding.message, Catch::EndsWith("Pipeline sizes that work: 1, 2"));
    o.layout.pipeline_parallel_size = 2;
    CHECK(errors(eval(v41(), gpu("h200"), o)) == 0);
    o.layout.num_speculative_tokens = 5;
    const auto rs = eval(v41(), gpu("h200"), o);
    CHECK_FALSE(find(rs, "backend.pipeline_cut"));
    const auto r = find(rs, "spec.dspark_parallel");
    REQUIRE(r);
    CHECK(r->finding.message ==
          "DSpark does not support pipeline parallelism (PP > 1). (--pipeline-parallel-size 2 "
          "with --spec-tokens 5)");
    CHECK(r->finding.fix == "use --pipeline-parallel-size 1, or --spec-tokens 0");
    CHECK(rules_exit_code(rs) == 3);
    CHECK(errors(rs) == 1);
  }
  {
    RuleOptions o;
    o.layout.decode_context_parallel_size = 2;
    o.layout.num_speculative_tokens = 5;
    const auto rs = eval(v41(), gpu("b200"), o);
    const auto dspark = find(rs, "spec.dspark_parallel");
    REQUIRE(dspark);
    CHECK(dspark->finding.message ==
          "DSpark does not support decode context parallelism (DCP > 1). "
          "(--decode-context-parallel-size 2 with --spec-tokens 5)");
    CHECK(dspark->finding.fix == "use --decode-context-parallel-size 1, or --spec-tokens 0");
    // vLLM's own refusals: DCP 2 does not divide TP 1, and V4.1's ratio-2 indexer caches.
    const auto dcp = find(rs, "backend.dcp_indexer_compression");
    REQUIRE(dcp);
    CHECK(dcp->finding.message ==
          "--decode-context-parallel-size 2: vLLM refuses it: \"DCP is not supported with sparse indexer KV "
          "compression (compress_ratio=2).\" (layer 2's indexer; vllm/v1/attention/backends/mla/indexer.py, "
          "DeepseekV32IndexerMetadataBuilder)");
    CHECK(find(rs, "backend.dcp_tensor_parallel"));
    CHECK(errors(rs) == 3);
    // Without speculative tokens only the DCP rule fires; MTP (V4.0) has no DCP rule of its own.
    o.layout.num_speculative_tokens = 0;
    CHECK_FALSE(find(eval(v41(), gpu("b200"), o), "spec.dspark_parallel"));
    o.layout.num_speculative_tokens = 1;
    const auto v4 = eval(v40(), gpu("b200"), o);
    CHECK_FALSE(find(v4, "spec.dspark_parallel"));
    CHECK(find(v4, "backend.dcp_indexer_compression"));
  }
}

TEST_CASE("spec: MTP rounds and configs without draft layers", "[backends][spec]") {
  RuleOptions o;
  // V4.0-Flash: one MTP layer; any count is whole rounds of it.
  for (const std::int64_t n : {1, 2, 3, 7}) {
    o.layout.num_speculative_tokens = n;
    INFO("V4.0 --spec-tokens " << n);
    const auto rs = eval(v40(), gpu("h200"), o);
    CHECK(errors(rs) == 0);
    CHECK_FALSE(find(rs, "spec.mtp_tokens"));
  }
  // Two MTP layers: 1 and 2 run them once, 4 twice; 3 is refused.
  // (compress_ratios counts the draft layers when it is longer than the backbone: it gets one more.)
  const auto two = edited("deepseek-v4-flash.json", [](nlohmann::json& t) {
    t["num_nextn_predict_layers"] = 2;
    t["compress_ratios"].push_back(0);
  });
  REQUIRE(two.num_draft_layers == 2);
  REQUIRE(draft_method(two) == DraftMethod::mtp);
  o.layout.num_speculative_tokens = 3;
  const auto rs = eval(two, gpu("h200"), o);
  const auto r = find(rs, "spec.mtp_tokens");
  REQUIRE(r);
  CHECK(r->finding.message ==
        "num_speculative_tokens:3 must be divisible by n_predict=2 (--spec-tokens 3: vLLM reuses "
        "the 2 MTP stage(s) in whole rounds)");
  CHECK(r->finding.fix == "use --spec-tokens 1, 2, 4, 6, 8, ...");
  CHECK(r->finding.path == "/num_nextn_predict_layers");
  CHECK(rules_exit_code(rs) == 3);
  for (const std::int64_t n : {1, 2, 4, 6}) {
    o.layout.num_speculative_tokens = n;
    INFO("2 MTP layers, --spec-tokens " << n);
    CHECK_FALSE(find(eval(two, gpu("h200"), o), "spec.mtp_tokens"));
  }
  // No draft layers: the draft is another checkpoint; a warning, not an error.
  const auto none = edited("deepseek-v3.2.json", [](nlohmann::json& t) { t["num_nextn_predict_layers"] = 0; });
  REQUIRE(draft_method(none) == DraftMethod::none);
  o.layout.num_speculative_tokens = 2;
  const auto ns = eval(none, gpu("h200"), o);
  const auto w = find(ns, "spec.no_draft_layers", Severity::warning);
  REQUIRE(w);
  CHECK(w->finding.message ==
        "--spec-tokens 2 but the config has no draft layers (num_nextn_predict_layers 0): the "
        "draft model is a separate checkpoint whose weights and caches are not counted here");
  CHECK(w->finding.fix == "plan the draft model's config too");
  CHECK(w->finding.path == "/num_nextn_predict_layers");
  CHECK(errors(ns) == 0);
  o.layout.num_speculative_tokens = 0;
  CHECK_FALSE(find(eval(none, gpu("h200"), o), "spec.no_draft_layers", Severity::warning));
  // A V4.0 re-release with dspark_block_size runs DSpark, not MTP.
  const auto v40_dspark = edited("deepseek-v4-flash.json", [](nlohmann::json& t) { t["dspark_block_size"] = 5; });
  CHECK(draft_method(v40_dspark) == DraftMethod::dspark);
  o.layout.num_speculative_tokens = 3;
  CHECK(find(eval(v40_dspark, gpu("h200"), o), "spec.dspark_block_size", Severity::warning));
}

// =================================================================== 5. kernel shapes

namespace {

std::string types_of(const KernelShape& s) {
  std::string t;
  for (auto x : s.layer_types) t += (t.empty() ? "" : ",") + std::string(to_string(x));
  return t;
}

/// One line per shape: what the brief asks to be checked, in a form a failure prints readably.
std::string describe(const KernelShape& s) {
  std::ostringstream o;
  o << s.phase << " " << types_of(s) << (s.draft ? " (draft)" : "") << " h" << s.local_heads << "->" << s.kernel_heads
    << " topk " << s.topk << " extra " << s.extra_topk << " rows " << s.page_rows << "/" << s.extra_page_rows << " "
    << to_string(s.status);
  return o.str();
}

std::string line(const std::string& phase, const std::string& types, bool draft, std::int64_t h, std::int64_t kh,
                 std::int64_t topk, std::int64_t extra, std::int64_t rows, std::int64_t extra_rows,
                 const std::string& status) {
  std::ostringstream o;
  o << phase << " " << types << (draft ? " (draft)" : "") << " h" << h << "->" << kh << " topk " << topk << " extra "
    << extra << " rows " << rows << "/" << extra_rows << " " << status;
  return o.str();
}

std::vector<std::string> shapes_of(const ModelConfig& cfg, const std::string& g, LayoutOptions o) {
  std::vector<std::string> out;
  for (const auto& s : kernel_shapes(cfg, topo_of(cfg), gpu(g), o)) out.push_back(describe(s));
  return out;
}

}  // namespace

TEST_CASE("kernel shapes of V4.1-Flash per TP on H200, B200 and RTX PRO 6000", "[backends][kernel]") {
  const ModelConfig& c = v41();
  const std::int64_t W = c.sliding_window;  // 128
  const std::int64_t K = c.index_topk;      // 512
  const std::int64_t H = c.num_attention_heads;
  REQUIRE(W == 128);
  REQUIRE(K == 512);
  // Prefill on FlashMLA reads one combined list: round_up(window + extra, 128).
  const std::int64_t p0 = round_up(W, 128), p1 = round_up(W + K, 128);  // 128, 640
  for (const std::int64_t tp : {1, 2, 4, 8}) {
    LayoutOptions o;
    o.tensor_parallel_size = tp;
    const std::int64_t h = H / tp;
    INFO("TP " << tp);
    // H200: split-KV FlashMLA, 64-head kernel at every TP, block 64 (c2a pages 32 rows), window pages 32.
    CHECK(shapes_of(c, "h200", o) ==
          std::vector<std::string>{line("decode", "swaonly", false, h, 64, W, 0, 32, 0, "available"),
                                   line("decode", "c2a", false, h, 64, W, K, 32, 32, "available"),
                                   line("decode", "c1a", false, h, 64, W, K, 32, 64, "available"),
                                   line("prefill", "swaonly", false, h, 64, p0, 0, 32, 0, "available"),
                                   line("prefill", "c2a,c1a", false, h, 64, p1, 0, 32, 0, "available")});
    // B200: the fused kernel, block 128.
    CHECK(shapes_of(c, "b200", o) ==
          std::vector<std::string>{line("decode", "swaonly", false, h, 64, W, 0, 32, 0, "available"),
                                   line("decode", "c2a", false, h, 64, W, K, 32, 64, "available"),
                                   line("decode", "c1a", false, h, 64, W, K, 32, 128, "available"),
                                   line("prefill", "swaonly", false, h, 64, p0, 0, 32, 0, "available"),
                                   line("prefill", "c2a,c1a", false, h, 64, p1, 0, 32, 0, "available")});
    // RTX PRO 6000: FlashInfer pads to the exact head count; pages of 64 rows everywhere, so c2a
    // and c1a launch one shape. Prefill runs the same decode kernel with the window and the
    // extra indices apart (vLLM's SM120 _forward_prefill), so it has the decode widths.
    CHECK(shapes_of(c, "rtx-pro-6000", o) ==
          std::vector<std::string>{line("decode", "swaonly", false, h, h, W, 0, 64, 0, "available"),
                                   line("decode", "c2a,c1a", false, h, h, W, K, 64, 64, "available"),
                                   line("prefill", "swaonly", false, h, h, W, 0, 64, 0, "available"),
                                   line("prefill", "c2a,c1a", false, h, h, W, K, 64, 64, "available")});
    CHECK(errors(eval(c, gpu("rtx-pro-6000"), RuleOptions{std::nullopt, o})) == 0);
    CHECK_FALSE(find(eval(c, gpu("rtx-pro-6000"), RuleOptions{std::nullopt, o}), "kernel.shape", Severity::warning));
  }
  // Head size and layout of every shape.
  for (const auto& s : kernel_shapes(c, topo_of(c), gpu("b200"), LayoutOptions{})) {
    CHECK(s.d_qk == 512);
    CHECK(s.d_v == 512);
    CHECK(s.kv_layout == "fp8_ds_mla");
    CHECK_THAT(s.kernel, Catch::StartsWith("FlashMLA fused sparse sm100 "));
  }
}

TEST_CASE("kernel shapes of the DSpark draft: window + n padded to 64", "[backends][kernel]") {
  CHECK(dspark_window_width(128, 5) == 192);
  CHECK(dspark_window_width(128, 0) == 128);
  CHECK(dspark_window_width(128, 64) == 192);
  CHECK(dspark_window_width(128, 65) == 256);
  CHECK(dspark_window_width(0, 1) == 64);
  const ModelConfig& c = v41();
  LayoutOptions o;
  o.num_speculative_tokens = 5;
  const std::int64_t dw = round_up(c.sliding_window + 5, 64);  // 192
  // SM120 at TP 2: 32 heads, the draft's 192-wide window is not in FlashInfer <= 0.6.18's table.
  o.tensor_parallel_size = 2;
  const auto sm = kernel_shapes(c, topo_of(c), gpu("rtx-pro-6000"), o);
  const auto draft = std::find_if(sm.begin(), sm.end(), [](const KernelShape& s) { return s.draft; });
  REQUIRE(draft != sm.end());
  CHECK(describe(*draft) == line("decode", "swaonly", true, 32, 32, dw, 0, 64, 0, "unknown"));
  CHECK(draft->fix == "use FlashInfer 0.7.0 or later");
  CHECK(std::count_if(sm.begin(), sm.end(), [](const KernelShape& s) { return s.draft; }) == 1);
  RuleOptions ro;
  ro.layout = o;
  const auto rs = eval(c, gpu("rtx-pro-6000"), ro);
  const auto w = find(rs, "kernel.shape", Severity::warning);
  REQUIRE(w);
  CHECK(w->finding.message ==
        "decode swaonly (draft): h_q 32, topk 192, page 64 rows on FlashInfer SM120 DSV4 sparse MLA decode: (h_q 32, "
        "topk 192): FlashInfer <= 0.6.18 dispatches a fixed (heads, topk) table (128, 512 and 1024; 192 and 256 "
        "added later, flashinfer#4380); 0.7.0 takes any width");
  CHECK(errors(rs) == 0);
  // FlashMLA reads index blocks of 64: 192 is fine there.
  for (const auto g : {"h200", "b200"}) {
    INFO(g);
    const auto fm = kernel_shapes(c, topo_of(c), gpu(g), o);
    const auto d = std::find_if(fm.begin(), fm.end(), [](const KernelShape& s) { return s.draft; });
    REQUIRE(d != fm.end());
    CHECK(describe(*d) == line("decode", "swaonly", true, 32, 64, dw, 0, 32, 0, "available"));
  }
  // No speculative tokens: no draft shapes.
  o.num_speculative_tokens = 0;
  for (const auto& s : kernel_shapes(c, topo_of(c), gpu("h200"), o)) CHECK_FALSE(s.draft);
}

TEST_CASE("kernel shapes of V4-Flash and V3.2 per TP", "[backends][kernel]") {
  {
    const ModelConfig& c = v40();
    const std::int64_t W = c.sliding_window, K = c.index_topk, H = c.num_attention_heads;
    // c128a attends every ratio-128 entry: round_up(cdiv(max_model_len, 128), 128) = 8,192 at 1M.
    const std::int64_t C = round_up(cdiv(c.max_position_embeddings, 128), 128);
    REQUIRE(C == 8192);
    for (const std::int64_t tp : {1, 2, 4, 8}) {
      INFO("V4.0 TP " << tp);
      LayoutOptions o;
      o.tensor_parallel_size = tp;
      const std::int64_t h = H / tp;
      // Block 256: c4a pages hold 64 compressed rows, c128a pages 2; window pages of 64.
      const std::vector<std::string> flashmla = {
          line("decode", "swaonly", false, h, 64, W, 0, 64, 0, "available"),
          line("decode", "c4a", false, h, 64, W, K, 64, 64, "available"),
          line("decode", "c128a", false, h, 64, W, C, 64, 2, "available"),
          line("prefill", "swaonly", false, h, 64, round_up(W, 128), 0, 64, 0, "available"),
          line("prefill", "c4a", false, h, 64, round_up(W + K, 128), 0, 64, 0, "available"),
          line("prefill", "c128a", false, h, 64, round_up(W + C, 128), 0, 64, 0, "available")};
      CHECK(shapes_of(c, "h200", o) == flashmla);
      CHECK(shapes_of(c, "b200", o) == flashmla);
      // SM120: the main width (the window, 128) is what vLLM asks FlashInfer for; the c128a extra
      // width (8,192) is a runtime length there.
      CHECK(shapes_of(c, "rtx-pro-6000", o) ==
            std::vector<std::string>{line("decode", "swaonly", false, h, h, W, 0, 64, 0, "available"),
                                     line("decode", "c4a", false, h, h, W, K, 64, 64, "available"),
                                     line("decode", "c128a", false, h, h, W, C, 64, 2, "available"),
                                     line("prefill", "swaonly", false, h, h, W, 0, 64, 0, "available"),
                                     line("prefill", "c4a", false, h, h, W, K, 64, 64, "available"),
                                     line("prefill", "c128a", false, h, h, W, C, 64, 2, "available")});
    }
    // A shorter max_model_len narrows c128a: 128K tokens -> round_up(1024, 128) = 1,024 (in the table).
    LayoutOptions o;
    o.max_model_len = 131072;
    const auto s = kernel_shapes(c, topo_of(c), gpu("rtx-pro-6000"), o);
    const auto c128 = std::find_if(s.begin(), s.end(), [](const KernelShape& x) {
      return x.phase == "decode" && x.layer_types == std::vector<LayerType>{LayerType::c128a};
    });
    REQUIRE(c128 != s.end());
    CHECK(c128->extra_topk == 1024);
    CHECK(c128->status == ShapeStatus::available);
  }
  {
    const ModelConfig& c = v32();
    const std::int64_t K = c.index_topk, H = c.num_attention_heads;  // 2048, 128
    REQUIRE(H == 128);
    for (const std::int64_t tp : {1, 2, 4, 8}) {
      INFO("V3.2 TP " << tp);
      LayoutOptions o;
      o.tensor_parallel_size = tp;
      const std::int64_t h = H / tp;
      const std::int64_t kh = h > 64 ? 128 : 64;
      const std::vector<std::string> want = {line("decode", "dsa", false, h, kh, K, 0, 64, 0, "available"),
                                             line("prefill", "dsa", false, h, kh, K, 0, 64, 0, "available")};
      CHECK(shapes_of(c, "h200", o) == want);
      CHECK(shapes_of(c, "b200", o) == want);
      for (const auto& s : kernel_shapes(c, topo_of(c), gpu("h200"), o)) {
        CHECK(s.d_qk == 576);
        CHECK(s.d_v == 512);
      }
    }
  }
}

TEST_CASE("kernel shapes that are missing", "[backends][kernel]") {
  // 256 heads at TP 1: no FlashMLA kernel has that many (backend.query_heads says so too).
  const auto wide = edited("deepseek-v4.1-flash.json", [](nlohmann::json& t) {
    t["num_attention_heads"] = 256;
    t["o_groups"] = 32;
  });
  const auto ws = kernel_shapes(wide, topo_of(wide), gpu("h200"), LayoutOptions{});
  REQUIRE_FALSE(ws.empty());
  for (const auto& s : ws) {
    CHECK(s.kernel_heads == 0);
    CHECK(s.status == ShapeStatus::missing);
    CHECK(s.note == "256 query heads per rank: no FLASHMLA_SPARSE_DSV41 kernel has that many");
    CHECK(s.fix == "a larger --tensor-parallel-size");
  }
  // 128 heads and index_topk 576 (a multiple of 64, so backend.topk_width passes): h_q 128 reads
  // B_TOPK 128, and 576 % 128 != 0, which FlashMLA asserts against. TP 2 (h_q 64, B_TOPK 64) runs.
  const auto odd = edited("deepseek-v4.1-flash.json", [](nlohmann::json& t) {
    t["num_attention_heads"] = 128;
    t["o_groups"] = 16;
    t["index_topk"] = 576;
  });
  const auto os = kernel_shapes(odd, topo_of(odd), gpu("h200"), LayoutOptions{});
  std::vector<std::string> missing;
  for (const auto& s : os) {
    if (s.status != ShapeStatus::missing) continue;
    missing.push_back(describe(s));
    CHECK(s.note == "extra_topk 576 % B_TOPK 128 != 0 (FlashMLA asserts extra_topk % B_TOPK == 0 for h_q 128)");
  }
  CHECK(missing == std::vector<std::string>{line("decode", "c2a", false, 128, 128, 128, 576, 32, 32, "missing"),
                                            line("decode", "c1a", false, 128, 128, 128, 576, 32, 64, "missing")});
  const auto rs = eval(odd, gpu("h200"));
  const auto ks = all_of_id(rs, "kernel.shape");
  REQUIRE(ks.size() == 2);
  CHECK(ks[0].finding.severity == Severity::error);
  CHECK(ks[0].finding.message ==
        "decode c2a: h_q 128, topk 128 + extra 576, page 32 rows on FlashMLA sparse sm90 decode: extra_topk 576 % "
        "B_TOPK 128 != 0 (FlashMLA asserts extra_topk % B_TOPK == 0 for h_q 128)");
  CHECK(rules_exit_code(rs) == 3);
  RuleOptions tp2;
  tp2.layout.tensor_parallel_size = 2;
  CHECK(errors(eval(odd, gpu("h200"), tp2)) == 0);
  // Not usable options (a bad flag value): no shapes at all.
  LayoutOptions bad;
  bad.kv_cache_dtype = "fp9";
  CHECK(kernel_shapes(v41(), topo_of(v41()), gpu("h200"), bad).empty());
}

// =================================================================== 6. head padding

TEST_CASE("kernel.head_padding: the idle share of a padded kernel", "[backends][kernel]") {
  const ScopedHeadPaddingMeasurements none({});  // not the table's rows: nothing measured anywhere
  RuleOptions o;
  o.layout.tensor_parallel_size = 8;
  const auto h = find(eval(v41(), gpu("h200"), o), "kernel.head_padding", Severity::info);
  REQUIRE(h);
  CHECK(h->finding.message ==
        "TP 8: 8 of 64 query heads per rank run in a 64-head kernel (56 idle, 7/8 of the "
        "attention math) on FLASHMLA_SPARSE_DSV41; unpadded: not measured on NVIDIA H200 SXM 141GB: run `mla-plan "
        "bench CONFIG --tp 8` there");
  // The release modelled by default here has no TRITON_MLA_SPARSE_DSV41 (0.31's: test_small_heads.cpp).
  CHECK(h->finding.fix == "DP attention (--data-parallel-size) keeps all 64 heads on each rank");
  CHECK(h->finding.path == "/text_config/num_attention_heads");
  const auto b = find(eval(v41(), gpu("b200"), o), "kernel.head_padding", Severity::info);
  REQUIRE(b);
  CHECK(b->finding.message ==
        "TP 8: 8 of 64 query heads per rank run in a 64-head kernel (56 idle, 7/8 of the "
        "attention math) on FLASHMLA_SPARSE_DSV41 (fused); unpadded: not measured on NVIDIA B200 180GB: run "
        "`mla-plan bench CONFIG --tp 8` there");
  o.layout.tensor_parallel_size = 2;
  const auto t2 = find(eval(v41(), gpu("h200"), o), "kernel.head_padding", Severity::info);
  REQUIRE(t2);
  CHECK(t2->finding.message ==
        "TP 2: 32 of 64 query heads per rank run in a 64-head kernel (32 idle, 1/2 of the "
        "attention math) on FLASHMLA_SPARSE_DSV41");
  // FlashInfer has 8-, 16- and 32-head kernels: nothing idle.
  for (const std::int64_t tp : {1, 2, 4, 8}) {
    o.layout.tensor_parallel_size = tp;
    INFO("TP " << tp);
    CHECK_FALSE(find(eval(v41(), gpu("rtx-pro-6000"), o), "kernel.head_padding", Severity::info));
    RuleOptions fi = o;
    fi.layout.attention_backend = "FLASHINFER_MLA_SPARSE_DSV41";
    CHECK_FALSE(find(eval(v41(), gpu("b200"), fi), "kernel.head_padding", Severity::info));
  }
  o.layout.tensor_parallel_size = 1;
  CHECK_FALSE(find(eval(v41(), gpu("h200"), o), "kernel.head_padding", Severity::info));
  // V3.2's 128 heads at TP 4: 32 per rank in the 64-head kernel.
  o.layout.tensor_parallel_size = 4;
  const auto v = find(eval(v32(), gpu("h200"), o), "kernel.head_padding", Severity::info);
  REQUIRE(v);
  CHECK(v->finding.message ==
        "TP 4: 32 of 128 query heads per rank run in a 64-head kernel (32 idle, 1/2 of the "
        "attention math) on FLASHMLA_SPARSE");
  CHECK(v->finding.path == "/num_attention_heads");
}

// =================================================================== 7. vLLM 0.31's V4.1 backends
// FLASHMLA_MEGA_ATTN_DSV41 (the SM100 default where it is available) and TRITON_MLA_SPARSE_DSV41
// (opt-in, SM90). Facts: shared/docs/vllm-versions.md 7.2-7.4 and vLLM's
// vllm/models/deepseek_v41/nvidia/{model,flash_mla_mega_attn,triton_sparse}.py.

namespace {

BackendReleaseRules rules31() {
  BackendReleaseRules r;
  r.v41_mega_attention_default = true;
  r.v41_triton_sm90 = true;
  r.version = "0.31.0";
  return r;
}
BackendReleaseRules rules30() {
  BackendReleaseRules r;
  r.version = "0.30.0";
  return r;
}

BackendChoice choose31(const ModelConfig& cfg, const std::string& g, std::optional<std::string> name = std::nullopt,
                       std::int64_t tp = 1, const std::string& kv = "auto") {
  return choose_backend(cfg, gpu(g), name, FusedAttention::auto_, kv, tp, rules31());
}

RuleOptions options31(std::optional<std::string> name, std::int64_t tp, const std::string& kv = "auto") {
  RuleOptions o;
  o.layout.attention_backend = std::move(name);
  o.layout.tensor_parallel_size = tp;
  o.layout.kv_cache_dtype = kv;
  o.layout.release = rules31();
  return o;
}

const char* kSevenNames =
    "FLASHMLA_SPARSE_DSV41, FLASHMLA_SPARSE_DSV4, FLASHMLA_SPARSE, FLASHINFER_MLA_SPARSE_DSV41, "
    "FLASHINFER_MLA_SPARSE_DSV4, FLASHINFER_MLA_SPARSE, FLASHINFER_MLA_SPARSE_SM120";

}  // namespace

TEST_CASE("vLLM 0.31: the catalogue entries of mega attention and the Triton backend", "[backends][v031]") {
  const auto& mega = backend_info(BackendId::flashmla_mega_attn_dsv41);
  CHECK(backend_title(mega.id) == "FLASHMLA_MEGA_ATTN_DSV41");
  CHECK(mega.attention_class == "DeepseekV4MegaAttnAttention");
  CHECK(mega.families == std::vector<Family>{Family::deepseek_v41});
  CHECK(mega.cc_majors == std::vector<int>{10});
  CHECK(mega.head_paddings == std::vector<std::int64_t>{64, 128});  // a FlashMLA subclass: padded
  CHECK_FALSE(mega.tile_plans);  // one decode kernel, no scheduler metadata, no split-KV fallback
  CHECK(mega.first_release == "0.31.0");
  const auto& tri = backend_info(BackendId::triton_mla_sparse_dsv41);
  CHECK(backend_title(tri.id) == "TRITON_MLA_SPARSE_DSV41");
  CHECK(tri.attention_class == "DeepseekV41TritonSparseAttention");
  CHECK(tri.cc_majors == std::vector<int>{9});
  CHECK(tri.head_paddings == std::vector<std::int64_t>{8, 16});
  CHECK(tri.exact_heads);
  CHECK_FALSE(tri.tile_plans);  // its metadata builder asks for an empty tile plan
  CHECK(tri.first_release == "0.31.0");
  // Heads: mega attention pads like FlashMLA; Triton runs 8 or 16 as they are, nothing else.
  CHECK(padded_heads(mega.id, 8) == 64);
  CHECK(padded_heads(mega.id, 64) == 64);
  CHECK(padded_heads(tri.id, 8) == 8);
  CHECK(padded_heads(tri.id, 16) == 16);
  CHECK_FALSE(padded_heads(tri.id, 4));
  CHECK_FALSE(padded_heads(tri.id, 12));
  CHECK_FALSE(padded_heads(tri.id, 32));
  // Blocks: FlashMLA's (128 on SM100, 64 on SM90), V4.1's 32-token window pages.
  const ComputeCapability sm90{9, 0}, sm100{10, 0};
  using V = std::vector<std::int64_t>;
  CHECK(backend_block_sizes(mega.id, Family::deepseek_v41, sm100) == V{128});
  CHECK(backend_block_sizes(tri.id, Family::deepseek_v41, sm90) == V{64});
  CHECK(backend_window_block(mega.id, Family::deepseek_v41) == 32);
  CHECK(backend_window_block(tri.id, Family::deepseek_v41) == 32);
  CHECK(fixed_page_states(mega.id, Family::deepseek_v41) == 0);
  // Every name is a value; a release without the two does not take them.
  const auto values = attention_backend_values();
  CHECK(values.size() == 9);
  CHECK(std::find(values.begin(), values.end(), "FLASHMLA_MEGA_ATTN_DSV41") != values.end());
  CHECK(std::find(values.begin(), values.end(), "TRITON_MLA_SPARSE_DSV41") != values.end());
  CHECK_FALSE(release_has_backend_name("FLASHMLA_MEGA_ATTN_DSV41", rules30()));
  CHECK_FALSE(release_has_backend_name("TRITON_MLA_SPARSE_DSV41", {}));
  CHECK(release_has_backend_name("FLASHMLA_MEGA_ATTN_DSV41", rules31()));
  CHECK(release_has_backend_name("TRITON_MLA_SPARSE_DSV41", rules31()));
  CHECK(release_has_backend_name("FLASHMLA_SPARSE_DSV41", {}));
}

TEST_CASE("vLLM 0.31: what every kv-cache dtype becomes on the two backends", "[backends][v031]") {
  using K = KvCacheDtype;
  // Mega attention: an unspecific value (auto, fp8; the other fp8 spellings are rewritten the
  // same way) becomes its packed record nvfp4_ds_mla; fp8_ds_mla stays.
  check_kv_table(BackendId::flashmla_mega_attn_dsv41, 10,
                 {{"auto", K::nvfp4_ds_mla, ""},
                  {"fp8", K::nvfp4_ds_mla, ""},
                  {"fp8_e4m3", K::nvfp4_ds_mla, ""},
                  {"fp8_e5m2", K::nvfp4_ds_mla, ""},
                  {"fp8_ds_mla", K::fp8_ds_mla, ""},
                  {"nvfp4_ds_mla", K::nvfp4_ds_mla, ""},
                  {"bfloat16", std::nullopt, kFp8LayoutOnly}});
  const char* tri = "TRITON_MLA_SPARSE_DSV41 requires fp8_ds_mla KV cache";
  check_kv_table(BackendId::triton_mla_sparse_dsv41, 9,
                 {{"auto", K::fp8_ds_mla, ""},
                  {"fp8", K::fp8_ds_mla, ""},
                  {"fp8_ds_mla", K::fp8_ds_mla, ""},
                  {"fp8_e4m3", std::nullopt, tri},
                  {"fp8_e5m2", std::nullopt, tri},
                  {"nvfp4_ds_mla", std::nullopt, tri},
                  {"bfloat16", std::nullopt, tri}});
  // Through the rules: the refusal names the value and the backend.
  const auto rs = eval(v41(), gpu("h200"), options31(std::string("TRITON_MLA_SPARSE_DSV41"), 8, "fp8_e4m3"));
  const auto r = find(rs, "backend.kv_cache_dtype");
  REQUIRE(r);
  CHECK(r->finding.message ==
        "TRITON_MLA_SPARSE_DSV41 requires fp8_ds_mla KV cache (--kv-cache-dtype fp8_e4m3 on TRITON_MLA_SPARSE_DSV41)");
  CHECK(r->finding.fix == "use --kv-cache-dtype auto, fp8, fp8_ds_mla");
}

TEST_CASE("vLLM 0.31: mega attention is the SM100 default for V4.1 where it is available", "[backends][v031]") {
  for (const auto g : {"b200", "gb200", "b300"}) {
    for (const std::int64_t tp : {1, 2, 4, 8}) {
      INFO(g << " TP " << tp);
      const Target t = gpu(g);
      const auto ch = choose31(v41(), g, std::nullopt, tp);
      CHECK(ch.id == BackendId::flashmla_mega_attn_dsv41);
      CHECK(ch.by_default);
      CHECK(ch.refusal.empty());
      CHECK(ch.mega_declined.empty());
      // The release that first has this default is not pinned, and the choice says so.
      CHECK(ch.how == "vLLM's default on " + t.cc.sm() +
                          " (the first vLLM release with this default is not pinned: the selector of vLLM after "
                          "0.30, modelled as 0.31.0; --vllm-version 0.30.0 plans 0.30's FlashMLA default)");
      CHECK(mega_attention_declines(v41(), t.cc, tp).empty());
      const auto rs = eval(v41(), t, options31(std::nullopt, tp));
      CHECK(errors(rs) == 0);
      const auto info = find(rs, "layout.kv_cache_dtype", Severity::info);
      REQUIRE(info);
      CHECK(info->finding.message == "--kv-cache-dtype auto resolves to nvfp4_ds_mla on FLASHMLA_MEGA_ATTN_DSV41");
    }
  }
  const auto r = resolve(v41(), "b200", options31(std::nullopt, 8).layout).options;
  CHECK(r.backend.id == BackendId::flashmla_mega_attn_dsv41);
  CHECK(r.kv == KvCacheDtype::nvfp4_ds_mla);
  CHECK(r.block == 128);
  CHECK(r.window_block == 32);
  CHECK(r.parallel.local_query_heads == 8);
  CHECK(r.parallel.padded_query_heads == 64);
  // --kv-cache-dtype fp8_ds_mla is specific: mega attention keeps it.
  CHECK(resolve(v41(), "b200", options31(std::nullopt, 1, "fp8_ds_mla").layout).options.kv == KvCacheDtype::fp8_ds_mla);
  // Elsewhere the 0.31 default is unchanged: FlashMLA on 9.x (Triton is opt-in only), the SM120
  // class on 12.x; V4.0 and V3.2 keep theirs.
  CHECK(choose31(v41(), "h200").id == BackendId::flashmla_sparse_dsv41);
  CHECK(choose31(v41(), "h20", std::nullopt, 8).id == BackendId::flashmla_sparse_dsv41);
  CHECK(choose31(v41(), "rtx-pro-6000").id == BackendId::flashinfer_mla_sparse_sm120);
  CHECK(choose31(v40(), "b200").id == BackendId::flashmla_sparse_dsv4);
  CHECK(choose31(v32(), "b200").id == BackendId::flashmla_sparse);
  // The releases before 0.31 (the defaults, or the 0.30 rules): today's choice, the fused path.
  for (const auto& rel : {BackendReleaseRules{}, rules30()}) {
    const auto ch = choose_backend(v41(), gpu("b200"), std::nullopt, FusedAttention::auto_, "auto", 8, rel);
    CHECK(ch.id == BackendId::flashmla_sparse_dsv41_fused);
    CHECK(ch.mega_declined.empty());
  }
  CHECK(resolve(v41(), "b200").options.kv == KvCacheDtype::fp8_ds_mla);
}

TEST_CASE("vLLM 0.31: mega attention declines TP16 and the default falls back to FlashMLA", "[backends][v031]") {
  const std::string why =
      "TP16 on a 64-head model leaves 4 heads per rank and does not divide its 8 wo_a groups (o_groups); the kernel "
      "needs 8 heads per wo_a group";
  CHECK(mega_attention_declines(v41(), ComputeCapability{10, 0}, 16) == why);
  CHECK(mega_attention_declines(v41(), ComputeCapability{9, 0}, 1) == "FlashMLA mega attention requires sm_10x GPUs.");
  // 16 wo_a groups of 4 heads: no TP gives the kernel 8 heads per group.
  const auto narrow = edited("deepseek-v4.1-flash.json", [](nlohmann::json& t) { t["o_groups"] = 16; });
  CHECK(mega_attention_declines(narrow, ComputeCapability{10, 0}, 1) ==
        "TP1 on a 64-head model leaves 64 heads per rank in 16 wo_a groups, 4 heads per group; the kernel needs 8");
  CHECK(mega_attention_declines(narrow, ComputeCapability{10, 0}, 16) ==
        "TP16 on a 64-head model leaves 4 heads per rank, not a multiple of 8");

  // The default asks mega attention first; at TP16 it declines and vLLM runs split-KV FlashMLA
  // (the 0.31 selector has no fused class), with the reason on the choice.
  const auto ch = choose31(v41(), "b200", std::nullopt, 16);
  CHECK(ch.id == BackendId::flashmla_sparse_dsv41);
  CHECK(ch.by_default);
  CHECK(ch.refusal.empty());
  CHECK(ch.mega_declined == why);
  CHECK(ch.how == "vLLM's default on sm100; FLASHMLA_MEGA_ATTN_DSV41 declined: " + why);
  const auto rs = eval(v41(), gpu("b200"), options31(std::nullopt, 16));
  CHECK_FALSE(find(rs, "backend.attention_backend"));
  CHECK_FALSE(find(rs, "backend.query_heads"));
  const auto info = find(rs, "layout.attention_backend", Severity::info);
  REQUIRE(info);
  CHECK_THAT(info->finding.message, Catch::StartsWith("attention backend FLASHMLA_SPARSE_DSV41 (vLLM's default on "
                                                      "sm100; FLASHMLA_MEGA_ATTN_DSV41 declined: TP16 on a 64-head "
                                                      "model leaves 4"));
  const auto r = resolve(v41(), "b200", options31(std::nullopt, 16).layout).options;
  CHECK(r.kv == KvCacheDtype::fp8_ds_mla);
  CHECK(r.parallel.padded_query_heads == 64);
  // nvfp4_ds_mla after the fallback: FlashMLA does not store it, and the fix says why mega
  // attention (which does) is not there.
  const auto nv = find(eval(v41(), gpu("b200"), options31(std::nullopt, 16, "nvfp4_ds_mla")), "backend.kv_cache_dtype");
  REQUIRE(nv);
  CHECK(nv->finding.fix ==
        "use --kv-cache-dtype fp8_ds_mla (FLASHMLA_MEGA_ATTN_DSV41, which stores nvfp4_ds_mla, declined: " + why + ")");
  // FlashMLA named under 0.31 on SM100: the split-KV class, with the pointer to mega attention.
  const auto named = find(eval(v41(), gpu("b200"), options31(std::string("FLASHMLA_SPARSE_DSV41"), 8, "nvfp4_ds_mla")),
                          "backend.kv_cache_dtype");
  REQUIRE(named);
  CHECK(named->finding.fix ==
        "use --attention-backend FLASHMLA_MEGA_ATTN_DSV41 (it stores nvfp4_ds_mla), or --kv-cache-dtype fp8_ds_mla");
}

TEST_CASE("vLLM 0.31: FLASHMLA_MEGA_ATTN_DSV41 by name", "[backends][v031]") {
  const auto b = choose31(v41(), "b200", std::string("flashmla_mega_attn_dsv41"), 4);
  CHECK(b.id == BackendId::flashmla_mega_attn_dsv41);
  CHECK_FALSE(b.by_default);
  CHECK(b.refusal.empty());
  CHECK(b.how == "--attention-backend FLASHMLA_MEGA_ATTN_DSV41 on sm100");
  // Off SM100: vLLM's decline reason, as a refusal.
  const auto h = choose31(v41(), "h200", std::string("FLASHMLA_MEGA_ATTN_DSV41"), 8);
  CHECK(h.id == BackendId::flashmla_mega_attn_dsv41);
  CHECK(h.refusal_id == "backend.arch");
  CHECK(h.refusal == "FlashMLA mega attention requires sm_10x GPUs. Target h200 is sm90 (compute capability 9.0).");
  CHECK(h.fix == "use a compute capability 10.x GPU (--gpu b200), or omit --attention-backend");
  {
    const auto rs = eval(v41(), gpu("h200"), options31(std::string("FLASHMLA_MEGA_ATTN_DSV41"), 8));
    const auto r = find(rs, "backend.arch");
    REQUIRE(r);
    CHECK_THAT(r->finding.message, Catch::StartsWith("FlashMLA mega attention requires sm_10x GPUs."));
    CHECK(rules_exit_code(rs) == 3);
  }
  // Named at TP16: the layer's own check raises.
  const auto t16 = choose31(v41(), "b200", std::string("FLASHMLA_MEGA_ATTN_DSV41"), 16);
  CHECK(t16.refusal_id == "backend.query_heads");
  CHECK(t16.refusal ==
        "mega attention needs the local head count (4) to be a multiple of 8. (TP16 on a 64-head model leaves 4 heads "
        "per rank and does not divide its 8 wo_a groups (o_groups); the kernel needs 8 heads per wo_a group)");
  CHECK(t16.fix ==
        "use --tensor-parallel-size 1, 2, 4, 8, or omit --attention-backend (vLLM's default then runs "
        "FLASHMLA_SPARSE_DSV41)");
  // Not in the release: a usage error naming the release that added it.
  require_usage_error(
      [] {
        choose_backend(v41(), gpu("b200"), std::string("FLASHMLA_MEGA_ATTN_DSV41"), FusedAttention::auto_, "auto", 1,
                       rules30());
      },
      std::string("--attention-backend: FLASHMLA_MEGA_ATTN_DSV41 is new in vLLM 0.31.0; vLLM 0.30.0 does not have "
                  "it; allowed: ") +
          kSevenNames);
  require_usage_error([] { choose(v41(), "b200", std::string("flashmla_mega_attn_dsv41")); },
                      std::string("--attention-backend: FLASHMLA_MEGA_ATTN_DSV41 is new in vLLM 0.31.0; the vLLM "
                                  "release modelled does not have it; allowed: ") +
                          kSevenNames);
  {
    RuleOptions o;
    o.layout.attention_backend = "FLASHMLA_MEGA_ATTN_DSV41";
    const auto rs = eval(v41(), gpu("b200"), o);
    const auto r = find(rs, "layout.attention_backend");
    REQUIRE(r);
    CHECK(r->kind == ErrorKind::usage);
    CHECK(rules_exit_code(rs) == 1);
  }
  // V4.0 and V3.2 do not take it.
  const auto v4 = choose31(v40(), "b200", std::string("FLASHMLA_MEGA_ATTN_DSV41"));
  CHECK(v4.refusal_id == "backend.attention_backend");
  CHECK(v4.refusal ==
        "FLASHMLA_MEGA_ATTN_DSV41 is not a DeepSeek V4 attention backend; DeepSeek V4.0 runs on "
        "FLASHMLA_SPARSE_DSV4 (sm90, sm100) or FLASHINFER_MLA_SPARSE_DSV4 (sm120)");
  CHECK(choose31(v32(), "b200", std::string("FLASHMLA_MEGA_ATTN_DSV41")).refusal_id == "backend.attention_backend");
}

TEST_CASE("vLLM 0.31: TRITON_MLA_SPARSE_DSV41 opt-in on SM90", "[backends][v031]") {
  // V4.1-Flash at TP8 (8 local heads) and TP4 (16): chosen, heads unpadded, fp8_ds_mla rows.
  for (const std::int64_t tp : {8, 4}) {
    INFO("TP " << tp);
    const auto ch = choose31(v41(), "h200", std::string("TRITON_MLA_SPARSE_DSV41"), tp);
    CHECK(ch.id == BackendId::triton_mla_sparse_dsv41);
    CHECK_FALSE(ch.by_default);
    CHECK(ch.refusal.empty());
    CHECK(ch.how == "--attention-backend TRITON_MLA_SPARSE_DSV41 on sm90");
    const auto o = options31(std::string("TRITON_MLA_SPARSE_DSV41"), tp);
    const auto rs = eval(v41(), gpu("h200"), o);
    CHECK(errors(rs) == 0);
    CHECK_FALSE(find(rs, "kernel.head_padding", Severity::info));
    const auto r = resolve(v41(), "h200", o.layout).options;
    CHECK(r.parallel.local_query_heads == 64 / tp);
    CHECK(r.parallel.padded_query_heads == 64 / tp);
    CHECK(r.kv == KvCacheDtype::fp8_ds_mla);
    CHECK(r.block == 64);
    CHECK(r.window_block == 32);
  }
  // 32 local heads (TP2), 4 (TP16): vLLM's text, the TP sizes that work.
  for (const std::int64_t tp : {2, 16}) {
    INFO("TP " << tp);
    const auto rs = eval(v41(), gpu("h200"), options31(std::string("TRITON_MLA_SPARSE_DSV41"), tp));
    const auto r = find(rs, "backend.query_heads");
    REQUIRE(r);
    CHECK(r->finding.message == "TRITON_MLA_SPARSE_DSV41 requires 8 or 16 local heads (--tensor-parallel-size " +
                                    std::to_string(tp) + " leaves " + std::to_string(64 / tp) +
                                    " query heads per rank; TRITON_MLA_SPARSE_DSV41 runs 8, 16 heads unpadded)");
    CHECK(r->finding.fix == "use --tensor-parallel-size 4, 8");
    CHECK(rules_exit_code(rs) == 3);
  }
  // Capability exactly 9.0.
  const auto b = choose31(v41(), "b200", std::string("TRITON_MLA_SPARSE_DSV41"), 8);
  CHECK(b.refusal_id == "backend.arch");
  CHECK(b.refusal == "TRITON_MLA_SPARSE_DSV41 requires SM90; target b200 is sm100 (compute capability 10.0)");
  CHECK(b.fix == "use a compute capability 9.0 GPU (--gpu h200), or omit --attention-backend");
  CHECK(choose31(v41(), "rtx-pro-6000", std::string("TRITON_MLA_SPARSE_DSV41"), 8).refusal_id == "backend.arch");
  // Never the default, and not in a release before 0.31.
  CHECK(choose31(v41(), "h200", std::nullopt, 8).id == BackendId::flashmla_sparse_dsv41);
  require_usage_error(
      [] {
        choose_backend(v41(), gpu("h200"), std::string("TRITON_MLA_SPARSE_DSV41"), FusedAttention::auto_, "auto", 8,
                       rules30());
      },
      std::string("--attention-backend: TRITON_MLA_SPARSE_DSV41 is new in vLLM 0.31.0; vLLM 0.30.0 does not have "
                  "it; allowed: ") +
          kSevenNames);
  // V4.0 does not take it.
  const auto v4 = choose31(v40(), "h200", std::string("TRITON_MLA_SPARSE_DSV41"), 8);
  CHECK(v4.refusal_id == "backend.attention_backend");
  CHECK_THAT(v4.refusal, Catch::StartsWith("TRITON_MLA_SPARSE_DSV41 is not a DeepSeek V4 attention backend"));
}

TEST_CASE("vLLM 0.31: the explicit names of the 0.31 selector", "[backends][v031]") {
  // The FlashMLA names are the split-KV class on SM100 too: the selector has no fused class.
  for (const std::string name : {"FLASHMLA_SPARSE", "FLASHMLA_SPARSE_DSV4", "FLASHMLA_SPARSE_DSV41"}) {
    INFO(name);
    const auto ch = choose31(v41(), "b200", name, 8);
    CHECK(ch.id == BackendId::flashmla_sparse_dsv41);
    CHECK(ch.refusal.empty());
    CHECK(ch.mega_declined.empty());
  }
  for (const std::string name : {"FLASHINFER_MLA_SPARSE", "FLASHINFER_MLA_SPARSE_SM120"}) {
    const auto ch = choose31(v41(), "b200", name, 8);
    CHECK(ch.refusal_id == "backend.attention_backend");
    CHECK(ch.refusal == name +
                            " is not a DeepSeek V4.1 attention backend. Use FLASHINFER_MLA_SPARSE_DSV41 for DeepSeek "
                            "V4.1 FlashInfer sparse MLA.");
  }
  CHECK(choose31(v41(), "b200", std::string("FLASHINFER_MLA_SPARSE_DSV41"), 8).id ==
        BackendId::flashinfer_mla_sparse_dsv41);
  CHECK(choose31(v41(), "rtx-pro-6000", std::string("FLASHINFER_MLA_SPARSE_DSV4"), 8).id ==
        BackendId::flashinfer_mla_sparse_sm120);
  // --dsv4-fused-attention changes nothing under this selector: an info says so.
  const auto on = choose_backend(v41(), gpu("b200"), std::nullopt, FusedAttention::on, "auto", 8, rules31());
  CHECK(on.id == BackendId::flashmla_mega_attn_dsv41);
  CHECK(on.refusal.empty());
  RuleOptions o = options31(std::nullopt, 8);
  o.layout.fused_attention = FusedAttention::on;
  const auto rs = eval(v41(), gpu("b200"), o);
  CHECK(errors(rs) == 0);
  const auto info = find(rs, "backend.fused_attention", Severity::info);
  REQUIRE(info);
  CHECK(info->finding.message ==
        "--dsv4-fused-attention has no effect: the DeepSeek V4.1 selector of vLLM 0.31.0 has no fused FlashMLA class "
        "(FLASHMLA_MEGA_ATTN_DSV41 runs the fused kernel)");
  // An unknown name lists the nine names of 0.31.
  require_usage_error(
      [] {
        choose_backend(v41(), gpu("h200"), std::string("TRITON_MLA"), FusedAttention::auto_, "auto", 8, rules31());
      },
      std::string("--attention-backend: 'TRITON_MLA' is not a sparse-MLA attention backend vLLM selects for "
                  "DeepSeek; allowed: ") +
          kSevenNames + ", FLASHMLA_MEGA_ATTN_DSV41, TRITON_MLA_SPARSE_DSV41; did you mean 'TRITON_MLA_SPARSE_DSV41'?");
}

TEST_CASE("vLLM 0.31: the plan of each backend", "[backends][v031][plan]") {
  auto plan_of = [](const std::string& g, std::optional<std::string> backend, std::int64_t tp,
                    const BackendReleaseRules& rel) {
    PlanRequest r;
    r.target.gpu = g;
    r.layout.tensor_parallel_size = tp;
    r.layout.attention_backend = std::move(backend);
    r.deploy.vllm_version = rel.v41_mega_attention_default ? "0.31.0" : "0.30.0";  // the plan's release
    r.suggestions = false;
    return make_plan(config_path("deepseek-v4.1-flash.json"), r);
  };
  // B200 TP8: mega attention stores nvfp4_ds_mla (528 B window rows, 288 B compressed rows), so
  // more tokens fit than on 0.30's fused FlashMLA with 584 B rows; it takes no tile plans.
  const Plan mega = plan_of("b200", std::nullopt, 8, rules31());
  const Plan fused = plan_of("b200", std::nullopt, 8, rules30());
  for (const Plan* p : {&mega, &fused}) {
    REQUIRE(p->fit);
    CHECK(p->exit_code == 0);
  }
  CHECK(mega.layout->backend == BackendId::flashmla_mega_attn_dsv41);
  CHECK(mega.layout->kv_cache_dtype == KvCacheDtype::nvfp4_ds_mla);
  CHECK(mega.schedules.empty());
  CHECK(fused.layout->backend == BackendId::flashmla_sparse_dsv41_fused);
  CHECK(fused.layout->kv_cache_dtype == KvCacheDtype::fp8_ds_mla);
  CHECK(mega.fit->vllm.gpu_kv_cache_tokens > fused.fit->vllm.gpu_kv_cache_tokens);
  // H200 TP8: Triton keeps FlashMLA's pages, so the KV cache is the same; no tile plans.
  const Plan tri = plan_of("h200", std::string("TRITON_MLA_SPARSE_DSV41"), 8, rules31());
  const Plan mla = plan_of("h200", std::nullopt, 8, rules31());
  REQUIRE(tri.fit);
  CHECK(tri.exit_code == 0);
  CHECK(tri.layout->backend == BackendId::triton_mla_sparse_dsv41);
  CHECK(tri.layout->parallel.padded_query_heads == 8);
  CHECK(tri.schedules.empty());
  CHECK_FALSE(mla.schedules.empty());
  CHECK(tri.layout->accounting.global_pages.value() == mla.layout->accounting.global_pages.value());
  CHECK(tri.fit->vllm.gpu_kv_cache_tokens == mla.fit->vllm.gpu_kv_cache_tokens);
}

TEST_CASE("vLLM 0.31: the release table and the catalogue agree on the new names", "[backends][v031]") {
  auto number = [](std::string_view v) {
    // "0.31.0" -> 31000: the modelled releases are all 0.x.y.
    const auto a = v.find('.');
    const auto b = v.find('.', a + 1);
    return std::stoi(std::string(v.substr(a + 1, b - a - 1))) * 1000 + std::stoi(std::string(v.substr(b + 1)));
  };
  for (const auto& rel : vllm_releases()) {
    const BackendReleaseRules rules = backend_release_rules(rel);
    CHECK(rules.version == rel.version);
    for (const auto& b : backend_catalogue()) {
      INFO(rel.version << " " << b.vllm_name);
      const bool since = b.first_release.empty() || number(rel.version) >= number(b.first_release);
      CHECK(release_has_backend_name(b.vllm_name, rules) == since);
    }
  }
  const BackendReleaseRules newest = backend_release_rules(newest_vllm_release());
  CHECK(newest.v41_mega_attention_default);
  CHECK(newest.v41_triton_sm90);
}

TEST_CASE("vLLM 0.31: the search tries the two backends only where the release has them", "[backends][v031][search]") {
  const auto& m = testing_rules::v41();
  auto searched = [&](const std::string& g, const BackendReleaseRules& rel) {
    PlanRequest base;
    base.target.gpu = g;
    base.layout.tensor_parallel_size = 8;
    base.deploy.vllm_version = rel.v41_mega_attention_default ? "0.31.0" : "0.30.0";
    SearchOptions opt;
    opt.gpus = 8;
    opt.fixed = SearchFixed{true, true, true, true, true, true, true, false};
    const SearchResult s = search_layouts(m.cfg, m.topo, base, opt);
    std::vector<std::string> names;
    for (const auto& c : s.ranked) names.push_back(c.attention_backend + "=" + c.backend);
    return std::make_pair(s.planned, names);
  };
  using Names = std::vector<std::string>;
  // H200: vLLM's choice and FLASHMLA_SPARSE_DSV41 (the same plan, left out); with 0.31 the
  // Triton backend too.
  const auto h30 = searched("h200", {});
  CHECK(h30.first == 2);
  CHECK(h30.second == Names{"=FLASHMLA_SPARSE_DSV41"});
  const auto h31 = searched("h200", rules31());
  CHECK(h31.first == 3);
  CHECK(h31.second.size() == 2);
  CHECK(std::find(h31.second.begin(), h31.second.end(), "TRITON_MLA_SPARSE_DSV41=TRITON_MLA_SPARSE_DSV41") !=
        h31.second.end());
  // B200: with 0.31 the default is mega attention, and naming it repeats it.
  const auto b31 = searched("b200", rules31());
  CHECK(std::find(b31.second.begin(), b31.second.end(), "=FLASHMLA_MEGA_ATTN_DSV41") != b31.second.end());
  const auto b30 = searched("b200", {});
  for (const auto& n : b30.second) CHECK(n.find("MEGA") == std::string::npos);
}
