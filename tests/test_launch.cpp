// The planner plans (docs/launch.md): the layout search, the `vllm serve` command of every plan and
// its round trip, a vLLM command line read as vLLM reads it, vLLM's sizes, the margin, the
// inverse questions.

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/vllm_args.hpp"
#include "cli_run.hpp"
#include "flags/flag_values.hpp"
#include "mlaplan/base/error.hpp"
#include "mlaplan/model/config.hpp"
#include "mlaplan/model/topology.hpp"
#include "mlaplan/plan/launch.hpp"
#include "mlaplan/plan/search.hpp"
#include "temp_dir.hpp"

namespace {

using nlohmann::json;
using testing_cli::Run;
using testing_cli::run;
const std::string kV41 = testing_cli::config_file("deepseek-v4.1-flash.json");
const std::string kV4 = testing_cli::config_file("deepseek-v4-flash.json");
const std::string kV32 = testing_cli::config_file("deepseek-v3.2.json");

json plan_json(std::vector<std::string> args) {
  args.push_back("--json");
  const Run r = run(args);
  INFO(r.err);
  REQUIRE(!r.out.empty());
  return json::parse(r.out);
}

/// The document without the input echo and the question that chose the layout (the search,
/// --max-model-len auto).
json plan_part(json j) {
  j.erase("config");
  j.erase("input");
  j.erase("search");
  j.erase("max_model_len_auto");
  return j;
}

std::vector<std::string> strings(const json& a) {
  std::vector<std::string> v;
  for (const auto& x : a) v.push_back(x.get<std::string>());
  return v;
}

}  // namespace

TEST_CASE("launch: vLLM's sizes, as human_readable_int reads them", "[launch][flag-values]") {
  using mlaplan::cli::IntRange;
  using mlaplan::cli::parse_size_value;
  const IntRange any{1, std::int64_t{1} << 50, {}};
  CHECK(parse_size_value("--max-model-len", "128k", any) == 128000);
  CHECK(parse_size_value("--max-model-len", "128K", any) == 131072);
  CHECK(parse_size_value("--max-model-len", "1.5k", any) == 1500);
  CHECK(parse_size_value("--max-model-len", "25.6k", any) == 25600);
  CHECK(parse_size_value("--max-model-len", "1m", any) == 1000000);
  CHECK(parse_size_value("--max-model-len", "1M", any) == 1048576);
  CHECK(parse_size_value("--kv-cache-memory-bytes", "2G", any) == std::int64_t{2} << 30);
  CHECK(parse_size_value("--kv-cache-memory-bytes", "1t", any) == 1000000000000);
  CHECK(parse_size_value("--max-model-len", " 4096 ", any) == 4096);
  CHECK_THROWS_WITH(
      parse_size_value("--max-model-len", "1.5K", any),
      Catch::Contains("decimals are not allowed with the binary suffix K") && Catch::Contains("did you mean 1.5k?"));
  CHECK_THROWS_WITH(parse_size_value("--max-model-len", "1kb", any),
                    Catch::Contains("is not a decimal integer or size"));
  CHECK_THROWS_WITH(parse_size_value("--max-model-len", "-1k", any),
                    Catch::Contains("is not a decimal integer or size"));
  CHECK_THROWS_WITH(parse_size_value("--max-model-len", "0k", any), Catch::Contains("is out of range"));
  CHECK_THROWS_WITH(parse_size_value("--max-model-len", "99999999T", any), Catch::Contains("is out of range"));
  // The plan reads them the same way: 128k and 128K are two lengths.
  const auto a = plan_json({kV41, "--tp", "8", "--max-model-len", "128k"});
  const auto b = plan_json({kV41, "--tp", "8", "--max-model-len", "128K"});
  CHECK(a.at("layout").at("max_model_len") == 128000);
  CHECK(b.at("layout").at("max_model_len") == 131072);
}

