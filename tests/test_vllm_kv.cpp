#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "mlaplan/model/config.hpp"
#include "mlaplan/cache/layout.hpp"
#include "mlaplan/hardware/target.hpp"
#include "mlaplan/model/topology.hpp"
#include "mlaplan/engine/vllm/vllm_kv.hpp"
#include "rule_testing.hpp"

using namespace mlaplan;

// Expected values are computed by hand in the comments from docs/fit.md section 4 and the
// Layout's rows (docs/layout-accounting.md), not by calling the code under test.

namespace {

constexpr std::int64_t kGiB = std::int64_t{1} << 30;

using testing_rules::Model;
using testing_rules::model;
using testing_rules::v32;
using testing_rules::v40;
using testing_rules::v41;

Layout plan(const Model& m, std::int64_t mml, std::int64_t pp = 1) {
  TargetRequest r;
  r.gpu = "h200";
  LayoutOptions o;
  o.max_model_len = mml;
  o.pipeline_parallel_size = pp;
  return plan_layout(m.cfg, m.topo, resolve_target(r), o);
}

VllmKvConfig config(const Model& m, std::int64_t mml, VllmKvOptions o = {}, std::int64_t stage = 0,
                    std::int64_t pp = 1) {
  return vllm_kv_config(m.cfg, m.topo, plan(m, mml, pp), stage, o);
}

std::map<std::string, int> count_what(const VllmKvConfig& c) {
  std::map<std::string, int> n;
  for (const auto& s : c.specs) n[s.what]++;
  return n;
}

// Page bytes of the specs of one kind, all equal or the test fails.
std::vector<std::int64_t> pages_of(const VllmKvConfig& c, const std::string& what) {
  std::vector<std::int64_t> p;
  for (const auto& s : c.specs) {
    if (s.what == what && std::find(p.begin(), p.end(), s.page_bytes) == p.end()) p.push_back(s.page_bytes);
  }
  std::sort(p.begin(), p.end());
  return p;
}

std::int64_t round_up(std::int64_t x, std::int64_t a) { return (x + a - 1) / a * a; }

}  // namespace

TEST_CASE("vllm_kv: V4.1-Flash specs, groups and blocks per request (SM90, fp8_ds_mla)", "[vllm_kv]") {
  const VllmKvConfig c = config(v41(), 1048576);
  // 40 backbone layers, every one an SWA spec; KV sources 2, 8, 14 (ratio 2) and 20 (ratio 1): compressed +
  // indexer each; rings on the three ratio-2 sources. Draft layers (3) are not registered without
  // speculative decoding.
  auto n = count_what(c);
  CHECK(n["swa"] == 40);
  CHECK(n["compressed"] == 4);
  CHECK(n["indexer"] == 4);
  CHECK(n["ring"] == 3);
  CHECK(c.specs.size() == 51);
  // Pages: SWA 32 x 584 = 18688 -> round_up(576) = 19008; compressed c2 (64/2) x 584 -> 19008,
  // c1 64 x 584 = 37376 -> 37440; indexer c2 32 x 132 = 4224 -> 4608, c1 64 x 132 = 8448 -> 8640;
  // ring max(8, next_pow2(0 + 2)) = 8 rows x 4096 = 32768, no alignment.
  CHECK(pages_of(c, "swa") == std::vector<std::int64_t>{round_up(32 * 584, 576)});
  CHECK(pages_of(c, "compressed") == std::vector<std::int64_t>{19008, 37440});
  CHECK(pages_of(c, "indexer") == std::vector<std::int64_t>{4608, 8640});
  CHECK(pages_of(c, "ring") == std::vector<std::int64_t>{8 * 4096});
  for (const auto& s : c.specs) {
    if (s.what == "swa") {
      CHECK(s.kind == VllmSpecKind::sliding_window);
      CHECK(s.block_size == 32);
      CHECK(s.sliding_window == 128);
    }
    if (s.what == "compressed" || s.what == "indexer") {
      CHECK(s.kind == VllmSpecKind::full);
      CHECK(s.block_size == 64);
    }
    if (s.what == "ring") CHECK(s.kind == VllmSpecKind::ring);
  }
  // Buckets: SWA (b32, w128) 40 x 19008 balanced, one page size; full b64: 19008 x3, 37440 x1, 4608 x3,
  // 8640 x1, not balanced; ring 3 x 32768. No balanced bucket mixes page sizes, so no repeats: the
  // full bucket is one group of 3*19008 + 37440 + 3*4608 + 8640 = 116928 B (the anchor); the state
  // buckets split: SWA at most 116928 // 19008 = 6 per group -> cdiv(40, 6) = 7 groups (6,6,6,6,6,5,5);
  // rings 116928 // 32768 = 3 per group -> 1 group.
  REQUIRE(c.groups.size() == 9);
  int swa_groups = 0;
  for (const auto& g : c.groups) {
    if (g.kind == VllmSpecKind::sliding_window) {
      ++swa_groups;
      CHECK(g.specs.size() <= 6);
      CHECK(g.specs.size() >= 5);
    }
  }
  CHECK(swa_groups == 7);
  // bytes_per_block = max(6 x 19008 = 114048, 116928, 3 x 32768 = 98304) = 116928 = 203 x 576.
  CHECK(c.bytes_per_block == 116928);
  // R = 2 x 8192 = 16384 (async). SWA group: cdiv(min(127 + 16384, L), 32) + 1 = 516 + 1 = 517;
  // full cdiv(1048576, 64) = 16384; ring 1. 7 x 517 + 16384 + 1 = 20004.
  CHECK(c.retained_tokens == 16384);
  CHECK(c.blocks_per_request == 20004);
  // At 65536: 7 x 517 + 1024 + 1 = 4644.
  CHECK(c.request_blocks(65536) == 4644);
  CHECK(config(v41(), 65536).blocks_per_request == 4644);
}

