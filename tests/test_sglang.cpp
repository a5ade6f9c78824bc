// SGLang's start-up arithmetic (engine/sglang): the default mem_fraction_static against
// memory_hook.py's worked example, each configurator generation's bytes per full token and fixed
// terms against hand-computed values (docs/sglang.md), the two real logs (S1: V4-Flash-Base on
// 8 x H20 with a G1 build; S4: V4.1-Flash with DSpark on H200, a G3 build) to the token, SGLang's
// start-up errors and refusals in its own words, and what would start instead.

#include <catch2/catch.hpp>
#include <cmath>
#include <nlohmann/json.hpp>
#include <string>

#include "cli_run.hpp"
#include "mlaplan/base/error.hpp"
#include "mlaplan/base/number_format.hpp"
#include "mlaplan/engine/sglang/sglang.hpp"
#include "mlaplan/engine/sglang/startup_log.hpp"
#include "mlaplan/hardware/target.hpp"
#include "mlaplan/model/config.hpp"
#include "mlaplan/model/topology.hpp"

using namespace mlaplan;

namespace {

std::string src(const std::string& rel) { return std::string(MLAPLAN_SOURCE_DIR) + "/" + rel; }
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

struct Model {
  ModelConfig cfg;
  Topology topo;
  explicit Model(const std::string& rel) : cfg(load_config(src(rel))), topo(build_topology(cfg)) {}
};

const Model& v4() {
  static const Model m("configs/deepseek-v4-flash.json");
  return m;
}
const Model& v41() {
  static const Model m("configs/deepseek-v4.1-flash.json");
  return m;
}

Target gpu(const std::string& id) {
  TargetRequest r;
  r.gpu = id;
  return resolve_target(r);
}

/// A fit whose KV budget is `budget_gib` exactly: a fraction of 1, nothing lost loading, weights
/// that leave the budget free of 100 GiB.
SglangFit fit_with_budget(const Model& m, double budget_gib, SglangOptions o, std::int64_t tp = 8) {
  o.mem_fraction_static = 1.0;
  o.free_before_load_gib = 100.0;
  SglangInput in;
  in.tp_size = tp;
  in.weights_bytes = static_cast<std::int64_t>((100.0 - budget_gib) * kGiB);
  in.weights_given = true;
  in.load_overhead_gib = 0.0;
  return sglang_fit(m.cfg, m.topo, gpu("h200"), in, o);
}

bool has_line(const SglangFit& f, const std::string& line) {
  for (const auto& l : f.log_lines) {
    if (l == line) return true;
  }
  return false;
}

}  // namespace

TEST_CASE("sglang: the default mem_fraction_static of memory_hook.py's worked example", "[sglang]") {
  SglangOptions o;
  // H200, TP8, MLA-type backend with prefill graphs, decode max_bs 512, chunk 8192: 16,384 MiB.
  const SglangFraction f = sglang_default_fraction(143156, 8, 1, 1, o);
  CHECK(f.reserve_mib == 16384);
  CHECK(f.fraction == Approx(0.886));
  CHECK(f.chunked_prefill_size == 8192);
  CHECK(f.cuda_graph_max_bs == 512);
  // DP attention over 8: 512 x 8 x 3 + 512 x 8 x 1.5 = 18,432 MiB more.
  o.enable_dp_attention = true;
  const SglangFraction dp = sglang_default_fraction(143156, 8, 1, 8, o);
  CHECK(dp.reserve_mib == 34816);
  CHECK(dp.fraction == Approx(0.757));
  CHECK(sglang_default_fraction(143771, 8, 1, 8, o).fraction == Approx(0.758));
  // Below 60 GiB no floor; the buckets set the chunk and the graph batch.
  SglangOptions small;
  const SglangFraction l40 = sglang_default_fraction(46068, 2, 1, 1, small);
  CHECK(l40.chunked_prefill_size == 4096);
  CHECK(l40.cuda_graph_max_bs == 32);
  CHECK(l40.reserve_mib == 512 + 6144 + 256 + 64 + 1536);
  // A floor of 10 GiB above 60 GiB: TP 1 on an H100 (80 GiB) reserves less than that otherwise.
  SglangOptions h100;
  h100.chunked_prefill_size = 2048;
  h100.cuda_graph_max_bs = 8;
  CHECK(sglang_default_fraction(81559, 1, 1, 1, h100).reserve_mib == 10240);
}

