// Decode batches and the per-layer-type tile-scheduler plans of a config.

#include <catch2/catch.hpp>
#include <string>

#include "mlaplan/cache/decode.hpp"
#include "mlaplan/base/error.hpp"

using namespace mlaplan;

namespace {

struct Planned {
  ModelConfig cfg;
  Topology topo;
  Layout layout;
};

Planned planned(const std::string& name, const std::string& gpu_id = "h200", std::int64_t tp = 1) {
  Planned p;
  p.cfg = load_config(std::string(MLAPLAN_SOURCE_DIR) + "/configs/" + name);
  p.topo = build_topology(p.cfg);
  TargetRequest r;
  r.gpu = gpu_id;
  LayoutOptions o;
  o.tensor_parallel_size = tp;
  p.layout = plan_layout(p.cfg, p.topo, resolve_target(r), o);
  return p;
}

std::string usage_message(const BatchOptions& o, std::int64_t mml) {
  try {
    make_decode_batch(o, mml);
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::usage);
    return e.what();
  }
  FAIL("accepted");
  return {};
}

}  // namespace

TEST_CASE("decode batches", "[decode]") {
  SECTION("default") {
    const auto b = make_decode_batch({}, 1 << 20);
    CHECK(b.defaulted);
    CHECK(b.context_lens.size() == 64);
    CHECK(b.positions.front() == 4095);
    CHECK(b.description == "64 requests x 4,096 tokens (b = 64 decode tokens), the default batch");
  }
  SECTION("default capped by max_model_len") {
    const auto b = make_decode_batch({}, 100);
    CHECK(b.context_lens.front() == 100);
  }
  SECTION("speculative tokens at consecutive positions") {
    BatchOptions o;
    o.context_lens = {10, 300};
    o.spec_tokens = 2;
    const auto b = make_decode_batch(o, 1000);
    CHECK(b.positions == std::vector<std::int64_t>{9, 10, 11, 299, 300, 301});
  }
  SECTION("rejections") {
    BatchOptions o;
    o.batch = 0;
    CHECK(usage_message(o, 100) == "--batch: '0' is out of range; allowed 1..65536");
    o = {};
    o.context_len = 101;
    CHECK(usage_message(o, 100) == "--context-len: '101' is out of range; allowed 1..100 (max_model_len 100)");
    o = {};
    o.context_lens = {5, 0};
    CHECK(usage_message(o, 100) == "--context-lens[1]: '0' is out of range; allowed 1..100 (max_model_len 100)");
    o = {};
    o.context_lens = {99};
    o.spec_tokens = 3;
    CHECK(usage_message(o, 100) ==
          "--context-lens[0]: '99' is out of range; allowed 1..97 (max_model_len 100 minus 3 speculative tokens)");
    o = {};
    o.spec_tokens = 65;
    CHECK(usage_message(o, 100) == "--spec-tokens: '65' is out of range; allowed 0..64");
    o = {};
    o.batch = 2;
    o.context_lens = {3};
    CHECK(usage_message(o, 100) ==
          "--context-lens lists every request; it cannot be combined with --batch or --context-len");
  }
}

TEST_CASE("V4.1-Flash plans on H200: one per layer type, vLLM's inputs", "[decode]") {
  const auto p = planned("deepseek-v4.1-flash.json");
  BatchOptions o;
  o.context_lens = {1, 100, 129, 5000};
  const auto batch = make_decode_batch(o, p.layout.max_model_len);
  const auto s = plan_decode_schedules(p.cfg, p.topo, p.layout, batch);
  REQUIRE(s.size() == 3);
  CHECK(s[0].type == LayerType::c1a);
  CHECK(s[1].type == LayerType::c2a);
  CHECK(s[2].type == LayerType::swaonly);
  for (const auto& x : s) {
    CHECK(x.input.kernel == SchedKernel::sm90_sparse);
    CHECK(x.input.h_q == 64);
    CHECK(x.input.num_sms == 132);
    CHECK(x.topk == 128);
    CHECK(x.page_block_size == 32);
    CHECK(x.input.lengths == std::vector<std::int32_t>{1, 100, 128, 128});
    CHECK(x.plan.params.num_sm_parts == 132);
  }
  CHECK(s[0].num_layers == 20);
  CHECK(s[0].extra_topk == 512);
  CHECK(s[0].extra_page_block_size == 64);
  CHECK(s[0].input.extra_lengths == std::vector<std::int32_t>{1, 100, 129, 512});
  CHECK(s[1].extra_page_block_size == 32);
  CHECK(s[1].input.extra_lengths == std::vector<std::int32_t>{0, 50, 64, 512});
  CHECK_FALSE(s[2].input.has_extra);
  CHECK(s[2].num_layers == 5);
}

