// Weights from a checkpoint's files: safetensors shards written here from a small V4 config's
// contract give the contract's totals to the byte and no mismatch; a changed shape, a dropped
// tensor, an unknown tensor and a changed dtype are each listed; names the contract does not know
// are placed by the name patterns (which agree with the contract on every released layout); an
// unknown contract compares nothing; a Hugging Face cache tree works end to end.

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "mlaplan/model/checkpoint_weights.hpp"
#include "mlaplan/model/config.hpp"
#include "mlaplan/model/safetensors.hpp"
#include "mlaplan/base/text.hpp"
#include "mlaplan/model/weights.hpp"
#include "temp_dir.hpp"

using namespace mlaplan;
namespace fs = std::filesystem;
using json = nlohmann::json;
using testing_files::TempDir;

namespace {

std::string src(const std::string& rel) { return std::string(MLAPLAN_SOURCE_DIR) + "/" + rel; }

/// A tiny V4 checkpoint: 3 layers (ratios 0, 4, 128), one MTP stage, 4 routed experts (top 2),
/// one hash layer, fp8 linear layers and fp4 experts.
json tiny_v4(const std::string& quant_method = "fp8") {
  return json{
      {"model_type", "deepseek_v4"},
      {"architectures", {"DeepseekV4ForCausalLM"}},
      {"hidden_size", 64},
      {"num_attention_heads", 4},
      {"num_key_value_heads", 1},
      {"num_hidden_layers", 3},
      {"num_experts_per_tok", 2},
      {"moe_intermediate_size", 64},
      {"max_position_embeddings", 64},
      {"head_dim", 32},
      {"qk_rope_head_dim", 8},
      {"q_lora_rank", 32},
      {"o_groups", 2},
      {"o_lora_rank", 16},
      {"n_routed_experts", 4},
      {"n_shared_experts", 1},
      {"num_hash_layers", 1},
      {"vocab_size", 256},
      {"compress_ratios", {0, 4, 128, 0}},
      {"sliding_window", 8},
      {"hc_mult", 2},
      {"hc_sinkhorn_iters", 3},
      {"hc_eps", 1e-06},
      {"index_n_heads", 2},
      {"index_head_dim", 16},
      {"index_topk", 2},
      {"num_nextn_predict_layers", 1},
      {"scoring_func", "sqrtsoftplus"},
      {"routed_scaling_factor", 1.5},
      {"swiglu_limit", 10.0},
      {"rope_theta", 10000.0},
      {"compress_rope_theta", 160000.0},
      {"expert_dtype", "fp4"},
      {"quantization_config",
       {{"activation_scheme", "dynamic"},
        {"fmt", "e4m3"},
        {"quant_method", quant_method},
        {"scale_fmt", "ue8m0"},
        {"weight_block_size", {32, 32}}}},
  };
}

ModelConfig tiny_config(const std::string& quant_method = "fp8") {
  return parse_config(tiny_v4(quant_method).dump(), "tiny-v4.json");
}

/// A file tensor of this contract tensor.
CheckpointTensor from_contract(const TensorInfo& t) {
  return CheckpointTensor{t.name, std::string(to_string(t.dtype)), t.shape, t.bytes, ""};
}

std::vector<CheckpointTensor> contract_tensors(const WeightsReport& r) {
  std::vector<CheckpointTensor> v;
  for (const auto& t : r.tensors) v.push_back(from_contract(t));
  return v;
}

/// Writes a safetensors file of these tensors, packed from offset 0 (data zeros).
void write_shard(const std::string& path, const std::vector<CheckpointTensor>& tensors) {
  json h = json::object();
  std::int64_t at = 0;
  for (const auto& t : tensors) {
    h[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {at, at + t.bytes}}};
    at += t.bytes;
  }
  const std::string text = h.dump();
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i) {
    bytes[static_cast<std::size_t>(i)] = static_cast<char>((static_cast<std::uint64_t>(text.size()) >> (8 * i)) & 0xff);
  }
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  REQUIRE(f);
  f << bytes << text << std::string(static_cast<std::size_t>(at), '\0');
}