TEST_CASE("launch: a vllm serve command line goes in as it is", "[launch][vllm-serve]") {
  // Short forms, a size, JSON flags, switches, ignored server flags, --model moved to MODEL.
  const Run r = run({"vllm", "serve", "--model", kV41, "-tp", "8", "--max_model_len=128k", "--speculative-config",
                     R"({"method": "dspark", "num_speculative_tokens": 2})", "--language-model-only", "--port", "8000",
                     "--host", "0.0.0.0", "--served-model-name", "a", "b", "--trust-remote-code", "--json"});
  REQUIRE(r.code == 0);
  const auto j = json::parse(r.out);
  CHECK(j.at("parallel").at("tensor_parallel_size") == 8);
  CHECK(j.at("layout").at("max_model_len") == 128000);
  CHECK(j.at("batch").at("spec_tokens") == 2);
  // --language-model-only: the vision tower is not loaded.
  const auto full = plan_json({kV41, "--tp", "8", "--max-model-len", "128000", "--spec-tokens", "2"});
  CHECK(j.at("fit").at("stages").at(0).at("weights_bytes").get<std::int64_t>() <
        full.at("fit").at("stages").at(0).at("weights_bytes").get<std::int64_t>());
  CHECK_FALSE(j.at("fit").at("stages").at(0).at("part_bytes").contains("vision"));
  bool ignored = false;
  for (const auto& f : j.at("findings")) {
    if (f.at("id") == "vllm.ignored") {
      ignored = true;
      CHECK(f.at("message") ==
            "vllm serve: accepted and ignored (they change nothing mla-plan computes): --port, "
            "--host, --served-model-name, --trust-remote-code");
    }
  }
  CHECK(ignored);
  // The dotted form of a JSON flag, an abbreviation, --no- forms.
  const auto d = plan_json({"vllm", "serve", kV41, "--tensor-parallel-size", "8", "--speculative-config.method",
                            "dspark", "--speculative-config.num_speculative_tokens", "3", "--max-model", "64k",
                            "--no-enable-prefix-caching", "--no-async-scheduling", "-ep"});
  CHECK(d.at("batch").at("spec_tokens") == 3);
  CHECK(d.at("layout").at("max_model_len") == 64000);
  CHECK(d.at("fit").at("layout").at("enable_expert_parallel") == true);
  CHECK(d.at("fit").at("kv_tiers").at("prefix_cache").at("enabled") == false);
  CHECK(d.at("fit").at("kv_tiers").at("prefix_cache").at("prompts_cached").is_null());
  CHECK(strings(d.at("launch").at("argv")) ==
        std::vector<std::string>{"vllm", "serve", kV41, "--tensor-parallel-size", "8", "--enable-expert-parallel",
                                 "--max-model-len", "64000", "--speculative-config",
                                 R"({"method": "dspark", "num_speculative_tokens": 3})", "--no-async-scheduling",
                                 "--no-enable-prefix-caching"});
  // The native offloading connector is --kv-offloading-size; attention-config's backend.
  const auto o = plan_json({"vllm", "serve", kV41, "-tp", "8", "--kv-transfer-config",
                            R"({"kv_connector": "OffloadingConnector", "kv_role": "kv_both",
                                "kv_connector_extra_config": {"cpu_bytes_to_use": 107374182400}})",
                            "-ac", R"({"backend": "FLASHMLA_SPARSE_DSV41"})"});
  CHECK(strings(o.at("launch").at("argv")) ==
        std::vector<std::string>{"vllm", "serve", kV41, "--tensor-parallel-size", "8", "--attention-backend",
                                 "FLASHMLA_SPARSE_DSV41", "--kv-offloading-size", "100"});
}

