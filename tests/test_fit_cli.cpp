// The fit answer on the command line: vLLM 0.30's start-up fit of the bundled checkpoints
// (weights derived from config.json and placed per GPU, the memory budget, the KV cache and
// vLLM's log line), in text and JSON, and the flags that change its terms.

#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <cmath>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "cli/cli.hpp"
#include "cli_run.hpp"
#include "mlaplan/base/error.hpp"
#include "temp_dir.hpp"

namespace {

using testing_cli::Run;
using testing_cli::run;
std::string cfg(const std::string& rel) { return testing_cli::config_file(rel); }
const std::string kV41 = cfg("deepseek-v4.1-flash.json");
const std::string kV4 = cfg("deepseek-v4-flash.json");

constexpr double kGiB = 1073741824.0;

nlohmann::json plan_json(std::vector<std::string> args) {
  args.insert(args.begin(), "plan");
  args.push_back("--json");
  const Run r = run(args);
  INFO(r.err);
  REQUIRE(r.code == 0);
  return nlohmann::json::parse(r.out);
}

const nlohmann::json& term(const nlohmann::json& j, const std::string& id) {
  for (const auto& t : j.at("fit").at("stages").at(0).at("budget").at("terms")) {
    if (t.at("id") == id) return t;
  }
  FAIL("no budget term " << id);
  static const nlohmann::json none;
  return none;
}

std::int64_t kv_bytes(const nlohmann::json& j) {
  return j.at("fit").at("stages").at(0).at("budget").at("available_kv_bytes").get<std::int64_t>();
}

}  // namespace

TEST_CASE("fit CLI: V4.1-Flash does not fit on one H200 and says what would", "[cli][fit]") {
  const Run r = run({kV41, "--tp", "1"});
  CHECK(r.code == 4);
  // The weights alone exceed the GPU: said once, not as vLLM's KV-cache message.
  CHECK_THAT(r.err,
             Catch::StartsWith("mla-plan: error: weights need 278.70 GiB per GPU, 1.99 x the 139.80 GiB of h200; "
                               "vLLM fails while loading the weights (CUDA out of memory)"));
  CHECK_THAT(r.err, Catch::Contains(" Would fit: --tp 1 --dp 4 --enable-expert-parallel (4 GPUs: the fewest h200 that "
                                    "hold it, 62.36x concurrency)."));
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  CHECK_THAT(r.out, Catch::Contains("fit: DOES NOT FIT on 1 x h200 (TP 1 x DP 1 x PP 1, expert parallel off)"));
  CHECK_THAT(r.out, Catch::Contains("\n  weights need 278.70 GiB per GPU, 1.99 x the 139.80 GiB of h200"));
  CHECK_THAT(r.out, Catch::Contains("  would fit: --tp 1 --dp 4 --enable-expert-parallel"));
  CHECK(r.out.find("No available memory") == std::string::npos);
  // The suggestion holds: that layout fits, with the concurrency it named.
  const Run four = run({kV41, "--tp", "1", "--dp", "4", "--enable-expert-parallel"});
  CHECK(four.code == 0);
  CHECK_THAT(four.out, Catch::Contains("Maximum concurrency for 1,048,576 tokens per request: 15.59x"));  // x 4 engines
  // check answers the same for that layout.
  const Run check = run({"check", kV41, "--tp", "1"});
  CHECK(check.code == 4);
  CHECK_THAT(check.out, Catch::Contains("error [fit.does_not_fit]: does not fit: weights need 278.70 GiB per GPU"));
}

TEST_CASE("fit CLI: without a layout flag the layouts of one node are searched and the best planned", "[cli][fit]") {
  const Run r = run({kV41});
  REQUIRE(r.code == 0);
  CHECK(r.err.empty());
  CHECK_THAT(r.out, Catch::Contains("\nsearch: 8 x h200 (no layout flag: one node), ranked by concurrency: "));
  CHECK_THAT(r.out, Catch::Contains("\n  best: TP 1 x DP 8, EP (8 GPUs): 238.47x"));
  CHECK_THAT(r.out, Catch::Contains("\nfit: FITS on 8 x h200 (TP 1 x DP 8 x PP 1, expert parallel on, EP 8)"));
  CHECK_THAT(r.out, Catch::Contains("\nlaunch: VLLM_PLE_CPU_OFFLOAD=1 vllm serve " + kV41 +
                                    " --data-parallel-size 8 --enable-expert-parallel\n"));
  // The plan of the best is the plan of that layout given by hand, number for number.
  const Run hand = run({kV41, "--dp", "8", "--enable-expert-parallel", "--json"});
  const Run searched = run({kV41, "--json"});
  REQUIRE(hand.code == 0);
  REQUIRE(searched.code == 0);
  auto a = nlohmann::json::parse(hand.out), b = nlohmann::json::parse(searched.out);
  CHECK(a.at("fit") == b.at("fit"));
  CHECK(a.at("layout") == b.at("layout"));
  CHECK(b.at("search").at("ranked").at(0).at("total_concurrency") == a.at("fit").at("total_concurrency"));
  // check without a layout flag judges the recommended layout and says which.
  const Run check = run({"check", kV41});
  CHECK(check.code == 0);
  CHECK_THAT(check.out, Catch::Contains("TP 1 x DP 8, EP (recommended for one node)] 238.47x"));
}

TEST_CASE("fit CLI: V4.1-Flash at TP 8, the text", "[cli][fit]") {
  const Run r = run({kV41, "--tp", "8"});
  REQUIRE(r.code == 0);
  CHECK(r.err.empty());
  CHECK_THAT(r.out, Catch::Contains("\nfit: FITS on 8 x h200 (TP 8 x DP 1 x PP 1, expert parallel off), as vLLM "
                                    "0.31.0 computes it at start-up\n"));
  CHECK_THAT(r.out, Catch::Contains("  vLLM prints: GPU KV cache size: 32,823,353 tokens, Maximum concurrency for "
                                    "1,048,576 tokens per request: 31.30x\n"));
  CHECK_THAT(r.out, Catch::Contains("  weights: 509,890,541,400 B (474.87 GiB) in the checkpoint"));
  // Engram's tables in host memory (vLLM's default); the experts' shares padded from 288 to 384.
  CHECK_THAT(r.out, Catch::Contains("  per GPU: weights 47.44 GiB = replicated 1.59 GiB + TP-sharded 1.02 GiB + "
                                    "experts 44.82 GiB; 23.60 GiB offloaded to the host\n"));
  for (const std::string line :
       {"    requested (x 0.92)      128.62 GiB  default", "    - weights                47.44 GiB  estimated",
        "    - load overhead           0.78 GiB  estimated", "    - activation peak        10.31 GiB  estimated",
        "    - non-torch memory        1.91 GiB  estimated", "    - CUDA graphs             0.00 GiB  derived",
        "    = KV cache               68.19 GiB            vLLM logs \"Available KV cache memory\""}) {
    INFO(line);
    CHECK_THAT(r.out, Catch::Contains("\n" + line));
  }
  // The fit section comes right after the model lines.
  const auto model = r.out.find("\nmodel: ");
  const auto fit = r.out.find("\nfit: ");
  const auto types = r.out.find("\nlayer types");
  REQUIRE(model != std::string::npos);
  CHECK(model < fit);
  CHECK(fit < types);
  // The old capacity lines are gone.
  CHECK_THAT(r.out, !Catch::Contains("tokens that fit"));
  CHECK_THAT(r.out, !Catch::Contains("concurrency at max_model_len"));
}