TEST_CASE("sglang: the reserve with graphs or chunked prefill off", "[sglang]") {
  // reserve_for_graph_mb (memory_hook.py): --disable-cuda-graph drops the decode graphs' 2 x max_bs
  // and, in the newest resolver, the prefill graphs' 1,536; DP attention's term stays.
  SglangOptions off;
  off.disable_cuda_graph = true;
  const SglangFraction f = sglang_default_fraction(143156, 8, 1, 1, off);
  CHECK(f.reserve_mib == 512 + 12288 + 1024);
  CHECK(f.fraction == Approx(0.903));
  off.enable_dp_attention = true;
  const SglangFraction dp = sglang_default_fraction(143156, 8, 1, 8, off);
  CHECK(dp.reserve_mib == 512 + 12288 + 1024 + 512 * 8 * 3 + 512 * 8 * 3 / 2);
  CHECK(dp.fraction == Approx(0.775));
  // --disable-piecewise-cuda-graph: the prefill graphs alone.
  SglangOptions piecewise;
  piecewise.disable_piecewise_cuda_graph = true;
  CHECK(sglang_default_fraction(143156, 8, 1, 1, piecewise).reserve_mib == 16384 - 1536);
  // Chunked prefill off: the activations scale with max(max_prefill_tokens, 2048).
  SglangOptions unchunked;
  unchunked.chunked_prefill_size = -1;
  const SglangFraction u = sglang_default_fraction(143156, 8, 1, 1, unchunked);
  CHECK(u.chunked_prefill_size == -1);
  CHECK(u.reserve_mib == 16384 - 12288 + 24576);
  CHECK(u.fraction == Approx(0.8));
  unchunked.max_prefill_tokens = 4096;  // 512 + 6,144 + 1,024 + 1,024 + 1,536 = 10,240
  CHECK(sglang_default_fraction(143156, 8, 1, 1, unchunked).reserve_mib == 10240);
  unchunked.max_prefill_tokens = 8192;
  CHECK(sglang_default_fraction(143156, 8, 1, 1, unchunked).reserve_mib == 16384);
}

TEST_CASE("sglang: S1, V4-Flash-Base on 8 x H20 with a G1 build, to the token", "[sglang]") {
  SglangOptions o;
  o.generation = "G1";
  o.disable_radix_cache = true;
  o.cuda_graph_max_bs = 320;
  o.kv_cache_dtype = "bf16";
  // The printed inputs: 93.58 GiB free before loading, 57.01 after, fraction 0.88.
  o.mem_fraction_static = 0.88;
  o.free_before_load_gib = 93.58;
  SglangInput in;
  in.tp_size = 8;
  in.weights_bytes = static_cast<std::int64_t>((93.58 - 57.01) * kGiB);
  in.weights_given = true;
  in.load_overhead_gib = 0.0;
  const SglangFit f = sglang_fit(v4().cfg, v4().topo, gpu("h20"), in, o);
  REQUIRE(f.fits);
  CHECK(f.layers == 44);  // G1 counts the MTP entry
  CHECK(f.layers_c4 == 21);
  CHECK(f.layers_c128 == 20);
  CHECK(format_fixed(f.bytes_per_full_token, 2) == "15955.85");
  CHECK(static_cast<double>(f.budget_bytes) / kGiB == Approx(45.7804).margin(1e-4));
  // Fed the printed inputs exactly, one page short of the log (docs/sglang.md section 9).
  CHECK(f.pools.full == 3080704);
  CHECK(has_line(f,
                 "DSv4 memory calculation: bytes_per_full_token=15955.85, available_bytes=45.78 GB, "
                 "full_token=3080704"));
  CHECK(has_line(f,
                 "Memory profiling: available_gpu_memory=57.01 GB, total_gpu_memory=93.58 GB, "
                 "mem_fraction_static=0.88, rest_memory=45.78 GB"));
  // A budget inside the window the log's rounding allows reproduces it to the token.
  SglangOptions g1;
  g1.generation = "G1";
  const SglangFit w = fit_with_budget(v4(), 45.784, g1);
  REQUIRE(w.fits);
  CHECK(w.pools.full == 3080960);
  CHECK(w.pools.swa == 307968);
  CHECK(w.pools.c4 == 770240);
  CHECK(w.pools.c128 == 24070);
  CHECK(w.pools.c4_state == 19248);
  CHECK(w.pools.c128_state == 307968);
  CHECK(has_line(w,
                 "max_total_num_tokens=3080960, chunked_prefill_size=8192, max_prefill_tokens=16384, "
                 "max_running_requests=256, context_len=1048576, available_gpu_mem=(after CUDA graphs: not "
                 "modelled)"));
  // The request table outside the budget: 257 x 1,048,576 x 4 B = 1.0039 GiB.
  CHECK(f.request_table_bytes == 257LL * 1048576 * 4);
}

