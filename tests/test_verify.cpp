// verify's orchestration on the host: a fake device (host quantizer, scheduler and reference)
// must pass; a device that gets a byte, a record or an output wrong must fail with the reason.

#include <catch2/catch.hpp>
#include <string>

#include "mlaplan/error.hpp"
#include "mlaplan/verify.hpp"

using namespace mlaplan;

namespace {

ModelConfig released(const std::string& name) {
  return load_config(std::string(MLAPLAN_SOURCE_DIR) + "/configs/" + name);
}

Target gpu(const std::string& id) {
  TargetRequest r;
  r.gpu = id;
  return resolve_target(r);
}

VerifyOptions small_batch() {
  VerifyOptions o;
  o.batch.context_lens = {1, 130, 700, 4000};
  o.timing_iterations = 1;
  return o;
}

const VerifyCell& cell(const VerifyReport& r, const std::string& dtype, LayerType t) {
  for (const auto& c : r.cells) {
    if (c.kv_cache_dtype == dtype && c.type == t) return c;
  }
  FAIL("no cell " << dtype << " " << to_string(t));
  return r.cells.front();
}

}  // namespace

TEST_CASE("verify on a faithful device: V4.1-Flash on H200", "[verify]") {
  const auto cfg = released("deepseek-v4.1-flash.json");
  const auto topo = build_topology(cfg);
  auto dev = make_host_verify_device();
  std::vector<std::string> progress;
  auto opts = small_batch();
  opts.progress = [&](const std::string& s) { progress.push_back(s); };
  const auto r = run_verify(cfg, topo, gpu("h200"), *dev, opts);
  CHECK(r.exit_code == 0);
  REQUIRE(r.cells.size() == 6);  // 2 dtypes x 3 layer types
  for (auto t : {LayerType::c1a, LayerType::c2a, LayerType::swaonly}) {
    const auto& c = cell(r, "fp8_ds_mla", t);
    CHECK(c.status == VerifyStatus::pass);
    CHECK(c.quantize_match);
    CHECK(c.schedule_match);
    CHECK(c.decode.pass);
    CHECK(c.h_q == 64);
    CHECK(c.main_format == "fp8_ds_mla_v4");
    CHECK(c.main_page == 32);
    CHECK(c.main_stride == 19008);
    const auto& n = cell(r, "nvfp4_ds_mla", t);
    CHECK(n.status == VerifyStatus::unsupported);
    CHECK_THAT(n.reason, Catch::StartsWith("nvfp4_ds_mla needs SM100"));
  }
  CHECK(cell(r, "fp8_ds_mla", LayerType::c1a).extra_page == 64);
  CHECK(cell(r, "fp8_ds_mla", LayerType::c1a).extra_stride == 37440);
  CHECK(cell(r, "fp8_ds_mla", LayerType::c2a).extra_page == 32);
  CHECK(cell(r, "fp8_ds_mla", LayerType::c1a).extra_topk == 512);
  CHECK(progress.size() == 6);  // a start and a result line per cell that ran
}

TEST_CASE("verify --force runs what the rules reject, labelled", "[verify]") {
  const auto cfg = released("deepseek-v4.1-flash.json");
  const auto topo = build_topology(cfg);
  auto dev = make_host_verify_device();
  auto opts = small_batch();
  opts.kv_cache_dtypes = {"nvfp4_ds_mla"};
  opts.force = true;
  const auto r = run_verify(cfg, topo, gpu("h200"), *dev, opts);
  CHECK(r.exit_code == 0);
  const auto& c = cell(r, "nvfp4_ds_mla", LayerType::c2a);
  CHECK(c.forced);
  CHECK(c.status == VerifyStatus::pass);
  CHECK(c.main_format == "v41_fp8");
  CHECK(c.main_stride == 16896);
  CHECK(c.extra_format == "v41_fp4");
}

