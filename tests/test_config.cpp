// Config reader: every rule of docs/config.md with its whole message, the released configs, the
// small test configs, and bad input that must be rejected cleanly.

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <string>

#include "mlaplan/model/config.hpp"
#include "mlaplan/base/error.hpp"

using namespace mlaplan;

namespace {

std::string src(const std::string& rel) { return std::string(MLAPLAN_SOURCE_DIR) + "/" + rel; }

/// Parses `text` and returns the error message (fails the test if it parses or the kind differs).
std::string error_of(const std::string& text, ErrorKind kind = ErrorKind::invalid_config) {
  try {
    parse_config(text, "t.json");
  } catch (const Error& e) {
    CHECK(e.kind() == kind);
    return e.what();
  }
  FAIL("config was accepted: " << text);
  return {};
}

bool has_finding(const ModelConfig& c, const std::string& id, const std::string& message) {
  for (const auto& f : c.findings) {
    if (f.id == id && f.message == message) return true;
  }
  return false;
}

// A flat V4.1 config with the given extra fields (JSON members, comma-separated).
std::string v41(const std::string& fields) {
  return R"({"model_type": "deepseek_v41_text", "num_nextn_predict_layers": 0)" +
         (fields.empty() ? std::string() : ", " + fields) + "}";
}

}  // namespace

TEST_CASE("released V4.1-Flash config", "[config]") {
  const auto c = load_config(src("configs/deepseek-v4.1-flash.json"));
  CHECK(c.family == Family::deepseek_v41);
  CHECK(c.composite);
  CHECK(c.field_prefix == "/text_config");
  CHECK(c.num_hidden_layers == 40);
  CHECK(c.num_draft_layers == 3);
  CHECK(c.num_attention_heads == 64);
  CHECK(c.head_dim == 512);
  CHECK(c.sliding_window == 128);
  CHECK(c.index_topk == 512);
  CHECK(c.dtype == "bfloat16");
  CHECK(c.compress_ratios.size() == 43);
  CHECK(c.kv_source_layer_ids == std::vector<std::int64_t>{2, 8, 14, 20});
  CHECK(c.index_source_layer_ids == std::vector<std::int64_t>{2, 8, 14, 20, 24, 28, 32, 36});
  CHECK(c.candidate_source_layer_id == 20);
  CHECK(c.max_position_embeddings == 1048576);
  CHECK(c.findings.empty());
}

TEST_CASE("released V4-Flash config: MTP tail", "[config]") {
  const auto c = load_config(src("configs/deepseek-v4-flash.json"));
  CHECK(c.family == Family::deepseek_v4);
  CHECK(c.num_hidden_layers == 43);
  CHECK(c.num_draft_layers == 1);
  REQUIRE(c.compress_ratios.size() == 44);
  CHECK(c.compress_ratios[43] == 0);
  CHECK(std::count(c.compress_ratios.begin(), c.compress_ratios.end(), 4) == 21);
  CHECK(std::count(c.compress_ratios.begin(), c.compress_ratios.end(), 128) == 20);
  CHECK(c.findings.empty());
}

TEST_CASE("released V3.2 config", "[config]") {
  const auto c = load_config(src("configs/deepseek-v3.2.json"));
  CHECK(c.family == Family::deepseek_v32);
  CHECK(c.num_hidden_layers == 61);
  CHECK(c.num_draft_layers == 1);
  CHECK(c.num_attention_heads == 128);
  CHECK(c.head_dim == 576);
  CHECK(c.kv_lora_rank == 512);
  CHECK(c.index_topk == 2048);
  CHECK(c.sliding_window == 0);
  CHECK(c.max_position_embeddings == 163840);
}

TEST_CASE("config path may be a directory holding config.json", "[config]") {
  const auto dir = std::filesystem::temp_directory_path() / "mlaplan-test-dir";
  std::filesystem::create_directories(dir);
  std::filesystem::copy_file(src("configs/deepseek-v4.1-flash.json"), dir / "config.json",
                             std::filesystem::copy_options::overwrite_existing);
  const auto c = load_config(dir.string());
  CHECK(c.source == dir.string());
  CHECK(c.file == (dir / "config.json").string());
  CHECK(c.num_hidden_layers == 40);
  std::filesystem::remove_all(dir);
}