TEST_CASE("sglang: S4, V4.1-Flash with DSpark on H200 (G3): the 94,976-slot SWA pool", "[sglang]") {
  SglangOptions o;
  o.speculative_algorithm = "DSPARK";
  o.speculative_dspark_block_size = 5;
  o.max_running_requests = 32;
  o.chunked_prefill_size = 4096;
  const SglangFit f = fit_with_budget(v41(), 20.0, o, 4);
  REQUIRE(f.fits);
  CHECK(f.draft_tokens == 6);
  CHECK(f.swa_mode == "cap");
  CHECK(f.swa_per_request == 1164);
  CHECK(f.swa_request_cap == 45696);
  CHECK(f.swa_prefix_tails == 128);
  CHECK(f.pools.swa == 94976);
  CHECK(f.ring_c2 == 8);  // 1 << (6 + 1).bit_length()
  CHECK(has_line(f, "DSV4 SWA sizing: mode=cap, swa_tokens=94976, request_cap+headroom=94976, prefix_tails=128"));
  // --swa-prefix-tails 1024 (what the script later passes): 1024 x 384 more slots.
  o.swa_prefix_tails = 1024;
  CHECK(fit_with_budget(v41(), 20.0, o, 4).pools.swa == 439040);  // ceil_256(45,696 + 1,024 x 384)
}