TEST_CASE("fit CLI: the JSON fit object", "[cli][fit][json]") {
  const auto j = plan_json({kV41, "--tp", "8"});
  CHECK(j.at("schema") == "mla-plan/3");
  const auto& fit = j.at("fit");
  CHECK(fit.at("fits") == true);
  CHECK(fit.at("vllm").at("log_line") ==
        "GPU KV cache size: 32,823,353 tokens, Maximum concurrency for 1,048,576 tokens per request: 31.30x");
  CHECK(fit.at("vllm").at("gpu_kv_cache_tokens") == 32823353);
  CHECK(fit.at("vllm").at("max_model_len") == 1048576);
  CHECK(fit.at("vllm").at("maximum_concurrency").get<double>() == Approx(31.303).margin(0.001));
  CHECK(fit.at("vllm_release").at("version") == "0.31.0");
  CHECK(fit.at("vllm_release").at("model_runner") == "v2");
  CHECK(fit.at("vllm_release").at("batches_in_flight") == 2);
  CHECK(fit.at("weights").at("checkpoint_bytes") == 509890541400);
  const auto& terms = fit.at("stages").at(0).at("budget").at("terms");
  std::vector<std::string> ids;
  for (const auto& t : terms) {
    ids.push_back(t.at("id").get<std::string>());
    INFO(ids.back());
    CHECK_FALSE(t.at("source").get<std::string>().empty());
    CHECK(t.at("bytes").get<std::int64_t>() >= 0);
  }
  CHECK(ids == std::vector<std::string>{"weights", "load_overhead", "activation_peak", "non_torch", "cudagraph"});
  CHECK(term(j, "weights").at("bytes") == fit.at("stages").at(0).at("weights_bytes"));
  CHECK(term(j, "weights").at("bytes") == 50934067136);
  // The budget adds up: requested - every term = the KV cache.
  const auto& budget = fit.at("stages").at(0).at("budget");
  std::int64_t non_kv = 0;
  for (const auto& t : terms) non_kv += t.at("bytes").get<std::int64_t>();
  CHECK(budget.at("non_kv_bytes") == non_kv);
  CHECK(budget.at("requested_bytes").get<std::int64_t>() - non_kv == kv_bytes(j));

  const auto v4 = plan_json({kV4, "--tp", "2"});
  CHECK(v4.at("fit").at("weights").at("checkpoint_bytes") == 159609485896);
}

TEST_CASE("fit CLI: V4-Flash at TP 2 x DP 4 with expert parallelism", "[cli][fit]") {
  const auto j = plan_json({kV4, "--tp", "2", "--dp", "4", "--enable-expert-parallel"});
  CHECK(j.at("fit").at("fits") == true);
  const double per_gpu = j.at("fit").at("stages").at(0).at("weights_bytes").get<double>() / kGiB;
  CHECK(per_gpu == Approx(21.87).margin(0.01));
  // Less per GPU than TP 2 alone (experts over 8 GPUs instead of 2).
  const auto tp2 = plan_json({kV4, "--tp", "2"});
  CHECK(tp2.at("fit").at("stages").at(0).at("weights_bytes").get<double>() / kGiB > per_gpu + 1.0);
}

TEST_CASE("fit CLI: --enforce-eager drops the CUDA-graph term into the KV cache", "[cli][fit]") {
  // The V1 model runner (vLLM 0.25-0.28) takes its CUDA-graph estimate off the KV budget.
  const auto graphs = plan_json({kV4, "--tp", "8", "--vllm-version", "0.28"});
  const auto eager = plan_json({kV4, "--tp", "8", "--vllm-version", "0.28", "--enforce-eager"});
  const auto cudagraph = term(graphs, "cudagraph").at("bytes").get<std::int64_t>();
  CHECK(cudagraph > 0);
  CHECK(term(eager, "cudagraph").at("bytes") == 0);
  CHECK(kv_bytes(eager) == kv_bytes(graphs) + cudagraph);
  CHECK(eager.at("fit").at("vllm").at("gpu_kv_cache_tokens").get<std::int64_t>() >
        graphs.at("fit").at("vllm").at("gpu_kv_cache_tokens").get<std::int64_t>());
}

TEST_CASE("fit CLI: --weights-gib replaces the derived weights", "[cli][fit]") {
  const auto derived = plan_json({kV41, "--tp", "8"});
  const auto given = plan_json({kV41, "--tp", "8", "--weights-gib", "10"});
  CHECK(term(given, "weights").at("bytes") == 10737418240);
  CHECK(term(given, "weights").at("source") == "given");
  CHECK(term(derived, "weights").at("source") == "estimated");
  CHECK(kv_bytes(given) == kv_bytes(derived) + term(derived, "weights").at("bytes").get<std::int64_t>() - 10737418240);
  // The other terms stay.
  for (const std::string id : {"load_overhead", "activation_peak", "non_torch", "cudagraph"}) {
    INFO(id);
    CHECK(term(given, id).at("bytes") == term(derived, id).at("bytes"));
  }
}

TEST_CASE("fit CLI: --engram offload keeps the engram tables off the GPU", "[cli][fit]") {
  const auto gpu = plan_json({kV41, "--tp", "8", "--engram", "gpu"});
  const auto offload = plan_json({kV41, "--tp", "8", "--engram", "offload"});
  const double on = gpu.at("fit").at("stages").at(0).at("weights_bytes").get<double>() / kGiB;
  const double off = offload.at("fit").at("stages").at(0).at("weights_bytes").get<double>() / kGiB;
  CHECK(on - off == Approx(23.6).margin(0.05));
  CHECK(kv_bytes(offload) > kv_bytes(gpu));
  CHECK(run({kV41, "--tp", "8", "--engram", "offload"}).out == run({kV41, "--tp", "8"}).out);  // vLLM's default
}

