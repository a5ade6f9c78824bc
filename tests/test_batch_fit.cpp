// The decode batch against the KV cache (fit.decode_batch, check --require-batch-fits): a batch
// whose requests' blocks exceed the GPU KV cache is a warning naming the batch, its tokens, the
// blocks it needs and has, vLLM's GPU KV cache size and how many requests fit; nothing is claimed
// where the fit does not know the cache (docs/rules.md, docs/fit.md).

#include <catch2/catch.hpp>
#include <cstdint>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "cli_run.hpp"
#include "temp_dir.hpp"

using testing_cli::Run;
using testing_cli::run;

namespace {

const std::string kV41 = testing_cli::config_file("deepseek-v4.1-flash.json");
const std::string kV4 = testing_cli::config_file("deepseek-v4-flash.json");

nlohmann::json plan_json(std::vector<std::string> args) {
  args.push_back("--json");
  const Run r = run(args);
  INFO(r.err);
  REQUIRE(r.code == 0);
  return nlohmann::json::parse(r.out);
}

/// The findings of a plan's JSON with this id.
std::vector<nlohmann::json> findings(const nlohmann::json& j, const std::string& id) {
  std::vector<nlohmann::json> out;
  for (const auto& f : j.at("findings")) {
    if (f.at("id") == id) out.push_back(f);
  }
  return out;
}

// V4.1-Flash on 8 x H200 (TP 8): 626,181 blocks of 116,928 B, one held back as vLLM's null
// block; vLLM prints GPU KV cache size 32,823,353 tokens. A request of L tokens decoding one
// token a step (2 batches in flight) holds cdiv(L, 64) blocks of the compressed group, 7 x
// (cdiv(129, 32) + 1) = 42 of the sliding-window groups and 1 ring block: 1,606 at 100,000
// tokens (tests/test_vllm_kv.cpp), so floor(626,180 / 1,606) = 389 requests fit.
const std::string kCache =
    "the cache has 626,180 (vLLM's GPU KV cache size: 32,823,353 tokens, for requests of 1,048,576 tokens)";

}  // namespace

TEST_CASE("batch fit: 65,536 requests of 100,000 tokens are a warning, exit 0", "[cli][batch-fit]") {
  const Run r = run({kV41, "--tp", "8", "--batch", "65536", "--context-len", "100000"});
  CHECK(r.code == 0);
  CHECK(r.err.empty());
  const std::string message =
      "the decode batch, 65,536 requests x 100,000 tokens (6,553,600,000 tokens of history), does not fit the GPU KV "
      "cache: it needs 105,250,816 blocks at once and " +
      kCache + "; 389 requests of 100,000 tokens fit at once";
  const std::string fix =
      "--batch 389 or fewer, shorter requests, or a larger KV cache (more GPUs, --gpu-memory-utilization)";
  CHECK_THAT(r.out, Catch::Contains("\n  warning [fit.decode_batch]: " + message + "\n    fix: " + fix + "\n"));
  CHECK_THAT(r.out, Catch::Contains("\n  decode batch: 65,536 requests, 6,553,600,000 tokens of history, need "
                                    "105,250,816 of the 626,180 blocks: DOES NOT FIT (389 of them fit at once; "
                                    "fit.decode_batch)\n"));
  const auto j = plan_json({kV41, "--tp", "8", "--batch", "65536", "--context-len", "100000"});
  const auto fs = findings(j, "fit.decode_batch");
  REQUIRE(fs.size() == 1);
  CHECK(fs[0].at("severity") == "warning");
  CHECK(fs[0].at("message") == message);
  CHECK(fs[0].at("fix") == fix);
  CHECK(std::find(j.at("warnings").begin(), j.at("warnings").end(), message) != j.at("warnings").end());
  CHECK(j.at("batch").at("kv_cache") == nlohmann::json{{"fits", false},
                                                       {"tokens", 6553600000},
                                                       {"blocks", 105250816},
                                                       {"usable_blocks", 626180},
                                                       {"gpu_kv_cache_tokens", 32823353},
                                                       {"requests_that_fit", 389}});
  CHECK(j.at("exit_code") == 0);
}