TEST_CASE("vllm_kv: V4.1-Flash numbers and vLLM's log line", "[vllm_kv]") {
  const VllmKvConfig c = config(v41(), 1048576);
  // 60 GiB = 64424509440 B // 116928 = 550975 blocks; 550975 / 20004 = 27.5432...;
  // int(27.5432... x 1048576) = 28881181.
  const VllmKvNumbers n = vllm_kv_numbers({c}, 60 * kGiB);
  CHECK(n.fits);
  CHECK(n.num_blocks == 550975);
  CHECK(n.concurrency == Approx(550975.0 / 20004.0));
  CHECK(n.gpu_kv_cache_tokens == 28881181);
  CHECK(n.log_line ==
        "GPU KV cache size: 28,881,181 tokens, Maximum concurrency for 1,048,576 tokens per request: 27.54x");
  CHECK(n.error_message.empty());
}

TEST_CASE("vllm_kv: does not fit: vLLM's error and estimated maximum model length", "[vllm_kv]") {
  const VllmKvConfig c = config(v41(), 1048576);
  // Needed 116928 x 20004 = 2339027712 B = 2.18 GiB. Available 2 GiB; the check holds one null block back:
  // 2147483648 - 116928 = 2147366720 B = 2.00 GiB. Longest L: 116928 x blocks(L) <= 2147366720 ->
  // blocks <= 18364 = 3619 + cdiv(L, 64) + 1 -> cdiv(L, 64) <= 14744 -> L = 943616.
  const VllmKvNumbers n = vllm_kv_numbers({c}, 2 * kGiB);
  CHECK_FALSE(n.fits);
  CHECK(n.needed_bytes == 2339027712);
  CHECK(n.estimated_max_model_len == 943616);
  CHECK(n.error_message ==
        "To serve at least one request with the model's max seq len (1048576), (2.18 GiB KV cache is needed, "
        "which is larger than the available KV cache memory (2.00 GiB). Based on the available memory, the "
        "estimated maximum model length is 943616. Try increasing `gpu_memory_utilization` (which also "
        "controls CPU memory on the CPU backend) or decreasing `max_model_len` when initializing the engine. "
        "See https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details.");
  CHECK(n.log_line.empty());
  // Less than one block: nothing left after the null block.
  const VllmKvNumbers none = vllm_kv_numbers({c}, 100000);
  CHECK_FALSE(none.fits);
  CHECK(none.error_message.rfind("No available memory for the cache blocks.", 0) == 0);
  CHECK(none.estimated_max_model_len == 0);
  // Exactly enough: available = (blocks_per_request + 1) x bytes_per_block fits, one byte less does not.
  const std::int64_t just = (20004 + 1) * std::int64_t{116928};
  CHECK(vllm_kv_numbers({c}, just).fits);
  CHECK_FALSE(vllm_kv_numbers({c}, just - 1).fits);
}

TEST_CASE("vllm_kv: sync scheduling halves the sliding-window reserve", "[vllm_kv]") {
  VllmKvOptions sync;
  sync.async_scheduling = false;
  const VllmKvConfig c = config(v41(), 1048576, sync);
  // R = 8192: SWA cdiv(min(127 + 8192, L), 32) + 1 = 260 + 1 = 261; 7 x 261 + 16384 + 1 = 18212.
  CHECK(c.retained_tokens == 8192);
  CHECK(c.blocks_per_request == 18212);
  CHECK(c.bytes_per_block == 116928);
  // extra_retained_tokens adds to R: 16384 + 2 x 8192 = 32768 -> cdiv(32895, 32) + 1 = 1028 + 1 = 1029.
  VllmKvOptions extra;
  extra.extra_retained_tokens = 16384;
  CHECK(config(v41(), 1048576, extra).blocks_per_request == 7 * 1029 + 16384 + 1);
}

