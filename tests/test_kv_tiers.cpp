#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "mlaplan/model/config.hpp"
#include "mlaplan/base/error.hpp"
#include "mlaplan/engine/vllm/kv_tiers.hpp"
#include "mlaplan/cache/layout.hpp"
#include "mlaplan/plan/plan.hpp"
#include "mlaplan/hardware/target.hpp"
#include "mlaplan/model/topology.hpp"
#include "mlaplan/engine/vllm/vllm_kv.hpp"
#include "rule_testing.hpp"

using namespace mlaplan;

// Expected values are worked by hand in the comments from the groups vLLM 0.30's planner makes
// (tests/test_vllm_kv.cpp pins those) and the rules of docs/prefix-cache.md and docs/offload.md,
// not by calling the code under test.

namespace {

constexpr std::int64_t kMiB1 = 1048576;

using testing_rules::Model;
using testing_rules::model;
using testing_rules::v32;
using testing_rules::v40;
using testing_rules::v41;

std::vector<VllmKvConfig> stages(const Model& m, std::int64_t spec_tokens = 0, std::int64_t tp = 8,
                                 std::int64_t dcp = 1) {
  TargetRequest r;
  r.gpu = "h200";
  LayoutOptions o;
  o.max_model_len = std::min(kMiB1, m.cfg.max_position_embeddings);
  o.tensor_parallel_size = tp;
  o.num_speculative_tokens = spec_tokens;
  const Layout L = plan_layout(m.cfg, m.topo, resolve_target(r), o);
  VllmKvOptions ko;
  ko.speculative_decoding = spec_tokens > 0;
  ko.decode_context_parallel_size = dcp;
  return vllm_kv_configs(m.cfg, m.topo, L, ko);
}

PrefixCachePlan prefix(const Model& m, std::int64_t spec_tokens = 0, std::int64_t retention = 0) {
  PrefixCacheOptions o;
  o.speculative = spec_tokens > 0;
  o.num_speculative_tokens = spec_tokens;
  o.multi_module_draft = spec_tokens > 0 && m.cfg.num_draft_layers > 1;
  o.retention_interval = retention;
  return plan_prefix_cache(stages(m, spec_tokens), o);
}

}  // namespace

TEST_CASE("kv_tiers: the hit rule on the vllm-ascend threads' own numbers", "[kv_tiers]") {
  // vllm-ascend issue 16270 (block 32): "scheduler_block_size = LCM(128, 4096, 32, 2, 8) = 4096",
  // and "round_down(2048, 4096) = 0": a 2,048-token prompt never hits.
  const std::vector<PrefixGroupBlock> b32 = {{128}, {4096}, {32}, {2}, {8}};
  const PrefixHitRule r = prefix_hit_rule(b32, false);
  CHECK(r.scheduler_block_size == 4096);
  CHECK(r.min_hit_tokens == 4096);
  CHECK(r.min_hit_prompt_len == 4097);  // the lookup stops one token short of the prompt
  CHECK(prefix_hit_tokens(r, 2048) == 0);
  CHECK(prefix_hit_tokens(r, 4096) == 0);
  CHECK(prefix_hit_tokens(r, 4097) == 4096);
  CHECK(r.hash_block_size == 2);  // gcd(128, 4096, 32, 2, 8)

  // vllm-ascend issue 10710: block 128 with ratio 128 is a 16,384-token group: "a minimum prefix
  // cache hit length of 16k ... 32k when speculative decoding is enabled"; block 32: 4k and 8k.
  // With no group marked as the draft's, every group drops its block: the largest, 16,384.
  const std::vector<PrefixGroupBlock> b128 = {{128}, {128 * 128}, {128 * 4}, {2}, {8}};
  CHECK(prefix_hit_rule(b128, false).min_hit_tokens == 16384);
  const PrefixHitRule s128 = prefix_hit_rule(b128, true);
  CHECK(s128.eagle_drop_tokens == 16384);
  CHECK(s128.min_hit_tokens + s128.eagle_drop_tokens == 32768);
  CHECK(s128.min_hit_prompt_len == 32769);
  const PrefixHitRule s32 = prefix_hit_rule({{32}, {32 * 128}, {32 * 4}, {2}, {8}}, true);
  CHECK(s32.min_hit_tokens == 4096);
  CHECK(s32.min_hit_tokens + s32.eagle_drop_tokens == 8192);

  // A group that is not prefix-cacheable (the V4.1 ring) sets the scheduler block but neither the
  // hash block nor the drop.
  const PrefixHitRule ring = prefix_hit_rule({{32, true, true}, {64}, {8, false, true}}, true);
  CHECK(ring.scheduler_block_size == 64);
  CHECK(ring.hash_block_size == 32);
  CHECK(ring.eagle_drop_tokens == 32);
  CHECK(ring.min_hit_prompt_len == 97);
}

