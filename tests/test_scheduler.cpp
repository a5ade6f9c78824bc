// Tests of the host tile scheduler (src/cache/scheduler.cpp, docs/scheduler.md): golden plans measured
// on FlashMLA, hand-checked small plans, and properties over thousands of random batches.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "mlaplan/base/error.hpp"
#include "mlaplan/cache/scheduler.hpp"

using namespace mlaplan;
using Catch::Matchers::Contains;

namespace {

SchedInput make_input(SchedKernel k, std::int32_t num_sms, std::int32_t s_q, std::int32_t h_q,
                      std::vector<std::int32_t> lengths, std::vector<std::int32_t> extra = {}, bool has_extra = false,
                      std::int32_t h_k = 1) {
  SchedInput in;
  in.kernel = k;
  in.num_sms = num_sms;
  in.s_q = s_q;
  in.h_q = h_q;
  in.h_k = h_k;
  in.lengths = std::move(lengths);
  in.has_extra = has_extra;
  in.extra_lengths = std::move(extra);
  return in;
}

// Runs fn, expects a usage error, returns its message.
std::string usage_error(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    CHECK(e.kind() == ErrorKind::usage);
    return e.what();
  }
  FAIL("no mlaplan::Error thrown");
  return {};
}

// Blocks of one request computed a second way (the block-space description: the top-k part in
// whole blocks, then the extra part in whole blocks), independent of the implementation's formula.
std::int64_t expected_blocks(const SchedInput& in, std::size_t i) {
  if (in.kernel == SchedKernel::sm90_dense) return std::max<std::int64_t>(1, (in.lengths[i] + 63) / 64);
  std::int64_t n = (std::max(in.lengths[i], 1) + 63) / 64;
  if (in.has_extra) n += (in.extra_lengths[i] + 63) / 64;
  return n;
}