TEST_CASE("small configs", "[config]") {
  SECTION("derived sources") {
    const auto c = load_config(src("configs/small/v41-5layer-derived-sources.json"));
    CHECK(c.kv_source_layer_ids == std::vector<std::int64_t>{1, 3});
    CHECK(c.index_source_layer_ids == std::vector<std::int64_t>{1, 3});
    CHECK(c.candidate_source_layer_id == 3);
    CHECK(has_finding(c, "config.structural_default",
                      "assumed kv_source_layer_ids = [1, 3], the first layer of each run of equal non-zero ratios"));
    CHECK(has_finding(c, "config.structural_default", "assumed candidate_source_layer_id = 3, the last KV source"));
  }
  SECTION("reindex, composite") {
    const auto c = load_config(src("configs/small/v41-6layer-reindex.json"));
    CHECK(c.composite);
    CHECK(c.index_source_layer_ids == std::vector<std::int64_t>{2, 4, 5});
    CHECK(c.dtype == "float32");
    CHECK(has_finding(c, "config.default", "assumed sliding_window = 128, the transformers default"));
  }
  SECTION("flat, no num_nextn_predict_layers") {
    const auto c = load_config(src("configs/small/v41-8layer-flat.json"));
    CHECK(c.num_draft_layers == 3);
    CHECK(c.compress_ratios == std::vector<int>{0, 0, 2, 2, 2, 1, 1, 1, 0, 0, 0});
    CHECK(
        has_finding(c, "config.structural_default", "assumed num_nextn_predict_layers = 3, the transformers default"));
    CHECK(has_finding(c, "config.padded_ratios", "padded compress_ratios with 3 zero(s) for draft layers 8-10"));
  }
  SECTION("V4 layer_types") {
    const auto c = load_config(src("configs/small/v4-2layer-layer-types.json"));
    CHECK(c.compress_ratios == std::vector<int>{128, 4});
    CHECK(has_finding(c, "config.normalised",
                      "read layer_types as compress_ratios (sliding 0, compressed_sparse 4, heavily_compressed 128)"));
  }
}

TEST_CASE("structural defaults are warnings that name the field and the value assumed", "[config]") {
  const auto c = parse_config(v41(R"("num_hidden_layers": 9)"), "t.json");
  std::vector<std::string> structural;
  for (const auto& f : c.findings) {
    if (f.id == "config.structural_default") {
      CHECK(f.severity == Severity::warning);
      CHECK_FALSE(f.path.empty());
      structural.push_back(f.path + ": " + f.message);
    } else if (f.id == "config.default") {
      CHECK(f.severity == Severity::info);
      // A tuning value, not the layer structure.
      CHECK(f.message.find("compress_ratios") == std::string::npos);
      CHECK(f.message.find("source_layer") == std::string::npos);
    }
  }
  CHECK(structural == std::vector<std::string>{
                          "/compress_ratios: assumed compress_ratios = [0, 0, 2, 2, 2, 2, 1, 1, 1], the transformers "
                          "default for 9 layers",
                          "/kv_source_layer_ids: assumed kv_source_layer_ids = [2, 6], the first layer of each run of "
                          "equal non-zero ratios",
                          "/index_source_layer_ids: assumed index_source_layer_ids = kv_source_layer_ids = [2, 6]",
                          "/candidate_source_layer_id: assumed candidate_source_layer_id = 6, the last KV source"});
}

