// End-to-end: the built mla-plan binary on the bundled configs and on each class of bad input,
// checking stdout, stderr and the exit code as a script or CI job would see them.

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "e2e_run.hpp"

namespace {

namespace fs = std::filesystem;
using e2e::cfg;
using e2e::Run;
using e2e::run;
using e2e::scratch;
using e2e::slurp;
using e2e::write_file;

}  // namespace

TEST_CASE("e2e: help and version", "[e2e]") {
  auto h = run({"--help"});
  CHECK(h.code == 0);
  CHECK_THAT(h.out, Catch::Contains("mla-plan"));
  auto v = run({"--version"});
  CHECK(v.code == 0);
  CHECK_THAT(v.out, Catch::Matches("mla-plan [0-9]+\\.[0-9]+\\.[0-9]+\n"));
}

TEST_CASE("e2e: every bundled config plans, and its JSON parses back", "[e2e]") {
  // The small test models have head_dim != 512: the topology plans, the backend rejects them
  // (exit 3) and says why, in the text and in the JSON.
  struct Expect {
    std::string file;
    std::string family;
    std::size_t layers;
    std::vector<std::string> types;
    int code;
    std::vector<std::string> layout;  ///< a layout on which the checkpoint fits on H200s
  };
  // The bundled checkpoints need several H200s; the small test models fit on one.
  const std::vector<Expect> cases = {
      {"deepseek-v4.1-flash.json", "deepseek_v41", 43, {"c1a", "c2a", "swaonly"}, 0, {"--tp", "8"}},
      {"deepseek-v4-flash.json", "deepseek_v4", 44, {"c128a", "c4a", "swaonly"}, 0, {"--tp", "2"}},
      {"deepseek-v3.2.json", "deepseek_v32", 62, {"dsa"}, 0, {"--tp", "8"}},
      {"small/v41-5layer-derived-sources.json", "deepseek_v41", 5, {"c1a", "c2a", "swaonly"}, 3, {}},
      {"small/v41-6layer-reindex.json", "deepseek_v41", 6, {"c1a", "c2a", "swaonly"}, 3, {}},
      {"small/v41-8layer-flat.json", "deepseek_v41", 11, {"c1a", "c2a", "swaonly"}, 3, {}},
      {"small/v4-2layer-layer-types.json", "deepseek_v4", 2, {"c128a", "c4a"}, 3, {}},
  };
  for (const auto& c : cases) {
    INFO(c.file);
    if (!c.layout.empty()) {
      // On one H200 (the default) the bundled checkpoint does not fit: exit 4, vLLM's message and
      // what would fit.
      auto one = run({cfg(c.file), "--tp", "1"});
      CHECK(one.code == 4);
      CHECK_THAT(one.err, Catch::StartsWith("mla-plan: error: weights need "));
      CHECK_THAT(one.err, Catch::Contains(" Would fit: --tp "));
      CHECK_THAT(one.out, Catch::Contains("fit: DOES NOT FIT on 1 x h200"));
    }
    std::vector<std::string> args = {cfg(c.file)};
    args.insert(args.end(), c.layout.begin(), c.layout.end());
    auto text = run(args);
    CHECK(text.code == c.code);
    if (c.code == 0) {
      CHECK(text.err.empty());
    } else {
      CHECK_THAT(text.err, Catch::StartsWith("mla-plan: error: "));
      CHECK_THAT(text.out, Catch::Contains("error [backend.head_size]"));
    }
    CHECK_THAT(text.out, Catch::Contains("layer types"));
    args.insert(args.begin(), "plan");
    args.push_back("--json");
    auto r = run(args);
    REQUIRE(r.code == c.code);
    const auto j = nlohmann::json::parse(r.out);
    CHECK(j.at("schema") == "mla-plan/3");
    CHECK(j.at("model").at("family") == c.family);
    CHECK(j.at("layers").size() == c.layers);
    CHECK(j.at("layer_types").get<std::vector<std::string>>() == c.types);
    for (std::size_t i = 0; i < j.at("layers").size(); ++i) CHECK(j.at("layers")[i].at("index") == i);
    CHECK(j.at("exit_code") == c.code);
    bool head_size_error = false;
    for (const auto& f : j.at("findings")) head_size_error |= f.at("id") == "backend.head_size";
    CHECK(head_size_error == (c.code == 3));
  }
}

