// The sparse indexer's transient prefill workspace (docs/prefill.md) and decode context
// parallelism (docs/fit.md section 7): the formulas on the threads' own numbers and on the
// bundled configs, the plan's answers, the guards and the refusals.

#include <catch2/catch.hpp>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli_run.hpp"
#include "mlaplan/plan/plan.hpp"
#include "mlaplan/engine/vllm/prefill.hpp"
#include "rule_testing.hpp"

using namespace mlaplan;
using testing_cli::Run;
using testing_cli::run;
using testing_rules::gpu;
using testing_rules::released;

namespace {

constexpr std::int64_t kGiB = std::int64_t{1} << 30;
const std::string kV41 = testing_cli::config_file("deepseek-v4.1-flash.json");
const std::string kV4 = testing_cli::config_file("deepseek-v4-flash.json");
const std::string kV32 = testing_cli::config_file("deepseek-v3.2.json");

IndexerWorkspaceShape untiled() {
  IndexerWorkspaceShape s;
  s.tiling = IndexerTiling::none;
  return s;
}

IndexerWorkspaceShape shape_of(const std::string& name, const PrefillOptions& o = {}, std::int64_t dcp = 1) {
  const ModelConfig cfg = released(name);
  const Topology topo = build_topology(cfg);
  return indexer_workspace_shape(cfg, topo, o, dcp, 0, cfg.num_hidden_layers - 1, true);
}

nlohmann::json plan_json(std::vector<std::string> args, int code = 0) {
  args.push_back("--json");
  const Run r = run(args);
  INFO(r.err);
  REQUIRE(r.code == code);
  return nlohmann::json::parse(r.out);
}

bool has_finding(const nlohmann::json& j, const std::string& id) {
  for (const auto& f : j.at("findings")) {
    if (f.at("id") == id) return true;
  }
  return false;
}

}  // namespace

TEST_CASE("prefill: the threads' own numbers", "[prefill]") {
  const IndexerWorkspaceShape s = untiled();
  // SGLang PR 40217: 6 x 16,384 x 1,048,576 = 96 GiB per GPU for V4.1's candidate path.
  CHECK(indexer_layer_transient(s, IndexerLayerShape{20, 1, 2, 1}, 1048576, 16384) == 96 * kGiB);
  // SGLang PR 39187: the fp32 scores of a 16,384-token chunk of a 487,936-token request, 29.8 GiB.
  const std::int64_t scores = indexer_layer_transient(s, IndexerLayerShape{20, 1, 0, 1}, 487936, 16384);
  CHECK(scores == 31977373696);
  CHECK(static_cast<double>(scores) / static_cast<double>(kGiB) == Approx(29.78).margin(0.005));
  // SGLang PR 40352: one consumer layer's scores, 16,384 tokens at 262,144: "17 GB" = 16 GiB.
  CHECK(indexer_layer_transient(s, IndexerLayerShape{24, 1, 0, 1}, 262144, 16384) == 16 * kGiB);
  // vLLM PR 41333: 8,192 tokens at 1M context, ratio 4: "8 GiB".
  CHECK(indexer_layer_transient(s, IndexerLayerShape{2, 4, 0, 1}, 1048576, 8192) == 8 * kGiB);
  // The last chunk of a short prompt scores only its own rows; N = floor(L / ratio).
  CHECK(indexer_layer_transient(s, IndexerLayerShape{2, 4, 0, 1}, 1000, 8192) == 4 * 1000 * 250);
  CHECK(indexer_entries(1023, 4, 1) == 255);
  CHECK(indexer_entries(1048576, 1, 2) == 524288);
  CHECK(indexer_entries(7, 1, 2) == 4);  // cdiv: the first rank holds the odd entry
}