TEST_CASE("launch: what vllm serve refuses or mla-plan does not model is said", "[launch][vllm-serve]") {
  const auto bad = [](std::vector<std::string> args, const std::string& part) {
    args.insert(args.begin(), {"vllm", "serve"});
    const Run r = run(args);
    INFO(r.err);
    CHECK(r.code == 1);
    CHECK(r.out.empty());
    CHECK_THAT(r.err, Catch::StartsWith("mla-plan: error: ") && Catch::Contains(part));
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  };
  bad({kV41, "--tensor-paralel-size", "8"},
      "unknown flag --tensor-paralel-size (neither vLLM's nor mla-plan's); did you mean '--tensor-parallel-size'?");
  bad({kV41, "--max-n", "8"}, "--max-n is ambiguous (vLLM takes a unique prefix)");
  bad({kV41, "--swap-space", "4"}, "vLLM removed --swap-space in 0.18.0");
  bad({kV41, "--config", "x.yaml"}, "mla-plan does not read it");
  bad({kV41, "--speculative-config", "{not json"}, "--speculative-config: '{not json' is not JSON");
  bad({kV41, "--speculative-config", "[1]"}, "is not a JSON object");
  bad({kV41, "--speculative-config", R"({"method": "eagle", "num_speculative_tokens": 2})"},
      "method 'eagle' is not the config's own drafter (dspark");
  bad({kV41, "--speculative-config", R"({"method": "dspark"})"}, "no num_speculative_tokens");
  bad({kV41, "--compilation-config", R"({"cudagraph_mode": "FULLY"})"}, "cudagraph_mode 'FULLY' is not a mode");
  bad({kV41, "--enforce-eager=true"}, "--enforce-eager takes no value");
  bad({kV41, "--max-model-len", "1.5K"}, "decimals are not allowed with the binary suffix K");
  bad({kV41, "-tp"}, "-tp needs a value");
  bad({"-tp", "8"}, "no MODEL");
  bad({kV41, kV4}, "a second MODEL");
  const Run other = run({"vllm", "bench", kV41});
  CHECK(other.code == 1);
  CHECK_THAT(other.err, Catch::Contains("only `vllm serve MODEL [vLLM flags]` is understood, not 'bench'"));
  // Flags that change memory mla-plan does not model: a warning, the numbers without them.
  const auto w =
      plan_json({"vllm", "serve", kV41, "-tp", "8", "--cpu-offload-gb", "10", "--enable-lora", "--cpu-offload-gb=0"});
  std::vector<std::string> warnings;
  for (const auto& f : w.at("findings")) {
    if (f.at("id") == "vllm.not_modelled") warnings.push_back(f.at("message").get<std::string>());
  }
  REQUIRE(warnings.size() == 2);
  CHECK_THAT(warnings[0], Catch::StartsWith("vllm serve: --cpu-offload-gb 10 (changes the weights on the GPU"));
  CHECK_THAT(warnings[1], Catch::StartsWith("vllm serve: --enable-lora (changes LoRA adapters' weights"));
  // Chunked prefill off changes the step's tokens: said, not ignored; on (the default) changes nothing.
  auto said = [&](const std::vector<std::string>& extra, const std::string& id) {
    std::vector<std::string> a = {"vllm", "serve", kV41, "-tp", "8"};
    a.insert(a.end(), extra.begin(), extra.end());
    std::string all;
    const json j = plan_json(a);  // kept: a range over a temporary's member would dangle
    for (const auto& f : j.at("findings")) {
      if (f.at("id") == id) all += f.at("message").get<std::string>();
    }
    return all;
  };
  CHECK_THAT(said({"--no-enable-chunked-prefill"}, "vllm.not_modelled"),
             Catch::Contains("--no-enable-chunked-prefill (changes the tokens of one step"));
  CHECK_THAT(said({"--enable-chunked-prefill"}, "vllm.ignored"), Catch::Contains("--enable-chunked-prefill"));
  CHECK_THAT(said({"--prefix-cache-retention-interval", "auto"}, "vllm.not_modelled"),
             Catch::Contains("--prefix-cache-retention-interval auto"));
}