// Checks every property a plan must have, recomputing the derived facts from the records alone.
void check_properties(const SchedInput& in, const SchedPlan& plan) {
  const std::size_t b = in.lengths.size();
  const std::int64_t P = plan.params.num_sm_parts;
  const std::int64_t O = plan.params.fixed_overhead;
  const auto nb = static_cast<std::int32_t>(b);
  REQUIRE(plan.batch == static_cast<std::int64_t>(b));
  REQUIRE(plan.records.size() == static_cast<std::size_t>(P));
  REQUIRE(plan.num_splits.size() == b + 1);
  REQUIRE(plan.blocks.size() == b);
  REQUIRE(plan.num_splits[0] == 0);

  std::int64_t total = 0;
  for (std::size_t i = 0; i < b; ++i) {
    REQUIRE(plan.blocks[i] == expected_blocks(in, i));
    total += plan.blocks[i] + O;
  }
  REQUIRE(plan.payload == (total + P - 1) / P + O);

  std::vector<std::int64_t> next_block(b, 0);  // coverage cursor per request
  std::vector<std::int32_t> pieces(b, 0);      // partials per request
  std::int64_t min_blocks = -1, max_blocks = 0;
  std::int32_t idle = 0;
  bool seen_idle = false;
  for (std::size_t p = 0; p < plan.records.size(); ++p) {
    const SchedRecord& r = plan.records[p];
    INFO("partition " << p);
    REQUIRE(r[7] == 0);
    if (r[0] >= nb) {  // idle: only at the end, with the documented fixed content
      seen_idle = true;
      ++idle;
      REQUIRE(r == SchedRecord{nb, nb - 1, plan.blocks[0] - 1, plan.blocks[b - 1], 0, 0, 0, 0});
      continue;
    }
    REQUIRE_FALSE(seen_idle);
    REQUIRE(r[0] <= r[1]);
    REQUIRE(r[1] < nb);
    std::int64_t cost = 0, blocks = 0;
    for (std::int32_t q = r[0]; q <= r[1]; ++q) {
      const auto qi = static_cast<std::size_t>(q);
      const std::int64_t start = q == r[0] ? r[2] : 0;
      const std::int64_t end = q == r[1] ? r[3] : plan.blocks[qi];
      REQUIRE(0 <= start);
      REQUIRE(start < end);
      REQUIRE(end <= plan.blocks[qi]);
      REQUIRE(next_block[qi] == start);  // contiguous, no overlap, no gap
      next_block[qi] = end;
      if (q == r[0]) REQUIRE(r[4] == pieces[qi]);  // begin_split = partials of q so far
      ++pieces[qi];
      cost += end - start + O;
      blocks += end - start;
    }
    REQUIRE(cost <= plan.payload);
    // Flags: begin/end of a split request; a single piece is split if either end is cut.
    const bool cut_front = r[2] != 0;
    const bool cut_back = r[3] != plan.blocks[static_cast<std::size_t>(r[1])];
    if (r[0] == r[1]) {
      REQUIRE(r[5] == ((cut_front || cut_back) ? 1 : 0));
      REQUIRE(r[6] == r[5]);
    } else {
      REQUIRE(r[5] == (cut_front ? 1 : 0));
      REQUIRE(r[6] == (cut_back ? 1 : 0));
    }
    min_blocks = min_blocks < 0 ? blocks : std::min(min_blocks, blocks);
    max_blocks = std::max(max_blocks, blocks);
  }

  std::int32_t split_requests = 0, max_splits = 0;
  for (std::size_t i = 0; i < b; ++i) {
    INFO("request " << i);
    REQUIRE(next_block[i] == plan.blocks[i]);  // every block covered
    REQUIRE(plan.num_splits[i + 1] - plan.num_splits[i] == pieces[i]);
    if (pieces[i] > 1) ++split_requests;
    max_splits = std::max(max_splits, pieces[i]);
  }
  REQUIRE(plan.total_partials == plan.num_splits[b]);
  REQUIRE(plan.total_partials <= static_cast<std::int64_t>(b) + P - 1);
  REQUIRE(plan.idle_partitions == idle);
  REQUIRE(plan.split_requests == split_requests);
  REQUIRE(plan.max_splits == max_splits);
  REQUIRE(plan.min_blocks_per_partition == min_blocks);
  REQUIRE(plan.max_blocks_per_partition == max_blocks);
  REQUIRE(plan.accum_bytes == 4 * (static_cast<std::int64_t>(b) + P) * in.s_q * in.h_q * 513);
}

}  // namespace

TEST_CASE("scheduler kernel names round-trip", "[scheduler]") {
  for (SchedKernel k :
       {SchedKernel::sm90_sparse, SchedKernel::sm100_head64, SchedKernel::sm100_head128, SchedKernel::sm90_dense}) {
    const auto parsed = parse_sched_kernel(to_string(k));
    REQUIRE(parsed.has_value());
    CHECK(*parsed == k);
  }
  CHECK(to_string(SchedKernel::sm90_sparse) == "sm90-sparse");
  CHECK(to_string(SchedKernel::sm100_head64) == "sm100-head64");
  CHECK(to_string(SchedKernel::sm100_head128) == "sm100-head128");
  CHECK(to_string(SchedKernel::sm90_dense) == "sm90-dense");
  CHECK_FALSE(parse_sched_kernel("sm90").has_value());
  CHECK_FALSE(parse_sched_kernel("SM90-SPARSE").has_value());
  CHECK_FALSE(parse_sched_kernel("").has_value());
  CHECK_FALSE(parse_sched_kernel("sm100-head256").has_value());
}