TEST_CASE("vllm_kv: a decoding request holds its window, not the start-up reserve", "[vllm_kv]") {
  const VllmKvConfig c = config(v41(), 1048576);
  CHECK(c.extra_retained_tokens == 0);
  CHECK(c.batches_in_flight == 2);
  // One token a step, 2 batches in flight: the SWA reserve is 2 x 1. At 100000 tokens: full
  // cdiv(100000, 64) = 1563; each of 7 SWA groups cdiv(min(127 + 2, 100000), 32) + 1 = 5 + 1 = 6;
  // ring 1: 1563 + 42 + 1 = 1606 (the start-up count: 1563 + 7 x 517 + 1 = 5183).
  CHECK(c.decode_request_blocks(100000, 1) == 1606);
  CHECK(c.request_blocks(100000) == 5183);
  // At 10 tokens: full 1; SWA cdiv(min(129, 10), 32) + 1 = 2 each; ring 1: 1 + 14 + 1 = 16.
  CHECK(c.decode_request_blocks(10, 1) == 16);
  // Three tokens a step (2 speculative): reserve 2 x 3 = 6, cdiv(133, 32) + 1 = 6 per SWA group.
  CHECK(c.decode_request_blocks(100002, 3) == 1563 + 42 + 1);
  // 64 tokens a step: reserve 128, cdiv(255, 32) + 1 = 9 per SWA group.
  CHECK(c.decode_request_blocks(100000, 64) == 1563 + 63 + 1);
  // Sync scheduling: one batch in flight, cdiv(128, 32) + 1 = 5 per SWA group.
  VllmKvOptions sync;
  sync.async_scheduling = false;
  CHECK(config(v41(), 1048576, sync).decode_request_blocks(100000, 1) == 1563 + 35 + 1);
  // The extra retained tokens of several draft modules add to the window: 127 + 4 + 2 = 133.
  VllmKvOptions extra;
  extra.extra_retained_tokens = 4;
  CHECK(config(v41(), 1048576, extra).decode_request_blocks(100000, 1) == 1563 + 42 + 1);
}

TEST_CASE("vllm_kv: speculative decoding registers the draft layers", "[vllm_kv]") {
  VllmKvOptions spec;
  spec.speculative_decoding = true;
  const VllmKvConfig c = config(v41(), 1048576, spec);
  // 3 DSpark draft layers add 3 SWA specs: 43 SWA -> cdiv(43, 6) = 8 groups; 8 x 517 + 16384 + 1 = 20521.
  auto n = count_what(c);
  CHECK(n["swa"] == 43);
  CHECK(c.specs.size() == 54);
  CHECK(c.groups.size() == 10);
  CHECK(c.bytes_per_block == 116928);
  CHECK(c.blocks_per_request == 20521);
  int drafts = 0;
  for (const auto& s : c.specs) drafts += s.draft ? 1 : 0;
  CHECK(drafts == 3);
}

TEST_CASE("vllm_kv: V4-Flash specs, groups and blocks per request", "[vllm_kv]") {
  const VllmKvConfig c = config(v40(), 1048576);
  // 43 layers: 0, 1 SWA only; 21 C4 (even 2..42) and 20 C128 (odd 3..41). The MTP layer is not registered.
  auto n = count_what(c);
  CHECK(n["swa"] == 43);
  CHECK(n["compressed"] == 41);
  CHECK(n["indexer"] == 21);
  CHECK(n["c4_state"] == 21);
  CHECK(n["c4_indexer_state"] == 21);
  CHECK(n["c128_state"] == 20);
  CHECK(c.specs.size() == 167);
  // Pages (alignment 576): SWA 64 x 584 = 37376 -> 37440; C4 compressed (256/4) 64 x 584 -> 37440;
  // C128 compressed 2 x 584 = 1168 -> 1728; C4 indexer 64 x 132 = 8448 -> 8640;
  // C4 attention state 4 tokens/block x 2*2*512*4 = 32768 -> 32832; C4 indexer state 4 x 2*2*128*4 = 8192
  // -> 8640; C128 state 8 x 2*1*512*4 = 32768 -> 32832.
  CHECK(pages_of(c, "swa") == std::vector<std::int64_t>{37440});
  CHECK(pages_of(c, "compressed") == std::vector<std::int64_t>{1728, 37440});
  CHECK(pages_of(c, "indexer") == std::vector<std::int64_t>{8640});
  CHECK(pages_of(c, "c4_state") == std::vector<std::int64_t>{round_up(4 * 2 * 2 * 512 * 4, 576)});
  CHECK(pages_of(c, "c4_indexer_state") == std::vector<std::int64_t>{round_up(4 * 2 * 2 * 128 * 4, 576)});
  CHECK(pages_of(c, "c128_state") == std::vector<std::int64_t>{round_up(8 * 2 * 1 * 512 * 4, 576)});
  for (const auto& s : c.specs) {
    if (s.what == "c4_state" || s.what == "c4_indexer_state") {
      CHECK(s.block_size == 4);
      CHECK(s.sliding_window == 8);
    }
    if (s.what == "c128_state") {
      CHECK(s.block_size == 8);
      CHECK(s.sliding_window == 128);
    }
    if (s.what == "compressed") CHECK(s.block_size == 256);
  }
  // Buckets: SWA 43 (balanced, 1 page); full b256 37440 x21, 1728 x20, 8640 x21 (not balanced);
  // C4 states b4 w8 32832 x21 + 8640 x21 (balanced, 2 pages: floor 21); C128 states 20 (balanced).
  // repeats = approximate gcd of {43, 21, 20} from 21: d = 22 pads 1 + 1 + 2 = 4 (d = 21: 20 + 0 + 1).
  // Groups: SWA cdiv(43, 22) = 2 (22 + 21), full 1, C4 states cdiv(21, 22) = 1, C128 1: 5 groups.
  REQUIRE(c.groups.size() == 5);
  // bytes: SWA 22 x 37440 = 823680; full 21 x 37440 + 20 x 1728 + 21 x 8640 = 1002240; C4 states
  // 21 x (32832 + 8640) = 870912; C128 20 x 32832 = 656640. bytes_per_block = 1002240.
  CHECK(c.bytes_per_block == 1002240);
  // Blocks at 1M, R = 16384: SWA cdiv(16511, 64) + 1 = 259 (x2 = 518); full 1048576 / 256 = 4096;
  // C4 states cdiv(min(7 + 16384, L), 4) + 1 = 4098 + 1 = 4099; C128 cdiv(127 + 16384, 8) + 1 = 2064 + 1 = 2065.
  // 518 + 4096 + 4099 + 2065 = 10778.
  CHECK(c.blocks_per_request == 10778);
  // At 65536: 518 + 256 + 4099 + 2065 = 6938.
  CHECK(config(v40(), 65536).blocks_per_request == 6938);
  // 60 GiB // 1002240 = 64280 blocks; 64280 / 10778 = 5.964...; int(x 1048576) = 6253708.
  const VllmKvNumbers num = vllm_kv_numbers({c}, 60 * kGiB);
  CHECK(num.num_blocks == 64280);
  CHECK(num.gpu_kv_cache_tokens == 6253708);
  CHECK(num.log_line ==
        "GPU KV cache size: 6,253,708 tokens, Maximum concurrency for 1,048,576 tokens per request: 5.96x");
  // With the MTP layer: 44 SWA, repeats from {44, 21, 20}: d = 22 pads 0 + 1 + 2 = 3 -> 2 SWA groups of 22.
  VllmKvOptions spec;
  spec.speculative_decoding = true;
  const VllmKvConfig d = config(v40(), 1048576, spec);
  CHECK(count_what(d)["swa"] == 44);
  CHECK(d.groups.size() == 5);
  CHECK(d.bytes_per_block == 1002240);
  CHECK(d.blocks_per_request == 10778);
}