TEST_CASE("fit CLI: check --matrix, one H200 against eight", "[cli][fit][check]") {
  const Run r = run({"check", "--matrix", "--tp", "1,8", kV4, "--format", "json"});
  REQUIRE(r.code == 0);
  const auto j = nlohmann::json::parse(r.out);
  int seen = 0;
  for (const auto& c : j.at("files").at(0).at("matrix")) {
    if (c.at("gpu") != "h200") continue;
    ++seen;
    INFO(c.dump());
    CHECK(c.at("data_parallel_size") == 1);
    if (c.at("tensor_parallel_size") == 1) {
      CHECK(c.at("supported") == false);
      CHECK(c.at("exit_code") == 4);
      CHECK_THAT(c.at("reason").get<std::string>(),
                 Catch::StartsWith("does not fit: weights 145.30 GiB per GPU leave nothing (short by 28.37 GiB)"));
    } else {
      CHECK(c.at("tensor_parallel_size") == 8);
      CHECK(c.at("supported") == true);
      CHECK(c.at("exit_code") == 0);
      CHECK(c.at("maximum_concurrency").get<double>() == Approx(9.70).margin(0.005));
      CHECK(c.at("weights_bytes_per_gpu").get<double>() / kGiB == Approx(19.24).margin(0.005));
    }
  }
  CHECK(seen == 2);  // V4.0: fp8_ds_mla only, at TP 1 and 8
}

TEST_CASE("fit CLI: check --min-concurrency compares vLLM's maximum concurrency", "[cli][fit][check]") {
  const Run r = run({"check", kV41, "--tp", "8", "--min-concurrency", "1000", "--json"});
  CHECK(r.code == 4);
  const auto j = nlohmann::json::parse(r.out);
  const auto& f = j.at("files").at(0);
  CHECK(f.at("status") == "fail");
  bool guard = false;
  for (const auto& finding : f.at("findings")) {
    if (finding.at("id") == "guard.concurrency") {
      guard = true;
      CHECK_THAT(finding.at("message").get<std::string>(), Catch::Contains("31.30x, below the minimum 1000"));
    }
  }
  CHECK(guard);
  CHECK(run({"check", kV41, "--tp", "8", "--min-concurrency", "31"}).code == 0);
}

TEST_CASE("fit CLI: weights of a scheme not known leave the fit undecided, never a confident answer", "[cli][fit]") {
  testing_files::TempDir dir;
  std::ifstream in(kV4);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string text = ss.str();
  const auto at = text.find("\"quant_method\": \"fp8\"");
  REQUIRE(at != std::string::npos);
  text.replace(at, std::string("\"quant_method\": \"fp8\"").size(), "\"quant_method\": \"int4\"");
  const std::string path = dir.write("int4.json", text);

  const Run r = run({path, "--tp", "2"});
  CHECK(r.code == 0);  // the layout and kernels are fine; the fit is not decided
  CHECK_THAT(r.out, Catch::Contains("fit: NOT DECIDED on 2 x h200"));
  CHECK_THAT(r.out, Catch::Contains("quantization_config.quant_method = \"int4\""));
  CHECK_THAT(r.out, Catch::Contains("weights.unknown"));
  CHECK(r.out.find("vLLM prints:") == std::string::npos);
  const auto j = nlohmann::json::parse(run({path, "--tp", "2", "--json"}).out);
  CHECK(j.at("fit").at("decided") == false);
  CHECK(j.at("fit").at("fits") == false);
  CHECK(j.at("fit").at("weights").at("known") == false);
  // A guard cannot pass on an undecided fit.
  const Run g = run({"check", path, "--tp", "2", "--min-concurrency", "1"});
  CHECK(g.code == 4);
  CHECK_THAT(g.out, Catch::Contains("guard.concurrency") && Catch::Contains("cannot be checked"));
  // --weights-gib decides it.
  const Run w = run({path, "--tp", "2", "--weights-gib", "74"});
  CHECK(w.code == 0);
  CHECK_THAT(w.out, Catch::Contains("fit: FITS on 2 x h200"));
}

TEST_CASE("fit CLI: parameters printed with the published figures", "[cli][fit]") {
  const Run r = run({kV4, "--tp", "2"});
  CHECK_THAT(r.out, Catch::Contains("parameters: 284.33 B in the main model, 13.27 B active per token; published for "
                                    "DeepSeek-V4-Flash: 284B / 13B"));
  const auto j = plan_json({kV4, "--tp", "2"});
  CHECK(j.at("fit").at("weights").at("published").at("total_params").get<double>() == 284e9);
  const auto v41 = plan_json({kV41, "--tp", "8"});
  CHECK_FALSE(v41.at("fit").at("weights").contains("published"));  // no published figure to compare with
}

TEST_CASE("fit CLI: a model directory's broken safetensors file is exit 2 naming the file", "[cli][fit]") {
  testing_files::TempDir dir;
  {
    std::ifstream in(kV4);
    std::ofstream out(dir / "config.json");
    out << in.rdbuf();
  }
  // A header length past the end of the file.
  const std::string bad("\xff\x00\x00\x00\x00\x00\x00\x00{}", 10);
  dir.write("model.safetensors", bad);
  const Run r = run({dir.path.string(), "--tp", "2"});
  CHECK(r.code == 2);
  CHECK_THAT(r.err, Catch::Contains("model.safetensors"));
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  // Without the files the config's weights are used.
  const Run d = run({dir.path.string(), "--tp", "2", "--no-checkpoint-files"});
  CHECK(d.code == 0);
  CHECK_THAT(d.out, Catch::Contains("derived from config.json"));
}

namespace {

/// A Hugging Face snapshot of V4.1-Flash while it downloads: config.json, the index of its 46
/// shards (total_size the released 510,286,023,000 B) and the first shard, of one 64-byte tensor.
void partial_v41_snapshot(testing_files::TempDir& dir, bool with_index) {
  {
    std::ifstream in(kV41);
    std::ofstream out(dir / "config.json");
    out << in.rdbuf();
  }
  const std::string header = R"({"embed.weight":{"dtype":"BF16","shape":[4,8],"data_offsets":[0,64]}})";
  std::string bytes(8, '\0');
  bytes[0] = static_cast<char>(header.size());
  dir.write("model-00001-of-00046.safetensors", bytes + header + std::string(64, '\0'));
  if (!with_index) return;
  nlohmann::json map = nlohmann::json::object();
  map["embed.weight"] = "model-00001-of-00046.safetensors";
  for (int i = 2; i <= 46; ++i) {
    char shard[64];
    std::snprintf(shard, sizeof shard, "model-%05d-of-00046.safetensors", i);
    map["t" + std::to_string(i)] = shard;
  }
  dir.write("model.safetensors.index.json",
            nlohmann::json{{"metadata", {{"total_size", 510286023000LL}}}, {"weight_map", map}}.dump());
}

}  // namespace

