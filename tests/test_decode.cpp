// Decode batches and the per-layer-type tile-scheduler plans of a config.

#include <catch2/catch.hpp>
#include <string>

#include "mlaplan/decode.hpp"
#include "mlaplan/error.hpp"

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
  // V4.1 shape: 128 + 512 rows = 10 blocks. Clusters of 4 CTAs (3 blocks each) from
  // ctas * 10 >= 132 * 3 / 2 (ctas >= 19.8) while 4 x ctas <= 132; of 2 CTAs (5 blocks each) while
  // 2 x ctas <= 132; then one pass (ctas * 10 >= 132 * 9 / 2 holds from 60 on).
  CHECK(decode_plan_mode(1, 1, 64, 128, true, 512, 132) == DecodeMode::split_kv);
  CHECK(decode_plan_mode(19, 1, 64, 128, true, 512, 132) == DecodeMode::split_kv);
  CHECK(decode_plan_mode(20, 1, 64, 128, true, 512, 132) == DecodeMode::cluster_split);
  CHECK(decode_plan_mode(59, 1, 64, 128, true, 512, 132) == DecodeMode::cluster_split);
  CHECK(decode_plan_mode(66, 1, 64, 128, true, 512, 132) == DecodeMode::cluster_split);
  CHECK(decode_plan_mode(67, 1, 64, 128, true, 512, 132) == DecodeMode::one_pass);
  CHECK(decode_plan_mode(9, 1, 128, 128, true, 512, 132) == DecodeMode::split_kv);
  CHECK(decode_plan_mode(10, 1, 128, 128, true, 512, 132) == DecodeMode::cluster_split);
  CHECK(decode_plan_mode(33, 1, 128, 128, true, 512, 132) == DecodeMode::cluster_split);
  CHECK(decode_plan_mode(34, 1, 128, 128, true, 512, 132) == DecodeMode::one_pass);
  CHECK(mlaplan::choose_decode_mode(33, 1, 64, 128, true, 512, 132).cluster_ctas == 4);
  CHECK(mlaplan::choose_decode_mode(34, 1, 64, 128, true, 512, 132).cluster_ctas == 2);
  CHECK(mlaplan::choose_decode_mode(67, 1, 64, 128, true, 512, 132).cluster_ctas == 1);
  CHECK(mlaplan::cluster_split_ctas(1, 10, 132) == 4);
  CHECK(mlaplan::cluster_split_ctas(33, 10, 132) == 4);
  CHECK(mlaplan::cluster_split_ctas(34, 10, 132) == 2);
  CHECK(mlaplan::cluster_split_ctas(66, 10, 132) == 2);
  CHECK(mlaplan::cluster_split_ctas(67, 10, 132) == 1);
  CHECK(mlaplan::cluster_split_ctas(1, 3, 132) == 2);  // at most the request's blocks
  CHECK(mlaplan::cluster_split_ctas(1, 1, 132) == 1);
  // Two blocks (the window alone): a cluster would save one block only; one pass from
  // ctas * 2 >= 132 / 2.
  CHECK(decode_plan_mode(32, 1, 64, 128, false, 0, 132) == DecodeMode::split_kv);
  CHECK(decode_plan_mode(33, 1, 64, 128, false, 0, 132) == DecodeMode::one_pass);
  CHECK(decode_plan_mode(66, 2, 64, 128, true, 512, 132) == DecodeMode::one_pass);
  // Wider than 640 rows: always split.
  CHECK(decode_plan_mode(256, 1, 64, 128, true, 513, 132) == DecodeMode::split_kv);
  CHECK(decode_plan_mode(4096, 1, 64, 2048, false, 0, 132) == DecodeMode::split_kv);
  // One block per request: nothing to split.
  CHECK(decode_plan_mode(1, 1, 64, 64, false, 0, 132) == DecodeMode::one_pass);
  CHECK(decode_plan_mode(0, 1, 64, 128, true, 512, 132) == DecodeMode::one_pass);
  const auto c = mlaplan::choose_decode_mode(16, 1, 64, 128, true, 512, 132);
  CHECK(c.mode == DecodeMode::split_kv);
  CHECK(c.reason == "16 CTAs x 10 blocks < 132 SMs x 9 / 2: the scheduler spreads the blocks, combine merges");
  CHECK(mlaplan::choose_decode_mode(32, 1, 64, 128, true, 512, 132).reason ==
        "32 CTAs x 10 blocks >= 132 SMs x 3 / 2: 4 CTAs per request as one cluster, 3 blocks each, partial rows "
        "merged in distributed shared memory, no combine");
  CHECK(mlaplan::choose_decode_mode(128, 1, 64, 128, true, 512, 132).reason ==
        "128 CTAs x 10 blocks >= 132 SMs x 9 / 2: each request in one pass by one CTA, no combine");
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
  for (const std::int64_t b : {1, 8, 19, 20, 37, 66, 67, 128}) {
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
  // b 37, lengths about half the widths (6 blocks on average), the longest 10: the widths say a
  // cluster of 2 (37 x 10 x 2 >= 132 x 5); the work (222 blocks) does not fill the SMs -> split-KV.
  const mlaplan::DecodeWork half{222, 10};
  CHECK(choose_decode_mode(37, 1, 64, 128, true, 512, 132).mode == DecodeMode::cluster_split);
  const auto v = choose_decode_mode(37, 1, 64, 128, true, 512, 132, half);
  CHECK(v.mode == DecodeMode::split_kv);
  CHECK(v.reason == "37 CTAs x 10 blocks < 132 SMs x 9 / 2: the scheduler spreads the blocks, combine merges");
  // At h_q 128 (74 CTAs) the one_pass test stays the widths' (one pass lasts as long as its longest
  // request): one_pass.
  CHECK(choose_decode_mode(37, 1, 128, 128, true, 512, 132, half).mode == DecodeMode::one_pass);
  // Enough work for the cluster: b 30, 8 blocks on average.
  const auto c = choose_decode_mode(30, 1, 64, 128, true, 512, 132, mlaplan::DecodeWork{240, 10});
  CHECK(c.mode == DecodeMode::cluster_split);
  CHECK(c.reason ==
        "240 blocks by the lengths (longest request 10) >= 132 SMs x 3 / 2: 4 CTAs per request as one "
        "cluster, 3 blocks each, partial rows merged in distributed shared memory, no combine");
}