/// Writes `tensors` into `shards` shards of `dir` with a model.safetensors.index.json (its
/// total_size `total_size`, or the true sum when negative).
void write_checkpoint(const fs::path& dir, const std::vector<CheckpointTensor>& tensors, int shards = 2,
                      std::int64_t total_size = -1) {
  std::vector<std::vector<CheckpointTensor>> parts(static_cast<std::size_t>(shards));
  json map = json::object();
  std::int64_t sum = 0;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const std::size_t s = i * static_cast<std::size_t>(shards) / tensors.size();
    parts[s].push_back(tensors[i]);
    map[tensors[i].name] = "model-0000" + std::to_string(s + 1) + "-of-0000" + std::to_string(shards) + ".safetensors";
    sum += tensors[i].bytes;
  }
  for (int s = 0; s < shards; ++s) {
    write_shard(
        (dir / ("model-0000" + std::to_string(s + 1) + "-of-0000" + std::to_string(shards) + ".safetensors")).string(),
        parts[static_cast<std::size_t>(s)]);
  }
  std::ofstream(dir / "model.safetensors.index.json")
      << json{{"metadata", {{"total_size", total_size < 0 ? sum : total_size}}}, {"weight_map", map}}.dump();
}

const Finding* finding(const WeightsReport& r, const std::string& id) {
  for (const auto& f : r.findings) {
    if (f.id == id) return &f;
  }
  return nullptr;
}

const TensorInfo* find(const WeightsReport& r, const std::string& name) {
  for (const auto& t : r.tensors) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

void check_same_totals(const PartTotals& a, const PartTotals& b) {
  CHECK(a.bytes == b.bytes);
  CHECK(a.scale_bytes == b.scale_bytes);
  CHECK(a.tensors == b.tensors);
  CHECK(a.params == b.params);
}

/// The file weights equal the contract: every total, every part, every tensor's classification.
void check_equals_contract(const FileWeights& fw, const WeightsReport& derived) {
  const WeightsReport& r = fw.report;
  CHECK(r.known);
  CHECK(r.listed);
  CHECK_FALSE(r.estimated());
  CHECK(r.total_bytes() == derived.total_bytes());
  CHECK(fw.files_bytes == derived.total_bytes());
  CHECK(fw.contract_bytes == derived.total_bytes());
  check_same_totals(r.main, derived.main);
  check_same_totals(r.draft, derived.draft);
  for (std::size_t p = 0; p < kWeightPartCount; ++p) {
    INFO(to_string(static_cast<WeightPart>(p)));
    check_same_totals(r.main_parts[p], derived.main_parts[p]);
    check_same_totals(r.draft_parts[p], derived.draft_parts[p]);
  }
  CHECK(r.active_params == derived.active_params);
  CHECK(r.draft_stages == derived.draft_stages);
  REQUIRE(r.tensors.size() == derived.tensors.size());
  std::map<std::string, const TensorInfo*> by_name;
  for (const auto& t : derived.tensors) by_name[t.name] = &t;
  for (const auto& t : r.tensors) {
    INFO(t.name);
    const TensorInfo* c = by_name.at(t.name);
    CHECK(t.part == c->part);
    CHECK(t.layer == c->layer);
    CHECK(t.draft == c->draft);
    CHECK(t.scale == c->scale);
    CHECK(t.params == c->params);
    CHECK(t.dtype == c->dtype);
  }
  // The experts regroup into the contract's "{e}" groups: as many groups, the same bytes.
  CHECK(r.groups.size() == derived.groups.size());
  std::int64_t group_bytes = 0, group_tensors = 0;
  for (const auto& g : r.groups) {
    group_bytes += g.total_bytes();
    group_tensors += g.count;
  }
  CHECK(group_bytes == r.total_bytes());
  CHECK(group_tensors == r.total_tensors());
}

}  // namespace

TEST_CASE("checkpoint_weights: every safetensors dtype has a WeightDtype of its size", "[checkpoint_weights]") {
  for (const auto& d : safetensors_dtypes()) {
    INFO(d.name);
    const auto w = parse_weight_dtype(d.name);
    REQUIRE(w);
    CHECK(to_string(*w) == d.name);
    CHECK(dtype_bits(*w) == d.bits);
    CHECK(dtype_bytes(*w) == (d.bits % 8 == 0 ? d.bits / 8 : 0));
  }
  CHECK_FALSE(parse_weight_dtype("bf16"));
  CHECK(dtype_bytes(WeightDtype::F8_E4M3) == 1);
  CHECK(dtype_bytes(WeightDtype::F16) == 2);
  CHECK(dtype_bytes(WeightDtype::F4) == 0);
}