TEST_CASE("kv_tiers: prefix cache of V4.1-Flash at TP8 on H200", "[kv_tiers]") {
  // 9 groups: 7 sliding windows of block 32 (window 128), the full group of block 64 (compressed +
  // indexer of the 4 KV sources), the ring group of block 8. S = lcm(32, 64, 8) = 64.
  const PrefixCachePlan p = prefix(v41());
  REQUIRE(p.groups.size() == 9);
  CHECK(p.rule.scheduler_block_size == 64);
  CHECK(p.rule.hash_block_size == 32);
  CHECK(p.rule.eagle_drop_tokens == 0);
  CHECK(p.rule.min_hit_prompt_len == 65);
  CHECK(p.refusals.empty());
  CHECK_FALSE(p.groups[8].cacheable);  // the ring
  CHECK(p.groups[0].hit_blocks == 4);  // cdiv(128 - 1, 32)
  // Retention 0: the full group caches 1,048,576 / 64 = 16,384 blocks; each window group only the 4
  // blocks before the replay boundary (1,048,575 rounded down to 64 = 1,048,512 = block 32,766):
  // 16,384 + 7 x 4 = 16,412 blocks, x 116,928 B per block.
  CHECK(p.groups[7].cached_blocks == 16384);
  CHECK(p.groups[0].cached_blocks == 4);
  CHECK(p.cached_blocks_per_prompt == 16412);
  CHECK(p.cached_bytes_per_prompt == 16412LL * 116928);
  // Dense retention keeps every window block: 2 per 64-token segment and a hit needs 4, so all
  // 32,768 of each window group: 16,384 + 7 x 32,768.
  CHECK(p.dense_cached_blocks_per_prompt == 16384 + 7 * 32768);

  // Every 4,096 tokens: 32,768 / 128 = 256 segments of 4 tail blocks; the replay boundary's blocks
  // 32,762-32,765 add the two (32,762, 32,763) not already in a segment tail: 1,026 per window group.
  const PrefixCachePlan r4k = prefix(v41(), 0, 4096);
  CHECK(r4k.refusals.empty());
  CHECK(r4k.groups[0].cached_blocks == 1026);
  CHECK(r4k.cached_blocks_per_prompt == 16384 + 7 * 1026);
  // An interval vLLM refuses: not a multiple of the scheduler block.
  const PrefixCachePlan bad = prefix(v41(), 0, 100);
  REQUIRE(bad.refusals.size() == 1);
  CHECK(bad.refusals[0] ==
        "prefix_cache_retention_interval (100) must be non-negative and a multiple of scheduler_block_size (64).");

  // DSpark drafts (3 layers, sliding window only) sit in block-32 groups: they match 32 tokens past
  // the hit and drop them, so 64 + 32 + 1.
  const PrefixCachePlan s = prefix(v41(), 3);
  CHECK(s.rule.eagle_drop_tokens == 32);
  CHECK(s.rule.min_hit_prompt_len == 97);
  CHECK(prefix_hit_tokens(s.rule, 96) == 0);
  CHECK(prefix_hit_tokens(s.rule, 97) == 64);
}

TEST_CASE("kv_tiers: prefix cache of V4.0-Flash and V3.2", "[kv_tiers]") {
  // V4.0: windows of block 64, the full group of block 256, compressor states of block 4 and 8.
  const PrefixCachePlan v4 = prefix(v40());
  CHECK(v4.rule.scheduler_block_size == 256);
  CHECK(v4.rule.hash_block_size == 4);
  CHECK(v4.rule.min_hit_prompt_len == 257);
  // The MTP layer's window sits in a block-64 group: 256 + 64 + 1.
  CHECK(prefix(v40(), 1).rule.min_hit_prompt_len == 321);
  // V3.2: one group of block 64 (the unitary coordinator): 65, and 129 with MTP (the drop doubles it).
  const PrefixCachePlan v3 = prefix(v32());
  REQUIRE(v3.groups.size() == 1);
  CHECK(v3.rule.min_hit_prompt_len == 65);
  CHECK(prefix(v32(), 1).rule.min_hit_prompt_len == 129);
  // No window group: a retention interval other than 0 is refused.
  CHECK(prefix(v32(), 0, 64).refusals.size() == 1);
  CHECK(prefix(v32(), 0, 0).refusals.empty());
}

