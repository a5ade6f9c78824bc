// The backend rule engine: each rule's accepting and rejecting side, with ids, messages and fixes.

#include <catch2/catch.hpp>
#include <algorithm>
#include <optional>
#include <set>
#include <string>

#include "mlaplan/model/config.hpp"
#include "mlaplan/rules/rules.hpp"
#include "mlaplan/hardware/target.hpp"
#include "mlaplan/model/topology.hpp"
#include "rule_testing.hpp"

using namespace mlaplan;

using testing_rules::errors;
using testing_rules::eval;
using testing_rules::find;
using testing_rules::gpu;
using testing_rules::released;

TEST_CASE("released configs pass on H200 and B200 with fp8_ds_mla", "[rules]") {
  for (const auto name : {"deepseek-v4.1-flash.json", "deepseek-v4-flash.json", "deepseek-v3.2.json"}) {
    for (const auto g : {"h200", "h100", "h800", "h20", "b200", "gb200", "b300"}) {
      INFO(name << " on " << g);
      const auto rs = eval(released(name), gpu(g));
      CHECK(errors(rs) == 0);
      CHECK(rules_exit_code(rs) == 0);
    }
  }
}

TEST_CASE("rule: compute capability", "[rules]") {
  // SM12x runs V4.1 through FlashInfer's SM120 class; V3.2 has no backend there.
  for (const auto g : {"rtx-pro-6000", "rtx5090", "gb10"}) {
    INFO(g);
    CHECK_FALSE(find(eval(released("deepseek-v4.1-flash.json"), gpu(g)), "backend.arch"));
    const auto rs = eval(released("deepseek-v3.2.json"), gpu(g));
    const auto r = find(rs, "backend.arch");
    REQUIRE(r);
    CHECK_THAT(r->finding.message, Catch::StartsWith("FlashMLA Sparse is only supported on Hopper and Blackwell DC "
                                                     "devices; target " +
                                                     std::string(g)));
  }
  for (const auto g : {"a100", "l40s"}) {
    INFO(g);
    const auto rs = eval(released("deepseek-v4.1-flash.json"), gpu(g));
    const auto r = find(rs, "backend.arch");
    REQUIRE(r);
    CHECK_THAT(r->finding.message, Catch::StartsWith("FlashMLA Sparse is only supported on Hopper and Blackwell DC "
                                                     "devices; target " +
                                                     std::string(g)));
    CHECK(r->kind == ErrorKind::unsupported);
    CHECK(rules_exit_code(rs) == 3);
  }
}

TEST_CASE("rule: nvfp4_ds_mla needs SM100 and V4.1", "[rules]") {
  RuleOptions o;
  o.layout.kv_cache_dtype = "nvfp4_ds_mla";
  const auto h200 = eval(released("deepseek-v4.1-flash.json"), gpu("h200"), o);
  const auto r = find(h200, "backend.kv_cache_dtype");
  REQUIRE(r);
  CHECK(r->finding.message ==
        "nvfp4_ds_mla needs SM100 (FlashMLA V4.1 fp8/fp4 sparse decode); target h200 is sm90 (compute capability 9.0)");
  CHECK(r->finding.fix == "use --kv-cache-dtype fp8_ds_mla, or a compute capability 10.x GPU (--gpu b200)");
  CHECK(errors(eval(released("deepseek-v4.1-flash.json"), gpu("b200"), o)) == 0);
  const auto v4 = eval(released("deepseek-v4-flash.json"), gpu("b200"), o);
  REQUIRE(find(v4, "backend.kv_cache_dtype"));
}