TEST_CASE("vllm_kv: pipeline stages group globally, take the minimum num_blocks", "[vllm_kv]") {
  // PP 2 over 43 layers: stage 0 layers 0-21, stage 1 layers 22-42. Groups are the whole model's (5),
  // projected: stage 0 full group 10 x 37440 + 10 x 1728 + 10 x 8640 = 478080 (widest); stage 1 full group
  // 11 x 37440 + 10 x 1728 + 11 x 8640 = 524160. A request reserves every group's blocks on both: 10778.
  const VllmKvConfig s0 = config(v40(), 1048576, {}, 0, 2);
  const VllmKvConfig s1 = config(v40(), 1048576, {}, 1, 2);
  CHECK(s0.group_count() == 5);
  CHECK(s1.group_count() == 5);
  CHECK(s0.bytes_per_block == 478080);
  CHECK(s1.bytes_per_block == 524160);
  CHECK(s0.blocks_per_request == 10778);
  CHECK(s1.blocks_per_request == 10778);
  // 60 GiB: stage 0 134756 blocks, stage 1 122910: the minimum, 122910 / 10778 = 11.40x.
  const VllmKvNumbers n = vllm_kv_numbers({s0, s1}, 60 * kGiB);
  CHECK(n.num_blocks == 122910);
  CHECK(n.limiting_stage == 1);
  CHECK(n.gpu_kv_cache_tokens == 11957735);
  CHECK(n.log_line ==
        "GPU KV cache size: 11,957,735 tokens, Maximum concurrency for 1,048,576 tokens per request: 11.40x");
  // Stage 1 with fewer bytes available than stage 0 is still the limit.
  const VllmKvNumbers m = vllm_kv_numbers({s0, s1}, std::vector<std::int64_t>{60 * kGiB, 30 * kGiB});
  CHECK(m.num_blocks == (30 * kGiB) / 524160);
  CHECK(m.limiting_stage == 1);
}

TEST_CASE("vllm_kv: V3.2 one MLA spec and one indexer key per layer, one group", "[vllm_kv]") {
  const VllmKvConfig c = config(v32(), 163840);
  // 61 layers: fp8_ds_mla 64 x 656 = 41984 and indexer 64 x (128 + 4) = 8448, no padding; both full b64:
  // one uniform-type group of 61 x (41984 + 8448) = 3076352 B.
  auto n = count_what(c);
  CHECK(n["compressed"] == 61);
  CHECK(n["indexer"] == 61);
  CHECK(pages_of(c, "compressed") == std::vector<std::int64_t>{64 * 656});
  CHECK(pages_of(c, "indexer") == std::vector<std::int64_t>{64 * 132});
  REQUIRE(c.groups.size() == 1);
  CHECK(c.bytes_per_block == 3076352);
  // 163840 / 64 = 2560 blocks; 60 GiB // 3076352 = 20941; 20941 / 2560 = 8.18x; int(x 163840) = 1340224.
  CHECK(c.blocks_per_request == 2560);
  const VllmKvNumbers num = vllm_kv_numbers({c}, 60 * kGiB);
  CHECK(num.log_line ==
        "GPU KV cache size: 1,340,224 tokens, Maximum concurrency for 163,840 tokens per request: 8.18x");
}