TEST_CASE("prefill: vLLM's row tiles bound the peak", "[prefill]") {
  IndexerWorkspaceShape s;  // rows, 512 MiB: VLLM_SPARSE_INDEXER_MAX_LOGITS_MB
  REQUIRE(s.logits_budget_bytes == 512 * (std::int64_t{1} << 20));
  const IndexerLayerShape v41{20, 1, 2, 5};
  // At 1M a tile holds 128 rows of 1,048,576 fp32 scores (512 MiB) and their masks: 768 MiB.
  CHECK(indexer_layer_transient(s, v41, 1048576, 8192) == 6 * (512 * (std::int64_t{1} << 20) / 4));
  // Short contexts are untiled: 8,192 x 8,192 x 6 = 384 MiB (the profile run's shape).
  CHECK(indexer_layer_transient(s, v41, 8192, 8192) == std::int64_t{6} * 8192 * 8192);
  // A row wider than the budget is one tile of one row.
  s.logits_budget_bytes = 1 << 20;
  CHECK(indexer_layer_transient(s, v41, 1048576, 8192) == 6 * 1048576);
  // SGLang PR 40217's 2 GiB budget: 16K rows at 1M are 512 rows a tile, 3 GiB with the masks.
  s.logits_budget_bytes = 2 * kGiB;
  CHECK(indexer_layer_transient(s, v41, 1048576, 16384) == 3 * kGiB);
  CHECK_THROWS_WITH(parse_indexer_tiling("tiles"), "--indexer-tiling: 'tiles' is not known; allowed: rows, none");
}

TEST_CASE("prefill: the indexer layers of the bundled configs", "[prefill]") {
  // V4.1-Flash: index sources 2, 8, 14 at ratio 2; the candidate source 20 and 24-36 at ratio 1
  // with the candidate masks. The DSpark layers have no indexer.
  const IndexerWorkspaceShape v41 = shape_of("deepseek-v4.1-flash.json");
  REQUIRE(v41.layers.size() == 2);
  CHECK(v41.layers[0].layer == 2);
  CHECK(v41.layers[0].compress_ratio == 2);
  CHECK(v41.layers[0].mask_bytes == 0);
  CHECK(v41.layers[0].layers == 3);
  CHECK(v41.layers[1].layer == 20);
  CHECK(v41.layers[1].compress_ratio == 1);
  CHECK(v41.layers[1].mask_bytes == 2);
  CHECK(v41.layers[1].layers == 5);
  // V4-Flash: the C4 indexer on every ratio-4 layer, N = L / 4.
  const IndexerWorkspaceShape v4 = shape_of("deepseek-v4-flash.json");
  REQUIRE(v4.layers.size() == 1);
  CHECK(v4.layers[0].compress_ratio == 4);
  CHECK(v4.layers[0].mask_bytes == 0);
  CHECK(v4.layers[0].layers == 21);
  // V3.2: every layer (and its MTP layer) scores the whole context.
  const IndexerWorkspaceShape v32 = shape_of("deepseek-v3.2.json");
  REQUIRE(v32.layers.size() == 1);
  CHECK(v32.layers[0].compress_ratio == 1);
  CHECK(v32.layers[0].layers == 62);
  // Untiled at the configs' max_model_len and vLLM's 8,192-token chunk.
  PrefillOptions none;
  none.tiling = IndexerTiling::none;
  CHECK(indexer_transient(shape_of("deepseek-v4.1-flash.json", none), 1048576, 8192) == 48 * kGiB);
  CHECK(indexer_transient(shape_of("deepseek-v4-flash.json", none), 1048576, 8192) == 8 * kGiB);
  CHECK(indexer_transient(shape_of("deepseek-v3.2.json", none), 163840, 8192) == std::int64_t{4} * 8192 * 163840);
  // DCP: each rank scores half the entries.
  CHECK(indexer_transient(shape_of("deepseek-v3.2.json", none, 2), 163840, 8192) == std::int64_t{4} * 8192 * 81920);
}