TEST_CASE("fit CLI: a partial download is not the checkpoint, in every format", "[cli][fit][checkpoint]") {
  for (const bool with_index : {false, true}) {
    INFO("with the index: " << with_index);
    testing_files::TempDir dir;
    partial_v41_snapshot(dir, with_index);
    const std::string d = dir.path.string();
    // The files (64 B) would fit 56.24x; the weights derived from config.json fit 31.30x.
    const Run r = run({d, "--tp", "8"});
    CHECK(r.code == 2);
    CHECK_THAT(r.out, Catch::Contains("Maximum concurrency for 1,048,576 tokens per request: 31.30x"));
    CHECK_THAT(r.out, Catch::Contains("weights: 509,890,541,400 B (474.87 GiB) in the checkpoint, derived from "
                                      "config.json (some parts estimated: compressor, indexer, engram, vision; draft "
                                      "stages); the checkpoint in " +
                                      d + " is incomplete (45 of 46 shards missing), its files are not used"));
    const std::string reason =
        "the checkpoint in '" + d +
        "' is incomplete: 45 of 46 shards are missing: 'model-00002-of-00046.safetensors', "
        "'model-00003-of-00046.safetensors', 'model-00004-of-00046.safetensors' (not in the directory) and 42 more; " +
        (with_index ? "the index maps 45 tensors to them; the files present hold 1 tensor, 64 B of the index's "
                      "total_size 510,286,023,000 B"
                    : "the files present hold 1 tensor, 64 B") +
        "; its files are not used as the weights (the fit takes the weights derived from config.json)";
    CHECK_THAT(r.out, Catch::Contains("\nfindings:\n  error [checkpoint.incomplete]: " + reason +
                                      "\n    fix: finish the "
                                      "download, or plan from config.json alone with --no-checkpoint-files\n"));
    CHECK(r.err == "mla-plan: error: " + reason +
                       " (fix: finish the download, or plan from config.json alone with --no-checkpoint-files)\n");

    const Run js = run({d, "--tp", "8", "--json"});
    CHECK(js.code == 2);
    const auto j = nlohmann::json::parse(js.out);
    CHECK(j.at("exit_code") == 2);
    const auto& w = j.at("fit").at("weights");
    CHECK(w.at("source") == "config");
    CHECK(w.at("checkpoint_bytes") == 509890541400LL);
    const auto& ic = w.at("incomplete_checkpoint");
    CHECK(ic.at("missing_count") == 45);
    CHECK(ic.at("expected_files") == 46);
    CHECK(ic.at("missing").size() == 8);
    CHECK(ic.at("missing").at(0).at("file") == "model-00002-of-00046.safetensors");
    CHECK(ic.at("files_bytes") == 64);
    CHECK(ic.contains("index_total_size") == with_index);
    bool finding = false;
    for (const auto& f : j.at("findings"))
      finding |= f.at("id") == "checkpoint.incomplete" && f.at("severity") == "error";
    CHECK(finding);

    const Run md = run({d, "--tp", "8", "--format", "markdown"});
    CHECK(md.code == 2);
    CHECK_THAT(md.out, Catch::Contains("**Result: FAIL** (exit 2): the checkpoint in "));
    CHECK_THAT(md.out, Catch::Contains("`checkpoint.incomplete`"));

    // check fails the file in every format.
    const Run text = run({"check", d, "--tp", "8"});
    CHECK(text.code == 2);
    CHECK_THAT(text.out, Catch::StartsWith("FAIL " + d + " (exit 2)"));
    CHECK_THAT(text.out, Catch::Contains("  error [checkpoint.incomplete]: " + reason));
    const Run gh = run({"check", d, "--tp", "8", "--format", "github"});
    CHECK(gh.code == 2);
    CHECK_THAT(gh.out, Catch::StartsWith("::error file=" + d + ",title=mla-plan checkpoint.incomplete::"));
    const Run cj = run({"check", d, "--tp", "8", "--json"});
    CHECK(cj.code == 2);
    CHECK_THAT(cj.out, Catch::Contains("checkpoint.incomplete"));
    const Run cm = run({"check", d, "--tp", "8", "--format", "markdown"});
    CHECK(cm.code == 2);
    CHECK_THAT(cm.out, Catch::Contains("**error** `checkpoint.incomplete`"));
    // The matrix plans its cells with the config's weights and fails the file.
    const Run matrix = run({"check", d, "--matrix", "--tp", "8"});
    CHECK(matrix.code == 2);
    CHECK_THAT(matrix.out, Catch::Contains("yes fits: 31.30x requests of 1048576 tokens"));
    CHECK_THAT(matrix.out, Catch::Contains("  error [checkpoint.incomplete]: " + reason));
    const Run mj = run({"check", d, "--matrix", "--tp", "8", "--json"});
    CHECK(mj.code == 2);
    const auto mjj = nlohmann::json::parse(mj.out);
    CHECK(mjj.at("exit_code") == 2);
    CHECK(mjj.at("files").at(0).at("exit_code") == 2);
    CHECK_THAT(mjj.at("files").at(0).at("error").get<std::string>(), Catch::StartsWith(reason));

    // Planned from config.json alone, as the fix says: the same numbers, exit 0.
    const Run alone = run({d, "--tp", "8", "--no-checkpoint-files"});
    CHECK(alone.code == 0);
    CHECK_THAT(alone.out, Catch::Contains("31.30x"));
  }
}