TEST_CASE("vllm_kv: the stages of a pipeline share one grouping of the whole model", "[vllm_kv]") {
  for (const char* name : {"configs/deepseek-v4-flash.json", "configs/deepseek-v4.1-flash.json"}) {
    INFO(name);
    const auto cfg = mlaplan::load_config(std::string(MLAPLAN_SOURCE_DIR) + "/" + name);
    const auto topo = mlaplan::build_topology(cfg);
    mlaplan::LayoutOptions lo;
    lo.num_speculative_tokens = 1;
    mlaplan::VllmKvOptions ko;
    ko.speculative_decoding = true;
    const auto target = mlaplan::resolve_target({});
    const auto whole = mlaplan::vllm_kv_configs(
        cfg, topo, mlaplan::plan_layout(cfg, topo, target, lo, mlaplan::Strictness::lenient), ko);
    REQUIRE(whole.size() == 1);
    lo.pipeline_parallel_size = 4;
    const auto layout = mlaplan::plan_layout(cfg, topo, target, lo, mlaplan::Strictness::lenient);
    const auto all = mlaplan::vllm_kv_configs(cfg, topo, layout, ko);
    REQUIRE(all.size() == 4);
    std::size_t specs = 0;
    for (std::int64_t s = 0; s < 4; ++s) {
      const auto& a = all[static_cast<std::size_t>(s)];
      CHECK(a.stage == s);
      specs += a.specs.size();
      // Every stage keeps every group of the whole model (some without a layer here), so a request
      // reserves the same blocks on each; a stage lists the groups it has specs in, by index, each
      // holding only its own specs. The grouping itself is one object shared by the stages.
      REQUIRE(a.group_count() == whole[0].group_count());
      CHECK(a.all_groups == all[0].all_groups);
      CHECK(a.groups.size() <= a.group_count());
      CHECK(a.blocks_per_request == whole[0].blocks_per_request);
      CHECK(a.bytes_per_block <= whole[0].bytes_per_block);
      std::int64_t widest = 0;
      for (std::size_t k = 0; k < a.groups.size(); ++k) {
        const auto& g = a.groups[k];
        if (k > 0) CHECK(a.groups[k - 1].index < g.index);
        REQUIRE(a.group_on_stage(g.index) == &g);
        const auto* w = whole[0].group_on_stage(g.index);
        REQUIRE(w != nullptr);
        CHECK(g.kind == w->kind);
        CHECK(g.block_size == w->block_size);
        CHECK(!g.specs.empty());
        CHECK(g.specs.size() <= w->specs.size());
        for (auto i : g.specs) CHECK(i < a.specs.size());
        widest = std::max(widest, g.bytes);
      }
      CHECK(a.bytes_per_block >= widest);
      // vllm_kv_config of one stage is that stage of all of them.
      CHECK(mlaplan::vllm_kv_config(cfg, topo, layout, s, ko).bytes_per_block == a.bytes_per_block);
    }
    CHECK(specs == whole[0].specs.size());
    CHECK_THROWS_AS(mlaplan::vllm_kv_config(cfg, topo, layout, 4, ko), mlaplan::Error);
    CHECK_THROWS_AS(mlaplan::vllm_kv_config(cfg, topo, layout, -1, ko), mlaplan::Error);
  }
}

// vLLM v0.25.0's planner ("packed buckets", vllm/v1/core/kv_cache_utils.py; docs/fit.md section 4).

namespace {

// Case A of the project's notes ("vLLM versions", section 10): V4-Flash, TP 2 without EP, 2 x RTX PRO
// 6000 (SM120: the FlashInfer SM120 class, fp8_ds_mla 584 B rows; V4.0 keeps 256-token blocks there),
// --kv-cache-dtype fp8, --max-model-len 1048576, --max-num-batched-tokens 4096, MTP with 2
// speculative tokens (the draft layer registers its caches), async scheduling on.
Layout case_a_layout() {
  LayoutOptions o;
  o.kv_cache_dtype = "fp8";
  o.max_model_len = 1048576;
  o.in_flight_tokens = 4096;
  o.tensor_parallel_size = 2;
  o.num_speculative_tokens = 2;
  return plan_layout(v40().cfg, v40().topo, testing_rules::gpu("rtx-pro-6000"), o);
}

VllmKvOptions packed_buckets(std::int64_t max_num_batched_tokens = 8192, bool speculative = false) {
  VllmKvOptions o;
  o.generation = VllmKvGeneration::packed_buckets;
  o.max_num_batched_tokens = max_num_batched_tokens;
  o.speculative_decoding = speculative;
  return o;
}

VllmKvConfig case_a(VllmKvOptions o = packed_buckets(4096, true)) {
  const auto all = vllm_kv_configs(v40().cfg, v40().topo, case_a_layout(), o);
  REQUIRE(all.size() == 1);
  return all[0];
}

}  // namespace