TEST_CASE("e2e: DeepSeek's published bytes per token", "[e2e][layout]") {
  auto figure = [](std::vector<std::string> args) {
    args.insert(args.begin(), "plan");
    args.push_back("--json");
    auto r = run(args);
    REQUIRE(r.code == 0);
    return nlohmann::json::parse(r.out).at("layout").at("global_bytes_per_token").at("rows_exact").get<std::string>();
  };
  // On layouts that fit (MLA's latent cache is whole on every TP rank: the bytes per token do not
  // depend on TP).
  CHECK(figure({cfg("deepseek-v3.2.json"), "--tp", "8"}) == "48068");
  CHECK(figure({cfg("deepseek-v4-flash.json"), "--tp", "2", "--indexer-cache-dtype", "fp4"}) == "3514.25");
  CHECK(figure({cfg("deepseek-v4.1-flash.json"), "--tp", "8", "--gpu", "b200", "--kv-cache-dtype", "nvfp4_ds_mla",
                "--indexer-cache-dtype", "fp4"}) == "890");
}

TEST_CASE("e2e: unsupported target exits 3, a budget too small exits 4", "[e2e][layout]") {
  auto nvfp4 = run({cfg("deepseek-v4.1-flash.json"), "--kv-cache-dtype", "nvfp4_ds_mla"});
  CHECK(nvfp4.code == 3);
  CHECK_THAT(nvfp4.err, Catch::Contains("nvfp4_ds_mla needs SM100 (FlashMLA V4.1 fp8/fp4 sparse decode)"));
  auto a100 = run({cfg("deepseek-v4.1-flash.json"), "--gpu", "a100", "--json"});
  CHECK(a100.code == 3);
  CHECK(nlohmann::json::parse(a100.out).at("exit_code") == 3);
  CHECK_THAT(a100.err, Catch::Contains("FlashMLA Sparse is only supported on Hopper and Blackwell DC devices"));
  // --tp 8: the weights fit; the 1 GiB KV budget holds less than one request of 163840 tokens.
  auto small = run({cfg("deepseek-v3.2.json"), "--tp", "8", "--kv-budget-gib", "1"});
  CHECK(small.code == 4);
  CHECK_THAT(small.err, Catch::StartsWith("mla-plan: error: To serve at least one request with the model's max seq "
                                          "len (163840)"));
  CHECK_THAT(small.err, Catch::Contains("Would fit: --max-model-len 22272"));
  // bfloat16 is a kv-cache dtype vLLM takes and FlashMLA refuses (3); "bf16" is none (1).
  auto bf16 = run({cfg("deepseek-v4.1-flash.json"), "--kv-cache-dtype", "bfloat16"});
  CHECK(bf16.code == 3);
  CHECK_THAT(bf16.err, Catch::Contains("DeepseekV4 fp8_ds_mla layout only supports fp8 kv-cache, got bfloat16."));
  auto bad_dtype = run({cfg("deepseek-v4.1-flash.json"), "--kv-cache-dtype", "bf16"});
  CHECK(bad_dtype.code == 1);
  CHECK(bad_dtype.out.empty());
}

TEST_CASE("e2e: a directory holding config.json", "[e2e]") {
  const auto dir = scratch() / "model";
  fs::create_directories(dir);
  fs::copy_file(cfg("deepseek-v4.1-flash.json"), dir / "config.json", fs::copy_options::overwrite_existing);
  auto r = run({dir.string(), "--tp", "8", "--json"});
  CHECK(r.code == 0);
  CHECK(nlohmann::json::parse(r.out).at("config") == dir.string());
}