TEST_CASE("fit CLI: the checkpoint's own findings are shown", "[cli][fit][checkpoint]") {
  testing_files::TempDir dir;
  {
    std::ifstream in(kV4);
    std::ofstream out(dir / "config.json");
    out << in.rdbuf();
  }
  // Files holding more than the contract (one sparse 160 GB expert tensor besides a small one), an index
  // whose total_size says 5 bytes, a tensor of layer 5000, and a macOS AppleDouble file (not read:
  // the index names the shards).
  const std::string header =
      R"({"embed.weight":{"dtype":"BF16","shape":[16,64],"data_offsets":[0,2048]},)"
      R"("layers.0.ffn.experts.300.w1.weight":{"dtype":"U8","shape":[160000000000],"data_offsets":[2048,160000002048]},)"
      R"("model.layers.5000.mlp.down_proj.weight":{"dtype":"U8","shape":[1850000000],)"
      R"("data_offsets":[160000002048,161850002048]}})";
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i) bytes[static_cast<std::size_t>(i)] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
  const std::string shard = dir.write("model-00001-of-00001.safetensors", bytes + header);
  REQUIRE(::truncate(shard.c_str(), static_cast<off_t>(8 + header.size() + 161850002048LL)) == 0);
  dir.write("model.safetensors.index.json",
            R"({"metadata":{"total_size":5},"weight_map":{"embed.weight":"model-00001-of-00001.safetensors",)"
            R"("layers.0.ffn.experts.300.w1.weight":"model-00001-of-00001.safetensors",)"
            R"("model.layers.5000.mlp.down_proj.weight":"model-00001-of-00001.safetensors"}})");
  dir.write("._model-00001-of-00001.safetensors", std::string("\x00\x05\x16\x07", 4));
  const Run r = run({dir.path.string(), "--tp", "8"});
  INFO(r.err);
  CHECK(r.code == 0);
  CHECK_THAT(r.out, Catch::Contains("warning [weights.total_size]: model.safetensors.index.json: "
                                    "\"metadata\".\"total_size\" is 5 bytes; the tensors of its 1 shards hold "
                                    "161,850,002,048 bytes (the headers' figure is used)"));
  CHECK_THAT(r.out, Catch::Contains("warning [weights.unplaceable]: 1 tensors (1850000000 B) name a layer past the "
                                    "model's 43 layers and 1 draft stages: 'model.layers.5000.mlp.down_proj.weight'"));
  // The notes are shown with --details.
  const Run details = run({dir.path.string(), "--tp", "8", "--details"});
  CHECK_THAT(details.out, Catch::Contains("\nnotes:\n") && Catch::Contains("\n  bytes from 1 safetensors headers in "));
  const Run gh = run({"check", dir.path.string(), "--tp", "8", "--format", "github"});
  CHECK_THAT(gh.out, Catch::Contains("title=mla-plan weights.total_size::"));
  CHECK_THAT(gh.out, Catch::Contains("title=mla-plan weights.unplaceable::"));
  const auto j = plan_json({dir.path.string(), "--tp", "8"});
  std::set<std::string> ids;
  for (const auto& f : j.at("findings")) ids.insert(f.at("id").get<std::string>());
  CHECK(ids.count("weights.total_size"));
  CHECK(ids.count("weights.unplaceable"));
  CHECK(ids.count("weights.files_source"));
}

TEST_CASE("check: an invalid config is never hidden behind another file's exit 3 or 4", "[cli][check]") {
  using mlaplan::combine_exit_codes;
  // The order of docs/cli.md: 70, 7, 2, 1, 5, 6, 3, 4, 0.
  CHECK(combine_exit_codes(4, 2) == 2);
  CHECK(combine_exit_codes(2, 4) == 2);
  CHECK(combine_exit_codes(3, 2) == 2);
  CHECK(combine_exit_codes(4, 3) == 3);
  CHECK(combine_exit_codes(3, 4) == 3);
  CHECK(combine_exit_codes(2, 1) == 2);
  CHECK(combine_exit_codes(1, 5) == 1);
  CHECK(combine_exit_codes(5, 3) == 5);
  CHECK(combine_exit_codes(0, 4) == 4);
  CHECK(combine_exit_codes(7, 2) == 7);
  CHECK(combine_exit_codes(70, 7) == 70);
  CHECK(combine_exit_codes(7, 70) == 70);
  CHECK(combine_exit_codes(0, 0) == 0);

  testing_files::TempDir dir;
  const std::string bad = dir.write("bad.json", "{\"num_hidden_layers\": \"many\"}");
  // V4.1-Flash on one H200 does not fit (4); the invalid file (2) decides the run, in either order.
  for (const auto& files : {std::vector<std::string>{kV41, bad}, std::vector<std::string>{bad, kV41}}) {
    std::vector<std::string> args{"check"};
    args.insert(args.end(), files.begin(), files.end());
    args.insert(args.end(), {"--tp", "1"});
    const Run r = run(args);
    CHECK(r.code == 2);
    CHECK_THAT(r.out, Catch::Contains("FAIL " + bad + " (exit 2)") && Catch::Contains(" (exit 4)"));
  }
}

TEST_CASE("fit CLI: the error that decides exit 4 is a finding in text, JSON and the report", "[cli][fit][report]") {
  const Run text = run({kV4, "--tp", "1"});
  CHECK(text.code == 4);
  CHECK_THAT(text.out, Catch::Contains("\nfindings:\n  error [fit.does_not_fit]: does not fit: weights need 145.30 GiB "
                                       "per GPU, 1.04 x the 139.80 GiB of h200"));
  CHECK_THAT(text.out, Catch::Contains("    fix: --tp 1 --dp 2 --enable-expert-parallel (2 GPUs"));
  const Run js = run({kV4, "--tp", "1", "--json"});
  CHECK(js.code == 4);
  const auto j = nlohmann::json::parse(js.out);
  bool found = false;
  for (const auto& f : j.at("findings")) found |= f.at("id") == "fit.does_not_fit" && f.at("severity") == "error";
  CHECK(found);
  testing_files::TempDir dir;
  const Run rep = run({"report", kV4, "--tp", "1", "-o", dir / "r.svg"});
  CHECK(rep.code == 4);
  std::ifstream in(dir / "r.svg");
  std::stringstream svg;
  svg << in.rdbuf();
  CHECK(svg.str().find("No errors or warnings") == std::string::npos);
  CHECK_THAT(svg.str(), Catch::Contains("fit.does_not_fit"));
  // check lists it once per file.
  const Run c = run({"check", kV4, "--tp", "1"});
  CHECK(c.code == 4);
  const std::string id = "[fit.does_not_fit]";
  const auto first = c.out.find(id);
  REQUIRE(first != std::string::npos);
  CHECK(c.out.find(id, first + 1) == std::string::npos);
}