TEST_CASE("V4.1 defaults", "[config]") {
  SECTION("everything absent: the released schedule") {
    const auto c = parse_config(R"({"model_type": "deepseek_v41"})", "t.json");
    CHECK(c.num_hidden_layers == 40);
    CHECK(c.num_draft_layers == 3);
    CHECK(c.compress_ratios.size() == 43);
    CHECK(c.compress_ratios[1] == 0);
    CHECK(c.compress_ratios[2] == 2);
    CHECK(c.compress_ratios[19] == 2);
    CHECK(c.compress_ratios[20] == 1);
    CHECK(c.compress_ratios[39] == 1);
    CHECK(c.kv_source_layer_ids == std::vector<std::int64_t>{2, 8, 14, 20});
    CHECK(c.index_source_layer_ids == std::vector<std::int64_t>{2, 8, 14, 20, 24, 28, 32, 36});
    CHECK(c.candidate_source_layer_id == 20);
    CHECK(
        has_finding(c, "config.structural_default", "assumed num_nextn_predict_layers = 3, the transformers default"));
    CHECK(has_finding(c, "config.structural_default", "assumed num_hidden_layers = 40, the transformers default"));
  }
  SECTION("scaled schedule for other layer counts") {
    const auto c = parse_config(v41(R"("num_hidden_layers": 9)"), "t.json");
    // 2 window-only, ceil(7/2) = 4 ratio-2, 3 ratio-1
    CHECK(c.compress_ratios == std::vector<int>{0, 0, 2, 2, 2, 2, 1, 1, 1});
    CHECK(c.kv_source_layer_ids == std::vector<std::int64_t>{2, 6});
    CHECK(c.index_source_layer_ids == std::vector<std::int64_t>{2, 6});
    CHECK(c.candidate_source_layer_id == 6);
    CHECK(has_finding(c, "config.structural_default",
                      "assumed compress_ratios = [0, 0, 2, 2, 2, 2, 1, 1, 1], the transformers default for 9 layers"));
  }
  SECTION("one and two layers") {
    CHECK(parse_config(v41(R"("num_hidden_layers": 1)"), "t.json").compress_ratios == std::vector<int>{0});
    CHECK(parse_config(v41(R"("num_hidden_layers": 2)"), "t.json").compress_ratios == std::vector<int>{0, 0});
    CHECK(parse_config(v41(R"("num_hidden_layers": 3)"), "t.json").compress_ratios == std::vector<int>{0, 0, 2});
  }
  SECTION("negative candidate disables") {
    const auto c = parse_config(v41(R"("candidate_source_layer_id": -1)"), "t.json");
    CHECK(c.candidate_source_layer_id == -1);
    CHECK(has_finding(c, "config.candidate_disabled", "candidate_source_layer_id = -1: candidate selection disabled"));
  }
  SECTION("unsorted source lists are sorted, with a note") {
    const auto c = parse_config(
        v41(R"("num_hidden_layers": 6, "compress_ratios": [0, 2, 2, 1, 1, 1], "kv_source_layer_ids": [3, 1])"),
        "t.json");
    CHECK(c.kv_source_layer_ids == std::vector<std::int64_t>{1, 3});
    CHECK(has_finding(c, "config.sorted", "sorted kv_source_layer_ids to [1, 3]"));
  }
}

TEST_CASE("V4.1 rules, each with its whole message", "[config]") {
  const std::string six = R"("num_hidden_layers": 6, "compress_ratios": [0, 0, 2, 2, 1, 1])";
  CHECK(error_of(v41(R"("num_hidden_layers": 6, "compress_ratios": [0, 0, 3, 2, 1, 1])")) ==
        "t.json: /compress_ratios/2: layer 2: Unsupported DeepSeek V4.1 compress_ratio=3; expected 0, 1, or 2.");
  CHECK(error_of(v41(R"("num_hidden_layers": 6, "compress_ratios": [0, 0, 2, 2, 1])")) ==
        "t.json: /compress_ratios: compress_ratios has 5 entries; it needs one per layer, at least "
        "num_hidden_layers = 6");
  // More entries than backbone + draft layers: DeepseekV41TextConfig refuses the list.
  CHECK(error_of(v41(R"("num_hidden_layers": 2, "compress_ratios": [0, 0, 1])")) ==
        "t.json: /compress_ratios: compress_ratios has 3 entries; a DeepSeek V4.1 config allows at most "
        "num_hidden_layers + num_nextn_predict_layers = 2 + 0 = 2");
  CHECK(error_of(v41(six + R"(, "kv_source_layer_ids": [4, 9])")) ==
        "t.json: /kv_source_layer_ids/1: kv_source_layer_ids[1] = 9 is not a backbone layer; allowed 0..5");
  CHECK(error_of(v41(six + R"(, "kv_source_layer_ids": [1, 4])")) ==
        "t.json: /kv_source_layer_ids/0: kv_source_layer_ids[0] = 1: layer 1 has compress_ratio 0 (window "
        "only); a KV source must have compress_ratio 1 or 2");
  CHECK(error_of(v41(six + R"(, "kv_source_layer_ids": [2, 2, 4])")) ==
        "t.json: /kv_source_layer_ids/1: kv_source_layer_ids[1] = 2 repeats kv_source_layer_ids[0]");
  CHECK(error_of(
            v41(R"("num_hidden_layers": 6, "compress_ratios": [0, 0, 2, 2, 1, 1], "kv_source_layer_ids": [3, 4])")) ==
        "t.json: /kv_source_layer_ids: layer 2 has compress_ratio 2 but no kv_source_layer_ids entry at or before "
        "it (kv_source_layer_ids = [3, 4])");
  CHECK(error_of(v41(six + R"(, "kv_source_layer_ids": [2])")) ==
        "t.json: /kv_source_layer_ids: layer 4 has compress_ratio 1 but would read layer 2's compressed cache, "
        "which has ratio 2; a KV-sharing group has one ratio: make layer 4 (or an earlier ratio-1 layer) a KV source");
  CHECK(error_of(v41(six + R"(, "index_source_layer_ids": [2, 4, 1])")) ==
        "t.json: /index_source_layer_ids/2: index_source_layer_ids[2] = 1: layer 1 has compress_ratio 0 (window "
        "only); an index source must have compress_ratio 1 or 2");
  CHECK(error_of(v41(six + R"(, "index_source_layer_ids": [2])")) ==
        "t.json: /index_source_layer_ids: KV source 4 is not in index_source_layer_ids; the layers reading its "
        "cache would have no top-k indices (index_source_layer_ids = [2])");
  CHECK(error_of(v41(six + R"(, "candidate_source_layer_id": 3)")) ==
        "t.json: /candidate_source_layer_id: candidate_source_layer_id = 3 is not an index source; allowed: one "
        "of [2, 4], or a negative value to disable");
  CHECK(error_of(v41(R"("num_hidden_layers": 30, "compress_ratios": [0, 0, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2,
                      2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0], "kv_source_layer_ids": [2, 8, 14, 20])")) ==
        "t.json: /index_source_layer_ids: the default index_source_layer_ids include layer 24, which is not a "
        "compressed layer of this config; give index_source_layer_ids explicitly");
}