TEST_CASE("scheduler reproduces FlashMLA's plans (golden vectors)", "[scheduler]") {
  std::ifstream f(MLAPLAN_TESTDATA_DIR "/flashmla-sched-vectors.json");
  REQUIRE(f.good());
  const auto doc = nlohmann::json::parse(f);
  const auto& cases = doc.at("cases");
  REQUIRE(cases.size() == 39);
  std::size_t idle_seen = 0;
  for (std::size_t c = 0; c < cases.size(); ++c) {
    const auto& v = cases[c];
    INFO("golden case " << c << " (b = " << v.at("b").get<int>() << ")");
    const auto kernel = parse_sched_kernel(v.at("kernel").get<std::string>());
    REQUIRE(kernel.has_value());
    SchedInput in = make_input(*kernel, v.at("num_sms").get<std::int32_t>(), v.at("s_q").get<std::int32_t>(),
                               v.at("h_q").get<std::int32_t>(), v.at("lengths").get<std::vector<std::int32_t>>());
    if (!v.at("extra_lengths").is_null()) {
      in.has_extra = true;
      in.extra_lengths = v.at("extra_lengths").get<std::vector<std::int32_t>>();
    }
    REQUIRE(in.lengths.size() == v.at("b").get<std::size_t>());
    const SchedPlan plan = plan_schedule(in);

    const auto want_splits = v.at("num_splits").get<std::vector<std::int32_t>>();
    CHECK(plan.num_splits == want_splits);
    const auto want = v.at("records").get<std::vector<SchedRecord>>();
    REQUIRE(plan.records.size() == want.size());
    const auto b = static_cast<std::int32_t>(in.lengths.size());
    for (std::size_t p = 0; p < want.size(); ++p) {
      INFO("partition " << p);
      // Non-idle partitions are the contract. Idle ones carry FlashMLA's begin_block = n_0 - 1
      // artefact, which we reproduce too, so the whole record must match.
      if (want[p][0] >= b) ++idle_seen;
      CHECK(plan.records[p] == want[p]);
    }
    check_properties(in, plan);
  }
  CHECK(idle_seen > 0);  // the file exercises idle partitions
}

TEST_CASE("scheduler worked example: SM90, 132 SMs, h_q 128, b 3, topk 2048", "[scheduler]") {
  const SchedInput in = make_input(SchedKernel::sm90_sparse, 132, 1, 128, {2048, 2048, 2048});
  const SchedPlan plan = plan_schedule(in);
  CHECK(plan.params.num_sm_parts == 66);
  CHECK(plan.params.fixed_overhead == 5);
  CHECK(plan.params.block == 64);
  CHECK(plan.blocks == std::vector<std::int32_t>{32, 32, 32});
  CHECK(plan.payload == 7);
  CHECK(plan.num_splits == std::vector<std::int32_t>{0, 16, 32, 48});
  CHECK(plan.idle_partitions == 18);
  CHECK(plan.split_requests == 3);
  CHECK(plan.max_splits == 16);
  CHECK(plan.total_partials == 48);
  CHECK(plan.min_blocks_per_partition == 2);
  CHECK(plan.max_blocks_per_partition == 2);
  for (std::int32_t p = 0; p < 48; ++p) {
    const std::int32_t req = p / 16, k = p % 16;
    INFO("partition " << p);
    CHECK(plan.records[static_cast<std::size_t>(p)] == SchedRecord{req, req, 2 * k, 2 * k + 2, k, 1, 1, 0});
  }
  for (std::size_t p = 48; p < 66; ++p) {
    INFO("partition " << p);
    CHECK(plan.records[p][0] >= 3);
  }
  check_properties(in, plan);
}