TEST_CASE("batch fit: the count that fits is the boundary", "[cli][batch-fit]") {
  // 389 requests of 100,000 tokens fit, 390 do not.
  const auto fits = plan_json({kV41, "--tp", "8", "--batch", "389", "--context-len", "100000"});
  CHECK(findings(fits, "fit.decode_batch").empty());
  CHECK(fits.at("batch").at("kv_cache").at("fits") == true);
  CHECK(fits.at("batch").at("kv_cache").at("blocks") == 389 * 1606);
  CHECK(fits.at("batch").at("kv_cache").at("requests_that_fit") == 389);
  const auto over = plan_json({kV41, "--tp", "8", "--batch", "390", "--context-len", "100000"});
  REQUIRE(findings(over, "fit.decode_batch").size() == 1);
  CHECK(over.at("batch").at("kv_cache").at("blocks") == 390 * 1606);
  CHECK(over.at("batch").at("kv_cache").at("requests_that_fit") == 389);
  // vLLM's block pool keeps one block back (the null block): a cache of exactly the blocks a
  // batch needs does not hold it. 125,112,960 B // 116,928 = 1,070 blocks; 10 x 107 = 1,070.
  const std::vector<std::string> exact = {
      kV41,        "--tp",          "8",    "--max-model-len", "4096", "--kv-cache-memory-bytes",
      "125112960", "--context-len", "4096", "--batch"};
  auto with = [&](const char* batch) {
    auto a = exact;
    a.push_back(batch);
    return plan_json(a);
  };
  const auto ten = with("10");
  REQUIRE(findings(ten, "fit.decode_batch").size() == 1);
  CHECK(findings(ten, "fit.decode_batch")[0].at("message") ==
        "the decode batch, 10 requests x 4,096 tokens (40,960 tokens of history), does not fit the GPU KV cache: it "
        "needs 1,070 blocks at once and the cache has 1,069 (vLLM's GPU KV cache size: 4,527 tokens, for requests of "
        "4,096 tokens); 9 requests of 4,096 tokens fit at once");
  CHECK(findings(with("9"), "fit.decode_batch").empty());
  // The default batch (64 x 4,096) fits: a text line, no finding.
  const Run r = run({kV41, "--tp", "8"});
  CHECK(r.code == 0);
  // 64 x (cdiv(4096, 64) + 42 + 1) = 64 x 107 = 6,848.
  CHECK_THAT(r.out,
             Catch::Contains("\n  decode batch: 64 requests, 262,144 tokens of history, need 6,848 of the 626,180 "
                             "blocks: fits\n"));
  CHECK(r.out.find("fit.decode_batch") == std::string::npos);
}

TEST_CASE("batch fit: short requests fill the cache by their blocks, not their tokens", "[cli][batch-fit]") {
  // 655,360 tokens are far below the 32,823,353 vLLM counts, but each request holds a block of
  // every group: 1 + 7 x 2 + 1 = 16, and 65,536 x 16 = 1,048,576 blocks; 626,180 / 16 = 39,136 fit.
  const auto j = plan_json({kV41, "--tp", "8", "--batch", "65536", "--context-len", "10"});
  const auto fs = findings(j, "fit.decode_batch");
  REQUIRE(fs.size() == 1);
  CHECK(fs[0].at("message") ==
        "the decode batch, 65,536 requests x 10 tokens (655,360 tokens of history), does not fit the GPU KV cache: it "
        "needs 1,048,576 blocks at once and " +
            kCache + "; 39,136 requests of 10 tokens fit at once");
}

TEST_CASE("batch fit: --context-lens, speculative tokens, DP engines, the default batch", "[cli][batch-fit]") {
  // 3 x 1,000,000 + 900,000 + 5 + 6 tokens; at --kv-cache-memory-bytes 7e9 the cache has
  // 7e9 // 116,928 - 1 = 59,864 blocks. Blocks: 1,000,000 -> 15,625 + 43 = 15,668 (x 3);
  // 900,000 -> 14,063 + 43 = 14,106; 5 and 6 -> 1 + 14 + 1 = 16 each: 61,142 in all. The shortest
  // first: 16 + 16 + 14,106 + 3 x 15,668 = 61,142 > 59,864, so 5 fit.
  const auto j = plan_json({kV41, "--tp", "8", "--context-lens", "1000000,1000000,1000000,900000,5,6",
                            "--kv-cache-memory-bytes", "7000000000"});
  auto fs = findings(j, "fit.decode_batch");
  REQUIRE(fs.size() == 1);
  CHECK(fs[0].at("message") ==
        "the decode batch, 6 requests of 5-1,000,000 tokens (3,900,011 tokens of history), does not fit the GPU KV "
        "cache: it needs 61,142 blocks at once and the cache has 59,864 (vLLM's GPU KV cache size: 3,138,022 tokens, "
        "for requests of 1,048,576 tokens); 5 of its 6 requests fit at once, the shortest first");
  CHECK(fs[0].at("fix") ==
        "at most 5 of these requests in --context-lens, shorter requests, or a larger KV cache "
        "(more GPUs, --gpu-memory-utilization)");

  // Two DP engines, each its own cache: the batch is one engine's; speculative tokens count.
  const auto dp = plan_json({kV41, "--tp", "8", "--dp", "2", "--enable-expert-parallel", "--batch", "2000",
                             "--context-len", "100000", "--spec-tokens", "1"});
  fs = findings(dp, "fit.decode_batch");
  REQUIRE(fs.size() == 1);
  const auto& kv = dp.at("batch").at("kv_cache");
  CHECK(kv.at("tokens") == 2000 * 100001);
  CHECK_THAT(fs[0].at("message").get<std::string>(),
             Catch::StartsWith("the decode batch, 2,000 requests x 100,000 tokens + 1 speculative token each "
                               "(200,002,000 tokens of history), does not fit one engine's GPU KV cache (each of the 2 "
                               "DP engines has its own): it needs "));

  // The default batch is named so.
  const auto def = plan_json({kV41, "--tp", "8", "--max-model-len", "4096", "--kv-cache-memory-bytes", "233856000"});
  fs = findings(def, "fit.decode_batch");
  REQUIRE(fs.size() == 1);
  // 233,856,000 // 116,928 = 2,000 blocks, 1,999 usable; 64 x 107 = 6,848 needed; 1,999 / 107 = 18.
  CHECK(fs[0].at("message") ==
        "the default decode batch, 64 requests x 4,096 tokens (262,144 tokens of history), does not fit the GPU KV "
        "cache: it needs 6,848 blocks at once and the cache has 1,999 (vLLM's GPU KV cache size: 8,462 tokens, for "
        "requests of 4,096 tokens); 18 requests of 4,096 tokens fit at once");
}