TEST_CASE("index source before any KV source is rejected", "[config]") {
  // Layer 2 is compressed and a KV source only at 3: layer 2 has no source at or before it, which
  // is reported first; with sources [2] and index [2, 3] all is fine.
  const auto c = parse_config(
      v41(R"("num_hidden_layers": 4, "compress_ratios": [0, 0, 2, 2], "kv_source_layer_ids": [2], "index_source_layer_ids": [2, 3])"),
      "t.json");
  CHECK(c.index_source_layer_ids == std::vector<std::int64_t>{2, 3});
}

TEST_CASE("draft layers are window only", "[config]") {
  const auto c = parse_config(
      R"({"model_type": "deepseek_v41_text", "num_hidden_layers": 3, "num_nextn_predict_layers": 2, "compress_ratios": [0, 0, 2, 0, 1]})",
      "t.json");
  CHECK(c.compress_ratios == std::vector<int>{0, 0, 2, 0, 0});
  CHECK(has_finding(c, "config.draft_ratio",
                    "draft layer 4 has compress_ratio 1; draft layers are window-only, treated as 0"));
}

TEST_CASE("a V4.1 compress_ratios longer than backbone + draft layers is refused", "[config]") {
  // DeepseekV41TextConfig's rule (V4.0 counts such entries as draft stages instead).
  const std::string base = R"({"model_type": "deepseek_v41_text", "num_hidden_layers": 3, )";
  CHECK(error_of(base + R"("num_nextn_predict_layers": 1, "compress_ratios": [0, 0, 2, 0, 0]})") ==
        "t.json: /compress_ratios: compress_ratios has 5 entries; a DeepSeek V4.1 config allows at most "
        "num_hidden_layers + num_nextn_predict_layers = 3 + 1 = 4");
  const auto c = parse_config(base + R"("num_nextn_predict_layers": 2, "compress_ratios": [0, 0, 2, 0, 0]})", "t.json");
  CHECK(c.num_draft_layers == 2);
  // Fewer entries than that: num_nextn_predict_layers still counts the draft layers, padded with 0.
  const auto p = parse_config(base + R"("num_nextn_predict_layers": 2, "compress_ratios": [0, 0, 2, 0]})", "t.json");
  CHECK(p.num_draft_layers == 2);
  CHECK(p.compress_ratios == std::vector<int>{0, 0, 2, 0, 0});
}