TEST_CASE("launch: the command that comes out plans the same thing when fed back", "[launch][round-trip]") {
  // Many layouts, each plan's launch command (and mla-plan's own assumptions) fed back to
  // `mla-plan vllm serve`: the same document, byte for byte, apart from the input echo.
  const std::vector<std::vector<std::string>> cases = {
      {kV41},
      {kV41, "--tp", "8"},
      {kV41, "--tp", "1"},
      {kV41, "--tp", "4", "--dp", "2", "--enable-expert-parallel", "--max-model-len", "65536", "--gpu", "b200",
       "--kv-cache-dtype", "nvfp4_ds_mla"},
      {kV41, "--tp", "8", "--spec-tokens", "3", "--max-num-batched-tokens", "4096", "--no-async-scheduling",
       "--gpu-memory-utilization", "0.9"},
      {kV41, "--dp", "8", "--enable-expert-parallel", "--engram", "offload", "--max-num-seqs", "64"},
      {kV41, "--tp", "8", "--dsv4-fused-attention", "true", "--gpu", "b200", "--kv-offloading-size", "100"},
      {kV41, "--tp", "8", "--kv-cache-memory-bytes", "40G", "--enforce-eager", "--language-model-only"},
      {kV41, "--tp", "4", "--pp", "2", "--batch", "8", "--context-len", "1000", "--weights-gib", "70"},
      {kV41, "--tp", "8", "--dcp", "2", "--no-enable-prefix-caching", "--block-size", "64"},
      {kV4, "--tp", "2"},
      {kV4, "--tp", "8", "--indexer-cache-dtype", "fp4"},
      {kV41, "--tp", "8", "--dsv4-fused-attention", "false", "--gpu", "b200", "--indexer-cache-dtype", "fp4"},
      {kV4, "--tp", "4", "--pp", "2", "--spec-tokens", "2", "--gpu", "h100"},
      {kV4, "--gpus", "16xb300", "--objective", "gpus"},
      {kV32, "--tp", "8", "--max-model-len", "auto", "--min-concurrency", "64"},
      {kV32, "--dp", "8", "--enable-expert-parallel", "--indexer-tiling", "none", "--indexer-logits-budget-mib", "256"},
      {kV41, "--tp", "8", "--hf-overrides", R"({"max_position_embeddings": 262144})"},
  };
  for (const auto& c : cases) {
    std::string shown;
    for (const auto& a : c) shown += a + " ";
    INFO(shown);
    const auto first = plan_json(c);
    const auto& launch = first.at("launch");
    std::vector<std::string> again = {"vllm", "serve"};
    const auto argv = strings(launch.at("argv"));
    REQUIRE(argv.size() >= 3);
    CHECK(argv[0] == "vllm");
    CHECK(argv[1] == "serve");
    again.insert(again.end(), argv.begin() + 2, argv.end());
    const auto own = strings(launch.at("mla_plan_flags"));
    again.insert(again.end(), own.begin(), own.end());
    const auto second = plan_json(again);
    CHECK(plan_part(first).dump() == plan_part(second).dump());
    CHECK(second.at("exit_code") == first.at("exit_code"));
  }
}

TEST_CASE("launch: a short flag takes its value after '=' as argparse does", "[launch][vllm-serve]") {
  // "-tp=8" and "-cc.cudagraph_mode=NONE" are one word each: the next word stays a flag.
  const auto short_form =
      plan_json({"vllm", "serve", kV4, "-tp=8", "-cc.cudagraph_mode=NONE", "--no-async-scheduling"});
  const auto long_form = plan_json({"vllm", "serve", kV4, "--tensor-parallel-size", "8",
                                    "--compilation-config.cudagraph_mode=NONE", "--no-async-scheduling"});
  CHECK(short_form.at("parallel").at("tensor_parallel_size") == 8);
  CHECK(short_form.at("fit").at("vllm").at("log_line") == long_form.at("fit").at("vllm").at("log_line"));
  CHECK(short_form.at("launch").at("command") == long_form.at("launch").at("command"));
  CHECK(short_form.at("launch").at("command").get<std::string>().find("--no-async-scheduling") != std::string::npos);
}