TEST_CASE("checkpoint_weights: the name patterns agree with the contract on every layout", "[checkpoint_weights]") {
  for (const char* config : {"configs/deepseek-v4-flash.json", "configs/deepseek-v4.1-flash.json",
                             "configs/deepseek-v3.2.json", "configs/small/v41-5layer-derived-sources.json"}) {
    INFO(config);
    const ModelConfig cfg = load_config(src(config));
    WeightsOptions o;
    o.list_tensors = false;
    const WeightsReport r = compute_weights(cfg, o);
    REQUIRE_FALSE(r.groups.empty());
    for (const auto& g : r.groups) {
      std::string name = g.name;
      const auto brace = name.find("{e}");
      if (brace != std::string::npos) name.replace(brace, 3, "0");
      INFO(name);
      const NameClass c = classify_tensor_name(name, cfg.num_hidden_layers, r.draft_stages);
      CHECK_FALSE(c.unplaceable);
      CHECK(c.part == g.part);
      CHECK(c.layer == g.layer);
      CHECK(c.draft == g.draft);
      CHECK(c.scale == g.scale);
    }
  }
}

TEST_CASE("checkpoint_weights: name patterns for names no contract lists", "[checkpoint_weights]") {
  const auto is = [](const std::string& name, WeightPart part, std::int64_t layer, bool draft = false,
                     bool scale = false) {
    INFO(name);
    const NameClass c = classify_tensor_name(name, 10, 3);  // 10 layers and 3 draft stages: layers 10-12
    CHECK(to_string(c.part) == to_string(part));
    CHECK(c.layer == layer);
    CHECK(c.draft == draft);
    CHECK(c.scale == scale);
    CHECK_FALSE(c.unplaceable);
  };
  is("layers.3.ffn.experts.300.w1.weight", WeightPart::routed_experts, 3);
  is("layers.3.ffn.experts.w13.weight", WeightPart::routed_experts, 3);  // fused experts
  is("layers.3.ffn.experts.0.w1.scale", WeightPart::routed_experts, 3, false, true);
  is("layers.3.ffn.shared_experts.w9.weight", WeightPart::shared_experts, 3);
  is("layers.3.attn.indexer.k_norm.weight", WeightPart::indexer, 3);
  is("layers.3.attn.compressor.extra", WeightPart::compressor, 3);
  is("layers.4.engram.proj.weight", WeightPart::engram, 4);
  is("layers.4.hc_post_fn", WeightPart::mhc, 4);
  is("vision.blocks.2.attn.qkv.weight", WeightPart::vision, -1);
  is("visual.merger.weight", WeightPart::vision, -1);
  is("model.visual.patch.weight", WeightPart::vision, -1);
  is("lm_head.weight", WeightPart::head, -1);
  is("embed.weight", WeightPart::embedding, -1);
  is("mtp.1.norm.weight", WeightPart::mtp, 11, true);
  is("mtp.1.dspark_head.weight", WeightPart::attention, 11, true);  // no pattern: attention
  is("mtp.1.ffn.gate.bias", WeightPart::router, 11, true);
  is("norm.weight", WeightPart::norms, -1);
  is("layers.2.ffn.gate.weight", WeightPart::router, 2);
  is("model.layers.2.mlp.gate_proj.weight_scale_inv", WeightPart::dense_ffn, 2, false, true);
  is("model.layers.12.shared_head.head.weight", WeightPart::head, 12, true);
  is("layers.2.attn.extra.weight", WeightPart::attention, 2);
  is("layers.2.post_norm.weight", WeightPart::norms, 2);
  is("something.else", WeightPart::attention, -1);
  is("layers.x.attn.weight", WeightPart::attention, -1);   // no layer number
  is("layers.07.attn.weight", WeightPart::attention, -1);  // not the spelling of an index
  is("layers.99999999999999999999.attn.weight", WeightPart::attention, -1);
  // Past the draft stages a layer is no stage of the model: unplaceable, not a draft.
  for (const char* name : {"model.layers.13.mlp.down_proj.weight", "model.layers.5000.mlp.down_proj.weight",
                           "mtp.3.e_proj.weight", "layers.999999999999999999.attn.weight"}) {
    INFO(name);
    CHECK(classify_tensor_name(name, 10, 3).unplaceable);
  }
  CHECK(classify_tensor_name("model.layers.10.x", 10, 0).unplaceable);  // no draft stage at all
  CHECK_FALSE(classify_tensor_name("model.layers.9.x", 10, 0).unplaceable);
}