TEST_CASE("the kernel follows the target", "[decode]") {
  CHECK(decode_kernel_for({9, 0}, 64) == SchedKernel::sm90_sparse);
  CHECK(decode_kernel_for({10, 0}, 64) == SchedKernel::sm100_head64);
  CHECK(decode_kernel_for({10, 3}, 128) == SchedKernel::sm100_head128);
  CHECK_FALSE(decode_kernel_for({8, 0}, 64));
  CHECK_FALSE(decode_kernel_for({9, 0}, 96));
  const auto p = planned("deepseek-v4.1-flash.json", "b200");
  const auto s = plan_decode_schedules(p.cfg, p.topo, p.layout, make_decode_batch({}, p.layout.max_model_len));
  REQUIRE_FALSE(s.empty());
  CHECK(s[0].input.kernel == SchedKernel::sm100_head64);
  CHECK(s[0].extra_page_block_size == 128);  // B = 128 on SM100, ratio 1
  CHECK(s[0].input.num_sms == 148);
}

TEST_CASE("V4-Flash c128a and V3.2 dsa inputs", "[decode]") {
  const auto v4 = planned("deepseek-v4-flash.json");
  BatchOptions o;
  o.context_lens = {127, 128, 100000};
  const auto s = plan_decode_schedules(v4.cfg, v4.topo, v4.layout, make_decode_batch(o, v4.layout.max_model_len));
  REQUIRE(s.size() == 3);
  CHECK(s[0].type == LayerType::c128a);
  CHECK(s[0].extra_topk == 8192);  // round_up(cdiv(1048576, 128), 128)
  CHECK(s[0].extra_page_block_size == 2);
  CHECK(s[0].input.extra_lengths == std::vector<std::int32_t>{0, 1, 781});
  CHECK(s[1].type == LayerType::c4a);
  CHECK(s[1].extra_page_block_size == 64);
  CHECK(s[1].input.extra_lengths == std::vector<std::int32_t>{31, 32, 512});
  CHECK(s[1].page_block_size == 64);

  const auto v32 = planned("deepseek-v3.2.json", "h200", 1);
  const auto d = plan_decode_schedules(v32.cfg, v32.topo, v32.layout, make_decode_batch({}, v32.layout.max_model_len));
  REQUIRE(d.size() == 1);
  CHECK(d[0].type == LayerType::dsa);
  CHECK(d[0].input.h_q == 128);
  CHECK(d[0].plan.params.num_sm_parts == 66);
  CHECK(d[0].topk == 2048);
  CHECK(d[0].input.lengths.front() == 2048);
}