TEST_CASE("scheduler parameters of each kernel", "[scheduler]") {
  auto check = [](SchedParams p, std::int32_t parts, std::int32_t overhead) {
    CHECK(p.num_sm_parts == parts);
    CHECK(p.fixed_overhead == overhead);
    CHECK(p.block == 64);
  };
  // SM90 sparse: num_sms / s_q / (h_q / 64)
  check(sched_params(SchedKernel::sm90_sparse, 132, 1, 64), 132, 5);
  check(sched_params(SchedKernel::sm90_sparse, 132, 1, 128), 66, 5);
  check(sched_params(SchedKernel::sm90_sparse, 132, 2, 128), 33, 5);
  check(sched_params(SchedKernel::sm90_sparse, 132, 3, 128), 22, 5);
  check(sched_params(SchedKernel::sm90_sparse, 132, 200, 128), 1, 5);  // clamped to 1
  // SM100 head64: num_sms / s_q
  check(sched_params(SchedKernel::sm100_head64, 148, 1, 64), 148, 5);
  check(sched_params(SchedKernel::sm100_head64, 148, 3, 64), 49, 5);
  check(sched_params(SchedKernel::sm100_head64, 148, 1000, 64), 1, 5);
  // SM100 head128: num_sms / s_q / 2, overhead 3
  check(sched_params(SchedKernel::sm100_head128, 148, 1, 128), 74, 3);
  check(sched_params(SchedKernel::sm100_head128, 148, 2, 128), 37, 3);
  check(sched_params(SchedKernel::sm100_head128, 1, 1, 128), 1, 3);
  // SM90 dense: num_sms / h_k / ceil(s_q * h_q / h_k / 64)
  check(sched_params(SchedKernel::sm90_dense, 132, 1, 128, 1), 66, 5);
  check(sched_params(SchedKernel::sm90_dense, 132, 1, 16, 1), 132, 5);
  check(sched_params(SchedKernel::sm90_dense, 132, 1, 64, 8), 16, 5);  // 8 rows per KV head
  check(sched_params(SchedKernel::sm90_dense, 132, 16, 64, 8), 8, 5);  // 128 rows -> 2 tiles
  check(sched_params(SchedKernel::sm90_dense, 132, 2, 96, 1), 44, 5);  // 192 rows -> 3 tiles
  check(sched_params(SchedKernel::sm90_dense, 132, 1, 7, 7), 18, 5);   // 1 row per KV head
  check(sched_params(SchedKernel::sm90_dense, 4, 64, 128, 1), 1, 5);
}