TEST_CASE("V4.0 rules", "[config]") {
  const std::string base = R"({"model_type": "deepseek_v4", "num_hidden_layers": 4, "num_nextn_predict_layers": 1, )";
  SECTION("entries past the draft layers num_nextn_predict_layers declares are draft layers too") {
    // The V4-Flash-0731 convention: 46 entries for 43 layers and num_nextn_predict_layers 1 is 3 stages.
    const auto c = parse_config(base + R"("compress_ratios": [0, 4, 128, 4, 0, 0, 0]})", "t.json");
    CHECK(c.compress_ratios == std::vector<int>{0, 4, 128, 4, 0, 0, 0});
    CHECK(c.num_draft_layers == 3);
    CHECK(c.num_nextn_predict_layers == 1);
    CHECK(c.total_layers() == 7);
    CHECK(has_finding(c, "config.draft_layers",
                      "compress_ratios has 7 entries for num_hidden_layers = 4: 3 draft layers, although "
                      "num_nextn_predict_layers says 1 (a re-release that ships more draft stages than it declares); "
                      "the topology, the KV caches and the weights count 3"));
    for (const auto& f : c.findings) CHECK(f.id != "config.extra_ratios");
  }
  SECTION("a non-zero entry past them is an error: draft layers are window-only") {
    CHECK(error_of(base + R"("compress_ratios": [0, 4, 128, 4, 0, 4]})") ==
          "t.json: /compress_ratios/5: compress_ratios[5] = 4: compress_ratios has 6 entries for num_hidden_layers "
          "= 4: 2 draft layers (num_nextn_predict_layers says 1), so layer 5 is a draft layer, and draft layers are "
          "window-only: 0 expected");
  }
  SECTION("the list as long as the backbone and num_nextn_predict_layers agree: no finding") {
    const auto c = parse_config(base + R"("compress_ratios": [0, 4, 128, 4, 0]})", "t.json");
    CHECK(c.num_draft_layers == 1);
    for (const auto& f : c.findings) CHECK(f.id != "config.draft_layers");
  }
  SECTION("bad ratio") {
    CHECK(error_of(base + R"("compress_ratios": [0, 4, 2, 4, 0]})") ==
          "t.json: /compress_ratios/2: layer 2: Unsupported DeepseekV4 compress_ratio=2; expected 1, 4, or 128.");
  }
  SECTION("missing MTP entry padded") {
    const auto c = parse_config(base + R"("compress_ratios": [1, 4, 128, 4]})", "t.json");
    CHECK(c.compress_ratios == std::vector<int>{1, 4, 128, 4, 0});
  }
  SECTION("compress_rates spelling") {
    const auto c = parse_config(base + R"("compress_rates": [0, 4, 128, 4, 0]})", "t.json");
    CHECK(c.compress_ratios == std::vector<int>{0, 4, 128, 4, 0});
    CHECK(has_finding(c, "config.normalised", "read compress_rates as compress_ratios"));
  }
  SECTION("no schedule at all") {
    CHECK(error_of(base + R"("head_dim": 512})") ==
          "t.json: /compress_ratios: missing; a deepseek_v4 config needs compress_ratios (or layer_types) to say "
          "which layers compress");
  }
  SECTION("unknown layer type") {
    CHECK(error_of(base + R"("layer_types": ["sliding_attention", "full_attention"]})") ==
          "t.json: /layer_types/1: layer_types[1] = the string \"full_attention\" is not a V4 layer type; allowed: "
          "sliding_attention, compressed_sparse_attention, heavily_compressed_attention");
  }
  SECTION("num_hidden_layers required") {
    CHECK(error_of(R"({"model_type": "deepseek_v4", "compress_ratios": [0]})") ==
          "t.json: /num_hidden_layers: missing; num_hidden_layers is required for deepseek_v4 configs");
  }
}