TEST_CASE("decode mode: split, cluster or one pass by CTAs when a request is at most 640 rows", "[decode]") {
  using mlaplan::decode_plan_mode;
  using mlaplan::DecodeMode;
  // V4.1 shape: 128 + 512 rows = 10 blocks. Clusters of 2 CTAs (5 blocks each) from
  // 6 x ctas x 10 >= 5 x 132 x 5 (ctas >= 55) while 2 x ctas <= 132; clusters of 4 (3 blocks each)
  // would need ctas >= 33 but only 30 fit; one pass from ctas x 10 >= 132 x (10 - 5) (ctas >= 66, so
  // from 67 after the clusters; fp32 partials, measured on the H100: perf-history.md "v14").
  CHECK(decode_plan_mode(1, 1, 64, 128, true, 512, 132) == DecodeMode::split_kv);
  CHECK(decode_plan_mode(20, 1, 64, 128, true, 512, 132) == DecodeMode::split_kv);
  CHECK(decode_plan_mode(30, 1, 64, 128, true, 512, 132) == DecodeMode::split_kv);
  CHECK(decode_plan_mode(32, 1, 64, 128, true, 512, 132) == DecodeMode::split_kv);
  CHECK(decode_plan_mode(54, 1, 64, 128, true, 512, 132) == DecodeMode::split_kv);
  CHECK(decode_plan_mode(55, 1, 64, 128, true, 512, 132) == DecodeMode::cluster_split);
  CHECK(decode_plan_mode(66, 1, 64, 128, true, 512, 132) == DecodeMode::cluster_split);
  CHECK(decode_plan_mode(67, 1, 64, 128, true, 512, 132) == DecodeMode::one_pass);
  CHECK(decode_plan_mode(92, 1, 64, 128, true, 512, 132) == DecodeMode::one_pass);
  CHECK(decode_plan_mode(93, 1, 64, 128, true, 512, 132) == DecodeMode::one_pass);
  CHECK(decode_plan_mode(27, 1, 128, 128, true, 512, 132) == DecodeMode::split_kv);
  CHECK(decode_plan_mode(28, 1, 128, 128, true, 512, 132) == DecodeMode::cluster_split);
  CHECK(decode_plan_mode(33, 1, 128, 128, true, 512, 132) == DecodeMode::cluster_split);
  CHECK(decode_plan_mode(34, 1, 128, 128, true, 512, 132) == DecodeMode::one_pass);
  CHECK(decode_plan_mode(46, 1, 128, 128, true, 512, 132) == DecodeMode::one_pass);
  CHECK(decode_plan_mode(47, 1, 128, 128, true, 512, 132) == DecodeMode::one_pass);
  CHECK(mlaplan::choose_decode_mode(60, 1, 64, 128, true, 512, 132).cluster_ctas == 2);
  CHECK(mlaplan::choose_decode_mode(67, 1, 64, 128, true, 512, 132).cluster_ctas == 1);
  CHECK(mlaplan::cluster_split_ctas(60, 10, 264) == 4);  // 264 SMs hold 60 clusters of 4
  CHECK(mlaplan::resident_clusters(132, 1) == 132);
  CHECK(mlaplan::resident_clusters(132, 2) == 66);
  CHECK(mlaplan::resident_clusters(132, 4) == 30);
  CHECK(mlaplan::resident_clusters(132, 8) == 15);
  CHECK(mlaplan::resident_clusters(114, 4) == 25);  // scaled by the SMs: an estimate
  CHECK_THROWS_AS(mlaplan::resident_clusters(0, 4), mlaplan::Error);
  // 30 clusters of 4 fit the H200's GPCs (not 33); 66 of 2.
  CHECK(mlaplan::cluster_split_ctas(30, 10, 132) == 4);
  CHECK(mlaplan::cluster_split_ctas(31, 10, 132) == 2);
  CHECK(mlaplan::cluster_split_ctas(33, 10, 132) == 2);
  CHECK(mlaplan::cluster_split_ctas(34, 10, 132) == 2);
  CHECK(mlaplan::cluster_split_ctas(66, 10, 132) == 2);
  CHECK(mlaplan::cluster_split_ctas(67, 10, 132) == 1);
  CHECK(mlaplan::cluster_split_ctas(1, 3, 132) == 2);  // at most the request's blocks
  CHECK(mlaplan::cluster_split_ctas(1, 1, 132) == 1);
  // Two blocks (the window alone): a cluster would save one block only, and split-KV's fixed cost
  // is more than a block: one pass at any batch.
  CHECK(decode_plan_mode(1, 1, 64, 128, false, 0, 132) == DecodeMode::one_pass);
  CHECK(decode_plan_mode(33, 1, 64, 128, false, 0, 132) == DecodeMode::one_pass);
  // Five blocks (window 128 + extra 192): split-KV's fixed cost in one wave is a whole request, one
  // pass at any batch of one wave (an extrapolation: only 10-block requests were measured); more
  // than one wave: one pass from ctas x 5 >= 132 x (one pass's block times - 3): 133 CTAs take two
  // waves, 10 block times, against 665 blocks spread.
  CHECK(decode_plan_mode(1, 1, 64, 128, true, 192, 132) == DecodeMode::one_pass);
  CHECK(decode_plan_mode(52, 1, 64, 128, true, 192, 132) == DecodeMode::one_pass);
  CHECK(decode_plan_mode(133, 1, 64, 128, true, 192, 132) == DecodeMode::split_kv);
  CHECK(decode_plan_mode(185, 1, 64, 128, true, 192, 132) == DecodeMode::one_pass);
  CHECK(decode_plan_mode(66, 2, 64, 128, true, 512, 132) == DecodeMode::one_pass);
  // Wider than 640 rows: always split.
  CHECK(decode_plan_mode(256, 1, 64, 128, true, 513, 132) == DecodeMode::split_kv);
  CHECK(decode_plan_mode(4096, 1, 64, 2048, false, 0, 132) == DecodeMode::split_kv);
  // One block per request: nothing to split.
  CHECK(decode_plan_mode(1, 1, 64, 64, false, 0, 132) == DecodeMode::one_pass);
  CHECK(decode_plan_mode(0, 1, 64, 128, true, 512, 132) == DecodeMode::one_pass);
  const auto c = mlaplan::choose_decode_mode(16, 1, 64, 128, true, 512, 132);
  CHECK(c.mode == DecodeMode::split_kv);
  CHECK(c.reason == "16 CTAs x 10 blocks < 132 SMs x (10 - 5): the scheduler spreads the blocks, combine merges");
  CHECK(mlaplan::choose_decode_mode(60, 1, 64, 128, true, 512, 132).reason ==
        "60 CTAs x 10 blocks >= 5/6 x 132 SMs x 5: 2 CTAs per request as one cluster, 5 blocks each, partial rows "
        "merged in distributed shared memory, no combine");
  CHECK(mlaplan::choose_decode_mode(32, 1, 64, 128, true, 512, 132).reason ==
        "32 CTAs x 10 blocks < 132 SMs x (10 - 5): the scheduler spreads the blocks, combine merges");
  CHECK(mlaplan::choose_decode_mode(128, 1, 64, 128, true, 512, 132).reason ==
        "128 CTAs x 10 blocks >= 132 SMs x (10 - 5): each request in one pass by one CTA, no combine");
  CHECK(mlaplan::choose_decode_mode(256, 1, 64, 128, true, 640, 132).reason ==
        "a request attends up to 768 rows (one pass takes at most 640)");
  CHECK_THROWS_AS(decode_plan_mode(1, 0, 64, 128, true, 512, 132), mlaplan::Error);
  CHECK_THROWS_AS(decode_plan_mode(1, 1, 32, 128, true, 512, 132), mlaplan::Error);
  CHECK_THROWS_AS(decode_plan_mode(-1, 1, 64, 128, true, 512, 132), mlaplan::Error);
}