TEST_CASE("prefill: V4.1-Flash on 8 x H200 against the headroom", "[prefill][cli]") {
  const auto j = plan_json({kV41, "--tp", "8"});
  const auto& p = j.at("prefill");
  REQUIRE(p.is_object());
  CHECK(p.at("tiling") == "rows");
  CHECK(p.at("chunk_tokens") == 8192);
  CHECK(p.at("peak_layer") == 20);
  CHECK(p.at("entries") == 1048576);
  CHECK(p.at("peak_bytes") == 805306368);  // 768 MiB: one 512 MiB tile of scores + its masks
  CHECK(p.at("profile_bytes") == std::int64_t{6} * 8192 * 8192);
  const std::int64_t total = p.at("total_bytes"), budgeted = p.at("budgeted_bytes"), room = p.at("headroom_bytes");
  CHECK(total == 150109880320);  // the H200's cudaMemGetInfo total
  CHECK(room == total - budgeted);
  // The KV cache vLLM allocates: 575,637 blocks of 116,928 B (tests/test_batch_fit.cpp).
  const std::int64_t non_kv = budgeted - std::int64_t{575637} * 116928;
  CHECK(non_kv > 0);
  // Requested is ceil(total x 0.92); the slack inside it is less than one block.
  CHECK(p.at("budget_slack_bytes").get<std::int64_t>() >= 0);
  CHECK(p.at("budget_slack_bytes").get<std::int64_t>() < 116928);
  CHECK(p.at("fits") == true);
  CHECK(p.at("longest_prompt") == 1048576);
  CHECK(p.at("any_chunk") == true);
  CHECK_FALSE(has_finding(j, "fit.prefill_transient"));

  // Untiled (SGLang before PR 40217): 6 x 8,192 x L per GPU; the longest prompt is the largest L
  // with 6 x 8,192 x L <= headroom, and the chunk that makes 1M safe the largest T with
  // 6 x T x 1,048,576 <= headroom.
  const auto u = plan_json({kV41, "--tp", "8", "--indexer-tiling", "none"});
  const auto& q = u.at("prefill");
  CHECK(q.at("peak_bytes") == 48 * kGiB);
  CHECK(q.at("fits") == false);
  const std::int64_t h = q.at("headroom_bytes");
  CHECK(h == room);
  const std::int64_t longest = q.at("longest_prompt");
  CHECK(longest == h / (6 * 8192));
  CHECK(q.at("safe_chunk") == h / (std::int64_t{6} * 1048576));
  CHECK(q.at("any_chunk") == false);
  CHECK(has_finding(u, "fit.prefill_transient"));
  CHECK(u.at("exit_code") == 0);  // a warning: the start-up fit stands
}

TEST_CASE("prefill: check guards", "[prefill][cli][guards]") {
  {
    const Run r = run({"check", kV41, "--tp", "8", "--indexer-tiling", "none", "--require-prefill-fits"});
    CHECK(r.code == 4);
    CHECK(r.out.find("guard.prefill_transient") != std::string::npos);
    CHECK(r.out.find("fit.prefill_transient") == std::string::npos);
  }
  {
    const Run r = run({"check", kV41, "--tp", "8", "--require-prefill-fits"});
    INFO(r.out);
    CHECK(r.code == 0);
  }
  {
    const Run r = run({"check", kV41, "--tp", "8", "--indexer-tiling", "none", "--require-prompt-len", "100000"});
    INFO(r.out);
    CHECK(r.code == 0);
  }
  {
    const Run r = run({"check", kV41, "--tp", "8", "--indexer-tiling", "none", "--require-prompt-len", "500000"});
    CHECK(r.code == 4);
    CHECK(r.out.find("guard.prompt_len") != std::string::npos);
  }
  {
    const Run r = run({"check", kV41, "--tp", "8", "--max-model-len", "4096", "--require-prompt-len", "5000"});
    CHECK(r.code == 4);
    CHECK(r.out.find("longer than max_model_len 4,096") != std::string::npos);
  }
  {
    // One GPU does not hold V4.1-Flash: the guard cannot be checked, and fails.
    const Run r = run({"check", kV41, "--tp", "1", "--require-prefill-fits"});
    CHECK(r.code == 4);
    CHECK(r.out.find("--require-prefill-fits cannot be checked") != std::string::npos);
  }
  {
    const Run r = run({kV41, "--tp", "8", "--indexer-logits-budget-mib", "0"});
    CHECK(r.code == 1);
    CHECK(r.err.find("--indexer-logits-budget-mib") != std::string::npos);
  }
}