TEST_CASE("checkpoint_weights: files holding exactly the contract give its totals and no mismatch",
          "[checkpoint_weights]") {
  const ModelConfig cfg = tiny_config();
  const WeightsReport derived = compute_weights(cfg);
  REQUIRE(derived.known);
  REQUIRE(derived.listed);
  REQUIRE(derived.draft_stages == 1);
  TempDir dir;
  write_checkpoint(dir.path, contract_tensors(derived), 3);
  const CheckpointFiles files = read_checkpoint_files(dir.path.string());
  REQUIRE(files.tensors.size() == derived.tensors.size());

  const FileWeights fw = weights_from_files(cfg, files, derived);
  check_equals_contract(fw, derived);
  CHECK(fw.compared);
  CHECK(fw.mismatch_count == 0);
  CHECK(fw.mismatches.empty());
  CHECK(fw.pattern_classified == 0);
  const Finding* src_f = finding(fw.report, "weights.files_source");
  REQUIRE(src_f);
  CHECK(src_f->severity == Severity::info);
  CHECK_THAT(src_f->message, Catch::StartsWith("bytes from 3 safetensors headers in " +
                                               quoted(dir.path.string(), kQuotedPathMaxBytes)));
  CHECK_FALSE(finding(fw.report, "weights.mismatch"));
  CHECK_FALSE(finding(fw.report, "weights.unclassified"));
  CHECK_FALSE(finding(fw.report, "weights.total_size"));
  CHECK_FALSE(finding(fw.report, "weights.no_contract"));
  for (const auto& f : fw.report.findings) CHECK(is_printable_line(f.message));
  // Main model first, then the draft stage.
  bool seen_draft = false;
  for (const auto& t : fw.report.tensors) {
    if (t.draft) seen_draft = true;
    CHECK((t.draft || !seen_draft));
  }

  // A wrong metadata.total_size of the index is passed on.
  TempDir dir2;
  write_checkpoint(dir2.path, contract_tensors(derived), 2, 12345);
  const FileWeights fw2 = weights_from_files(cfg, read_checkpoint_files(dir2.path.string()), derived);
  const Finding* ts = finding(fw2.report, "weights.total_size");
  REQUIRE(ts);
  CHECK_THAT(ts->message, Catch::Contains("12,345"));
  CHECK(ts->severity == Severity::warning);  // an index that is not its shards' sum is shown everywhere
  CHECK(fw2.mismatch_count == 0);
}