TEST_CASE("decode mode over the lengths: the cluster test takes the work the requests attend", "[decode]") {
  using mlaplan::choose_decode_mode;
  using mlaplan::decode_work;
  using mlaplan::DecodeMode;
  // Full lengths: the same choice as the widths, at every batch of the V4.1 shape.
  for (const std::int64_t b : {1, 8, 16, 20, 27, 28, 30, 32, 37, 47, 54, 55, 66, 67, 92, 93, 128}) {
    for (const std::int64_t h : {64, 128}) {
      const std::vector<std::int32_t> len(static_cast<std::size_t>(b), 128), elen(static_cast<std::size_t>(b), 512);
      const auto w = decode_work(len.data(), b, 128, elen.data(), 512);
      CHECK(w.total_blocks == 10 * b);
      CHECK(w.max_blocks == 10);
      const auto a = choose_decode_mode(b, 1, h, 128, true, 512, 132);
      const auto l = choose_decode_mode(b, 1, h, 128, true, 512, 132, w);
      CHECK(a.mode == l.mode);
      CHECK(a.reason == l.reason);
    }
  }
  // A block count: ceil(max(len, 1) / 64) main + ceil(extra / 64); lengths clamp to the widths.
  const std::vector<std::int32_t> len = {0, 1, 64, 65, 128, 500, -3};
  const std::vector<std::int32_t> elen = {0, 0, 1, 64, 65, 512, 9999};
  const auto w = decode_work(len.data(), 7, 128, elen.data(), 512);
  CHECK(w.total_blocks == 1 + 1 + (1 + 1) + (2 + 1) + (2 + 2) + (2 + 8) + (1 + 8));
  CHECK(w.max_blocks == 10);
  CHECK(decode_work(len.data(), 7, 128, nullptr, 0).total_blocks == 1 + 1 + 1 + 2 + 2 + 2 + 1);
  // b 60, lengths about half the widths (6 blocks on average), the longest 10: the widths say a
  // cluster of 2 (6 x 60 x 10 >= 5 x 132 x 5); the work (360 blocks) does not fill the SMs -> split-KV.
  CHECK(choose_decode_mode(60, 1, 64, 128, true, 512, 132).mode == DecodeMode::cluster_split);
  const auto v = choose_decode_mode(60, 1, 64, 128, true, 512, 132, mlaplan::DecodeWork{360, 10, {}});
  CHECK(v.mode == DecodeMode::split_kv);
  CHECK(v.reason ==
        "360 blocks by the lengths (longest request 10) < 132 SMs x (10 - 5): the scheduler spreads the "
        "blocks, combine merges");
  // At h_q 128, b 50 (100 CTAs) the widths say one pass (1000 >= 132 x 7); one pass lasts as long as
  // its longest request (10 blocks) while split-KV spreads 600 blocks: split-KV.
  CHECK(choose_decode_mode(50, 1, 128, 128, true, 512, 132).mode == DecodeMode::one_pass);
  CHECK(choose_decode_mode(50, 1, 128, 128, true, 512, 132, mlaplan::DecodeWork{300, 10, {}}).mode ==
        DecodeMode::split_kv);
  // Short requests only (longest 2 blocks): one pass by each CTA is as long as two blocks.
  CHECK(choose_decode_mode(37, 1, 128, 128, true, 512, 132, mlaplan::DecodeWork{74, 2, {}}).mode ==
        DecodeMode::one_pass);
  // Enough work at h_q 128 (b 74): 940 blocks >= 132 x 7, one pass again.
  CHECK(choose_decode_mode(74, 1, 128, 128, true, 512, 132, mlaplan::DecodeWork{470, 10, {}}).mode ==
        DecodeMode::one_pass);
  // Enough work for the cluster: b 60, 9.3 blocks on average.
  const auto c = choose_decode_mode(60, 1, 64, 128, true, 512, 132, mlaplan::DecodeWork{560, 10, {}});
  CHECK(c.mode == DecodeMode::cluster_split);
  CHECK(c.reason ==
        "560 blocks by the lengths (longest request 10) >= 5/6 x 132 SMs x 5: 2 CTAs per request as one "
        "cluster, 5 blocks each, partial rows merged in distributed shared memory, no combine");
}