TEST_CASE("rule: kv cache dtype values", "[rules]") {
  RuleOptions o;
  // bfloat16 is a value vLLM takes; FlashMLA refuses it with its message (exit 3, not a usage error).
  o.layout.kv_cache_dtype = "bfloat16";
  const auto rs = eval(released("deepseek-v4.1-flash.json"), gpu("h200"), o);
  const auto r = find(rs, "backend.kv_cache_dtype");
  REQUIRE(r);
  CHECK(r->kind == ErrorKind::unsupported);
  CHECK(r->finding.message ==
        "DeepseekV4 fp8_ds_mla layout only supports fp8 kv-cache, got bfloat16. Please set --kv-cache-dtype fp8 or "
        "select a backend that supports bfloat16 KV cache. (--kv-cache-dtype bfloat16 on FLASHMLA_SPARSE_DSV41)");
  CHECK(r->finding.fix == "use --kv-cache-dtype auto, fp8, fp8_e4m3, fp8_e5m2, fp8_ds_mla");
  // A value vLLM does not have is a usage error with the nearest value.
  o.layout.kv_cache_dtype = "fp8_ds";
  const auto bad = find(eval(released("deepseek-v4.1-flash.json"), gpu("h200"), o), "layout.kv_cache_dtype");
  REQUIRE(bad);
  CHECK(bad->kind == ErrorKind::usage);
  CHECK(bad->finding.message ==
        "--kv-cache-dtype: 'fp8_ds' is not a kv-cache dtype; allowed: auto, bfloat16, fp8, fp8_e4m3, fp8_e5m2, "
        "fp8_ds_mla, nvfp4_ds_mla; did you mean 'fp8_ds_mla'?");
  for (const auto ok : {"auto", "fp8", "fp8_ds_mla", "FP8"}) {
    o.layout.kv_cache_dtype = ok;
    CHECK(errors(eval(released("deepseek-v4.1-flash.json"), gpu("h200"), o)) == 0);
  }
}

TEST_CASE("rule: model dtype", "[rules]") {
  const auto reindex = load_config(std::string(MLAPLAN_SOURCE_DIR) + "/configs/small/v41-6layer-reindex.json");
  const auto rs = eval(reindex, gpu("h200"));
  const auto r = find(rs, "backend.model_dtype");
  REQUIRE(r);
  CHECK(r->finding.message ==
        "model dtype 'float32' is not supported by the sparse-MLA backend; supported: bfloat16 (the config's dtype)");
  CHECK(r->finding.fix == "serve with --dtype bfloat16");
  CHECK(r->finding.path == "/text_config/dtype");
  RuleOptions o;
  o.dtype = "bfloat16";
  CHECK_FALSE(find(eval(reindex, gpu("h200"), o), "backend.model_dtype"));
  o.dtype = "float16";
  CHECK(find(eval(released("deepseek-v4.1-flash.json"), gpu("h200"), o), "backend.model_dtype"));
  const auto no_dtype = parse_config(R"({"model_type": "deepseek_v41"})", "t.json");
  CHECK(find(eval(no_dtype, gpu("h200")), "backend.model_dtype", Severity::info));
}

TEST_CASE("rule: head size, KV heads and index widths", "[rules]") {
  const auto small = load_config(std::string(MLAPLAN_SOURCE_DIR) + "/configs/small/v41-8layer-flat.json");
  const auto rs = eval(small, gpu("h200"));
  const auto h = find(rs, "backend.head_size");
  REQUIRE(h);
  CHECK(h->finding.message ==
        "head size 16 (qk_rope_head_dim 4) is not supported by the sparse-MLA backend; "
        "supported: 512 (448 NoPE + 64 RoPE)");
  CHECK(find(rs, "backend.topk_width"));
  const auto kv2 = parse_config(R"({"model_type": "deepseek_v41", "num_key_value_heads": 2})", "t.json");
  const auto k = find(eval(kv2, gpu("h200")), "backend.kv_heads");
  REQUIRE(k);
  CHECK_THAT(k->finding.message, Catch::StartsWith("num_key_value_heads 2 is not supported"));
  const auto topk = parse_config(R"({"model_type": "deepseek_v41", "index_topk": 500})", "t.json");
  const auto w = find(eval(topk, gpu("h200")), "backend.topk_width");
  REQUIRE(w);
  CHECK(w->finding.message ==
        "index_topk 500 is not a multiple of 64; the FlashMLA sparse decode kernel reads index "
        "widths in blocks of 64");
  const auto v32 =
      parse_config(R"({"model_type": "deepseek_v32", "num_hidden_layers": 2, "kv_lora_rank": 256})", "t.json");
  const auto v = find(eval(v32, gpu("h200")), "backend.head_size");
  REQUIRE(v);
  CHECK_THAT(v->finding.message, Catch::StartsWith("head size 320 (kv_lora_rank 256 + qk_rope_head_dim 64)"));
}