TEST_CASE("vllm_kv: packed buckets (vLLM 0.25) group V4-Flash into layer tuples and pad the window pages",
          "[vllm_kv][packed_buckets]") {
  const VllmKvConfig c = case_a();
  CHECK(c.generation == VllmKvGeneration::packed_buckets);
  // 43 layers + the MTP layer (SWA only): 44 SWA, 41 compressed (21 C4 + 20 C128), 21 indexer,
  // 21 + 21 C4 states, 20 C128 states.
  auto n = count_what(c);
  CHECK(n["swa"] == 44);
  CHECK(n["compressed"] == 41);
  CHECK(n["indexer"] == 21);
  CHECK(n["c4_state"] == 21);
  CHECK(n["c4_indexer_state"] == 21);
  CHECK(n["c128_state"] == 20);
  // Group 0: every full spec, pages {37440 x 21 (C4: 64 states x 584 -> 576-aligned), 1728 x 20
  // (C128: 2 x 584 = 1168 -> 1728), 8640 x 21 (indexer 64 x 132 = 8448 -> 8640)}: 21 layer tuples.
  // Window buckets in first-seen order: SWA (64, 128) 44 tuples; C4 states (4, 8) 32832 x 21 +
  // 8640 x 21: 21; C128 states (8, 128) 32832 x 20: 20. num_layer_tuples = approximate gcd of
  // {21, 44, 21, 20} from 21: d = 21 pads 0 + 19 + 0 + 1 = 20, d = 22 pads 1 + 0 + 1 + 2 = 4,
  // d = 23 pads 2 + 2 + 2 + 3 = 9, larger d more: 22.
  // Window pages padded up to the nearest MLA page at or above: 32832 -> 37440, 8640 stays, SWA
  // 37440 stays. Groups: the full group, SWA cdiv(44, 22) = 2 groups of 22, C4 states
  // cdiv(21, 22) = 1, C128 states 1: 5.
  CHECK(pages_of(c, "swa") == std::vector<std::int64_t>{37440});
  CHECK(pages_of(c, "compressed") == std::vector<std::int64_t>{1728, 37440});
  CHECK(pages_of(c, "indexer") == std::vector<std::int64_t>{8640});
  CHECK(pages_of(c, "c4_state") == std::vector<std::int64_t>{37440});
  CHECK(pages_of(c, "c4_indexer_state") == std::vector<std::int64_t>{8640});
  CHECK(pages_of(c, "c128_state") == std::vector<std::int64_t>{37440});
  for (const auto& s : c.specs) {
    if (s.what == "c4_state" || s.what == "c128_state") CHECK(s.unpadded_page_bytes == 32768);
  }
  REQUIRE(c.groups.size() == 5);
  REQUIRE(c.group_count() == 5);
  CHECK(c.groups[0].kind == VllmSpecKind::full);
  CHECK(c.groups[0].specs.size() == 62);
  CHECK(c.groups[0].layer_tuples == 21);
  CHECK(c.groups[0].bytes == 21 * 37440 + 20 * 1728 + 21 * 8640);
  CHECK(c.groups[1].specs.size() == 22);
  CHECK(c.groups[2].specs.size() == 22);
  CHECK(c.groups[1].block_size == 64);
  CHECK(c.groups[3].specs.size() == 42);
  CHECK(c.groups[3].block_size == 4);
  CHECK(c.groups[3].layer_tuples == 21);
  CHECK(c.groups[4].specs.size() == 20);
  CHECK(c.groups[4].block_size == 8);
  // bytes_per_block: one slot per page size and index in a group, as many slots of a page as its
  // largest count in one group: 37440 x 22 + 1728 x 20 + 8640 x 21 = 823680 + 34560 + 181440 = 1039680
  // (no alignment rounding).
  CHECK(c.bytes_per_block == 1039680);
  CHECK(c.num_layer_tuples == 22);
  CHECK(c.layer_tuple_bytes == 37440 + 1728 + 8640);
  // R = max_num_batched_tokens = 4096 (async scheduling not counted). At L = 1048576: full 4096;
  // SWA cdiv(127 + 4096, 64) + 1 = 66 + 1 = 67 (x 2); C4 states cdiv(7 + 4096, 4) + 1 = 1026 + 1 = 1027;
  // C128 states cdiv(127 + 4096, 8) + 1 = 528 + 1 = 529. Pool blocks: 4096 + 134 + 1027 + 529 = 5786.
  CHECK(c.retained_tokens == 4096);
  CHECK(c.blocks_per_request == 5786);
  CHECK(c.request_blocks(1048576) == 5786);
  // The concurrency's divisor: cdiv(sum of blocks_g x pages_g, pages_0) with pages 1002240 (group 0),
  // 823680 (each SWA group), 21 x (37440 + 8640) = 967680, 20 x 37440 = 748800:
  // 4096 x 1002240 + 2 x 67 x 823680 + 1027 x 967680 + 529 x 748800 = 5605470720; / 1002240 =
  // 5592.94 -> 5593.
  CHECK(c.concurrency_blocks_per_request == 5593);
  CHECK(c.concurrency_blocks(1048576) == 5593);
  // The start-up check: 22 tuples x 47808 B x 5786 blocks = 6085575936 B.
  CHECK(c.needed_bytes(1048576) == 6085575936);
  CHECK(c.check_bytes(1000) == 1000);
}