TEST_CASE("launch: --engram-config's cpu_offload places V4.1's Engram tables", "[launch][vllm-serve]") {
  const auto gpu = plan_json({kV41, "--tp", "8", "--engram", "gpu"});
  const auto host = plan_json({kV41, "--tp", "8", "--engram", "offload"});
  auto weights = [](const json& j) { return j.at("fit").at("stages").at(0).at("weights_bytes").get<std::int64_t>(); };
  REQUIRE(weights(gpu) > weights(host));
  CHECK(weights(plan_json({"vllm", "serve", kV41, "-tp", "8", "--engram-config", R"({"cpu_offload": false})"})) ==
        weights(gpu));
  CHECK(weights(plan_json({"vllm", "serve", kV41, "-tp", "8", "--engram-config.cpu_offload=true"})) == weights(host));
  const Run bad = run({"vllm", "serve", kV41, "-tp", "8", "--engram-config", R"({"cpu_offload": 2})"});
  CHECK(bad.code == 1);
  CHECK_THAT(bad.err, Catch::Contains("--engram-config: cpu_offload '2' is not true or false"));
}

TEST_CASE("launch: DeepSeek V4's MXFP4 indexer keys from --attention-config", "[launch][vllm-serve]") {
  // use_fp4_indexer_cache (the V4 recipes' --attention_config.use_fp4_indexer_cache=True) and the
  // newer indexer_kv_dtype: mxfp4 are the 68-byte indexer rows; the launch command says it back.
  const auto fp4 = plan_json({kV4, "--tp", "8", "--indexer-cache-dtype", "fp4"});
  for (const std::vector<std::string>& a :
       {std::vector<std::string>{"--attention_config.use_fp4_indexer_cache=True"},
        std::vector<std::string>{"--attention-config", R"({"use_fp4_indexer_cache": true})"},
        std::vector<std::string>{"--attention-config", R"({"indexer_kv_dtype": "mxfp4"})"}}) {
    std::vector<std::string> args = {"vllm", "serve", kV4, "-tp", "8"};
    args.insert(args.end(), a.begin(), a.end());
    CAPTURE(args);
    const auto j = plan_json(args);
    CHECK(j.at("layout").at("indexer_cache_dtype") == "fp4");
    CHECK(j.at("fit").at("vllm").at("log_line") == fp4.at("fit").at("vllm").at("log_line"));
    CHECK(j.at("launch").at("command").get<std::string>().find(
              R"(--attention-config '{"use_fp4_indexer_cache": true}')") != std::string::npos);
  }
  const auto fp8 = plan_json({"vllm", "serve", kV4, "-tp", "8", "--attention_config.use_fp4_indexer_cache=false"});
  CHECK(fp8.at("layout").at("indexer_cache_dtype") == "fp8");
  const Run bad = run({"vllm", "serve", kV4, "-tp", "8", "--attention_config.use_fp4_indexer_cache=maybe"});
  CHECK(bad.code == 1);
  CHECK_THAT(bad.err, Catch::Contains("use_fp4_indexer_cache '\"maybe\"' is not true or false"));
}