TEST_CASE("rule: block size", "[rules]") {
  RuleOptions o;
  o.layout.block_size = 16;
  const auto r = find(eval(released("deepseek-v4.1-flash.json"), gpu("h200"), o), "backend.block_size");
  REQUIRE(r);
  CHECK_THAT(r->finding.message,
             Catch::StartsWith("No common block size for 16 between kv_manager=[16] and backend=[64]"));
  o.layout.block_size = 64;
  CHECK_FALSE(find(eval(released("deepseek-v4.1-flash.json"), gpu("h200"), o), "backend.block_size"));
  CHECK(find(eval(released("deepseek-v4.1-flash.json"), gpu("b200"), o), "backend.block_size"));
  o.layout.block_size = 128;
  CHECK_FALSE(find(eval(released("deepseek-v4.1-flash.json"), gpu("b200"), o), "backend.block_size"));
}

TEST_CASE("rule: query heads per rank and TP", "[rules]") {
  RuleOptions o;
  const auto v32 = released("deepseek-v3.2.json");  // 128 heads
  o.layout.tensor_parallel_size = 1;
  CHECK(errors(eval(v32, gpu("h200"), o)) == 0);
  o.layout.tensor_parallel_size = 3;
  CHECK(find(eval(v32, gpu("h200"), o), "backend.tensor_parallel"));
  const auto wide = parse_config(R"({"model_type": "deepseek_v41", "num_attention_heads": 256})", "t.json");
  o.layout.tensor_parallel_size = 1;
  const auto r = find(eval(wide, gpu("h200"), o), "backend.query_heads");
  REQUIRE(r);
  CHECK(r->finding.message ==
        "DeepseekV4 FlashMLA does not support 256 heads (FP8 decode kernel requires h_q in {64, 128}). "
        "--tensor-parallel-size 1 leaves 256 query heads per rank (at most 128; fewer are padded to 64, 128)");
  CHECK(r->finding.fix == "use --tensor-parallel-size 2 or more");
  o.layout.tensor_parallel_size = 2;
  CHECK_FALSE(find(eval(wide, gpu("h200"), o), "backend.query_heads"));
}

TEST_CASE("rule: pipeline cuts inside a V4.1 sharing group", "[rules]") {
  RuleOptions o;
  o.layout.pipeline_parallel_size = 3;
  const auto rs = eval(released("deepseek-v4.1-flash.json"), gpu("h200"), o);
  const auto r = find(rs, "backend.pipeline_cut");
  REQUIRE(r);
  CHECK_THAT(r->finding.message, Catch::Contains("PP splits inside a v4.1 kv-sharing group are not supported"));
  CHECK_THAT(r->finding.message, Catch::Contains("Pipeline sizes that work: "));
  o.layout.pipeline_parallel_size = 1;
  CHECK_FALSE(find(eval(released("deepseek-v4.1-flash.json"), gpu("h200"), o), "backend.pipeline_cut"));
}