TEST_CASE("vllm_kv: packed buckets reproduce case A's start-up log (vLLM v0.25.0, 10.29 GiB)",
          "[vllm_kv][packed_buckets]") {
  const VllmKvConfig c = case_a();
  // vLLM printed "Available KV cache memory: 10.29 GiB", i.e. [10.285, 10.295) GiB =
  // [11043434660, 11054172078] B. num_blocks = available // 1039680; int(num_blocks / 5593 x 1048576)
  // is 1,993,100 only for num_blocks = 10631, i.e. available in [10631 x 1039680, 10632 x 1039680) =
  // [11052838080, 11053877759] B = [10.29376, 10.29473) GiB, inside the printed range (10630 blocks give
  // 1,992,913 tokens, 10632 give 1,993,288).
  for (const std::int64_t available :
       {std::int64_t{11052838080}, std::int64_t{11053300000}, std::int64_t{11053877759}}) {
    INFO(available);
    const VllmKvNumbers n = vllm_kv_numbers({c}, available);
    CHECK(n.fits);
    CHECK(n.num_blocks == 10631);
    CHECK(n.concurrency == Approx(10631.0 / 5593.0));
    CHECK(n.gpu_kv_cache_tokens == 1993100);
    CHECK(n.log_line ==
          "GPU KV cache size: 1,993,100 tokens\nMaximum concurrency for 1,048,576 tokens per request: 1.90x");
    CHECK(n.estimated_max_model_len == 1048576);
    CHECK(n.error_message.empty());
  }
  CHECK(vllm_kv_numbers({c}, 11052838079).gpu_kv_cache_tokens == 1992913);
  CHECK(vllm_kv_numbers({c}, 11053877760).gpu_kv_cache_tokens == 1993288);
  // vLLM 0.30's planner on the same budget: 1002240 B per block, R = 2 x 4096: 4096 + 2 x 131 + 2051 + 1041 =
  // 7450 blocks per request; 11052838080 // 1002240 = 11028 blocks, 11028 / 7450 = 1.48x.
  VllmKvOptions g = packed_buckets(4096, true);
  g.generation = VllmKvGeneration::generic_packed;
  const VllmKvNumbers n30 = vllm_kv_numbers({case_a(g)}, 11052838080);
  CHECK(n30.num_blocks == 11028);
  CHECK(n30.log_line ==
        "GPU KV cache size: 1,552,173 tokens, Maximum concurrency for 1,048,576 tokens per request: 1.48x");
}

TEST_CASE("vllm_kv: packed buckets count neither async scheduling nor extra retained tokens in R",
          "[vllm_kv][packed_buckets]") {
  VllmKvOptions sync = packed_buckets(4096, true);
  sync.async_scheduling = false;
  VllmKvOptions extra = packed_buckets(4096, true);
  extra.extra_retained_tokens = 16384;
  for (const auto& o : {sync, extra}) {
    const VllmKvConfig c = case_a(o);
    CHECK(c.retained_tokens == 4096);
    CHECK(c.extra_retained_tokens == 0);
    CHECK(c.blocks_per_request == 5786);
    CHECK(c.concurrency_blocks_per_request == 5593);
  }
  // A decoding request holds its windows plus the batches in flight (2 with async scheduling):
  // at 100000 tokens, 3 a step: full cdiv(100000, 256) = 391; SWA cdiv(127 + 6, 64) + 1 = 4 (x 2);
  // C4 states cdiv(7 + 6, 4) + 1 = 5; C128 states cdiv(127 + 6, 8) + 1 = 18: 391 + 8 + 5 + 18 = 422.
  CHECK(case_a().decode_request_blocks(100000, 3) == 422);
}

TEST_CASE("vllm_kv: packed buckets check the available bytes with no null block held back",
          "[vllm_kv][packed_buckets]") {
  const VllmKvConfig c = case_a();
  // Needed 6085575936 B (5.67 GiB); exactly that fits, one byte less does not.
  CHECK(vllm_kv_numbers({c}, 6085575936).fits);
  CHECK_FALSE(vllm_kv_numbers({c}, 6085575935).fits);
  // 4 GiB: 22 x 47808 x blocks(L) <= 4294967296 -> blocks(L) <= 4083 = cdiv(L, 256) + 134 + 1027 + 529
  // -> cdiv(L, 256) <= 2393 -> L = 612608. The message names the available bytes, not less a block.
  const VllmKvNumbers n = vllm_kv_numbers({c}, 4 * kGiB);
  CHECK_FALSE(n.fits);
  CHECK(n.needed_bytes == 6085575936);
  CHECK(n.estimated_max_model_len == 612608);
  CHECK(n.error_message ==
        "To serve at least one request with the model's max seq len (1048576), (5.67 GiB KV cache is needed, "
        "which is larger than the available KV cache memory (4.00 GiB). Based on the available memory, the "
        "estimated maximum model length is 612608. Try increasing `gpu_memory_utilization` (which also "
        "controls CPU memory on the CPU backend) or decreasing `max_model_len` when initializing the engine. "
        "See https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details.");
  CHECK(n.log_line.empty());
  // Less than one block still passes the "no memory" test (available > 0) but not the check.
  const VllmKvNumbers small = vllm_kv_numbers({c}, 1000);
  CHECK_FALSE(small.fits);
  CHECK(small.estimated_max_model_len == 0);
  CHECK(small.error_message.rfind("To serve at least one request", 0) == 0);
  CHECK(vllm_kv_numbers({c}, 0).error_message.rfind("No available memory for the cache blocks.", 0) == 0);
}