TEST_CASE("fit CLI: a refusal is not a fit, in every output and field", "[cli][fit][refusal]") {
  // Each way vLLM refuses a configuration (exit 3): a backend rule (the kv dtype, DSpark with PP),
  // a placement rule (TP against the heads), a KV tier's start-up check. None may say FITS.
  struct Case {
    std::vector<std::string> args;
    std::string id;
  };
  const std::vector<Case> cases = {
      {{kV4, "--tp", "4", "--kv-cache-dtype", "bfloat16"}, "backend.kv_cache_dtype"},
      {{kV4, "--tp", "4", "--kv-cache-dtype", "nvfp4_ds_mla"}, "backend.kv_cache_dtype"},
      {{kV41, "--tp", "8", "--pp", "2", "--spec-tokens", "5"}, "spec.dspark_parallel"},
      {{kV4, "--tp", "3"}, "backend.tensor_parallel"},
      {{kV4, "--tp", "16"}, "placement.tensor_parallel"},
      {{kV41, "--tp", "8", "--prefix-cache-retention-interval", "100"}, "prefix_cache.refused"},
  };
  for (const auto& c : cases) {
    std::string line;
    for (const auto& a : c.args) line += " " + a;
    INFO(line);
    const Run text = run(c.args);
    CHECK(text.code == 3);
    CHECK_THAT(text.out, !Catch::Contains("fit: FITS") && !Catch::Contains("fit: DOES NOT FIT") &&
                             !Catch::Contains("vLLM prints:") && !Catch::Contains("would fit:"));
    CHECK_THAT(text.out, Catch::Contains("fit: REFUSED") || Catch::Contains("fit: LAYOUT REJECTED"));

    std::vector<std::string> args = c.args;
    args.push_back("--json");
    const Run js = run(args);
    CHECK(js.code == 3);
    const auto j = nlohmann::json::parse(js.out);
    const auto& fit = j.at("fit");
    CHECK(fit.at("fits") == false);
    CHECK(fit.at("decided") == false);
    CHECK(fit.at("refused") == true);
    CHECK(fit.at("suggestions").empty());
    CHECK_THAT(fit.at("verdict").get<std::string>(), Catch::StartsWith("refused: "));
    // The refusal is the error finding that decides the exit (with its fix, as stderr has it).
    const std::string refusal = fit.at("refusal").get<std::string>();
    bool quoted = false;
    for (const auto& f : j.at("findings")) {
      if (f.at("severity") == "error" && f.at("id") == c.id) {
        quoted = refusal.rfind(f.at("message").get<std::string>(), 0) == 0;
      }
    }
    CHECK(quoted);
    CHECK(js.err == "mla-plan: error: " + refusal + "\n");
    CHECK(j.at("batch").at("kv_cache").is_null());

    args.back() = "--format";
    args.push_back("markdown");
    const Run md = run(args);
    CHECK(md.code == 3);
    CHECK_THAT(md.out, Catch::Contains("**Result: FAIL** (exit 3)") && Catch::Contains("): refused: ") &&
                           !Catch::Contains("GPU KV cache size"));

    // check: the file fails with exit 3 in every format, and its JSON says refused without
    // numbers that read like a fit.
    std::vector<std::string> ck = {"check"};
    ck.insert(ck.end(), c.args.begin(), c.args.end());
    const Run ct = run(ck);
    CHECK(ct.code == 3);
    CHECK_THAT(ct.out, Catch::StartsWith("FAIL ") && Catch::Contains("(exit 3)") && Catch::Contains("[" + c.id + "]") &&
                           Catch::EndsWith("0 of 1 configs passed\n"));
    ck.push_back("--json");
    const Run cj = run(ck);
    CHECK(cj.code == 3);
    const auto f = nlohmann::json::parse(cj.out).at("files").at(0);
    CHECK(f.at("status") == "fail");
    CHECK(f.at("exit_code") == 3);
    CHECK(f.at("fit") == "refused");
    CHECK_FALSE(f.contains("maximum_concurrency"));
    CHECK_FALSE(f.contains("gpu_kv_cache_tokens"));
    ck.back() = "--format";
    ck.push_back("github");
    const Run cg = run(ck);
    CHECK(cg.code == 3);
    CHECK_THAT(cg.out, Catch::Contains("::error ") && Catch::Contains("title=mla-plan " + c.id));
    CHECK_THAT(cg.err, Catch::Contains("0 passed, 1 failed"));
    ck.back() = "markdown";
    const Run cm = run(ck);
    CHECK(cm.code == 3);
  }
  // A configuration that fits is still FITS, decided, not refused.
  const Run ok = run({kV41, "--tp", "8", "--json"});
  REQUIRE(ok.code == 0);
  const auto j = nlohmann::json::parse(ok.out);
  CHECK(j.at("fit").at("fits") == true);
  CHECK(j.at("fit").at("refused") == false);
  CHECK(j.at("fit").at("refusal").is_null());
  const Run cok = run({"check", kV41, "--tp", "8", "--json"});
  CHECK(nlohmann::json::parse(cok.out).at("files").at(0).at("fit") == "fits");
}

TEST_CASE("fit CLI: a refused matrix cell is not supported, with the refusal as its reason", "[cli][fit][refusal]") {
  const Run r = run({"check", "--matrix", kV41, "--tp", "8", "--pp", "2", "--spec-tokens", "5", "--json"});
  REQUIRE(r.code == 0);
  const auto j = nlohmann::json::parse(r.out);
  int seen = 0;
  for (const auto& c : j.at("files").at(0).at("matrix")) {
    INFO(c.dump());
    CHECK(c.at("supported") == false);
    CHECK(c.at("exit_code") == 3);
    CHECK_THAT(c.at("reason").get<std::string>(), !Catch::StartsWith("fits"));
    seen += c.at("reason").get<std::string>().find("DSpark does not support pipeline parallelism") != std::string::npos;
  }
  CHECK(seen > 0);
}

TEST_CASE("fit CLI: check --matrix refuses every guard rather than ignore it", "[cli][check][matrix]") {
  const std::vector<std::vector<std::string>> guards = {
      {"--min-concurrency", "1000"},    {"--max-global-bytes-per-token", "10"}, {"--require-batch-fits"},
      {"--prefix-hit-prompt-len", "5"}, {"--min-offload-tokens", "5"},          {"--require-prefill-fits"},
      {"--require-prompt-len", "5"},    {"--guard-accounting", "rows"},
  };
  for (const auto& g : guards) {
    std::vector<std::string> args = {"check", "--matrix", kV4};
    args.insert(args.end(), g.begin(), g.end());
    INFO(g.front());
    const Run r = run(args);
    CHECK(r.code == 1);
    CHECK(r.out.empty());
    CHECK(r.err == "mla-plan: error: " + g.front() +
                       " is a guard of one plan and --matrix applies none (its cells cover every GPU preset and kv "
                       "dtype): run check without --matrix, with --gpu and --tensor-parallel-size, to apply it\n");
    // Without --matrix the guard applies.
    args.erase(args.begin() + 1);
    CHECK(run(args).code != 1);
  }
  const Run two = run({"check", "--matrix", kV4, "--min-concurrency", "1", "--require-batch-fits"});
  CHECK(two.code == 1);
  // In the order of the guard table (the order the guards are applied in).
  CHECK_THAT(two.err, Catch::Contains("--require-batch-fits, --min-concurrency are guards of one plan"));
}

// ============================================================ vLLM releases and start-up logs