TEST_CASE("checkpoint_weights: a changed shape, a dropped tensor, an unknown one and a changed dtype are listed",
          "[checkpoint_weights]") {
  const ModelConfig cfg = tiny_config();
  const WeightsReport derived = compute_weights(cfg);
  std::vector<CheckpointTensor> tensors;
  std::int64_t dropped_bytes = 0;
  for (const auto& t : derived.tensors) {
    CheckpointTensor f = from_contract(t);
    if (t.name == "layers.1.ffn.experts.2.w3.scale") {
      dropped_bytes = t.bytes;
      continue;
    }
    if (t.name == "layers.0.attn.wq_a.weight") {
      REQUIRE(f.shape == std::vector<std::int64_t>{32, 64});
      f.shape = {64, 32};  // same bytes
    }
    if (t.name == "norm.weight") {
      f.dtype = "F32";
      f.bytes *= 2;
    }
    if (t.name == "layers.2.ffn.experts.1.w1.weight") {
      REQUIRE(f.dtype == "I8");
      f.dtype = "F4";  // the same bytes as packed I8 [64, 32]
      f.shape = {64, 64};
    }
    tensors.push_back(f);
  }
  tensors.push_back(CheckpointTensor{"layers.0.attn.extra.weight", "BF16", {4, 4}, 32, ""});
  tensors.push_back(CheckpointTensor{"mtp.0.ffn.experts.7.w1.weight", "I8", {64, 32}, 2048, ""});  // only 4 experts
  TempDir dir;
  write_checkpoint(dir.path, tensors, 2);
  const CheckpointFiles files = read_checkpoint_files(dir.path.string());

  const FileWeights fw = weights_from_files(cfg, files, derived);
  CHECK(fw.compared);
  // shape (wq_a), missing (the scale), 2 not_in_contract, dtype + bytes (norm), dtype + shape (F4).
  CHECK(fw.mismatch_count == 8);
  REQUIRE(fw.mismatches.size() == 8);
  const auto m = [&](std::size_t i) {
    return fw.mismatches[i].tensor + " " + fw.mismatches[i].what + " " + fw.mismatches[i].contract + " | " +
           fw.mismatches[i].files;
  };
  CHECK(m(0) == "layers.0.attn.extra.weight not_in_contract  | BF16 [4, 4]");
  CHECK(m(1) == "layers.0.attn.wq_a.weight shape [32, 64] | [64, 32]");
  CHECK(m(2) == "layers.1.ffn.experts.2.w3.scale missing_in_files F8_E8M0 [64, 2] | ");
  CHECK(m(3) == "layers.2.ffn.experts.1.w1.weight dtype I8 | F4");
  CHECK(m(4) == "layers.2.ffn.experts.1.w1.weight shape [64, 32] | [64, 64]");
  CHECK(m(5) == "mtp.0.ffn.experts.7.w1.weight not_in_contract  | I8 [64, 32]");
  CHECK(m(6) == "norm.weight bytes 128 | 256");
  CHECK(m(7) == "norm.weight dtype BF16 | F32");

  const WeightsReport& r = fw.report;
  CHECK(fw.files_bytes == derived.total_bytes() - dropped_bytes + 128 + 32 + 2048);
  CHECK(r.total_bytes() == fw.files_bytes);
  CHECK(r.total_tensors() == derived.total_tensors() + 1);
  CHECK(fw.pattern_classified == 2);
  const TensorInfo* extra = find(r, "layers.0.attn.extra.weight");
  REQUIRE(extra);
  CHECK(extra->part == WeightPart::attention);
  CHECK(extra->layer == 0);
  CHECK_FALSE(extra->draft);
  CHECK(extra->params == 16);
  const TensorInfo* e7 = find(r, "mtp.0.ffn.experts.7.w1.weight");
  REQUIRE(e7);
  CHECK(e7->part == WeightPart::routed_experts);
  CHECK(e7->layer == 3);
  CHECK(e7->draft);
  CHECK(e7->params == 4096);  // packed FP4
  const TensorInfo* f4 = find(r, "layers.2.ffn.experts.1.w1.weight");
  REQUIRE(f4);
  CHECK(f4->dtype == WeightDtype::F4);
  CHECK(f4->bytes == 2048);
  CHECK(f4->params == 4096);
  CHECK(f4->part == WeightPart::routed_experts);
  const TensorInfo* norm = find(r, "norm.weight");
  REQUIRE(norm);
  CHECK(norm->part == WeightPart::norms);
  CHECK(norm->bytes == 256);
  // Per part: attention gained the extra tensor, routed experts lost the scale, the draft stage
  // gained an expert; norms doubled its norm.weight.
  const auto part = [&](WeightPart p, bool draft = false) {
    return (draft ? r.draft_parts : r.main_parts)[static_cast<std::size_t>(p)].bytes -
           (draft ? derived.draft_parts : derived.main_parts)[static_cast<std::size_t>(p)].bytes;
  };
  CHECK(part(WeightPart::attention) == 32);
  CHECK(part(WeightPart::routed_experts) == -dropped_bytes);
  CHECK(part(WeightPart::routed_experts, true) == 2048);
  CHECK(part(WeightPart::norms) == 128);
  CHECK(part(WeightPart::embedding) == 0);

  // The layer-2 w1 experts no longer regroup (one is F4); everything else does.
  std::int64_t group_bytes = 0;
  bool w1_layer2_grouped = false;
  for (const auto& g : r.groups) {
    group_bytes += g.total_bytes();
    if (g.name == "layers.2.ffn.experts.{e}.w1.weight") w1_layer2_grouped = true;
  }
  CHECK(group_bytes == r.total_bytes());
  CHECK_FALSE(w1_layer2_grouped);

  const Finding* mf = finding(r, "weights.mismatch");
  REQUIRE(mf);
  CHECK(mf->severity == Severity::warning);
  CHECK_THAT(mf->message, Catch::StartsWith("8 differences between the files and the tensors config.json describes: "
                                            "'layers.0.attn.extra.weight' not_in_contract; "
                                            "'layers.0.attn.wq_a.weight' shape (contract [32, 64], files [64, 32]); "));
  const Finding* uf = finding(r, "weights.unclassified");
  REQUIRE(uf);
  CHECK(uf->severity == Severity::info);
  CHECK(uf->message ==
        "2 tensors placed by their names only (not in the contract): 'layers.0.attn.extra.weight', "
        "'mtp.0.ffn.experts.7.w1.weight'");

  // At most max_mismatches listed, the first by name; all counted.
  const FileWeights few = weights_from_files(cfg, files, derived, 2);
  CHECK(few.mismatch_count == 8);
  REQUIRE(few.mismatches.size() == 2);
  CHECK(few.mismatches[0].tensor == "layers.0.attn.extra.weight");
  CHECK(few.mismatches[1].tensor == "layers.0.attn.wq_a.weight");
  const FileWeights none = weights_from_files(cfg, files, derived, 0);
  CHECK(none.mismatch_count == 8);
  CHECK(none.mismatches.empty());
}