TEST_CASE("dcp: full caches sharded, windows whole (vLLM's KV layout)", "[dcp][vllm-kv]") {
  const ModelConfig cfg = released("deepseek-v4.1-flash.json");
  const Topology topo = build_topology(cfg);
  LayoutOptions lo;
  lo.tensor_parallel_size = 8;
  const Layout L = plan_layout(cfg, topo, gpu("h200"), lo, Strictness::lenient);
  VllmKvOptions ko;
  const VllmKvConfig one = vllm_kv_configs(cfg, topo, L, ko).front();
  ko.decode_context_parallel_size = 2;
  const VllmKvConfig two = vllm_kv_configs(cfg, topo, L, ko).front();
  CHECK(two.bytes_per_block == one.bytes_per_block);
  // At 1M: the compressed group 16,384 blocks of 64 tokens, halved per rank; the 8 window groups
  // and the ring keep theirs (tests/test_vllm_kv.cpp: 20,004 blocks per request at DCP 1).
  REQUIRE(one.blocks_per_request == 20004);
  CHECK(two.blocks_per_request == 20004 - 16384 / 2);
  // 1,001 tokens: cdiv(cdiv(1001, 2), 64) = 8 full blocks instead of 16.
  CHECK(one.request_blocks(1001) - two.request_blocks(1001) == 16 - 8);
}

TEST_CASE("dcp: V3.2 at TP 8 x DCP 2 next to plain TP and DP attention", "[dcp][cli]") {
  const auto j = plan_json({kV32, "--tp", "8", "--dcp", "2"});
  const auto& cp = j.at("context_parallel");
  REQUIRE(cp.is_object());
  CHECK(cp.at("refused") == false);
  const auto& o = cp.at("options");
  REQUIRE(o.size() == 3);
  CHECK(o[0].at("decode_context_parallel_size") == 1);
  CHECK(o[1].at("decode_context_parallel_size") == 2);
  CHECK(o[2].at("tensor_parallel_size") == 1);
  CHECK(o[2].at("data_parallel_size") == 8);
  // V3.2's caches are all full: the request takes half the blocks per rank, the concurrency doubles
  // (within the rounding of cdiv).
  const std::int64_t b1 = o[0].at("blocks_per_request"), b2 = o[1].at("blocks_per_request");
  CHECK(b2 == (b1 + 1) / 2);
  CHECK(o[1].at("num_blocks") == o[0].at("num_blocks"));
  CHECK(o[1].at("concurrency").get<double>() == Approx(2 * o[0].at("concurrency").get<double>()).epsilon(0.01));
  // The fit is the DCP one.
  CHECK(j.at("fit").at("vllm").at("maximum_concurrency").get<double>() ==
        Approx(o[1].at("concurrency").get<double>()).margin(0.005));
  CHECK(j.at("exit_code") == 0);
  // Without --dcp there is no comparison.
  CHECK(plan_json({kV32, "--tp", "8"}).at("context_parallel").is_null());
}

TEST_CASE("dcp: where vLLM refuses it", "[dcp][rules]") {
  {
    const Run r = run({kV41, "--tp", "8", "--dcp", "2"});
    CHECK(r.code == 3);
    CHECK(r.out.find("backend.dcp_indexer_compression") != std::string::npos);
    CHECK(r.out.find("DCP is not supported with sparse indexer KV compression (compress_ratio=2).") !=
          std::string::npos);
    CHECK(r.out.find("REFUSED by vLLM") != std::string::npos);
  }
  {
    const auto j = plan_json({kV4, "--tp", "8", "--dcp", "4"}, 3);
    CHECK(has_finding(j, "backend.dcp_indexer_compression"));
    CHECK(j.at("context_parallel").at("refused") == true);
    CHECK(j.at("context_parallel").at("refusal").get<std::string>().find("compress_ratio=4") != std::string::npos);
  }
  {
    const auto j = plan_json({kV32, "--tp", "8", "--dcp", "3"}, 3);
    CHECK(has_finding(j, "backend.dcp_tensor_parallel"));
  }
  {
    const auto j = plan_json({kV32, "--tp", "8", "--dcp", "2", "--cp-kv-cache-interleave-size", "4"}, 3);
    CHECK(has_finding(j, "backend.dcp_interleave"));
  }
}