TEST_CASE("rule catalogue lists every id the engine reports", "[rules]") {
  std::vector<std::string> ids;
  for (const auto& r : rule_catalogue()) ids.emplace_back(r.id);
  auto listed = [&](const std::string& id) { return std::find(ids.begin(), ids.end(), id) != ids.end(); };
  // Ids are unique.
  std::vector<std::string> sorted = ids;
  std::sort(sorted.begin(), sorted.end());
  CHECK(std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end());

  struct Scenario {
    ModelConfig cfg;
    const char* gpu;
    RuleOptions o;
  };
  std::vector<Scenario> scenarios;
  auto add = [&](ModelConfig cfg, const char* g, auto&& set) {
    RuleOptions o;
    set(o);
    scenarios.push_back({std::move(cfg), g, std::move(o)});
  };
  const auto v41 = released("deepseek-v4.1-flash.json");
  const auto small = load_config(std::string(MLAPLAN_SOURCE_DIR) + "/configs/small/v41-8layer-flat.json");
  auto many = [](RuleOptions& o) {
    o.layout.kv_cache_dtype = "nvfp4_ds_mla";
    o.layout.block_size = 16;
    o.layout.pipeline_parallel_size = 3;
    o.dtype = "float16";
  };
  add(v41, "a100", many);    // backend.arch, kv_cache_dtype, block_size, pipeline_cut, model_dtype
  add(small, "a100", many);  // backend.head_size, topk_width
  add(v41, "h200", [](RuleOptions& o) { o.layout.attention_backend = "FLASHINFER_MLA_SPARSE"; });
  add(v41, "h200", [](RuleOptions& o) { o.layout.fused_attention = FusedAttention::on; });
  add(released("deepseek-v3.2.json"), "h200", [](RuleOptions& o) {
    o.layout.indexer_cache_dtype = "fp4";
    o.layout.tensor_parallel_size = 3;
  });
  add(parse_config(R"({"model_type": "deepseek_v41", "num_attention_heads": 256})", "t.json"), "h200",
      [](RuleOptions&) {});  // backend.query_heads
  add(parse_config(R"({"model_type": "deepseek_v41", "num_key_value_heads": 2})", "t.json"), "h200",
      [](RuleOptions&) {});              // backend.kv_heads
  add(v41, "h200", [](RuleOptions& o) {  // spec.dspark_block_size, spec.dspark_parallel, the DCP refusals
    o.layout.num_speculative_tokens = 3;
    o.layout.decode_context_parallel_size = 2;
    o.layout.cp_kv_cache_interleave_size = 2;
  });
  add(parse_config(R"({"model_type": "deepseek_v32", "num_hidden_layers": 2, "num_nextn_predict_layers": 0})",
                   "t.json"),
      "h200", [](RuleOptions& o) { o.layout.num_speculative_tokens = 2; });  // spec.no_draft_layers
  add(parse_config(R"({"model_type": "deepseek_v32", "num_hidden_layers": 2, "num_nextn_predict_layers": 2})",
                   "t.json"),
      "h200", [](RuleOptions& o) { o.layout.num_speculative_tokens = 3; });        // spec.mtp_tokens
  add(v41, "h200", [](RuleOptions& o) { o.layout.tensor_parallel_size = 8; });     // kernel.head_padding
  add(v41, "b200", [](RuleOptions& o) { o.layout.kv_cache_dtype = "bfloat16"; });  // backend.fused_attention (info)
  add(v41, "rtx-pro-6000", [](RuleOptions& o) { o.layout.num_speculative_tokens = 5; });  // kernel.shape (unknown)

  std::set<std::string> seen;
  for (const auto& s : scenarios) {
    for (const auto& r : eval(s.cfg, gpu(s.gpu), s.o)) {
      const std::string& id = r.finding.id;
      INFO(id << " on " << s.gpu << ": " << r.finding.message);
      // Flag values are layout.* (usage errors and the defaults applied); every rule is catalogued.
      if (id.rfind("layout.", 0) == 0) continue;
      CHECK((id.rfind("backend.", 0) == 0 || id.rfind("spec.", 0) == 0 || id.rfind("kernel.", 0) == 0));
      CHECK(listed(id));
      seen.insert(id);
    }
  }
  // And every catalogued rule is one some scenario reports.
  for (const auto& id : ids) {
    INFO(id);
    CHECK(seen.count(id) == 1);
  }
}