TEST_CASE("checkpoint_weights: a wholly missing expert group is one mismatch named with {e}", "[checkpoint_weights]") {
  const ModelConfig cfg = tiny_config();
  const WeightsReport derived = compute_weights(cfg);
  CheckpointFiles files;
  files.dir = "mem";
  for (const auto& t : derived.tensors) {
    if (t.name.rfind("layers.1.ffn.experts.", 0) == 0 && t.name.find(".w2.weight") != std::string::npos) continue;
    files.tensors.push_back(from_contract(t));
  }
  const FileWeights fw = weights_from_files(cfg, files, derived);
  REQUIRE(fw.mismatch_count == 1);
  // Tensors the contract's exact parts hold are missing: the files are short of any whole checkpoint.
  CHECK(fw.missing_contract_tensors == 4);
  CHECK(fw.short_of_contract);
  CHECK(fw.contract_exact_main_bytes == derived.main.bytes);  // V4: every part exact
  CHECK(fw.shortfall_reason() ==
        "the files' main model holds " + std::to_string(fw.report.main.bytes) + " B, less than the " +
            std::to_string(derived.main.bytes) +
            " B config.json's contract has in the parts whose rules are exact; 4 of the contract's tensors are not in "
            "the files (or config.json is not this checkpoint's)");
  CHECK(fw.mismatches[0].tensor == "layers.1.ffn.experts.{e}.w2.weight");
  CHECK(fw.mismatches[0].what == "missing_in_files");
  CHECK(fw.mismatches[0].contract == "4 x I8 [64, 32]");
  // Active parameters follow the files: layer 1's w2 experts are not there.
  CHECK(fw.report.active_params == derived.active_params - 2 * 64 * 64);
}

TEST_CASE("checkpoint_weights: an unknown contract places by name and compares nothing", "[checkpoint_weights]") {
  const ModelConfig known_cfg = tiny_config();
  const WeightsReport known = compute_weights(known_cfg);
  const ModelConfig cfg = tiny_config("int4");
  const WeightsReport derived = compute_weights(cfg);
  REQUIRE_FALSE(derived.known);
  CheckpointFiles files;
  files.dir = "mem";
  files.files = {"model.safetensors"};
  files.tensors = contract_tensors(known);
  files.tensors.push_back(CheckpointTensor{"layers.0.attn.extra.weight", "BF16", {4, 4}, 32, ""});
  const FileWeights fw = weights_from_files(cfg, files, derived);
  CHECK_FALSE(fw.compared);
  CHECK(fw.mismatch_count == 0);
  CHECK(fw.mismatches.empty());
  CHECK(fw.pattern_classified == static_cast<std::int64_t>(files.tensors.size()));
  CHECK(fw.report.known);
  const Finding* nc = finding(fw.report, "weights.no_contract");
  REQUIRE(nc);
  CHECK_THAT(nc->message, Catch::Contains("int4"));
  REQUIRE(finding(fw.report, "weights.unclassified"));
  CHECK_FALSE(finding(fw.report, "weights.mismatch"));
  // The patterns place the V4 names as the contract would.
  for (std::size_t p = 0; p < kWeightPartCount; ++p) {
    INFO(to_string(static_cast<WeightPart>(p)));
    const std::int64_t extra = static_cast<WeightPart>(p) == WeightPart::attention ? 32 : 0;
    CHECK(fw.report.main_parts[p].bytes == known.main_parts[p].bytes + extra);
    CHECK(fw.report.main_parts[p].params == known.main_parts[p].params + (extra ? 16 : 0));
    CHECK(fw.report.draft_parts[p].bytes == known.draft_parts[p].bytes);
  }
  CHECK(fw.report.active_params == known.active_params + 16);
  CHECK(fw.report.draft_stages == 1);
}