TEST_CASE("verify catches wrong bytes, records and outputs", "[verify]") {
  const auto cfg = released("deepseek-v4.1-flash.json");
  const auto topo = build_topology(cfg);
  auto opts = small_batch();
  opts.kv_cache_dtypes = {"fp8_ds_mla"};
  SECTION("a quantized byte") {
    auto dev = make_host_verify_device([](VerifyRun& r) { r.main_bytes[5] ^= 1; });
    const auto r = run_verify(cfg, topo, gpu("h200"), *dev, opts);
    CHECK(r.exit_code == 5);
    const auto& c = cell(r, "fp8_ds_mla", LayerType::swaonly);
    CHECK(c.status == VerifyStatus::fail);
    CHECK_FALSE(c.quantize_match);
    CHECK(c.quantize_first_diff == 5);
    CHECK_THAT(c.reason, Catch::Contains("quantize: main cache byte 5 differs from the host quantizer"));
  }
  SECTION("a scheduler record") {
    auto dev = make_host_verify_device([](VerifyRun& r) { r.records[3] += 1; });
    const auto r = run_verify(cfg, topo, gpu("h200"), *dev, opts);
    CHECK(r.exit_code == 5);
    CHECK_THAT(cell(r, "fp8_ds_mla", LayerType::c1a).reason, Catch::Contains("scheduler: record 0 field 3"));
  }
  SECTION("an output element") {
    auto dev = make_host_verify_device([](VerifyRun& r) { r.out[17] = 0x3F80; /* 1.0 */ });
    const auto r = run_verify(cfg, topo, gpu("h200"), *dev, opts);
    CHECK(r.exit_code == 5);
    const auto& c = cell(r, "fp8_ds_mla", LayerType::c2a);
    CHECK_FALSE(c.decode.pass);
    CHECK_THAT(c.reason, Catch::Contains("decode: fail"));
    CHECK_THAT(r.exit_message, Catch::StartsWith("verification failed: fp8_ds_mla "));
  }
  SECTION("a device fault is a FAIL, not a crash") {
    auto dev = make_host_verify_device([](VerifyRun&) {
      throw Error(ErrorKind::verify_failed, "cudaMalloc(&p, n): cudaErrorMemoryAllocation (out of memory)");
    });
    const auto r = run_verify(cfg, topo, gpu("h200"), *dev, opts);
    CHECK(r.exit_code == 5);
    CHECK_THAT(cell(r, "fp8_ds_mla", LayerType::c1a).reason, Catch::Contains("cudaErrorMemoryAllocation"));
  }
}

TEST_CASE("verify: nothing runs where the rules reject the config", "[verify]") {
  auto dev = make_host_verify_device();
  const auto cfg = released("deepseek-v4.1-flash.json");
  const auto r = run_verify(cfg, build_topology(cfg), gpu("a100"), *dev, small_batch());
  CHECK(r.exit_code == 3);
  for (const auto& c : r.cells) {
    CHECK(c.status == VerifyStatus::unsupported);
    CHECK_THAT(c.reason, Catch::StartsWith("FlashMLA Sparse is only supported on Hopper and Blackwell DC devices"));
  }
  const auto v32 = released("deepseek-v3.2.json");
  VerifyOptions o = small_batch();
  const auto r32 = run_verify(v32, build_topology(v32), gpu("h200"), *dev, o);
  CHECK(r32.exit_code == 3);
  REQUIRE(r32.cells.size() == 1);
  CHECK(r32.cells[0].status == VerifyStatus::unsupported);
  CHECK_THAT(r32.cells[0].reason, Catch::StartsWith("no decode kernel for fp8_ds_mla_v32 (head dim 576) in this build"));
}

TEST_CASE("verify problems follow the planned layout", "[verify]") {
  const auto cfg = released("deepseek-v4-flash.json");
  const auto topo = build_topology(cfg);
  TargetRequest tr;
  const auto target = resolve_target(tr);
  const auto layout = plan_layout(cfg, topo, target, LayoutOptions{});
  BatchOptions bo;
  bo.context_lens = {5, 300, 70000};
  const auto batch = make_decode_batch(bo, layout.max_model_len);
  const auto schedules = plan_decode_schedules(cfg, topo, layout, batch);
  REQUIRE(schedules.size() == 3);
  const auto p = build_verify_problem(cfg, topo, layout, schedules[0], 7, 1);  // c128a
  CHECK(p.b == 3);
  CHECK(p.main.page_block_size == 64);
  CHECK(p.extra.page_block_size == 2);
  CHECK(p.extra.page_stride == 1728);  // 2 x 584 = 1168 -> round_up to 576
  CHECK(p.extra_topk == 8192);
  CHECK(p.extra_topk_length == std::vector<std::int32_t>{0, 2, 546});
  CHECK(p.indices.size() == 3 * 128);
  // positions past a length point at rows that are never written
  for (std::size_t t = 5; t < 128; ++t) {
    const auto id = p.indices[t];
    CHECK(std::find(p.main.slots.begin(), p.main.slots.end(), id) == p.main.slots.end());
  }
  // never zeros
  CHECK(std::count(p.q.begin(), p.q.end(), std::uint16_t{0}) < static_cast<std::ptrdiff_t>(p.q.size() / 100));
}