namespace {

// Case A: a public V4-Flash start-up log, vLLM v0.25.0, 2 x RTX PRO 6000 Blackwell (TP 2), with
// the run's real flags (../shared vllm-versions notes, section 10). It printed Available KV cache
// memory 10.29 GiB, GPU KV cache size 1,993,100 tokens, maximum concurrency 1.90x.
const std::vector<std::string> kCaseA = {kV4,
                                         "--gpu",
                                         "rtx-pro-6000",
                                         "--tp",
                                         "2",
                                         "--kv-cache-dtype",
                                         "fp8",
                                         "--gpu-memory-utilization",
                                         "0.95",
                                         "--max-model-len",
                                         "1048576",
                                         "--max-num-seqs",
                                         "64",
                                         "--max-num-batched-tokens",
                                         "4096",
                                         "--spec-tokens",
                                         "2"};

const char* kCaseALog =
    "(APIServer pid=57) INFO 07-12 02:33:26 [utils.py:299] non-default args: {'model_tag': "
    "'deepseek-ai/DeepSeek-V4-Flash', 'max_model_len': 1048576, 'tensor_parallel_size': 2, "
    "'disable_custom_all_reduce': True, 'gpu_memory_utilization': 0.95, 'kv_cache_dtype': 'fp8', "
    "'enable_prefix_caching': True, 'max_num_batched_tokens': 4096, 'max_num_seqs': 64, 'async_scheduling': True, "
    "'speculative_config': {'method': 'mtp', 'num_speculative_tokens': 2}}\n"
    "(Worker_TP0 pid=514) INFO 07-12 02:35:39 [gpu_model_runner.py:4411] Model loading took 75.64 GiB memory and "
    "118.456 seconds\n"
    "(Worker_TP0 pid=514) INFO 07-12 02:36:10 [gpu_worker.py:486] Profiling CUDA graph memory: PIECEWISE=42 "
    "(largest=384), FULL=26 (largest=192)\n"
    "(Worker_TP0 pid=514) INFO 07-12 02:36:14 [gpu_worker.py:532] Estimated CUDA graph memory: 1.58 GiB total\n"
    "(Worker_TP0 pid=514) INFO 07-12 02:36:14 [gpu_worker.py:538] Available KV cache memory: 10.29 GiB\n"
    "(EngineCore pid=381) INFO 07-12 02:36:15 [kv_cache_utils.py:1317] GPU KV cache size: 1,993,100 tokens\n"
    "(EngineCore pid=381) INFO 07-12 02:36:15 [kv_cache_utils.py:1322] Maximum concurrency for 1,048,576 tokens per "
    "request: 1.90x\n";

std::vector<std::string> with(std::vector<std::string> a, std::initializer_list<std::string> more) {
  a.insert(a.end(), more);
  return a;
}

}  // namespace

TEST_CASE("vLLM releases: case A (v0.25.0, 2 x RTX PRO 6000) with its real flags", "[cli][fit][release]") {
  const auto j = plan_json(with(kCaseA, {"--vllm-version", "0.25.0"}));
  const auto& fit = j.at("fit");
  const double available = fit.at("vllm").at("available_kv_bytes").get<double>() / kGiB;
  const double tokens = fit.at("vllm").at("gpu_kv_cache_tokens").get<double>();
  const double concurrency = fit.at("vllm").at("maximum_concurrency").get<double>();
  CHECK(std::fabs(available - 10.29) <= 0.02 * 10.29);
  CHECK(std::fabs(tokens - 1'993'100) <= 0.01 * 1'993'100);
  CHECK(std::fabs(concurrency - 1.90) <= 0.01 * 1.90);
  CHECK(fit.at("vllm_release").at("version") == "0.25.0");
  CHECK(fit.at("vllm_release").at("kv_planner") == "packed_buckets");
  CHECK(fit.at("vllm_release").at("model_runner") == "v1");
  // v0.25 prints two lines.
  CHECK(fit.at("vllm").at("log_line") ==
        "GPU KV cache size: 1,993,663 tokens\nMaximum concurrency for 1,048,576 tokens per request: 1.90x");
  // vLLM 0.30's planner and runner on the same flags: far from what v0.25.0 printed.
  const auto newer = plan_json(with(kCaseA, {"--vllm-version", "0.30"}));
  CHECK(newer.at("fit").at("vllm").at("maximum_concurrency").get<double>() < 1.6);
}

TEST_CASE("vLLM releases: --vllm-version picks a release or names the modelled ones", "[cli][release]") {
  CHECK(plan_json({kV4, "--tp", "8", "--vllm-version", "0.27"}).at("fit").at("vllm_release").at("version") == "0.27.1");
  CHECK(plan_json({kV4, "--tp", "8", "--vllm-version", "v0.30.0"}).at("fit").at("vllm_release").at("version") ==
        "0.30.0");
  const Run bad = run({kV4, "--tp", "8", "--vllm-version", "0.24"});
  CHECK(bad.code == 1);
  CHECK_THAT(bad.err, Catch::Contains("--vllm-version: '0.24' is not a modelled vLLM release") &&
                          Catch::Contains("0.25.0, 0.25.1, 0.26.0, 0.27.0, 0.27.1, 0.28.0, 0.29.0, 0.30.0, 0.31.0"));
  // V4.1 is not in a release before 0.30.0: vLLM refuses it (exit 3).
  const Run old = run({kV41, "--tp", "8", "--vllm-version", "0.29"});
  CHECK(old.code == 3);
  CHECK_THAT(old.out, Catch::Contains("error [engine.vllm_version]: vLLM 0.29.0 has no DeepSeek V4.1 model"));
  // A release whose planner generation is not pinned prints the other generation beside it.
  const Run unpinned = run(with(kCaseA, {"--vllm-version", "0.27"}));
  CHECK(unpinned.code == 0);
  CHECK_THAT(unpinned.out, Catch::Contains("the KV planner of vLLM 0.27.1 is not pinned; under the packed KV-cache "
                                           "groups (kv_cache_planning.py, the v0.30 generation) vLLM would print: "
                                           "GPU KV cache size: "));
}

TEST_CASE("vLLM releases: batches in flight under pipeline parallelism", "[cli][release]") {
  // VllmConfig.max_concurrent_batches: PP with async scheduling on the V2 runner is PP + 1;
  // on the V1 runner (0.25-0.28 for DeepSeek's MoE models) PP.
  auto batches = [](std::initializer_list<std::string> more) {
    std::vector<std::string> a = {kV4, "--tp", "4", "--pp", "2"};
    a.insert(a.end(), more);
    return plan_json(a).at("fit").at("vllm_release").at("batches_in_flight").get<int>();
  };
  CHECK(batches({}) == 3);
  CHECK(batches({"--no-async-scheduling"}) == 2);
  CHECK(batches({"--vllm-version", "0.28"}) == 2);
  CHECK(plan_json({kV4, "--tp", "8"}).at("fit").at("vllm_release").at("batches_in_flight") == 2);
  CHECK(plan_json({kV4, "--tp", "8", "--no-async-scheduling"}).at("fit").at("vllm_release").at("batches_in_flight") ==
        1);
}