TEST_CASE("checkpoint_weights: a Hugging Face cache tree, resolved and read", "[checkpoint_weights]") {
  const ModelConfig cfg = tiny_config();
  const WeightsReport derived = compute_weights(cfg);
  TempDir dir;
  const fs::path repo = dir.path / "models--tiny-org--Tiny-V4";
  const std::string rev = "0123456789abcdef0123456789abcdef01234567";
  const fs::path snap = repo / "snapshots" / rev;
  fs::create_directories(repo / "refs");
  fs::create_directories(repo / "blobs");
  fs::create_directories(snap);
  std::ofstream(repo / "refs" / "main") << rev;
  // The blobs hold the files; the snapshot links to them, as huggingface_hub lays it out.
  TempDir staging;
  write_checkpoint(staging.path, contract_tensors(derived), 2);
  std::ofstream(staging.path / "config.json") << tiny_v4().dump(2);
  int n = 0;
  for (const auto& e : fs::directory_iterator(staging.path)) {
    const std::string blob = "blob" + std::to_string(n++);
    fs::copy_file(e.path(), repo / "blobs" / blob);
    fs::create_symlink("../../blobs/" + blob, snap / e.path().filename());
  }

  const std::string model_dir = resolve_model_dir(repo.string());
  CHECK(model_dir == snap.string());
  const ModelConfig loaded = load_config(model_dir + "/config.json");
  const WeightsReport contract = compute_weights(loaded);
  const CheckpointFiles files = read_checkpoint_files(model_dir);
  CHECK(files.has_index);
  CHECK(files.files.size() == 2);
  const FileWeights fw = weights_from_files(loaded, files, contract);
  check_equals_contract(fw, contract);
  CHECK(fw.mismatch_count == 0);
  const Finding* f = finding(fw.report, "weights.files_source");
  REQUIRE(f);
  CHECK_THAT(f->message,
             Catch::Contains("bytes from 2 safetensors headers in " + quoted(model_dir, kQuotedPathMaxBytes)));
}