TEST_CASE("other spellings are accepted and reported", "[config]") {
  SECTION("DeepSeek's inference names, no model_type") {
    const auto c = parse_config(
        R"({"n_layers": 6, "n_heads": 64, "dim": 4096, "window_size": 128, "n_mtp_layers": 1,
            "compress_ratios": [0, 0, 2, 2, 1, 1], "kv_source_layers": [2, 4],
            "index_source_layers": [2, 4, 5], "candidate_source_layer": 4, "rope_head_dim": 64})",
        "t.json");
    CHECK(c.family == Family::deepseek_v41);
    CHECK(c.num_hidden_layers == 6);
    CHECK(c.num_draft_layers == 1);
    CHECK(c.index_source_layer_ids == std::vector<std::int64_t>{2, 4, 5});
    CHECK(c.candidate_source_layer_id == 4);
    CHECK(has_finding(c, "config.inferred_family",
                      "no model_type; read DeepSeek's inference config names as deepseek_v41"));
    CHECK(has_finding(c, "config.normalised", "read n_mtp_layers as num_nextn_predict_layers"));
    CHECK(has_finding(c, "config.normalised", "read kv_source_layers as kv_source_layer_ids"));
    CHECK(has_finding(c, "config.normalised", "read window_size as sliding_window"));
  }
  SECTION("two spellings that disagree") {
    CHECK(error_of(v41(R"("sliding_window": 128, "window_size": 64)")) ==
          "t.json: /window_size: window_size = 64 disagrees with sliding_window = 128; they are two spellings of "
          "one field");
  }
  SECTION("V4 inference names with 4/128 ratios") {
    const auto c = parse_config(R"({"n_layers": 2, "n_mtp_layers": 0, "compress_ratios": [4, 128]})", "t.json");
    CHECK(c.family == Family::deepseek_v4);
  }
}

TEST_CASE("model_type", "[config]") {
  CHECK(error_of(R"({"model_type": "llama"})") ==
        "t.json: /model_type: the string \"llama\" is not a supported model family; supported: deepseek_v41 (also "
        "deepseek_v41_text), deepseek_v4, deepseek_v32");
  CHECK(error_of(R"({"model_type": "DeepSeek-V4"})") ==
        "t.json: /model_type: the string \"DeepSeek-V4\" is not a supported model family; supported: deepseek_v41 "
        "(also deepseek_v41_text), deepseek_v4, deepseek_v32; did you mean \"deepseek_v4\"?");
  CHECK(error_of(R"({"vocab_size": 3})") ==
        "t.json: /model_type: missing; supported families: deepseek_v41 (also deepseek_v41_text), deepseek_v4, "
        "deepseek_v32");
  CHECK(error_of(R"({"model_type": 4})") ==
        "t.json: /model_type: must be a string, got 4; supported families: deepseek_v41 (also deepseek_v41_text), "
        "deepseek_v4, deepseek_v32");
  CHECK(error_of(R"({"model_type": "deepseek_v41", "text_config": []})") ==
        "t.json: /text_config: must be an object, got an array of 0 entries");
  CHECK(error_of(R"({"model_type": "deepseek_v41", "text_config": {"model_type": "deepseek_v4"}})") ==
        "t.json: /text_config/model_type: the string \"deepseek_v4\" inside a deepseek_v41 config; expected "
        "\"deepseek_v41_text\"");
}

TEST_CASE("wrong types and ranges", "[config]") {
  CHECK(error_of(v41(R"("num_hidden_layers": 4, "compress_ratios": [0, "2", 2, 2])")) ==
        "t.json: /compress_ratios/1: compress_ratios[1] must be an integer, got the string \"2\"");
  CHECK(error_of(v41(R"("kv_source_layer_ids": [2, 8.0, 14, 20])")) ==
        "t.json: /kv_source_layer_ids/1: kv_source_layer_ids[1] must be an integer, got 8.0");
  CHECK(error_of(v41(R"("kv_source_layer_ids": null)")) ==
        "t.json: /kv_source_layer_ids: kv_source_layer_ids must be a list of integers, got null");
  CHECK(error_of(v41(R"("compress_ratios": null)")) ==
        "t.json: /compress_ratios: compress_ratios must be a list of integers, got null");
  CHECK(error_of(v41(R"("num_hidden_layers": -3)")) ==
        "t.json: /num_hidden_layers: num_hidden_layers = -3 is out of range; allowed 1..4096");
  CHECK(error_of(v41(R"("num_hidden_layers": 9223372036854775808)")) ==
        "t.json: /num_hidden_layers: num_hidden_layers = 9223372036854775808 is out of range; allowed 1..4096");
  CHECK(error_of(v41(R"("num_hidden_layers": 40.5)")) ==
        "t.json: /num_hidden_layers: num_hidden_layers must be an integer, got 40.5");
  CHECK(error_of(v41(R"("num_hidden_layers": true)")) ==
        "t.json: /num_hidden_layers: num_hidden_layers must be an integer, got true");
  CHECK(error_of(v41(R"("sliding_window": 0)")) ==
        "t.json: /sliding_window: sliding_window = 0 is out of range; allowed 1..1048576");
  CHECK(error_of(v41(R"("index_topk": 18446744073709551615)")) ==
        "t.json: /index_topk: index_topk = 18446744073709551615 is out of range; allowed 1..16777216");
  CHECK(error_of(v41(R"("kv_source_layer_ids": [-9223372036854775808])")) ==
        "t.json: /kv_source_layer_ids/0: kv_source_layer_ids[0] = -9223372036854775808 is not a backbone layer; "
        "allowed 0..39");
  CHECK(error_of(v41(R"("candidate_source_layer_id": "20")")) ==
        "t.json: /candidate_source_layer_id: candidate_source_layer_id must be an integer, got the string \"20\"");
  CHECK(error_of(v41(R"("dtype": 16)")) == "t.json: /dtype: dtype must be a string such as \"bfloat16\", got 16");
  CHECK(error_of(v41(R"("qk_rope_head_dim": 600)")) ==
        "t.json: /qk_rope_head_dim: qk_rope_head_dim = 600 exceeds head_dim = 512");
}