TEST_CASE("e2e: bad input exits 2 with a clear message, never a crash", "[e2e][bad-input]") {
  const auto dir = scratch();
  struct Bad {
    std::string what;
    std::string path;
    std::string message_part;
  };
  std::string deep(100000, '[');
  std::string big_list = R"({"model_type": "deepseek_v41", "compress_ratios": [0)";
  for (int i = 1; i < 100000; ++i) big_list += ",0";  // 200 KB: inside the file limit
  big_list += "]}";
  {
    std::ofstream big((dir / "huge.json").string(), std::ios::binary);
    big.seekp(200LL * 1000 * 1000 - 1);
    big.put('}');
  }
  fs::create_directories(dir / "empty-dir");
  const std::vector<Bad> cases = {
      {"missing file", (dir / "nope.json").string(), "no such file or directory"},
      {"directory without config.json", (dir / "empty-dir").string(), "holds no config.json"},
      {"empty file", write_file("empty.json", "").string(), "the file is empty"},
      {"not JSON", write_file("text.json", "model_type: deepseek").string(), "not valid JSON"},
      {"truncated JSON",
       write_file("trunc.json", R"({"model_type": "deepseek_v41", "text_config": {"num_hidden_layers": 4)").string(),
       "not valid JSON"},
      {"array at top level", write_file("array.json", "[1, 2, 3]").string(), "the top level is an array"},
      {"number at top level", write_file("number.json", "3.5").string(), "the top level is 3.5"},
      {"string ratio",
       write_file("string-ratio.json",
                  R"({"model_type": "deepseek_v41_text", "num_hidden_layers": 3, "compress_ratios": [0, "2", 2]})")
           .string(),
       "/compress_ratios/1: compress_ratios[1] must be an integer, got the string \"2\""},
      {"float layer id",
       write_file("float-id.json", R"({"model_type": "deepseek_v41_text", "kv_source_layer_ids": [2.0, 8, 14, 20]})")
           .string(),
       "/kv_source_layer_ids/0: kv_source_layer_ids[0] must be an integer, got 2.0"},
      {"null list",
       write_file("null-list.json", R"({"model_type": "deepseek_v41_text", "index_source_layer_ids": null})").string(),
       "must be a list of integers, got null"},
      {"negative",
       write_file("negative.json", R"({"model_type": "deepseek_v41_text", "num_hidden_layers": -40})").string(),
       "num_hidden_layers = -40 is out of range"},
      {"2^63",
       write_file("huge-number.json", R"({"model_type": "deepseek_v4", "num_hidden_layers": 9223372036854775808})")
           .string(),
       "num_hidden_layers = 9223372036854775808 is out of range"},
      {"10^5-entry array", write_file("big-list.json", big_list).string(), "compress_ratios has 100000 entries"},
      {"nested 100,000 deep", write_file("deep.json", deep).string(), "nested deeper than 64 levels"},
      {"invalid UTF-8",
       write_file("utf8.json", std::string("{\"model_type\": \"deepseek_v41\", \"x\": \"\xc3\x28\"}")).string(),
       "ill-formed UTF-8"},
      {"200 MB file", (dir / "huge.json").string(), "is larger than 1 MiB"},
      {"unknown family", write_file("llama.json", R"({"model_type": "llama"})").string(), "supported: deepseek_v41"},
      {"rule violation",
       write_file(
           "rule.json",
           R"({"model_type": "deepseek_v41", "text_config": {"num_hidden_layers": 6, "num_nextn_predict_layers": 0, "compress_ratios": [0, 0, 2, 2, 1, 1], "kv_source_layer_ids": [3, 4]}})")
           .string(),
       "/text_config/kv_source_layer_ids: layer 2 has compress_ratio 2 but no kv_source_layer_ids entry at or before "
       "it"},
  };
  for (const auto& b : cases) {
    INFO(b.what);
    for (bool json : {false, true}) {
      auto r = json ? run({b.path, "--json"}) : run({b.path});
      CHECK(r.code == 2);
      if (json) {
        // --json: the error document on stdout, the same line on stderr (docs/cli.md, "Errors as JSON").
        const auto doc = nlohmann::json::parse(r.out, nullptr, false);
        REQUIRE(doc.is_object());
        CHECK(doc["exit_code"] == 2);
        CHECK(doc["error"]["kind"] == "invalid_config");
        CHECK(r.err == "mla-plan: error: " + doc["error"]["message"].get<std::string>() + "\n");
      } else {
        CHECK(r.out.empty());
      }
      CHECK_THAT(r.err, Catch::StartsWith("mla-plan: error: "));
      CHECK_THAT(r.err, Catch::Contains(b.message_part));
      CHECK_THAT(r.err, !Catch::Contains("AddressSanitizer") && !Catch::Contains("runtime error"));
      CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
    }
  }
  {
    // As root (CI), run as the user nobody: mode 000 denies nothing to root.
    const auto p = write_file("unreadable.json", "{}");
    fs::permissions(p, fs::perms::none);
    e2e::RunOptions o;
    o.unprivileged = true;
    auto r = run({p.string()}, o);
    CHECK(r.code == 2);
    CHECK(r.out.empty());
    CHECK(r.err == "mla-plan: error: cannot read '" + p.string() + "': permission denied\n");
  }
  fs::remove_all(dir);
}