TEST_CASE("vllm_kv: packed buckets over pipeline stages: each stage's own pages and log lines",
          "[vllm_kv][packed_buckets]") {
  // V4-Flash on H200 (FlashMLA: the same pages as case A), PP 2: stage 0 layers 0-21, stage 1 22-42,
  // no MTP, R = 8192. Global grouping: tuples {21, 43, 21, 20} from 21 -> d = 22 (pads 1 + 1 + 1 + 2);
  // SWA cdiv(43, 22) = 2 groups: layers 0, 2, .., 42 (22) and 1, 3, .., 41 (21).
  const VllmKvConfig s0 = config(v40(), 1048576, packed_buckets(), 0, 2);
  const VllmKvConfig s1 = config(v40(), 1048576, packed_buckets(), 1, 2);
  REQUIRE(s0.group_count() == 5);
  // Stage 0: full 10 x 37440 + 10 x 1728 + 10 x 8640 = 478080; SWA 11 + 11 layers; C4 states 10 tuples
  // (460800); C128 10 (374400). Slots: 37440 x max(10, 11, 11, 10, 10) + 1728 x 10 + 8640 x 10 = 515520.
  // Stage 1: full 11 x 37440 + 10 x 1728 + 11 x 8640 = 524160; SWA 11 + 10; C4 states 11 (506880);
  // C128 10. Slots: 37440 x 11 + 1728 x 10 + 8640 x 11 = 524160.
  CHECK(s0.bytes_per_block == 515520);
  CHECK(s1.bytes_per_block == 524160);
  CHECK(s0.num_layer_tuples == 11);
  CHECK(s1.num_layer_tuples == 11);
  CHECK(s0.layer_tuple_bytes == 47808);
  // Blocks at 1M, R = 8192: full 4096, SWA cdiv(8319, 64) + 1 = 131, C4 states cdiv(8199, 4) + 1 = 2051,
  // C128 cdiv(8319, 8) + 1 = 1041: pool 4096 + 262 + 2051 + 1041 = 7450 on both stages.
  CHECK(s0.blocks_per_request == 7450);
  CHECK(s1.blocks_per_request == 7450);
  // Concurrency divisors: stage 0 (4096 x 478080 + 131 x 2 x 411840 + 2051 x 460800 + 1041 x 374400) /
  // 478080 = 3400968960 / 478080 -> 7114; stage 1 (4096 x 524160 + 131 x (411840 + 374400) +
  // 2051 x 506880 + 1041 x 374400) / 524160 = 3679318080 / 524160 -> 7020.
  CHECK(s0.concurrency_blocks_per_request == 7114);
  CHECK(s1.concurrency_blocks_per_request == 7020);
  // 60 GiB: stage 0 124969 blocks, stage 1 122910 (the minimum). Stage 0 logs 122910 / 7114 = 17.28x,
  // int(x 1048576) = 18116457; stage 1 17.51x, 18359042: v0.25.0 logs each worker's lines once.
  const VllmKvNumbers n = vllm_kv_numbers({s0, s1}, 60 * kGiB);
  CHECK(n.num_blocks == 122910);
  CHECK(n.limiting_stage == 1);
  CHECK(n.gpu_kv_cache_tokens == 18116457);
  CHECK(n.log_line ==
        "GPU KV cache size: 18,116,457 tokens\nMaximum concurrency for 1,048,576 tokens per request: 17.28x\n"
        "GPU KV cache size: 18,359,042 tokens\nMaximum concurrency for 1,048,576 tokens per request: 17.51x");
  // The check per stage: 11 x 47808 x 7450 = 3917865600 B on both.
  CHECK(s0.needed_bytes(1048576) == 3917865600);
  CHECK(s1.needed_bytes(1048576) == 3917865600);
}

TEST_CASE("vllm_kv: packed buckets of V3.2 (one group), V4.1 and DCP with windows (not in vLLM 0.25)",
          "[vllm_kv][packed_buckets]") {
  // V3.2: one uniform-type group of 61 x (41984 + 8448) = 3076352 B per block; 2560 blocks per request,
  // the concurrency's divisor cdiv(2560 x P, P) = 2560; needed 2560 x 3076352 = 7875461120 B against the
  // available bytes.
  const VllmKvConfig c = config(v32(), 163840, packed_buckets());
  REQUIRE(c.groups.size() == 1);
  CHECK(c.bytes_per_block == 3076352);
  CHECK(c.blocks_per_request == 2560);
  CHECK(c.concurrency_blocks_per_request == 2560);
  CHECK(c.needed_bytes(163840) == 7875461120);
  CHECK(vllm_kv_numbers({c}, 7875461120).fits);
  CHECK_FALSE(vllm_kv_numbers({c}, 7875461119).fits);
  // 60 GiB // 3076352 = 20941; 20941 / 2560 = 8.18x; int(x 163840) = 1340224.
  CHECK(vllm_kv_numbers({c}, 60 * kGiB).log_line ==
        "GPU KV cache size: 1,340,224 tokens\nMaximum concurrency for 163,840 tokens per request: 8.18x");
  // V4.1's compressor rings have no spec in v0.25.0.
  CHECK_THROWS_AS(config(v41(), 1048576, packed_buckets()), mlaplan::Error);
  // Nor does v0.25.0 take decode context parallelism with sliding windows ("DCP not support sliding window.").
  VllmKvOptions dcp = packed_buckets();
  dcp.decode_context_parallel_size = 2;
  CHECK_THROWS_AS(config(v40(), 1048576, dcp), mlaplan::Error);
  CHECK(config(v32(), 163840, dcp).groups.size() == 1);
  CHECK(to_string(VllmKvGeneration::packed_buckets) == "packed_buckets");
  CHECK(std::string(vllm_kv_planner_name(VllmKvGeneration::generic_packed)) == kVllmKvPlannerName);
}