TEST_CASE("dspark_block_size: the DSpark drafter's block, 0 when absent", "[config]") {
  // Released configs: V4.1-Flash has 5 under text_config; V4-Flash has none (its draft layer is MTP).
  CHECK(load_config(src("configs/deepseek-v4.1-flash.json")).dspark_block_size == 5);
  CHECK(load_config(src("configs/deepseek-v4-flash.json")).dspark_block_size == 0);
  CHECK(load_config(src("configs/deepseek-v3.2.json")).dspark_block_size == 0);
  // Flat V4.1 and V4 (a V4-Flash-0731 re-release has it at the top level); absence adds no finding.
  CHECK(parse_config(v41(R"("dspark_block_size": 5)"), "t.json").dspark_block_size == 5);
  const auto absent = parse_config(v41(""), "t.json");
  CHECK(absent.dspark_block_size == 0);
  for (const auto& f : absent.findings) CHECK(f.message.find("dspark_block_size") == std::string::npos);
  const std::string v4 = R"({"model_type": "deepseek_v4", "num_hidden_layers": 2, "num_nextn_predict_layers": 1,
                             "compress_ratios": [4, 128, 0], "dspark_block_size": )";
  CHECK(parse_config(v4 + "5}", "t.json").dspark_block_size == 5);
  CHECK(parse_config(v4 + "1}", "t.json").dspark_block_size == 1);
  CHECK(parse_config(v4 + "64}", "t.json").dspark_block_size == 64);
  // A written 0 is "no DSpark drafter", as when absent (configs without a drafter carry it).
  CHECK(parse_config(v41(R"("dspark_block_size": 0)"), "t.json").dspark_block_size == 0);
  CHECK(load_config(src("configs/small/v41-6layer-reindex.json")).dspark_block_size == 0);
  // Bad values: the pointer, the field, the value and the allowed range (or the type).
  CHECK(error_of(v41(R"("dspark_block_size": 65)")) ==
        "t.json: /dspark_block_size: dspark_block_size = 65 is out of range; allowed 0..64");
  CHECK(error_of(v4 + "-1}") == "t.json: /dspark_block_size: dspark_block_size = -1 is out of range; allowed 0..64");
  CHECK(error_of(v4 + "18446744073709551615}") ==
        "t.json: /dspark_block_size: dspark_block_size = 18446744073709551615 is out of range; allowed 0..64");
  CHECK(error_of(v41(R"("dspark_block_size": "5")")) ==
        "t.json: /dspark_block_size: dspark_block_size must be an integer, got the string \"5\"");
  CHECK(error_of(v41(R"("dspark_block_size": null)")) ==
        "t.json: /dspark_block_size: dspark_block_size must be an integer, got null");
  CHECK(error_of(v4 + "5.0}") == "t.json: /dspark_block_size: dspark_block_size must be an integer, got 5.0");
  // Composite V4.1: read under text_config, and named there.
  CHECK(error_of(R"({"model_type": "deepseek_v41", "text_config": {"num_nextn_predict_layers": 0,
                    "dspark_block_size": 100}})") ==
        "t.json: /text_config/dspark_block_size: dspark_block_size = 100 is out of range; allowed 0..64");
}