TEST_CASE("launch: the search proposes exactly the layouts whose own plan fits", "[launch][search]") {
  const auto j = plan_json({kV41, "--gpus", "8"});
  const auto& s = j.at("search");
  CHECK(s.at("gpus") == 8);
  CHECK(s.at("objective") == "concurrency");
  REQUIRE(s.at("ranked").size() >= 5);
  // Best first: concurrency never rises down the list.
  double last = 1e300;
  for (const auto& c : s.at("ranked")) {
    CHECK(c.at("total_concurrency").get<double>() <= last);
    last = c.at("total_concurrency").get<double>();
    CHECK(c.at("gpus").get<int>() <= 8);
  }
  // Each of the first few, planned on its own, fits with the same numbers.
  for (std::size_t i = 0; i < 5; ++i) {
    const auto& c = s.at("ranked").at(i);
    std::vector<std::string> args = {kV41,
                                     "--tp",
                                     std::to_string(c.at("tensor_parallel_size").get<int>()),
                                     "--dp",
                                     std::to_string(c.at("data_parallel_size").get<int>()),
                                     "--pp",
                                     std::to_string(c.at("pipeline_parallel_size").get<int>()),
                                     "--engram",
                                     c.at("engram").get<std::string>(),
                                     "--kv-cache-dtype",
                                     c.at("kv_cache_dtype").get<std::string>()};
    if (c.at("enable_expert_parallel").get<bool>()) args.push_back("--enable-expert-parallel");
    INFO(c.at("label").get<std::string>());
    const auto one = plan_json(args);
    CHECK(one.at("exit_code") == 0);
    CHECK(one.at("fit").at("total_concurrency") == c.at("total_concurrency"));
  }
  // The rejected families say why, once each: nvfp4 needs SM100 on an H200.
  bool nvfp4 = false;
  for (const auto& f : s.at("rejected")) {
    if (f.at("family") == "--kv-cache-dtype nvfp4_ds_mla") {
      nvfp4 = true;
      CHECK_THAT(f.at("reason").get<std::string>(), Catch::Contains("nvfp4_ds_mla needs SM100"));
    }
  }
  CHECK(nvfp4);
  // A layout flag with --gpus fixes that dimension.
  const auto tp8 = plan_json({kV41, "--gpus", "8", "--tp", "8"});
  for (const auto& c : tp8.at("search").at("ranked")) CHECK(c.at("tensor_parallel_size") == 8);
  // The fewest GPUs: at least one layout of fewer than 8.
  const auto few = plan_json({kV41, "--gpus", "8", "--objective", "gpus"});
  CHECK(few.at("search").at("ranked").at(0).at("gpus").get<int>() < 8);
  CHECK(few.at("parallel").at("tensor_parallel_size").get<int>() *
            few.at("parallel").at("data_parallel_size").get<int>() *
            few.at("parallel").at("pipeline_parallel_size").get<int>() ==
        few.at("search").at("ranked").at(0).at("gpus").get<int>());
  // --gpus NxGPU names the GPU; a different --gpu is an error.
  const auto b200 = plan_json({kV41, "--gpus", "4xb200"});
  CHECK(b200.at("target").at("name") == "b200");
  const Run clash = run({kV41, "--gpus", "4xb200", "--gpu", "h100"});
  CHECK(clash.code == 1);
  CHECK_THAT(clash.err, Catch::Contains("--gpus 4xb200 names b200 but --gpu is h100"));
  const Run zero = run({kV41, "--gpus", "0"});
  CHECK(zero.code == 1);
  CHECK_THAT(zero.err, Catch::Contains("--gpus: '0' is out of range"));
  // Nothing fits on one GB10: exit 4 with the plan of every GPU, and no FITS.
  const Run gb10 = run({kV41, "--gpu", "gb10"});
  CHECK(gb10.code == 4);
  CHECK_THAT(gb10.out, Catch::Contains("search: 1 x gb10 (no layout flag: one node)") &&
                           Catch::Contains("none fits: the plan below is of every GPU"));
}

TEST_CASE("launch: the longest context that serves N requests, and the sweep", "[launch][auto]") {
  const auto j = plan_json({kV41, "--tp", "8", "--max-model-len", "auto", "--min-concurrency", "64", "--details"});
  const std::int64_t len = j.at("max_model_len_auto").at("max_model_len").get<std::int64_t>();
  CHECK(j.at("layout").at("max_model_len") == len);
  CHECK(j.at("fit").at("total_concurrency").get<double>() >= 64.0);
  REQUIRE(len < 1048576);
  // One token longer serves fewer than 64.
  const auto longer = plan_json({kV41, "--tp", "8", "--max-model-len", std::to_string(len + 1)});
  CHECK(longer.at("fit").at("total_concurrency").get<double>() < 64.0);
  // The sweep: concurrency falls as max_model_len grows.
  const auto& sweep = j.at("context_sweep");
  REQUIRE(sweep.size() >= 5);
  for (std::size_t i = 1; i < sweep.size(); ++i) {
    CHECK(sweep[i].at("max_model_len").get<std::int64_t>() > sweep[i - 1].at("max_model_len").get<std::int64_t>());
    CHECK(sweep[i].at("total_concurrency").get<double>() <= sweep[i - 1].at("total_concurrency").get<double>());
  }
  // auto with nothing that serves: exit 4, said.
  const Run none = run({kV41, "--tp", "1", "--max-model-len", "auto"});
  CHECK(none.code == 4);
  CHECK_THAT(none.err, Catch::Contains("weights need"));
}