TEST_CASE("sglang: each generation's bytes per full token and fixed terms", "[sglang]") {
  SglangOptions o;
  o.disable_radix_cache = true;
  SECTION("G2: V4-Flash 7,705.45 B, the c128 state fixed at 2.53 GiB for 256 requests") {
    o.generation = "G2";
    const SglangFit f = fit_with_budget(v4(), 40.0, o);
    REQUIRE(f.fits);
    CHECK(f.layers == 43);
    CHECK(f.bytes_per_full_token == Approx(7705.45).margin(0.005));
    // ceil_128(257 x 128 + 128 + 1) = 33,152 rows x 4,096 B x 20 layers.
    CHECK(f.c128_state_fixed == 33152LL * 4096 * 20);
    const auto full = static_cast<std::int64_t>(
        (static_cast<double>(f.budget_bytes) - static_cast<double>(f.c128_state_fixed)) / 7705.45);
    CHECK(f.pools.full == full / 256 * 256);
    CHECK(f.pools.c128_state == 0);
    CHECK(f.pools.c128_state_final == 257 * 128);
  }
  SECTION("G3: V4-Flash 3,899.25 B and 31,875 B per SWA slot (576-byte page padding)") {
    o.generation = "G3";
    const SglangFit f = fit_with_budget(v4(), 40.0, o);
    REQUIRE(f.fits);
    CHECK(f.bytes_per_full_token == Approx(3899.25));
    CHECK(f.bytes_per_swa_token == Approx(31875.0));
    // Cap mode without prefix tails: 256 x 768 + 2 x 8,192 + 256 = 213,248 slots.
    CHECK(f.pools.swa == 213248);
    CHECK(f.swa_fixed == static_cast<std::int64_t>(213248.0 * 31875.0));
  }
  SECTION("G3: V4.1-Flash 1,630 B, 23,400 B per SWA slot, the ratio-2 state") {
    const SglangFit f = fit_with_budget(v41(), 40.0, o);
    REQUIRE(f.fits);
    CHECK(f.layers == 40);
    CHECK(f.layers_c2 == 3);
    CHECK(f.layers_c1 == 1);
    CHECK(f.bytes_per_full_token == Approx(1630.0));
    CHECK(f.bytes_per_swa_token == Approx(23400.0));
    CHECK(f.c2_state_fixed == 518LL * 4096 * 3);  // ceil_2(257 x 2 + 2 + 1) rows
    CHECK(f.c128_state_fixed == 0);
  }
  SECTION("G3 ratio mode when --swa-full-tokens-ratio is given") {
    o.swa_full_tokens_ratio = 0.1;
    const SglangFit f = fit_with_budget(v4(), 40.0, o);
    REQUIRE(f.fits);
    CHECK(f.swa_mode == "ratio (explicit)");
    CHECK(f.bytes_per_full_token == Approx(3899.25 + 0.1 * 31875.0));
    CHECK(f.pools.swa == static_cast<std::int64_t>(static_cast<double>(f.pools.full) * 0.1) / 256 * 256);
  }
  SECTION("speculative decoding scales the budget (G1) or the bytes (G2, G3) by L and L + 1") {
    o.speculative_algorithm = "EAGLE";
    o.generation = "G2";
    // The c4 ring doubles to 16 with speculative decoding: 1,344 B more of c4 state.
    CHECK(fit_with_budget(v4(), 40.0, o).bytes_per_full_token == Approx((7705.45 + 1344.0) * 44.0 / 43.0).margin(0.01));
  }
}

TEST_CASE("sglang: start-up errors in SGLang's words, and what would start", "[sglang]") {
  SECTION("weights that leave no budget name the minimum viable fraction") {
    SglangOptions o;
    o.mem_fraction_static = 0.5;
    o.free_before_load_gib = 100.0;
    SglangInput in;
    in.tp_size = 8;
    in.weights_bytes = static_cast<std::int64_t>(60.0 * kGiB);
    in.weights_given = true;
    in.load_overhead_gib = 0.0;
    const SglangFit f = sglang_fit(v4().cfg, v4().topo, gpu("h200"), in, o);
    CHECK_FALSE(f.fits);
    CHECK(f.error ==
          "ValueError: Loaded weights leave no GPU memory for the KV cache under --mem-fraction-static=0.5. Raise "
          "--mem-fraction-static above 0.600 (minimum viable = 1 - available/pre = 0.6000). If using speculative "
          "decoding, draft weights are now counted.");
    REQUIRE_FALSE(f.suggestion_flags.empty());
    CHECK(f.suggestion_flags.front().front() == "--mem-fraction-static");
  }
  SECTION("an SWA cap that fills the budget") {
    SglangOptions o;
    o.max_running_requests = 4096;
    o.mem_fraction_static = 0.9;
    o.free_before_load_gib = 100.0;
    SglangInput in;
    in.tp_size = 8;
    in.weights_bytes = static_cast<std::int64_t>(85.0 * kGiB);  // a budget of 5 GiB
    in.weights_given = true;
    in.load_overhead_gib = 0.0;
    const SglangFit f = sglang_fit(v4().cfg, v4().topo, gpu("h200"), in, o);
    CHECK_FALSE(f.fits);
    CHECK(f.error.rfind("RuntimeError: The DSV4 SWA pool cap (", 0) == 0);
    CHECK(f.error.find("Reduce --max-running-requests, lower --swa-prefix-tails") != std::string::npos);
    bool fewer = false;
    for (const auto& s : f.suggestion_flags) fewer = fewer || s.front() == "--max-running-requests";
    CHECK(fewer);
  }
  SECTION("a ratio-mode SWA pool that cannot admit one request") {
    SglangOptions o;
    o.swa_full_tokens_ratio = 0.0001;
    const SglangFit f = fit_with_budget(v4(), 5.0, o);
    CHECK_FALSE(f.fits);
    CHECK(f.error.rfind("ValueError: SWA pool (0 tokens) cannot hold even one request: the prefill admission floor is "
                        "sliding_window_size (128) + page_size (256).",
                        0) == 0);
  }
  SECTION("--max-total-tokens below the profiled count, and the request cap it reduces") {
    SglangOptions o;
    o.generation = "G2";
    o.max_total_tokens = 300;
    const SglangFit f = fit_with_budget(v4(), 40.0, o);
    REQUIRE(f.fits);
    CHECK(f.pools.full == 256);
    CHECK(f.profiled_full.has_value());
    CHECK(f.max_running_requests == 128);
    CHECK(f.running_requests_reduced);
  }
}