TEST_CASE("bad JSON is rejected with a clear message", "[config][bad-input]") {
  CHECK(error_of("") == "t.json: the file is empty; expected a JSON object (a model config.json)");
  CHECK(error_of("  \n") == "t.json: the file is empty; expected a JSON object (a model config.json)");
  CHECK(error_of("hello") ==
        "t.json: not valid JSON: parse error at line 1, column 1: syntax error while parsing value - invalid "
        "literal; last read: 'h'");
  CHECK(error_of(R"({"model_type": "deepseek_v41", )") ==
        "t.json: not valid JSON: parse error at line 1, column 32: syntax error while parsing object key - "
        "unexpected end of input; expected string literal");
  CHECK(error_of("[1, 2]") ==
        "t.json: the top level is an array of 2 entries; expected a JSON object (a model config.json)");
  CHECK(error_of("42") == "t.json: the top level is 42; expected a JSON object (a model config.json)");
  CHECK(error_of("\"x\"") == "t.json: the top level is the string \"x\"; expected a JSON object (a model config.json)");
  // A number too large for a double is the parser's out_of_range, not a parse_error: it was an
  // internal error (exit 70) before (fuzz/regressions/config/number-overflow-1e309.json).
  CHECK(error_of(v41(R"("num_hidden_layers": 1e309)")) == "t.json: not valid JSON: number overflow parsing '1e309'");
  CHECK(error_of(R"({"model_type": "deepseek_v4", "x": [-1e400]})") ==
        "t.json: not valid JSON: number overflow parsing '-1e400'");
  SECTION("invalid UTF-8") {
    const std::string bad = std::string(R"({"model_type": "deepseek_v41", "x": ")") + "\xff\xfe" + "\"}";
    CHECK_THAT(error_of(bad), Catch::StartsWith("t.json: not valid JSON: parse error at line 1, column"));
    CHECK_THAT(error_of(bad), Catch::Contains("invalid string: ill-formed UTF-8 byte"));
  }
  SECTION("nested 100,000 deep") {
    const std::string deep = std::string(100000, '[') + std::string(100000, ']');
    CHECK(error_of(deep) ==
          "t.json: JSON nested deeper than 64 levels (line 1); a model config is at most a few levels deep");
    const std::string deep_obj = R"({"model_type": "deepseek_v41", "x": )" + std::string(100000, '[');
    CHECK(error_of(deep_obj) ==
          "t.json: JSON nested deeper than 64 levels (line 1); a model config is at most a few levels deep");
  }
  SECTION("a 10^6-entry list") {
    std::string big = R"({"model_type": "deepseek_v41", "compress_ratios": [0)";
    for (int i = 1; i < 1000000; ++i) big += ",0";
    big += "]}";
    CHECK(error_of(big) == "t.json: /compress_ratios: compress_ratios has 1000000 entries; at most 8192 are accepted");
  }
  SECTION("brackets inside strings do not count as nesting") {
    const auto c = parse_config(
        R"({"model_type": "deepseek_v41", "note": "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[\"]]"})",
        "t.json");
    CHECK(c.num_hidden_layers == 40);
  }
}

TEST_CASE("files: missing, directory without config.json, empty, too large", "[config][bad-input]") {
  namespace fs = std::filesystem;
  const auto dir = fs::temp_directory_path() / "mlaplan-test-files";
  fs::remove_all(dir);
  fs::create_directories(dir);
  auto message = [](const std::string& path) {
    try {
      load_config(path);
    } catch (const Error& e) {
      CHECK(e.kind() == ErrorKind::invalid_config);
      return std::string(e.what());
    }
    FAIL("accepted " << path);
    return std::string();
  };
  CHECK(message((dir / "nope.json").string()) ==
        "cannot read '" + (dir / "nope.json").string() + "': no such file or directory");
  CHECK(message(dir.string()) == "directory '" + dir.string() + "' holds no config.json");
  std::ofstream((dir / "empty.json").string()).close();
  CHECK(message((dir / "empty.json").string()) ==
        (dir / "empty.json").string() + ": the file is empty; expected a JSON object (a model config.json)");
  {
    // a 200 MB file: rejected after reading at most the limit
    std::ofstream big((dir / "big.json").string(), std::ios::binary);
    big.seekp(200LL * 1000 * 1000 - 1);
    big.put('}');
  }
  CHECK(message((dir / "big.json").string()) ==
        "'" + (dir / "big.json").string() +
            "' is larger than 1 MiB (1048576 bytes, ConfigLimits::max_file_bytes); a model config.json is a few KiB");
  CHECK(message("") == "no config given: pass a config.json or a directory holding one");
  fs::remove_all(dir);
}