TEST_CASE("scheduler hand-checked small plans", "[scheduler]") {
  SECTION("b = 1, one block") {
    const SchedInput in = make_input(SchedKernel::sm90_sparse, 132, 1, 64, {64});
    const SchedPlan plan = plan_schedule(in);
    CHECK(plan.params.num_sm_parts == 132);
    CHECK(plan.payload == 6);  // ceil(6 / 132) + 5
    CHECK(plan.records[0] == SchedRecord{0, 0, 0, 1, 0, 0, 0, 0});
    CHECK(plan.num_splits == std::vector<std::int32_t>{0, 1});
    CHECK(plan.idle_partitions == 131);
    CHECK(plan.records[1] == SchedRecord{1, 0, 0, 1, 0, 0, 0, 0});  // idle: n_0 - 1 = 0
    CHECK(plan.split_requests == 0);
    CHECK(plan.max_splits == 1);
    CHECK(plan.accum_bytes == 4LL * 133 * 64 * 513);
    check_properties(in, plan);
  }
  SECTION("b = 1, one request split over 100 partitions") {
    const SchedInput in = make_input(SchedKernel::sm90_sparse, 132, 1, 64, {6400});
    const SchedPlan plan = plan_schedule(in);
    CHECK(plan.payload == 6);  // ceil(105 / 132) + 5: one block per partition
    for (std::int32_t p = 0; p < 100; ++p) {
      INFO("partition " << p);
      CHECK(plan.records[static_cast<std::size_t>(p)] == SchedRecord{0, 0, p, p + 1, p, 1, 1, 0});
    }
    CHECK(plan.num_splits == std::vector<std::int32_t>{0, 100});
    CHECK(plan.idle_partitions == 32);
    CHECK(plan.records[100] == SchedRecord{1, 0, 99, 100, 0, 0, 0, 0});  // idle: n_0 - 1 = 99
    check_properties(in, plan);
  }
  SECTION("zero lengths still cost one block each") {
    const SchedInput in = make_input(SchedKernel::sm90_sparse, 132, 1, 128, {0, 0, 0, 0});
    const SchedPlan plan = plan_schedule(in);
    CHECK(plan.blocks == std::vector<std::int32_t>{1, 1, 1, 1});
    CHECK(plan.payload == 6);  // ceil(24 / 66) + 5
    for (std::int32_t p = 0; p < 4; ++p) {
      CHECK(plan.records[static_cast<std::size_t>(p)] == SchedRecord{p, p, 0, 1, 0, 0, 0, 0});
    }
    CHECK(plan.num_splits == std::vector<std::int32_t>{0, 1, 2, 3, 4});
    CHECK(plan.idle_partitions == 62);
    check_properties(in, plan);

    // with an extra cache: a zero top-k length counts as one (masked) block, then the extra part
    const SchedInput ex = make_input(SchedKernel::sm90_sparse, 132, 1, 64, {0, 0, 65}, {0, 1, 64}, true);
    const SchedPlan pe = plan_schedule(ex);
    CHECK(pe.blocks == std::vector<std::int32_t>{1, 2, 3});
    check_properties(ex, pe);

    // dense: a zero sequence length is one block too
    const SchedInput dn = make_input(SchedKernel::sm90_dense, 132, 1, 128, {0, 65, 128});
    const SchedPlan pd = plan_schedule(dn);
    CHECK(pd.blocks == std::vector<std::int32_t>{1, 2, 2});
    check_properties(dn, pd);
  }
  SECTION("more partitions than blocks: several requests per partition, the rest idle") {
    // P = 132, n = 1 each, total = 60, payload = 1 + 5 = 6: one request per partition.
    const SchedInput in = make_input(SchedKernel::sm90_sparse, 132, 1, 64, std::vector<std::int32_t>(10, 10));
    const SchedPlan plan = plan_schedule(in);
    CHECK(plan.payload == 6);
    CHECK(plan.idle_partitions == 122);
    CHECK(plan.total_partials == 10);
    // P = 4 / 1 / 2 = 2, n = 1 each: total 60, payload 30 + 5: five whole requests per partition
    const SchedInput few = make_input(SchedKernel::sm90_sparse, 4, 1, 128, std::vector<std::int32_t>(10, 10));
    const SchedPlan pf = plan_schedule(few);
    CHECK(pf.params.num_sm_parts == 2);
    CHECK(pf.payload == 35);                                      // ceil(60 / 2) + 5
    CHECK(pf.records[0] == SchedRecord{0, 4, 0, 1, 0, 0, 0, 0});  // 5 requests x 6 = 30 <= 35
    CHECK(pf.records[1] == SchedRecord{5, 9, 0, 1, 0, 0, 0, 0});
    CHECK(pf.idle_partitions == 0);
    check_properties(in, plan);
    check_properties(few, pf);
  }
  SECTION("a request longer than the whole quota, then a short one") {
    // P = 66, n = {1000, 1}, total = 1011, payload = 16 + 5 = 21: 16 blocks per partition.
    const SchedInput in = make_input(SchedKernel::sm90_sparse, 132, 1, 128, {64000, 64});
    const SchedPlan plan = plan_schedule(in);
    CHECK(plan.payload == 21);
    for (std::int32_t p = 0; p < 62; ++p) {
      INFO("partition " << p);
      CHECK(plan.records[static_cast<std::size_t>(p)] == SchedRecord{0, 0, 16 * p, 16 * p + 16, p, 1, 1, 0});
    }
    // partition 62 finishes request 0 (8 blocks + 5) and all of request 1 (1 + 5) within 21
    CHECK(plan.records[62] == SchedRecord{0, 1, 992, 1, 62, 1, 0, 0});
    CHECK(plan.num_splits == std::vector<std::int32_t>{0, 63, 64});
    CHECK(plan.idle_partitions == 3);
    CHECK(plan.records[63] == SchedRecord{2, 1, 999, 1, 0, 0, 0, 0});
    CHECK(plan.max_splits == 63);
    CHECK(plan.split_requests == 1);
    CHECK(plan.min_blocks_per_partition == 9);
    CHECK(plan.max_blocks_per_partition == 16);
    check_properties(in, plan);
  }
  SECTION("sm100-head128: overhead 3") {
    // P = 74, n = {2, 1}, total = 9, payload = 1 + 3 = 4: request 0 goes 1 + 1, request 1 alone.
    const SchedInput in = make_input(SchedKernel::sm100_head128, 148, 1, 128, {128, 64});
    const SchedPlan plan = plan_schedule(in);
    CHECK(plan.params.num_sm_parts == 74);
    CHECK(plan.payload == 4);
    CHECK(plan.records[0] == SchedRecord{0, 0, 0, 1, 0, 1, 1, 0});
    CHECK(plan.records[1] == SchedRecord{0, 0, 1, 2, 1, 1, 1, 0});
    CHECK(plan.records[2] == SchedRecord{1, 1, 0, 1, 0, 0, 0, 0});
    CHECK(plan.records[3] == SchedRecord{2, 1, 1, 1, 0, 0, 0, 0});
    CHECK(plan.num_splits == std::vector<std::int32_t>{0, 2, 3});
    CHECK(plan.idle_partitions == 71);
    check_properties(in, plan);
  }
  SECTION("sm100-head64 and sm90-dense plans") {
    const SchedInput h64 = make_input(SchedKernel::sm100_head64, 148, 1, 64, {128, 640, 0}, {512, 0, 3}, true);
    const SchedPlan p64 = plan_schedule(h64);
    CHECK(p64.params.num_sm_parts == 148);
    CHECK(p64.blocks == std::vector<std::int32_t>{10, 10, 2});
    check_properties(h64, p64);

    const SchedInput dn = make_input(SchedKernel::sm90_dense, 132, 1, 64, {4096, 1, 8192}, {}, false, 8);
    const SchedPlan pd = plan_schedule(dn);
    CHECK(pd.params.num_sm_parts == 16);
    CHECK(pd.blocks == std::vector<std::int32_t>{64, 1, 128});
    CHECK(pd.payload == 18);  // ceil(208 / 16) + 5
    check_properties(dn, pd);
  }
}