TEST_CASE("launch: the batched tokens the answer is sensitive to are named", "[launch][sensitivity]") {
  // 8 x H100 at 32K: fewer batched tokens leave more KV memory (the activation peak shrinks).
  const auto j = plan_json({kV41, "--tp", "8", "--gpu", "h100", "--max-model-len", "32768"});
  bool named = false;
  for (const auto& s : j.at("sensitivity")) {
    if (strings(s.at("flags")) == std::vector<std::string>{"--max-num-batched-tokens", "2048"}) {
      named = true;
      CHECK(s.at("change").get<double>() > 0.10);
    }
    CHECK(std::abs(s.at("change").get<double>()) > 0.10);
  }
  CHECK(named);
}

TEST_CASE("launch: a fit states its margin, borderline is a warning and check gates on it", "[launch][margin]") {
  const auto j = plan_json({kV41, "--tp", "8"});
  const auto& m = j.at("fit").at("margin");
  REQUIRE(m.is_object());
  const auto& v = j.at("fit").at("vllm");
  CHECK(m.at("spare_bytes").get<std::int64_t>() ==
        v.at("available_kv_bytes").get<std::int64_t>() - v.at("needed_bytes").get<std::int64_t>());
  CHECK(m.at("estimated_bytes").get<std::int64_t>() > 0);
  CHECK(m.at("borderline") ==
        (m.at("spare_bytes").get<std::int64_t>() < m.at("uncertainty_bytes").get<std::int64_t>()));
  const double spare_gib = static_cast<double>(m.at("spare_bytes").get<std::int64_t>()) / 1073741824.0;
  CHECK(run({"check", kV41, "--tp", "8", "--require-margin-gib", std::to_string(spare_gib - 1)}).code == 0);
  const Run fail = run({"check", kV41, "--tp", "8", "--require-margin-gib", std::to_string(spare_gib + 1)});
  CHECK(fail.code == 4);
  CHECK_THAT(fail.out, Catch::Contains("error [guard.margin]: --require-margin-gib"));
  // A fit that is tight: one request of max_model_len barely fits.
  const auto tight = plan_json({kV41, "--tp", "4", "--enable-expert-parallel", "--gpu-memory-gib", "96"});
  if (tight.at("fit").at("fits").get<bool>()) {
    bool borderline = false;
    for (const auto& f : tight.at("findings")) borderline |= f.at("id") == "fit.borderline";
    CHECK(borderline == tight.at("fit").at("margin").at("borderline").get<bool>());
  }
}

TEST_CASE("launch: MODEL as a repo id in the local Hugging Face cache", "[launch][hf-cache]") {
  testing_files::TempDir dir;
  const std::filesystem::path repo = dir.path / "hub" / "models--deepseek-ai--DeepSeek-V4.1-Flash";
  const std::string commit(40, 'a');
  std::filesystem::create_directories(repo / "refs");
  std::filesystem::create_directories(repo / "snapshots" / commit);
  std::filesystem::copy_file(kV41, repo / "snapshots" / commit / "config.json");
  std::ofstream(repo / "refs" / "main") << commit;
  const std::string hub = (dir.path / "hub").string();
  const auto j = plan_json({"vllm", "serve", "deepseek-ai/DeepSeek-V4.1-Flash", "-tp", "8", "--download-dir", hub});
  CHECK(j.at("exit_code") == 0);
  const auto argv = strings(j.at("launch").at("argv"));
  CHECK(argv == std::vector<std::string>{"vllm", "serve", "deepseek-ai/DeepSeek-V4.1-Flash", "--tensor-parallel-size",
                                         "8", "--download-dir", hub});
  const Run missing = run({"vllm", "serve", "deepseek-ai/Not-There", "--download-dir", hub});
  CHECK(missing.code == 2);
  CHECK_THAT(missing.err, Catch::Contains("is not in the Hugging Face cache") && Catch::Contains("hf download"));
}

