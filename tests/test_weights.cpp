// Weights from config.json alone: the released V4-Flash checkpoint to the byte, per-part sums,
// tensor names and shapes, unknown schemes reported as unknown, overflow on a huge config.

#include <catch2/catch.hpp>
#include <fstream>
#include <sstream>
#include <string>

#include "mlaplan/model/config.hpp"
#include "mlaplan/base/error.hpp"
#include "mlaplan/base/text.hpp"
#include "mlaplan/model/weights.hpp"

using namespace mlaplan;

namespace {

std::string src(const std::string& rel) { return std::string(MLAPLAN_SOURCE_DIR) + "/" + rel; }

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
double gib(std::int64_t b) { return static_cast<double>(b) / kGiB; }

std::string read(const std::string& rel) {
  std::ifstream in(src(rel));
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// The V4-Flash config with `from` replaced by `to` (which must occur).
std::string v4_with(const std::string& from, const std::string& to) {
  std::string t = read("configs/deepseek-v4-flash.json");
  const auto at = t.find(from);
  REQUIRE(at != std::string::npos);
  return t.replace(at, from.size(), to);
}

const TensorInfo* find(const WeightsReport& r, const std::string& name) {
  for (const auto& t : r.tensors) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

}  // namespace

TEST_CASE("weights: DeepSeek-V4-Flash to the byte", "[weights]") {
  const auto r = compute_weights(load_config(src("configs/deepseek-v4-flash.json")));
  CHECK(r.known);
  CHECK(r.reason.empty());
  CHECK(r.listed);
  CHECK(r.main.bytes == 156'015'698'140);
  CHECK(r.main.tensors == 67'612);
  CHECK(r.draft.bytes == 3'593'787'756);
  CHECK(r.draft.tensors == 1'575);
  CHECK(r.draft_stages == 1);
  CHECK(r.total_bytes() == 159'609'485'896);
  CHECK(r.total_tensors() == 69'187);
  CHECK(static_cast<std::int64_t>(r.tensors.size()) == 69'187);
  std::int64_t listed = 0;
  for (const auto& t : r.tensors) listed += t.bytes;
  CHECK(listed == r.total_bytes());
  CHECK_FALSE(r.estimated());
  // Parameters: logical elements, an FP4 byte holds 2, scales not counted.
  CHECK(r.main.params == 284'334'567'511);
  CHECK(static_cast<double>(r.main.params) / 1e9 == Approx(284.33).margin(0.005));
  CHECK(static_cast<double>(r.active_params) / 1e9 == Approx(13.27).margin(0.005));
}

TEST_CASE("weights: V4-Flash bytes by part", "[weights]") {
  const auto r = compute_weights(load_config(src("configs/deepseek-v4-flash.json")), {false});
  CHECK_FALSE(r.listed);
  CHECK(r.tensors.empty());
  CHECK(r.total_bytes() == 159'609'485'896);  // the same without the list
  const auto& ex = r.part(WeightPart::routed_experts);
  CHECK(gib(ex.bytes - ex.scale_bytes) == Approx(129.0).margin(0.01));
  CHECK(gib(ex.scale_bytes) == Approx(8.06).margin(0.01));
  CHECK(ex.tensors == 43 * 256 * 3 * 2);
  CHECK(gib(r.part(WeightPart::attention).bytes) == Approx(4.28).margin(0.01));
  CHECK(gib(r.part(WeightPart::shared_experts).bytes) == Approx(1.01).margin(0.01));
  CHECK(gib(r.part(WeightPart::embedding).bytes) == Approx(0.99).margin(0.01));
  CHECK(gib(r.part(WeightPart::head).bytes) == Approx(0.99).margin(0.01));
  CHECK(gib(r.part(WeightPart::compressor).bytes) == Approx(0.49).margin(0.01));
  CHECK(gib(r.part(WeightPart::indexer).bytes) == Approx(0.26).margin(0.01));
  CHECK(gib(r.part(WeightPart::mhc).bytes) == Approx(0.13).margin(0.01));
  // router = gates (0.08) + tid2eid of the 3 hash layers (0.017)
  CHECK(gib(r.part(WeightPart::router).bytes) == Approx(0.08 + 0.017).margin(0.01));
  CHECK(r.part(WeightPart::router).bytes == 43LL * 256 * 4096 * 2 + 40LL * 256 * 4 + 3LL * 129280 * 6 * 8);
  CHECK(r.part(WeightPart::engram).tensors == 0);
  CHECK(r.part(WeightPart::mtp).tensors == 0);
  CHECK(r.draft_parts[static_cast<std::size_t>(WeightPart::mtp)].tensors == 7);
  std::int64_t sum = 0;
  for (const auto& p : r.main_parts) sum += p.bytes;
  CHECK(sum == r.main.bytes);
}

TEST_CASE("weights: V4-Flash tensors spelled out", "[weights]") {
  const auto r = compute_weights(load_config(src("configs/deepseek-v4-flash.json")));
  auto t = find(r, "layers.3.attn.wq_a.weight");
  REQUIRE(t);
  CHECK(t->dtype == WeightDtype::F8_E4M3);
  CHECK(t->shape == std::vector<std::int64_t>{1024, 4096});
  CHECK(t->bytes == 1024 * 4096);
  CHECK(t->part == WeightPart::attention);
  CHECK(t->layer == 3);
  CHECK_FALSE(t->draft);
  t = find(r, "layers.3.attn.wq_a.scale");
  REQUIRE(t);
  CHECK(to_string(t->dtype) == "F8_E8M0");
  CHECK(t->shape == std::vector<std::int64_t>{8, 32});
  CHECK(t->scale);
  CHECK(t->params == 0);
  t = find(r, "layers.3.attn.wo_a.weight");
  REQUIRE(t);
  CHECK(t->shape == std::vector<std::int64_t>{8192, 4096});
  t = find(r, "layers.7.ffn.experts.255.w2.weight");
  REQUIRE(t);
  CHECK(to_string(t->dtype) == "I8");
  CHECK(t->shape == std::vector<std::int64_t>{4096, 1024});
  CHECK(t->params == 4096LL * 2048);
  CHECK(t->part == WeightPart::routed_experts);
  t = find(r, "layers.7.ffn.experts.255.w2.scale");
  REQUIRE(t);
  CHECK(t->shape == std::vector<std::int64_t>{4096, 64});
  CHECK(find(r, "layers.7.ffn.experts.256.w2.weight") == nullptr);
  t = find(r, "layers.0.ffn.gate.tid2eid");  // hash layer
  REQUIRE(t);
  CHECK(to_string(t->dtype) == "I64");
  CHECK(t->shape == std::vector<std::int64_t>{129280, 6});
  CHECK(find(r, "layers.0.ffn.gate.bias") == nullptr);
  CHECK(find(r, "layers.3.ffn.gate.bias"));
  t = find(r, "layers.2.attn.compressor.ape");  // ratio 4: coff 2
  REQUIRE(t);
  CHECK(t->shape == std::vector<std::int64_t>{4, 1024});
  CHECK(t->part == WeightPart::compressor);
  t = find(r, "layers.3.attn.compressor.ape");  // ratio 128
  REQUIRE(t);
  CHECK(t->shape == std::vector<std::int64_t>{128, 512});
  CHECK(find(r, "layers.3.attn.indexer.wq_b.weight") == nullptr);  // indexer only on ratio 4
  t = find(r, "layers.2.attn.indexer.wq_b.weight");
  REQUIRE(t);
  CHECK(t->shape == std::vector<std::int64_t>{8192, 1024});
  CHECK(t->part == WeightPart::indexer);
  CHECK(find(r, "layers.0.attn.compressor.ape") == nullptr);
  t = find(r, "mtp.0.e_proj.weight");
  REQUIRE(t);
  CHECK(t->draft);
  CHECK(t->layer == 43);
  CHECK(t->part == WeightPart::mtp);
  CHECK(t->shape == std::vector<std::int64_t>{4096, 4096});
  t = find(r, "mtp.0.ffn.experts.0.w1.weight");
  REQUIRE(t);
  CHECK(t->draft);
  CHECK(t->part == WeightPart::routed_experts);
  CHECK(find(r, "mtp.0.hc_head_fn"));
  CHECK(find(r, "mtp.0.attn.compressor.ape") == nullptr);
  CHECK(find(r, "mtp.0.embed.weight") == nullptr);  // shared with the target
  t = find(r, "hc_head_fn");
  REQUIRE(t);
  CHECK(t->shape == std::vector<std::int64_t>{4, 16384});
  CHECK(t->layer == -1);
  t = find(r, "layers.5.hc_attn_fn");
  REQUIRE(t);
  CHECK(t->shape == std::vector<std::int64_t>{24, 16384});
  CHECK(t->part == WeightPart::mhc);
}

TEST_CASE("weights: the rules are general (more layers, experts, stages)", "[weights]") {
  // Two more experts add exactly 2 x 3 fp4 tensors (13,369,344 B per expert) per MoE layer, and
  // two gate rows (BF16 weight + F32 bias or nothing in hash layers) per layer.
  const auto base = compute_weights(load_config(src("configs/deepseek-v4-flash.json")), {false});
  const auto more =
      compute_weights(parse_config(v4_with("\"n_routed_experts\": 256", "\"n_routed_experts\": 258"), "t"), {false});
  const std::int64_t gate = 44 * 2 * 4096 * 2 + 41 * 2 * 4;
  CHECK(more.total_bytes() - base.total_bytes() == 44 * 2 * 13'369'344LL + gate);
  CHECK(more.total_tensors() - base.total_tensors() == 44 * 2 * 6);
  // No MTP stage: the draft totals vanish, the main model stays.
  const auto none =
      compute_weights(parse_config(v4_with("\"num_nextn_predict_layers\": 1", "\"num_nextn_predict_layers\": 0")
                                       .replace(read("configs/deepseek-v4-flash.json").find("4, 0]"), 5, "4]"),
                                   "t"),
                      {false});
  CHECK(none.draft_stages == 0);
  CHECK(none.draft.bytes == 0);
  CHECK(none.main.bytes == 156'015'698'140);
  // compress_ratios longer than the layers: that many stages (V4-Flash-0731: 3, num_nextn says 1).
  const auto three = compute_weights(parse_config(v4_with("4, 0]", "4, 0, 0, 0]"), "t"));
  CHECK(three.draft_stages == 3);
  CHECK(three.draft.bytes == 3 * 3'593'787'756LL);
  CHECK(three.draft.tensors == 3 * 1'575);
  CHECK(find(three, "mtp.2.e_proj.weight"));
  CHECK(find(three, "mtp.2.ffn.gate.bias"));
  CHECK(three.main.bytes == 156'015'698'140);
}

TEST_CASE("weights: unknown schemes are reported, not guessed", "[weights]") {
  SECTION("expert_dtype") {
    const auto r =
        compute_weights(parse_config(v4_with("\"expert_dtype\": \"fp4\"", "\"expert_dtype\": \"int3\""), "t"));
    CHECK_FALSE(r.known);
    CHECK_THAT(r.reason, Catch::Contains("expert_dtype") && Catch::Contains("int3"));
    CHECK(r.part(WeightPart::routed_experts).tensors == 0);
    CHECK(r.part(WeightPart::attention).tensors > 0);
  }
  SECTION("quant_method") {
    const auto r =
        compute_weights(parse_config(v4_with("\"quant_method\": \"fp8\"", "\"quant_method\": \"awq\""), "t"));
    CHECK_FALSE(r.known);
    CHECK_THAT(r.reason, Catch::Contains("quant_method") && Catch::Contains("awq"));
  }
  SECTION("scale_fmt") {
    const auto r = compute_weights(parse_config(v4_with("\"scale_fmt\": \"ue8m0\"", "\"scale_fmt\": \"e4m3\""), "t"));
    CHECK_FALSE(r.known);
    CHECK_THAT(r.reason, Catch::Contains("scale_fmt"));
  }
  SECTION("fp8 experts are a known kind") {
    const auto r =
        compute_weights(parse_config(v4_with("\"expert_dtype\": \"fp4\"", "\"expert_dtype\": \"fp8\""), "t"));
    CHECK(r.known);
    const auto& ex = r.part(WeightPart::routed_experts);
    // F8_E4M3 [2048, 4096] + 16 x 32 scales, three per expert
    CHECK(ex.bytes == 43LL * 256 * 3 * (2048 * 4096 + 16 * 32));
  }
  SECTION("no quantization_config: BF16, said so") {
    std::string t = read("configs/deepseek-v4-flash.json");
    const auto a = t.find("\"quantization_config\"");
    const auto b = t.find("},", a);
    t.erase(a, b + 2 - a);
    t = t.replace(t.find("\"expert_dtype\": \"fp4\","), 22, "");
    const auto r = compute_weights(parse_config(t, "t"), {false});
    CHECK(r.known);
    bool said = false;
    for (const auto& f : r.findings) said = said || f.id == "weights.bf16";
    CHECK(said);
    CHECK(r.part(WeightPart::routed_experts).bytes == 43LL * 256 * 3 * 2048 * 4096 * 2);
    CHECK(r.part(WeightPart::routed_experts).scale_bytes == 0);
  }
}

TEST_CASE("weights: a huge config is an error, never a wrapped number", "[weights]") {
  std::string t = v4_with("\"hidden_size\": 4096", "\"hidden_size\": 67108864");
  t = t.replace(t.find("\"moe_intermediate_size\": 2048"), 29, "\"moe_intermediate_size\": 67108864");
  t = t.replace(t.find("\"n_routed_experts\": 256"), 23, "\"n_routed_experts\": 1048576");
  const auto cfg = parse_config(t, "huge");
  try {
    const auto r = compute_weights(cfg, {false});
    FAIL("no error; total " << r.total_bytes());
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::invalid_config);
    // The config, the tensor, the overflow and the fields that size it, with their values.
    CHECK_THAT(std::string(e.what()),
               Catch::StartsWith("huge: the checkpoint this config describes does not fit 64-bit byte counts: tensor "
                                 "layers.0.ffn.experts.{e}.w1.weight (I8 [67108864, 33554432] x 1048576): bytes of "
                                 "layers.0.ffn.experts.{e}.w1.weight overflows 64-bit arithmetic (2251799813685248 x "
                                 "1048576); its sizes come from the fields num_hidden_layers 43, hidden_size 67108864, "
                                 "vocab_size 129280, moe_intermediate_size 67108864, n_routed_experts 1048576"));
    CHECK(is_printable_line(e.what()));
  }
  // Large but representable: exact, no list kept beyond the cap.
  WeightsOptions o;
  o.max_listed_tensors = 1000;
  const auto r = compute_weights(load_config(src("configs/deepseek-v4-flash.json")), o);
  CHECK_FALSE(r.listed);
  CHECK(r.tensors.empty());
  CHECK(r.total_bytes() == 159'609'485'896);
}

TEST_CASE("weights: exact only for a scheme that reproduces a published total, by the scheme's property", "[weights]") {
  // V4-Flash: main model and plain MTP stage, the published total_size to the byte.
  const auto flash = compute_weights(load_config(src("configs/deepseek-v4-flash.json")), {false});
  CHECK_FALSE(flash.estimated());
  CHECK(flash.estimated_reason().empty());
  // The same architecture with DSpark draft stages (a dspark_block_size, as the V4-Flash-0731
  // re-release has): the stages' extra heads are not listed, so the drafts are estimated.
  const auto dspark = compute_weights(
      parse_config(v4_with("4, 0]", "4, 0, 0, 0]").replace(0, 1, "{\"dspark_block_size\": 5, "), "t"), {false});
  CHECK(dspark.draft_stages == 3);
  CHECK(dspark.estimated());
  CHECK(dspark.estimated_reason() == "draft stages");
  for (std::size_t p = 0; p < kWeightPartCount; ++p) CHECK_FALSE(dspark.main_parts[p].estimated);
  bool said = false;
  for (const auto& f : dspark.findings)
    said |= f.id == "weights.estimated" && f.message.find("DSpark") != std::string::npos;
  CHECK(said);
  // Three plain MTP stages (no DSpark block) stay exact: the property is the draft scheme, not the count.
  CHECK_FALSE(compute_weights(parse_config(v4_with("4, 0]", "4, 0, 0, 0]"), "t"), {false}).estimated());
}

TEST_CASE("weights: V4.1-Flash and V3.2 mark what is estimated", "[weights]") {
  const auto v41 = compute_weights(load_config(src("configs/deepseek-v4.1-flash.json")), {false});
  CHECK(v41.known);
  CHECK(v41.estimated());
  CHECK_FALSE(v41.part(WeightPart::routed_experts).estimated);
  CHECK_FALSE(v41.part(WeightPart::attention).estimated);
  CHECK(v41.part(WeightPart::engram).estimated);
  CHECK(v41.part(WeightPart::vision).estimated);
  CHECK(v41.part(WeightPart::compressor).estimated);
  CHECK(gib(v41.part(WeightPart::routed_experts).bytes) == Approx(268.95).margin(0.01));
  CHECK(gib(v41.part(WeightPart::attention).bytes) == Approx(4.72).margin(0.01));
  CHECK(gib(v41.part(WeightPart::engram).bytes) == Approx(189.0).margin(0.6));
  CHECK(v41.draft_stages == 3);
  CHECK(v41.part(WeightPart::mhc).tensors == 40 * 6);        // no hc_head
  CHECK(v41.part(WeightPart::compressor).tensors == 4 * 4);  // kv_source_layer_ids only
  CHECK(v41.part(WeightPart::indexer).tensors == 8 * 7);     // index_source_layer_ids only
  // The released checkpoint is 510,286,023,000 B: within 0.1 %.
  CHECK(static_cast<double>(v41.total_bytes()) == Approx(510'286'023'000.0).epsilon(0.001));

  const auto v32 = compute_weights(load_config(src("configs/deepseek-v3.2.json")));
  CHECK(v32.known);
  CHECK(v32.estimated());
  // V3: 671 B main + 14 B MTP parameters; V3.2 adds an indexer (about 0.85 B).
  CHECK(static_cast<double>(v32.main.params) / 1e9 == Approx(671.9).margin(0.1));
  CHECK(static_cast<double>(v32.draft.params) / 1e9 == Approx(13.5).margin(0.1));
  auto t = find(v32, "model.layers.5.self_attn.q_b_proj.weight_scale_inv");
  REQUIRE(t);
  CHECK(t->dtype == WeightDtype::F32);
  CHECK(t->shape == std::vector<std::int64_t>{192, 12});
  CHECK(find(v32, "model.layers.0.mlp.gate_proj.weight"));  // dense layer
  CHECK(find(v32, "model.layers.0.mlp.experts.0.gate_proj.weight") == nullptr);
  CHECK(find(v32, "model.layers.61.shared_head.head.weight"));  // the MTP's own head
}

TEST_CASE("weights: the config fields are read with the config's rules", "[weights]") {
  SECTION("a wrong type names its JSON pointer") {
    try {
      (void)parse_config(v4_with("\"hc_mult\": 4", "\"hc_mult\": \"4\""), "t.json");
      FAIL("accepted");
    } catch (const Error& e) {
      CHECK(e.kind() == ErrorKind::invalid_config);
      CHECK_THAT(std::string(e.what()), Catch::Contains("t.json: /hc_mult: hc_mult must be an integer"));
    }
    try {
      (void)parse_config(v4_with("\"weight_block_size\": [", "\"weight_block_size\": [7, "), "t.json");
      FAIL("accepted");
    } catch (const Error& e) {
      CHECK_THAT(std::string(e.what()), Catch::Contains("/quantization_config/weight_block_size"));
    }
  }
  SECTION("a default is recorded with the weights, not in the planner's findings") {
    const auto with = parse_config(read("configs/deepseek-v4-flash.json"), "t");
    const auto without = parse_config(v4_with("\"num_hash_layers\": 3,", ""), "t");
    CHECK(without.findings.size() == with.findings.size());
    bool noted = false;
    for (const auto& f : without.checkpoint.findings) noted = noted || f.path == "/num_hash_layers";
    CHECK(noted);
    CHECK(without.checkpoint.num_hash_layers == 3);
    CHECK(compute_weights(without, {false}).total_bytes() == 159'609'485'896);
  }
  SECTION("V4.1 reads expert_dtype and 32x32 blocks inside quantization_config") {
    const auto c = load_config(src("configs/deepseek-v4.1-flash.json"));
    CHECK(c.checkpoint.expert_dtype == "fp4");
    CHECK(c.checkpoint.expert_dtype_pointer == "/quantization_config/expert_dtype");
    CHECK(c.checkpoint.weight_block_size == std::vector<std::int64_t>{32, 32});
    CHECK(c.checkpoint.num_hash_layers == 0);
    CHECK(c.checkpoint.hidden_size == 5120);
    CHECK(c.checkpoint.engram_num_embeddings.size() == 2);
    CHECK(c.checkpoint.has_vision);
  }
}