TEST_CASE("scheduler properties over random batches", "[scheduler]") {
  std::mt19937 rng(20261130u);
  auto uni = [&rng](std::int64_t lo, std::int64_t hi) {
    return static_cast<std::int32_t>(std::uniform_int_distribution<std::int64_t>(lo, hi)(rng));
  };
  const SchedKernel kernels[] = {SchedKernel::sm90_sparse, SchedKernel::sm100_head64, SchedKernel::sm100_head128,
                                 SchedKernel::sm90_dense};
  const std::int32_t sms_choices[] = {1, 2, 3, 78, 114, 132, 148, 4096};
  int planned = 0, with_idle = 0, with_split = 0, with_extra = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    SchedInput in;
    in.kernel = kernels[uni(0, 3)];
    in.num_sms = uni(0, 3) == 0 ? uni(1, 300) : sms_choices[uni(0, 7)];
    in.s_q = uni(0, 9) == 0 ? uni(1, 300) : uni(1, 4);
    switch (in.kernel) {
      case SchedKernel::sm90_sparse: in.h_q = uni(0, 1) == 0 ? 64 : 128; break;
      case SchedKernel::sm100_head64: in.h_q = 64; break;
      case SchedKernel::sm100_head128: in.h_q = 128; break;
      case SchedKernel::sm90_dense:
        in.h_k = 1 << uni(0, 3);
        in.h_q = in.h_k * uni(1, 32);
        break;
    }
    const std::int32_t b = uni(0, 4) == 0 ? uni(1, 8) : uni(1, 600);
    // Length profile of this batch: a top-k width, a share of zero lengths, occasional long ones.
    const std::int32_t topk = std::int32_t{64} << uni(0, 5);
    const std::int32_t zero_pct = uni(0, 2) == 0 ? 0 : uni(1, 100);
    in.has_extra = in.kernel != SchedKernel::sm90_dense && uni(0, 1) == 1;
    const std::int32_t extra_topk = std::int32_t{64} << uni(0, 6);
    for (std::int32_t i = 0; i < b; ++i) {
      std::int32_t len = uni(0, 99) < zero_pct ? 0 : uni(1, topk);
      if (uni(0, 199) == 0) len = uni(1, 200'000);
      in.lengths.push_back(len);
      if (in.has_extra) in.extra_lengths.push_back(uni(0, 3) == 0 ? 0 : uni(0, extra_topk));
    }
    INFO("iteration " << iter << ": " << to_string(in.kernel) << " num_sms " << in.num_sms << " s_q " << in.s_q
                      << " h_q " << in.h_q << " h_k " << in.h_k << " b " << b << " extra " << in.has_extra);
    const SchedPlan plan = plan_schedule(in);
    check_properties(in, plan);
    ++planned;
    with_idle += plan.idle_partitions > 0 ? 1 : 0;
    with_split += plan.split_requests > 0 ? 1 : 0;
    with_extra += in.has_extra ? 1 : 0;
  }
  CHECK(planned == 3000);
  // the generator reaches the interesting regimes
  CHECK(with_idle > 100);
  CHECK(with_split > 100);
  CHECK(with_extra > 500);
}