TEST_CASE("batch fit: nothing is claimed where the cache is not known", "[cli][batch-fit]") {
  // Does not fit at all (one H200): exit 4 for the fit, no batch finding.
  const Run one = run({kV41, "--tp", "1", "--batch", "65536", "--context-len", "100000", "--json"});
  CHECK(one.code == 4);
  const auto j = nlohmann::json::parse(one.out);
  CHECK(findings(j, "fit.decode_batch").empty());
  CHECK(j.at("batch").at("kv_cache").is_null());
  // Weights of a scheme not known: the fit is not decided.
  testing_files::TempDir dir;
  std::ifstream in(kV4);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string text = ss.str();
  const std::string fp8 = "\"quant_method\": \"fp8\"";
  const auto at = text.find(fp8);
  REQUIRE(at != std::string::npos);
  text.replace(at, fp8.size(), "\"quant_method\": \"int4\"");
  const std::string int4 = dir.write("int4.json", text);
  const auto u = plan_json({int4, "--tp", "2", "--batch", "65536", "--context-len", "100000"});
  CHECK(findings(u, "fit.decode_batch").empty());
  CHECK(u.at("batch").at("kv_cache").is_null());
  // ... and the guard cannot pass on it.
  const Run g = run({"check", int4, "--tp", "2", "--batch", "8", "--require-batch-fits"});
  CHECK(g.code == 4);
  CHECK_THAT(g.out,
             Catch::Contains("\n  error [guard.decode_batch]: --require-batch-fits cannot be checked: not decided: "
                             "the weights are not all known"));
}

TEST_CASE("batch fit: check warns, and fails with --require-batch-fits", "[cli][batch-fit]") {
  const std::string message =
      "the decode batch, 400 requests x 100,000 tokens (40,000,000 tokens of history), does not fit the GPU KV cache: "
      "it needs 642,400 blocks at once and " +
      kCache + "; 389 requests of 100,000 tokens fit at once";
  const std::string fix =
      "--batch 389 or fewer, shorter requests, or a larger KV cache (more GPUs, --gpu-memory-utilization)";
  const Run warn = run({"check", kV41, "--tp", "8", "--batch", "400", "--context-len", "100000"});
  CHECK(warn.code == 0);
  CHECK(warn.out == "PASS " + kV41 +
                        "  [deepseek_v41 on h200, fp8_ds_mla, TP 8] 31.30x requests of 1,048,576 tokens, 66.01 GiB to "
                        "spare\n  warning [fit.decode_batch]: " +
                        message + "\n    fix: " + fix + "\n1 of 1 configs passed\n");
  const Run guard =
      run({"check", kV41, "--tp", "8", "--batch", "400", "--context-len", "100000", "--require-batch-fits"});
  CHECK(guard.code == 4);
  CHECK(guard.out == "FAIL " + kV41 +
                         " (exit 4)  [deepseek_v41 on h200, fp8_ds_mla, TP 8] 31.30x requests of 1,048,576 tokens, "
                         "66.01 GiB to spare\n  error [guard.decode_batch]: " +
                         message + "\n    fix: " + fix + "\n0 of 1 configs passed\n");
  // A batch that fits passes the guard.
  CHECK(run({"check", kV41, "--tp", "8", "--batch", "389", "--context-len", "100000", "--require-batch-fits"}).code ==
        0);
  // JSON: the finding of each file; --context-lens @FILE read once for every file.
  testing_files::TempDir dir;
  std::string lens;
  for (int i = 0; i < 400; ++i) lens += "100000\n";
  const std::string file = dir.write("lens.txt", lens);
  const Run js =
      run({"check", kV41, kV41, "--tp", "8", "--context-lens", "@" + file, "--require-batch-fits", "--json"});
  CHECK(js.code == 4);
  const auto j = nlohmann::json::parse(js.out);
  REQUIRE(j.at("files").size() == 2);
  for (const auto& f : j.at("files")) {
    CHECK(f.at("exit_code") == 4);
    REQUIRE(f.at("findings").size() == 1);
    CHECK(f.at("findings").at(0).at("id") == "guard.decode_batch");
    CHECK(f.at("findings").at(0).at("severity") == "error");
    CHECK_THAT(f.at("findings").at(0).at("message").get<std::string>(),
               Catch::StartsWith("the decode batch, 400 requests x 100,000 tokens (40,000,000 tokens of history)"));
  }
}