TEST_CASE("sglang: SGLang's refusals", "[sglang]") {
  SglangInput in;
  in.tp_size = 8;
  in.weights_bytes = static_cast<std::int64_t>(40.0 * kGiB);
  in.weights_given = true;
  const Target h200 = gpu("h200");
  auto refusal = [&](const Model& m, const SglangOptions& o, const SglangInput& i) {
    const SglangFit f = sglang_fit(m.cfg, m.topo, h200, i, o);
    CHECK(f.refused);
    CHECK_FALSE(f.fits);
    return f.refusal;
  };
  SglangInput pp = in;
  pp.pp_size = 2;
  CHECK(refusal(v41(), SglangOptions{}, pp) ==
        "DeepSeek-V4.1 does not support pipeline parallelism yet; disable it to serve this model.");
  SglangOptions eagle;
  eagle.speculative_algorithm = "EAGLE";
  CHECK(refusal(v41(), eagle, in) ==
        "DeepSeek-V4.1 does not support speculative decoding other than DSpark yet; disable it to serve this model.");
  SglangOptions ngram;
  ngram.speculative_algorithm = "NGRAM";
  CHECK(refusal(v4(), ngram, in) ==
        "Only EAGLE and DSPARK speculative algorithms are supported for DeepseekV4ForCausalLM");
  SglangOptions topk;
  topk.speculative_algorithm = "EAGLE";
  topk.speculative_eagle_topk = 4;
  CHECK(refusal(v4(), topk, in) ==
        "Only EAGLE speculative algorithm with topk == 1 is supported for DeepseekV4ForCausalLM");
  SglangOptions g1;
  g1.generation = "G1";
  CHECK(refusal(v41(), g1, in).find("no DeepseekV41ForCausalLM") != std::string::npos);
  SglangInput tp16 = in;
  tp16.tp_size = 16;
  CHECK(refusal(v4(), SglangOptions{}, tp16)
            .rfind("DeepSeekV4 requires the effective attention TP size to divide both num_attention_heads=64 and "
                   "o_groups=8",
                   0) == 0);
  // DP attention divides the attention TP: TP 16 over DP 2 runs attention at TP 8.
  SglangOptions dp;
  dp.enable_dp_attention = true;
  SglangInput tp16dp2 = tp16;
  tp16dp2.dp_size = 2;
  CHECK_FALSE(sglang_fit(v4().cfg, v4().topo, h200, tp16dp2, dp).refused);
}

TEST_CASE("sglang: --sglang-version names a generation", "[sglang]") {
  CHECK(find_sglang_generation("g2").id == "G2");
  CHECK(find_sglang_generation("sglang@G1").id == "G1");
  CHECK(find_sglang_generation("").id == newest_sglang_generation().id);
  try {
    find_sglang_generation("0.5.4");
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::usage);
    CHECK(std::string(e.what()).find("G1, G2, G3") != std::string::npos);
  }
}