TEST_CASE("decode mode: one pass counts its waves of CTAs", "[decode]") {
  using mlaplan::DecodeWork;
  using mlaplan::one_pass_block_times;
  // One wave: as long as the longest request.
  CHECK(one_pass_block_times(DecodeWork{1000, 10, {}}, 100, 1, 64, 132) == 10);
  // The widths past one wave: whole waves (200 CTAs on 132 SMs: two waves of 10 blocks).
  CHECK(one_pass_block_times(DecodeWork{2000, 10, {}}, 200, 1, 64, 132) == 20);
  CHECK(one_pass_block_times(DecodeWork{2560, 10, {}}, 256, 1, 128, 132) == 40);
  // Lengths in launch order: each CTA to the SM that frees first. Three SMs, requests 4, 1, 1, 1, 4:
  // SM A takes 4 (ends 4), B and C take 1 each (end 1), the fourth goes to B (ends 2), the fifth to
  // C (1 + 4 = 5) -> 5.
  CHECK(one_pass_block_times(DecodeWork{11, 4, {4, 1, 1, 1, 4}}, 5, 1, 64, 3) == 5);
  // h_q 128: two slices, the second after the first (request-major within a slice).
  CHECK(one_pass_block_times(DecodeWork{4, 2, {2, 2}}, 2, 1, 128, 2) == 4);
  // Lengths without their order: the least it can last.
  CHECK(one_pass_block_times(DecodeWork{1500, 10, {}}, 200, 1, 64, 132) == 12);
  // b 200 at the widths, h_q 64: one pass needs two waves (20 block times), split-KV spreads 2,000
  // blocks < 132 x (20 - 3): split-KV. At b 256 the 2,560 blocks pay for the second wave.
  const auto two = mlaplan::choose_decode_mode(200, 1, 64, 128, true, 512, 132);
  CHECK(two.mode == DecodeMode::split_kv);
  CHECK(two.reason.find("(one pass: 200 CTAs on 132 SMs last 20 block times, more than one wave)") !=
        std::string::npos);
  CHECK(decode_plan_mode(256, 1, 64, 128, true, 512, 132) == DecodeMode::one_pass);
  CHECK(decode_plan_mode(200, 1, 128, 128, true, 512, 132) == DecodeMode::split_kv);
  CHECK(decode_plan_mode(128, 1, 128, 128, true, 512, 132) == DecodeMode::one_pass);
}