TEST_CASE("kv_tiers: host offload of V4.1-Flash reproduces vLLM issue 56871", "[kv_tiers]") {
  // tokens_per_hash = gcd of the prefix-cacheable groups (32, 64) = 32; the ring group's 8-token
  // block does not divide by it: the connector's assertion, on group 8 of 9.
  const HostOffloadPlan h = plan_host_offload(stages(v41()), 8, 100.0);
  CHECK(h.workers == 8);
  CHECK(h.tokens_per_hash == 32);
  REQUIRE(h.refused_group);
  CHECK(*h.refused_group == 8);
  CHECK(h.groups.size() == 9);
  CHECK(h.refusal ==
        "tokens_per_block=8 not divisible by tokens_per_hash=32. Hybrid models (e.g. Mamba+Attention) need "
        "--enable-prefix-caching to align block sizes.");
  // One host block: 116,928 B per GPU block x 8 workers = 935,424 B; 100 GiB hold
  // 107,374,182,400 // 935,424 = 114,786 of them: 114,786 x 64 tokens of the one full group.
  CHECK(h.slot_bytes == 935424);
  CHECK(*h.budget_bytes == 107374182400LL);
  CHECK(*h.host_slots == 114786);
  CHECK(*h.tokens_held == 114786LL * 64);
  // A request of 1,048,576 tokens: 16,384 full blocks + 4 window blocks in each of the 7 windows.
  CHECK(h.request_slots == 16384 + 7 * 4);
  CHECK(*h.requests_held == 114786 / 16412);
  // Unpadded bytes moved per token: the full group's unpadded pages (compressed + indexer of the
  // KV sources) over its 64 tokens, on every one of the 8 TP ranks (each holds the whole cache).
  std::int64_t unpadded = 0;
  const std::vector<VllmKvConfig> st = stages(v41());
  for (const auto& s : st.front().specs) {
    if (s.what == "compressed" || s.what == "indexer") unpadded += s.unpadded_page_bytes;
  }
  CHECK(h.groups[7].unpadded_block_bytes == unpadded * 8);
  CHECK(h.bytes_per_token == Approx(static_cast<double>(unpadded * 8) / 64.0));
  CHECK(h.groups[8].request_bytes == 0);  // the ring is never offloaded
}

TEST_CASE("kv_tiers: host offload of V4.0-Flash and V3.2 start the connector", "[kv_tiers]") {
  const HostOffloadPlan v4 = plan_host_offload(stages(v40()), 8, std::nullopt);
  CHECK(v4.refusal.empty());
  CHECK(v4.tokens_per_hash == 4);
  CHECK_FALSE(v4.host_slots);  // no budget: no capacity, not 0
  CHECK_FALSE(v4.tokens_held);
  // V3.2: one group: tokens_per_hash is its block.
  const HostOffloadPlan v3 = plan_host_offload(stages(v32()), 8, 1.0);
  CHECK(v3.tokens_per_hash == 64);
  CHECK(v3.refusal.empty());
  CHECK(*v3.host_slots == 1073741824LL / (v3.slot_bytes));
  CHECK(*v3.tokens_held == *v3.host_slots * 64);
  // Out of range sizes are the flag's error.
  CHECK_THROWS_AS(plan_host_offload(stages(v32()), 8, 0.0), Error);
}

TEST_CASE("kv_tiers: plan findings and check guards", "[kv_tiers]") {
  PlanRequest req;
  req.target.gpu = "h200";
  req.layout.tensor_parallel_size = 8;
  req.schedules = false;
  req.suggestions = false;
  const std::string path = std::string(MLAPLAN_SOURCE_DIR) + "/configs/deepseek-v4.1-flash.json";
  {
    PlanRequest r = req;
    r.guards.prefix_hit_prompt_len = 64;
    const Plan p = make_plan(path, r);
    CHECK(p.exit_code == 4);
    const auto it =
        std::find_if(p.findings.begin(), p.findings.end(), [](const Finding& f) { return f.id == "guard.prefix_hit"; });
    REQUIRE(it != p.findings.end());
    CHECK(it->message.find("the shortest that can is 65 tokens") != std::string::npos);
  }
  {
    PlanRequest r = req;
    r.guards.prefix_hit_prompt_len = 65;
    CHECK(make_plan(path, r).exit_code == 0);
  }
  {
    PlanRequest r = req;
    r.deploy.kv_offloading_size_gib = 100.0;
    const Plan p = make_plan(path, r);
    CHECK(p.exit_code == 3);
    CHECK(std::any_of(p.findings.begin(), p.findings.end(),
                      [](const Finding& f) { return f.id == "offload.hash_block"; }));
  }
  {
    PlanRequest r = req;
    r.guards.min_offload_tokens = 1000;  // no --kv-offloading-size: cannot be checked
    const Plan p = make_plan(path, r);
    CHECK(p.exit_code == 4);
  }
  {
    PlanRequest r = req;
    r.deploy.prefix_cache_retention_interval = 100;
    const Plan p = make_plan(path, r);
    CHECK(p.exit_code == 3);
    CHECK(std::any_of(p.findings.begin(), p.findings.end(),
                      [](const Finding& f) { return f.id == "prefix_cache.refused"; }));
  }
}

TEST_CASE("kv_tiers: decode context parallelism widens the blocks (V3.2, DCP 2)", "[kv_tiers]") {
  // resolve_kv_cache_block_sizes: one group's block x DCP = 128 tokens; a hit needs 129.
  const PrefixCachePlan p = plan_prefix_cache(stages(v32(), 0, 8, 2), PrefixCacheOptions{});
  CHECK(p.rule.scheduler_block_size == 128);
  CHECK(p.rule.min_hit_prompt_len == 129);
  // Each DCP rank's block covers 128 tokens: half the bytes per token of DCP 1 on the same 8 workers.
  const HostOffloadPlan one = plan_host_offload(stages(v32(), 0, 8, 1), 8, std::nullopt);
  const HostOffloadPlan two = plan_host_offload(stages(v32(), 0, 8, 2), 8, std::nullopt);
  CHECK(two.tokens_per_hash == 128);
  CHECK(two.bytes_per_token == Approx(one.bytes_per_token / 2));
}