TEST_CASE("scheduler plans a 65,536-token batch", "[scheduler]") {
  // DeepSeek V4.1-like decode: window top-k 128 (page 32 -> min(pos + 1, 128)), extra 512.
  std::mt19937 rng(65536u);
  std::uniform_int_distribution<std::int32_t> pos(0, 200'000);
  SchedInput in = make_input(SchedKernel::sm90_sparse, 132, 1, 64, {}, {}, true);
  for (int i = 0; i < 65'536; ++i) {
    const std::int32_t p = pos(rng);
    in.lengths.push_back(std::min(p + 1, 128));
    in.extra_lengths.push_back(std::min(512, (p + 1) / 4));
  }
  const SchedPlan plan = plan_schedule(in);
  check_properties(in, plan);
  CHECK(plan.idle_partitions == 0);

  in.kernel = SchedKernel::sm100_head128;
  in.h_q = 128;
  in.num_sms = 148;
  const SchedPlan p128 = plan_schedule(in);
  check_properties(in, p128);
}

TEST_CASE("scheduler limits are exact", "[scheduler]") {
  // largest accepted values plan; one past is a usage error naming the value
  SchedInput in = make_input(SchedKernel::sm90_sparse, 4096, 1, 64, {1 << 28, 0}, {1 << 28, 1 << 28}, true);
  const SchedPlan plan = plan_schedule(in);
  CHECK(plan.blocks[0] == 1 << 23);  // 2^22 top-k blocks + 2^22 extra blocks
  check_properties(in, plan);

  in.lengths[1] = (1 << 28) + 1;
  CHECK_THAT(usage_error([&] { plan_schedule(in); }), Contains("lengths[1] = 268435457") && Contains("<= 268435456"));
  in.lengths[1] = 0;
  in.extra_lengths[0] = (1 << 28) + 1;
  CHECK_THAT(usage_error([&] { plan_schedule(in); }), Contains("extra_lengths[0] = 268435457"));
  in.extra_lengths[0] = 0;
  in.num_sms = 4097;
  CHECK_THAT(usage_error([&] { plan_schedule(in); }), Contains("num_sms = 4097") && Contains("4096"));

  CHECK(sched_params(SchedKernel::sm90_dense, 132, 1, 4096, 1).num_sm_parts == 2);
  CHECK_THAT(usage_error([] { sched_params(SchedKernel::sm90_dense, 132, 1, 4097, 1); }), Contains("h_q = 4097"));

  SchedInput big = make_input(SchedKernel::sm100_head128, 148, 1, 128, std::vector<std::int32_t>(1'048'576, 128));
  const SchedPlan pb = plan_schedule(big);
  CHECK(pb.total_partials >= 1'048'576);
  CHECK(pb.total_partials <= 1'048'576 + 74 - 1);
  big.lengths.push_back(1);
  CHECK_THAT(usage_error([&] { plan_schedule(big); }), Contains("b = 1048577") && Contains("1048576"));
}

TEST_CASE("scheduler rejects invalid inputs", "[scheduler]") {
  SECTION("negative lengths") {
    SchedInput in = make_input(SchedKernel::sm90_sparse, 132, 1, 64, {5, 7, 0, -1});
    CHECK(usage_error([&] { plan_schedule(in); }) == "lengths[3] = -1: a length must be >= 0");
    in = make_input(SchedKernel::sm90_sparse, 132, 1, 64, {5, 7}, {1, -4}, true);
    CHECK(usage_error([&] { plan_schedule(in); }) == "extra_lengths[1] = -4: a length must be >= 0");
    in = make_input(SchedKernel::sm90_dense, 132, 1, 64, {-7});
    CHECK_THAT(usage_error([&] { plan_schedule(in); }), Contains("lengths[0] = -7"));
  }
  SECTION("extra_lengths of the wrong size") {
    SchedInput in = make_input(SchedKernel::sm90_sparse, 132, 1, 64, {5, 7, 9}, {1, 2}, true);
    CHECK_THAT(usage_error([&] { plan_schedule(in); }), Contains("extra_lengths has 2 entries") && Contains("b = 3"));
    in.extra_lengths = {};
    CHECK_THAT(usage_error([&] { plan_schedule(in); }), Contains("extra_lengths has 0 entries"));
    in = make_input(SchedKernel::sm90_sparse, 132, 1, 64, {5, 7, 9}, {1, 2, 3}, false);
    CHECK_THAT(usage_error([&] { plan_schedule(in); }), Contains("has_extra = false"));
    in = make_input(SchedKernel::sm90_dense, 132, 1, 64, {5}, {1}, true);
    CHECK_THAT(usage_error([&] { plan_schedule(in); }), Contains("sm90-dense has no extra cache"));
  }
  SECTION("h_q not accepted by the kernel") {
    for (std::int32_t h : {0, 1, 32, 96, 256}) {
      INFO("h_q " << h);
      CHECK_THAT(usage_error([&] { sched_params(SchedKernel::sm90_sparse, 132, 1, h); }),
                 Contains("h_q = " + std::to_string(h)));
    }
    CHECK(usage_error([] { sched_params(SchedKernel::sm90_sparse, 132, 1, 96); }) ==
          "h_q = 96: sm90-sparse accepts h_q 64 or 128 (and 8 or 16: mla-plan's small-head kernel)");
    CHECK(usage_error([] { sched_params(SchedKernel::sm100_head64, 148, 1, 128); }) ==
          "h_q = 128: sm100-head64 accepts only h_q 64");
    CHECK(usage_error([] { sched_params(SchedKernel::sm100_head128, 148, 1, 64); }) ==
          "h_q = 64: sm100-head128 accepts only h_q 128");
    CHECK_THAT(usage_error([] { sched_params(SchedKernel::sm90_dense, 132, 1, 0); }), Contains("h_q = 0"));
    CHECK_THAT(usage_error([] { sched_params(SchedKernel::sm90_dense, 132, 1, 12, 8); }),
               Contains("h_q = 12") && Contains("multiple of h_k"));
    CHECK_THAT(usage_error([] { sched_params(SchedKernel::sm90_dense, 132, 1, 4, 8); }), Contains("h_k = 8"));
    CHECK_THAT(usage_error([] { sched_params(SchedKernel::sm90_dense, 132, 1, 64, 0); }), Contains("h_k = 0"));
    // through plan_schedule too
    const SchedInput in = make_input(SchedKernel::sm100_head128, 148, 1, 64, {1});
    CHECK_THAT(usage_error([&] { plan_schedule(in); }), Contains("h_q = 64"));
  }
  SECTION("bad shapes") {
    CHECK_THAT(usage_error([] { sched_params(SchedKernel::sm90_sparse, 0, 1, 64); }), Contains("num_sms = 0"));
    CHECK_THAT(usage_error([] { sched_params(SchedKernel::sm90_sparse, -3, 1, 64); }), Contains("num_sms = -3"));
    CHECK_THAT(usage_error([] { sched_params(SchedKernel::sm90_sparse, 132, 0, 64); }), Contains("s_q = 0"));
    const SchedInput empty = make_input(SchedKernel::sm90_sparse, 132, 1, 64, {});
    CHECK_THAT(usage_error([&] { plan_schedule(empty); }), Contains("b = 0"));
  }
  SECTION("unknown kernel names") {
    CHECK_FALSE(parse_sched_kernel("sm80-sparse").has_value());
    CHECK_FALSE(parse_sched_kernel("sm90_sparse").has_value());
    CHECK_FALSE(parse_sched_kernel(" sm90-sparse").has_value());
  }
}