// ---- the command line: --engine, exit codes, JSON, check ----

namespace {

using testing_cli::Run;
using testing_cli::run;
const std::string kCliV41 = testing_cli::config_file("deepseek-v4.1-flash.json");
const std::string kCliV4 = testing_cli::config_file("deepseek-v4-flash.json");

}  // namespace

TEST_CASE("sglang CLI: --engine sglang answers as SGLang, with its exit codes", "[sglang][cli]") {
  SECTION("starts: exit 0, SGLang's lines and its launch command") {
    const Run r = run({"plan", kCliV41, "--engine", "sglang", "--tp", "8"});
    INFO(r.err);
    CHECK(r.code == 0);
    CHECK(r.out.find("SGLang (G3 configurator") != std::string::npos);
    CHECK(r.out.find("DSV4 SWA sizing: mode=cap") != std::string::npos);
    CHECK(r.out.find("SGLang launch: python3 -m sglang.launch_server --model-path") != std::string::npos);
    // vLLM's fit is not the answer.
    CHECK(r.out.find("\nfit: ") == std::string::npos);
  }
  SECTION("a refusal exits 3 in SGLang's words, with what it serves instead") {
    const Run r = run({"plan", kCliV41, "--engine", "sglang", "--tp", "4", "--pp", "2"});
    CHECK(r.code == 3);
    CHECK(r.err.find("DeepSeek-V4.1 does not support pipeline parallelism yet") != std::string::npos);
    CHECK(r.out.find("fix: the same GPUs without pipeline parallelism: --tp-size 8") != std::string::npos);
  }
  SECTION("does not start: exit 4 and a layout that would") {
    const Run r = run({"plan", kCliV41, "--engine", "sglang", "--tp", "4", "--gpu", "h100"});
    CHECK(r.code == 4);
    CHECK(r.err.find("SGLang does not start: the weights do not load") != std::string::npos);
    CHECK(r.out.find("would start: SGLang --tp-size 16") != std::string::npos);
  }
  SECTION("a fraction too small names SGLang's minimum and the fraction that starts") {
    const Run r = run({"plan", kCliV4, "--engine", "sglang", "--tp", "8", "--mem-fraction-static", "0.1"});
    CHECK(r.code == 4);
    CHECK(r.err.find("ValueError: Loaded weights leave no GPU memory for the KV cache under "
                     "--mem-fraction-static=0.1.") != std::string::npos);
    CHECK(r.out.find("would start: --mem-fraction-static 0.") != std::string::npos);
  }
  SECTION("a generation that is not modelled is a usage error") {
    const Run r = run({"plan", kCliV4, "--engine", "sglang", "--sglang-version", "0.5.9"});
    CHECK(r.code == 1);
    CHECK(r.err.find("--sglang-version") != std::string::npos);
  }
  SECTION("V3.2 is not modelled for SGLang") {
    const Run r = run({"plan", testing_cli::config_file("deepseek-v3.2.json"), "--engine", "sglang", "--tp", "8"});
    CHECK(r.code == 1);
    CHECK(r.err.find("V3.2's pool is not modelled") != std::string::npos);
  }
}

TEST_CASE("sglang CLI: --engine all puts both engines side by side, on screen and in JSON", "[sglang][cli]") {
  const Run t = run({"plan", kCliV4, "--engine", "all", "--tp", "8"});
  CHECK(t.code == 0);
  CHECK(t.out.find("engines side by side (h200") != std::string::npos);
  CHECK(t.out.find("  vLLM 0.31.0: KV ") != std::string::npos);
  CHECK(t.out.find("  SGLang G3: KV ") != std::string::npos);
  const Run j = run({"plan", kCliV4, "--engine", "all", "--tp", "8", "--json"});
  REQUIRE(j.code == 0);
  const auto doc = nlohmann::json::parse(j.out);
  CHECK(doc["engine"] == "all");
  CHECK(doc["fit"]["fits"] == true);
  CHECK(doc["sglang"]["fits"] == true);
  CHECK(doc["sglang"]["pools"]["bytes_per_full_token"].get<double>() == Approx(3899.25));
  CHECK(doc["sglang"]["launch"]["argv"][2] == "sglang.launch_server");
  // --engine vllm (the default) carries no SGLang answer.
  const Run v = run({"plan", kCliV4, "--tp", "8", "--json"});
  REQUIRE(v.code == 0);
  CHECK(nlohmann::json::parse(v.out)["sglang"].is_null());
}

