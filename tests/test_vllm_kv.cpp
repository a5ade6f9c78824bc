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