TEST_CASE("e2e: usage errors exit 1", "[e2e]") {
  auto r = run({cfg("deepseek-v4.1-flash.json"), "--bogus"});
  CHECK(r.code == 1);
  CHECK_THAT(r.err, Catch::StartsWith("mla-plan: error: "));
  auto none = run({});
  CHECK(none.code == 1);
}

TEST_CASE("e2e: the same inputs give byte-identical output, run after run, under any locale", "[e2e][repro]") {
  const auto dir = scratch() / "repro";
  fs::create_directories(dir);
  std::vector<std::vector<std::string>> cmds;
  for (const std::string c : {"deepseek-v4.1-flash.json", "deepseek-v4-flash.json", "deepseek-v3.2.json"}) {
    const std::string tp = c == "deepseek-v4-flash.json" ? "2" : "8";  // a layout that fits
    cmds.push_back({"plan", cfg(c), "--tp", tp});
    cmds.push_back({"plan", cfg(c), "--tp", tp, "--json", "--gpu-memory-utilization", "0.85"});
    cmds.push_back({"plan", cfg(c), "--tp", tp, "--format", "markdown"});
    cmds.push_back({"check", cfg(c), "--tp", tp, "--format", "json"});
    cmds.push_back({"report", cfg(c), "--tp", tp, "-o", (dir / (c + ".svg")).string()});
    cmds.push_back({"report", cfg(c), "--tp", tp, "-o", (dir / (c + ".html")).string()});
  }
  // And one that does not: the message and its suggestion are as stable.
  cmds.push_back({"plan", cfg("deepseek-v4.1-flash.json"), "--tp", "1"});
  // The search of one node and the vllm serve command line, as stable.
  cmds.push_back({"plan", cfg("deepseek-v4.1-flash.json"), "--json"});
  cmds.push_back({"vllm", "serve", cfg("deepseek-v4.1-flash.json"), "-tp", "8", "--max-model-len", "128k"});
  cmds.push_back(
      {"schedule", "--kernel", "sm90-sparse", "--num-sms", "132", "--h-q", "64", "--lengths", "1,900,70000"});
  cmds.push_back({"formats", "--json"});
  cmds.push_back({"gpus"});
  struct Result {
    Run run;
    std::string file;
  };
  auto once = [&](const std::vector<std::string>& args, const std::vector<std::string>& env) {
    Result r;
    r.run = run(args, env);
    if (args.front() == "report") r.file = slurp(args.back());
    return r;
  };
  // The binary never calls setlocale: the environment's locale changes nothing.
  const std::vector<std::vector<std::string>> envs = {
      {}, {}, {"LC_ALL=de_DE.UTF-8", "LANG=de_DE.UTF-8"}, {"LC_ALL=C.UTF-8"}, {"LC_NUMERIC=fr_FR.UTF-8"}};
  for (const auto& args : cmds) {
    INFO(args.front() << " " << (args.size() > 1 ? args[1] : std::string()));
    const Result first = once(args, envs[0]);
    const bool one_gpu = args.size() == 4 && args[0] == "plan" && args[3] == "1";  // the layout that does not fit
    CHECK(first.run.code == (one_gpu ? 4 : 0));
    for (std::size_t e = 1; e < envs.size(); ++e) {
      const Result again = once(args, envs[e]);
      CHECK(again.run.code == first.run.code);
      CHECK(again.run.out == first.run.out);
      CHECK(again.run.err == first.run.err);
      CHECK(again.file == first.file);
    }
  }
  fs::remove_all(dir);
}