TEST_CASE("checkpoint_weights: the V4-Flash listing (69,187 tensors) classifies in one pass", "[checkpoint_weights]") {
  // Not a timed assertion: it shows that matching is not quadratic (the "{e}" groups are hashed).
  const ModelConfig cfg = load_config(src("configs/deepseek-v4-flash.json"));
  const WeightsReport derived = compute_weights(cfg);
  REQUIRE(derived.tensors.size() == 69'187);
  CheckpointFiles files;
  files.dir = "mem";
  files.tensors = contract_tensors(derived);
  std::sort(files.tensors.begin(), files.tensors.end(),
            [](const CheckpointTensor& a, const CheckpointTensor& b) { return a.name < b.name; });
  const auto start = std::chrono::steady_clock::now();
  const FileWeights fw = weights_from_files(cfg, files, derived);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  INFO("weights_from_files on 69,187 tensors: " << s << " s");
  check_equals_contract(fw, derived);
  CHECK(fw.mismatch_count == 0);
  CHECK(fw.report.total_bytes() == 159'609'485'896);
  CHECK(fw.report.groups.size() < 2'000);

  // 1000 tensors, a third of them unknown to the contract.
  CheckpointFiles small;
  small.dir = "mem";
  for (int i = 0; i < 1000; ++i) {
    if (i % 3 == 0) {
      const std::string name = "layers.5.ffn.experts." + std::to_string(1000 + i) + ".w1.weight";
      small.tensors.push_back(CheckpointTensor{name, "I8", {2048, 2048}, 4194304, ""});
    } else {
      small.tensors.push_back(files.tensors[static_cast<std::size_t>(i) * 60]);
    }
  }
  const FileWeights fs1 = weights_from_files(cfg, small, derived);
  CHECK(fs1.pattern_classified == 334);
  CHECK(fs1.mismatch_count > 334);  // and what the contract has that these lack
  CHECK(fs1.mismatches.size() == 20);
}

TEST_CASE("checkpoint_weights: a tensor of a layer the model does not have is unplaceable, not a draft",
          "[checkpoint_weights]") {
  const ModelConfig cfg = tiny_config();  // 3 layers and 1 draft stage
  const WeightsReport derived = compute_weights(cfg);
  CheckpointFiles files;
  files.dir = "mem";
  for (const auto& t : derived.tensors) files.tensors.push_back(from_contract(t));
  files.tensors.push_back(
      CheckpointTensor{"model.layers.5000.mlp.down_proj.weight", "U8", {1850000000}, 1850000000, ""});
  files.tensors.push_back(CheckpointTensor{"mtp.1.e_proj.weight", "U8", {10}, 10, ""});
  std::sort(files.tensors.begin(), files.tensors.end(),
            [](const CheckpointTensor& a, const CheckpointTensor& b) { return a.name < b.name; });
  const FileWeights fw = weights_from_files(cfg, files, derived);
  CHECK(fw.unplaceable_tensors == 2);
  CHECK(fw.unplaceable_bytes == 1850000010);
  // Not counted as a draft stage, not placed: the report is the contract's; the files' bytes say all.
  CHECK(fw.report.draft_stages == 1);
  CHECK(fw.report.total_bytes() == derived.total_bytes());
  CHECK(fw.files_bytes == derived.total_bytes() + 1850000010);
  CHECK_FALSE(fw.short_of_contract);
  const Finding* f = finding(fw.report, "weights.unplaceable");
  REQUIRE(f);
  CHECK(f->severity == Severity::warning);
  // Skipped hidden files are a note.
  files.hidden_files_skipped = 2;
  const FileWeights hidden = weights_from_files(cfg, files, derived);
  const Finding* h = finding(hidden.report, "weights.hidden_files");
  REQUIRE(h);
  CHECK(h->severity == Severity::info);
  CHECK(h->message ==
        "2 *.safetensors files whose names start with '.' (macOS \"._\" files) are skipped, as the engines' "
        "\"*.safetensors\" glob skips them");
  CHECK(f->message ==
        "2 tensors (1850000010 B) name a layer past the model's 3 layers and 1 draft stages: "
        "'model.layers.5000.mlp.down_proj.weight', 'mtp.1.e_proj.weight'; no GPU holds them, and they are left out of "
        "the weights");
}

TEST_CASE("checkpoint_weights: the exact parts of an estimated contract bound what a whole checkpoint holds",
          "[checkpoint_weights]") {
  // V4.1: compressor, indexer, Engram, vision and the DSpark draft stages are estimated; the rest is exact.
  const ModelConfig cfg = load_config(src("configs/deepseek-v4.1-flash.json"));
  WeightsOptions o;
  o.list_tensors = false;
  const WeightsReport derived = compute_weights(cfg, o);
  REQUIRE(derived.estimated());
  CHECK(derived.estimated_reason() == "compressor, indexer, engram, vision; draft stages");
  CheckpointFiles files;
  files.dir = "mem";
  files.tensors.push_back(CheckpointTensor{"embed.weight", "BF16", {4, 8}, 64, ""});
  const FileWeights fw = weights_from_files(cfg, files, derived);
  std::int64_t exact = 0;
  for (std::size_t p = 0; p < kWeightPartCount; ++p) {
    if (!derived.main_parts[p].estimated) exact += derived.main_parts[p].bytes;
  }
  CHECK(fw.contract_exact_main_bytes == exact);
  CHECK(exact < derived.main.bytes);
  CHECK(fw.short_of_contract);
  // The released checkpoint (510,286,023,000 B) holds more than the exact parts.
  CHECK(exact < 510286023000);
}