TEST_CASE("sglang CLI: check --engine sglang gives SGLang's verdict", "[sglang][cli]") {
  const Run ok = run({"check", kCliV41, "--engine", "sglang", "--tp", "8"});
  CHECK(ok.code == 0);
  const Run pp = run({"check", kCliV41, "--engine", "sglang", "--tp", "4", "--pp", "2"});
  CHECK(pp.code == 3);
  CHECK((pp.out + pp.err).find("pipeline parallelism") != std::string::npos);
}

TEST_CASE("sglang: a start-up log is read for its memory, its server args and its configurator's lines", "[sglang]") {
  const SglangStartupLog log = read_sglang_startup_log(
      "[TP0] server_args=ServerArgs(model_path='x', tp_size=8, mem_fraction_static=0.88, kv_cache_dtype='bf16', "
      "cuda_graph_bs=[1, 2, 4], disable_radix_cache=True)\n"
      "[TP0] Load weight begin. avail mem=93.61 GB\r\n"
      "[TP1] Load weight begin. avail mem=93.56 GB\n"
      "[TP1] Load weight end. type=DeepseekV4ForCausalLM, quant=fp8, fmt=e4m3, avail mem=57.01 GB, mem usage=36.55 "
      "GB.\n"
      "[TP0] DSV4 SWA sizing: mode=cap, swa_tokens=94976, request_cap+headroom=94976, prefix_tails=128\n"
      "[TP0] DSV4 memory calculation: unified=False, unified_fp8=False, dspark_draft_bf16=False, "
      "bytes_per_full_token=1670.75, available_bytes=6.17 GB, c128_state_fixed=0.00 GB, full_token=2597120\n"
      "[TP0] DSV4 pool sizes: full=2597120, swa=94976, c4=649280, c128=20290, c4_state=0, c128_state=0\n"
      "[TP0] max_total_num_tokens=2597120, chunked_prefill_size=4096, max_prefill_tokens=16384, "
      "max_running_requests=32, context_len=1048576, available_gpu_mem=9.10 GB\n");
  CHECK(log.free_before_load_gib == Approx(93.56));  // the least over the ranks
  CHECK(log.free_after_load_gib == Approx(57.01));
  CHECK(log.load_usage_gib == Approx(36.55));
  CHECK(log.generation == "G3");
  CHECK(log.bytes_per_full_token == Approx(1670.75));
  CHECK(log.available_bytes_gib == Approx(6.17));
  CHECK(log.swa_tokens == 94976);
  CHECK(log.max_total_num_tokens == 2597120);
  CHECK(log.max_running_requests == 32);
  CHECK(log.server_args.at("mem_fraction_static") == "0.88");
  CHECK(log.server_args.at("kv_cache_dtype") == "bf16");
  CHECK(log.server_args.at("cuda_graph_bs") == "[1, 2, 4]");
  CHECK(log.server_args.at("disable_radix_cache") == "True");
  CHECK(log.lines.at("free_after_load") == 4);
  CHECK_FALSE(log.notes.empty());  // the ranks differ
  CHECK(read_sglang_startup_log("DSv4 memory calculation: bytes_per_full_token=15955.85, available_bytes=45.78 GB, "
                                "full_token=3080960\n")
            .generation == "G1");
  CHECK_THROWS_AS(read_sglang_startup_log("INFO vllm: GPU KV cache size: 1 tokens\n"), Error);
}