TEST_CASE("launch: check --matrix takes a GPU list, the kv dtype and a GPU-count column", "[launch][matrix]") {
  const Run r = run({"check", kV41, "--matrix", "--tp", "4,8", "--dp", "1,2", "--gpu", "h200,b200", "--kv-cache-dtype",
                     "fp8_ds_mla", "--enable-expert-parallel", "--json"});
  REQUIRE(r.code == 0);
  const auto j = json::parse(r.out);
  const auto& cells = j.at("files").at(0).at("matrix");
  REQUIRE(cells.size() == 8);  // 2 GPUs x 1 dtype x 4 layouts
  for (const auto& c : cells) {
    CHECK((c.at("gpu") == "h200" || c.at("gpu") == "b200"));
    CHECK(c.at("kv_cache_dtype") == "fp8_ds_mla");
    CHECK(c.at("gpus") == c.at("tensor_parallel_size").get<int>() * c.at("data_parallel_size").get<int>());
    CHECK(c.at("enable_expert_parallel") == true);
  }
  const Run bad = run({"check", kV41, "--matrix", "--gpu", "h200,h900"});
  CHECK(bad.code == 1);
  CHECK_THAT(bad.err, Catch::Contains("h900"));
}

TEST_CASE("launch: the report draws what overshoots the GPU and the context sweep", "[launch][report]") {
  testing_files::TempDir dir;
  const Run over = run({"report", kV41, "--tp", "1", "-o", dir / "over.svg"});
  CHECK(over.code == 4);
  std::ifstream in(dir / "over.svg");
  const std::string svg((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK_THAT(svg, Catch::Contains("class=\"overshoot\"") && Catch::Contains("past the GPU"));
  const Run fits = run({"report", kV41, "--tp", "8", "-o", dir / "fits.svg"});
  CHECK(fits.code == 0);
  std::ifstream in2(dir / "fits.svg");
  const std::string svg2((std::istreambuf_iterator<char>(in2)), std::istreambuf_iterator<char>());
  CHECK(svg2.find("class=\"overshoot\"") == std::string::npos);
  CHECK_THAT(svg2, Catch::Contains("sweep-point") && Catch::Contains("data-max-model-len=\"1048576\""));
}

TEST_CASE("launch: vllm serve reads what vLLM reads from the environment", "[launch][vllm-serve]") {
  mlaplan::cli::OwnFlags own;
  own.is_flag = [](std::string_view n) { return n == "--engram" || n == "--gpu"; };
  own.takes_value = [](std::string_view) { return true; };
  const auto env = [](const char* value) {
    return [value](const char* name) -> const char* {
      return std::string_view(name) == "VLLM_PLE_CPU_OFFLOAD" ? value : nullptr;
    };
  };
  own.getenv = env("1");
  auto in = mlaplan::cli::translate_vllm_serve({kV41, "-tp", "8"}, own);
  CHECK(in.plan_args == std::vector<std::string>{kV41, "--tensor-parallel-size", "8", "--engram", "offload"});
  CHECK(in.from_environment == std::vector<std::string>{"VLLM_PLE_CPU_OFFLOAD=1 (--engram offload)"});
  own.getenv = env("False");
  in = mlaplan::cli::translate_vllm_serve({kV41}, own);
  CHECK(in.plan_args == std::vector<std::string>{kV41, "--engram", "gpu"});
  // A flag given wins over the environment.
  own.getenv = env("1");
  in = mlaplan::cli::translate_vllm_serve({kV41, "--engram", "gpu"}, own);
  CHECK(in.plan_args == std::vector<std::string>{kV41, "--engram", "gpu"});
  CHECK(in.from_environment.empty());
  own.getenv = env("maybe");
  CHECK_THROWS_WITH(mlaplan::cli::translate_vllm_serve({kV41}, own),
                    Catch::Contains("VLLM_PLE_CPU_OFFLOAD: 'maybe' is not a boolean"));
}