TEST_CASE("vLLM start-up log: --from-log sets the log against the plan and uses its terms", "[cli][fit][log]") {
  testing_files::TempDir dir;
  const std::string log = dir.write("caseA.log", kCaseALog);
  const Run r = run(with(kCaseA, {"--vllm-version", "0.25.0", "--from-log", log}));
  REQUIRE(r.code == 0);
  CHECK_THAT(r.out, Catch::Contains("\nstart-up log " + log + ", against the model's plan of the same flags:\n"));
  CHECK_THAT(r.out,
             Catch::Contains("  weights as loaded (\"Model loading took\")                        75.73 GiB      "
                             "75.64 GiB  agrees\n"));
  CHECK_THAT(r.out, Catch::Contains("  GPU KV cache size                                               1,993,663      "
                                    "1,993,100  agrees\n"));
  CHECK_THAT(r.out,
             Catch::Contains("  measured, used in the plan above: --weights-gib 75.64 (\"Model loading took\")\n"));
  CHECK_THAT(r.out, Catch::Contains("  measured, used in the plan above: --cudagraph-gib 1.58"));
  const auto j = plan_json(with(kCaseA, {"--vllm-version", "0.25.0", "--from-log", log}));
  const auto& rows = j.at("log_check").at("rows");
  REQUIRE(rows.size() == 6);
  for (const auto& x : rows) CHECK(x.at("disagrees") == false);
  // The plan with the measured terms lands on the log's KV cache.
  CHECK(std::fabs(j.at("fit").at("vllm").at("available_kv_bytes").get<double>() / kGiB - 10.29) < 0.05);
  // Another layout than the log's: compared, not applied.
  const Run other = run({kV4, "--gpu", "rtx-pro-6000", "--tp", "4", "--from-log", log});
  CHECK_THAT(other.out, Catch::Contains("note: the log ran tensor_parallel_size 2, this plan 4"));
  CHECK_THAT(other.out, Catch::Contains("note: the log's terms are not applied: it ran another parallel layout"));
  // Not a start-up log: one line naming --from-log, exit 1.
  const Run junk = run({kV4, "--tp", "8", "--from-log", dir.write("junk.log", "hello\nworld\n")});
  CHECK(junk.code == 1);
  CHECK_THAT(junk.err, Catch::StartsWith("mla-plan: error: --from-log ") &&
                           Catch::Contains("not a vLLM start-up log: none of the lines 'Model loading took'"));
  // A line that names a term but whose number cannot be read: the error names the line.
  const Run garbled = run({kV4, "--tp", "8", "--from-log",
                           dir.write("garbled.log",
                                     "INFO Model loading took 19.79 GiB memory and 9.1 seconds\n"
                                     "INFO Available KV cache memory: lots GiB\n")});
  CHECK(garbled.code == 1);
  CHECK_THAT(garbled.err, Catch::StartsWith("mla-plan: error: --from-log ") && Catch::Contains("line 2:"));
  // A file that cannot be read is exit 2, as every input file; the message names --from-log.
  const Run missing = run({kV4, "--tp", "8", "--from-log", (dir.path / "nope.log").string()});
  CHECK(missing.code == 2);
  CHECK_THAT(missing.err, Catch::Contains("--from-log"));
  const Run folder = run({kV4, "--tp", "8", "--from-log", dir.path.string()});
  CHECK(folder.code == 2);
  CHECK_THAT(folder.err, Catch::Contains("--from-log"));
}

TEST_CASE("vLLM start-up log: a V2-runner log gives the peak activation and non-torch memory", "[cli][fit][log]") {
  // vLLM 0.31.1rc1, V4.1-Flash on 8 x H100 (TP 8, EP), the summary line of the V2 runner.
  testing_files::TempDir dir;
  const std::string log = dir.write(
      "v2.log",
      "(Worker_TP0_EP0 pid=1) INFO 10-20 01:02:03 [model_runner.py:413] Model loading took 36.32 GiB memory and 95.1 "
      "seconds\n"
      "(Worker_TP0_EP0 pid=1) INFO 10-20 01:03:03 [gpu_worker.py:726] Available KV cache memory: 29.14 GiB\n"
      "(EngineCore pid=1) INFO 10-20 01:03:04 [kv_cache_utils.py:1400] GPU KV cache size: 9,092,381 tokens, Maximum "
      "concurrency for 262,144 tokens per request: 34.68x\n"
      "(Worker_TP0_EP0 pid=1) INFO 10-20 01:04:00 [gpu_worker.py:800] Free memory on device (77.01/79.18 GiB) on "
      "startup. Desired GPU memory utilization is (0.9, 71.26 GiB). Actual usage is 38.23 GiB for consumed memory "
      "(weights + non-torch), 3.89 GiB for peak activation, and 1.13 GiB for CUDAGraph memory. Replace "
      "gpu_memory_utilization config with --kv-cache-memory=30000000000 (27.94 GiB) to fit into requested memory.\n");
  const auto j = plan_json({kV41, "--gpu", "h100", "--tp", "8", "--enable-expert-parallel", "--language-model-only",
                            "--max-num-seqs", "64", "--max-model-len", "262144", "--gpu-memory-utilization", "0.9",
                            "--no-enable-prefix-caching", "--from-log", log});
  std::map<std::string, nlohmann::json> by;
  for (const auto& x : j.at("log_check").at("rows")) by[x.at("what").get<std::string>()] = x;
  REQUIRE(by.count("peak activation") == 1);
  CHECK(by["peak activation"].at("logged").get<double>() == Approx(3.89));
  REQUIRE(by.count("non-torch memory") == 1);
  CHECK(by["non-torch memory"].at("logged").get<double>() == Approx(38.23 - 36.32));
  CHECK(by.at("GPU total").at("logged").get<double>() == Approx(79.18));
  // The model's own figures for this run are within 3% of what it printed.
  CHECK(std::fabs(by.at("GPU KV cache size").at("planned").get<double>() / 9'092'381.0 - 1.0) < 0.03);
  CHECK(j.at("log_check").at("model_runner_v2") == false);  // the excerpt has no "Using V2 Model Runner" line
}

TEST_CASE("fit CLI: a rule's refusal heads the text even when the layout is rejected too", "[cli][fit]") {
  // The 8-layer V4.1 test model: head size 16 is refused by the backend (the exit's refusal) and
  // TP 4 is above its o_groups 2 (a placement rejection): text says the refusal first, as JSON does.
  const std::string small = testing_cli::config_file("small/v41-8layer-flat.json");
  const Run r = run({small, "--tp", "4"});
  CHECK(r.code == 3);
  CHECK_THAT(r.out, Catch::Contains("\nfit: REFUSED on 4 x h200 ") &&
                        Catch::Contains("\n  refused: head size 16 (qk_rope_head_dim 4) is not supported") &&
                        Catch::Contains("\n  rejected: --tensor-parallel-size 4 is above o_groups 2"));
  const auto j = nlohmann::json::parse(run({small, "--tp", "4", "--json"}).out);
  CHECK_THAT(r.out, Catch::Contains("  " + j.at("fit").at("verdict").get<std::string>() + "\n"));
}