TEST_CASE("sglang CLI: --from-log compares a real log with the model and plans with its measured memory",
          "[sglang][cli]") {
  const std::string log = std::string(MLAPLAN_SOURCE_DIR) + "/tests/data/sglang-logs/s1-v4-flash-base-h20-tp8.log";
  const Run r = run({"plan", kCliV4, "--engine", "sglang", "--gpu", "h20", "--tp", "8", "--from-log", log});
  INFO(r.err);
  CHECK(r.code == 0);
  CHECK(r.out.find("(SGLang, its lines those of G1)") != std::string::npos);
  // The generation and the server args come from the log: the bytes per full token agree.
  CHECK(r.out.find("  bytes per full token ") != std::string::npos);
  CHECK(r.out.find("15955.85 B     15955.85 B  agrees") != std::string::npos);
  // With the log's measured memory the plan reproduces the log within its rounding (one page).
  CHECK(r.out.find("max_total_num_tokens=3080704,") != std::string::npos);
  const Run bad =
      run({"plan", kCliV4, "--engine", "sglang", "--from-log", std::string(MLAPLAN_SOURCE_DIR) + "/README.md"});
  CHECK(bad.code == 1);
  CHECK(bad.err.find("--from-log") != std::string::npos);
}

TEST_CASE("sglang: more draft tokens than V4's compressor-state rings serve do not start", "[sglang][cli]") {
  // _assert_ring_serves_draft_tokens (G2, G3): the speculative c4 ring (16) serves 16 - 8 + 2 = 10.
  const std::vector<std::string> eagle = {"plan",
                                          kCliV4,
                                          "--engine",
                                          "sglang",
                                          "--gpu",
                                          "h200",
                                          "--tp",
                                          "8",
                                          "--speculative-algorithm",
                                          "EAGLE",
                                          "--speculative-num-steps"};
  auto with = [&](const std::string& steps, const std::string& drafts) {
    std::vector<std::string> a = eagle;
    a.insert(a.end(), {steps, "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", drafts});
    return run(a);
  };
  const Run over = with("11", "12");
  CHECK(over.code == 4);
  CHECK_THAT(over.err, Catch::Contains("SGLang does not start: AssertionError: speculative_num_draft_tokens=12 exceeds "
                                       "what the c4 compress state ring can keep resident (ring_size=16 serves at "
                                       "most 10 draft tokens). Lower the draft count, or grow the ring in "
                                       "get_compress_state_ring_size()."));
  CHECK(with("9", "10").code == 0);
  // G1 has no such assertion.
  std::vector<std::string> g1 = eagle;
  g1.insert(g1.end(),
            {"11", "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "12", "--sglang-version", "G1"});
  CHECK(run(g1).err.find("compress state ring") == std::string::npos);
}

TEST_CASE("sglang: G1's --max-total-tokens cap sizes the pools again from cap x bytes per full token",
          "[sglang][cli]") {
  // resolve() of the May-2026 configurator: _calculate_pool_sizes(int(cap x bpft)); the float
  // rounding of int(int(1,000,192 x 15,955.85) / 15,955.85) gives 1,000,191, one page below the cap
  // after paging; the c128 state pool follows the capped SWA pool.
  const Run r = run({"sglang", "serve", kCliV4, "--tp", "8", "--gpu", "h200", "--sglang-version", "G1",
                     "--max-total-tokens", "1000192"});
  CHECK(r.code == 0);
  CHECK_THAT(r.out, Catch::Contains("    DSv4 memory calculation: bytes_per_full_token=15955.85, available_bytes=14.86 "
                                    "GB, full_token=999936\n"
                                    "    DSv4 pool sizes: full=999936, swa=99840, c4=249984, c128=7812, "
                                    "c4_state=6240, c128_state=99840\n"));
  // One pool-sizes line: the capped one.
  CHECK(r.out.find("DSv4 pool sizes: ") == r.out.rfind("DSv4 pool sizes: "));
}
