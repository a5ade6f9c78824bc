// bench's orchestration on the host: shapes from the planned layout, rules, rates and floors,
// with a fake device that returns set timings (the CUDA device is exercised on a GPU only).

#include <catch2/catch.hpp>
#include <sstream>
#include <cmath>
#include <nlohmann/json.hpp>
#include <string>

#include "output/bench_output.hpp"
#include "fake_bench_device.hpp"
#include "mlaplan/gpu_check/bench.hpp"
#include "mlaplan/base/error.hpp"
#include "mlaplan/version.hpp"
#include "rule_testing.hpp"

using namespace mlaplan;
using testing_devices::FakeBenchDevice;

namespace {

using testing_rules::gpu;
using testing_rules::released;

}  // namespace

TEST_CASE("bench shapes follow the planned layout of V4.1-Flash", "[bench]") {
  const auto cfg = released("deepseek-v4.1-flash.json");
  const auto topo = build_topology(cfg);
  const auto layout = plan_layout(cfg, topo, gpu("h200"), LayoutOptions{}, Strictness::lenient);
  const auto shapes = bench_shapes(cfg, topo, layout, {1, 128}, {});
  REQUIRE(shapes.size() == 6);  // c1a, c2a, swaonly x 2 batch sizes
  for (const auto& s : shapes) {
    CHECK(s.unsupported.empty());
    CHECK(s.h_q == 64);
    CHECK(s.topk == 128);
    CHECK(s.main_format == RowFormatId::fp8_ds_mla_v4);
    CHECK(s.main_page == 32);
    if (s.type == LayerType::swaonly) {
      CHECK_FALSE(s.has_extra);
    } else {
      REQUIRE(s.has_extra);
      CHECK(s.extra_topk == 512);
      CHECK(s.extra_page == (s.type == LayerType::c1a ? 64 : 32));
    }
  }
  // c1a at b 1: 640 rows, FLOPs 2 x 64 x 640 x 1024; bytes 640 x 584 + q + out (64 x 512 bf16 each).
  const auto& c1 = shapes.front();
  REQUIRE(c1.type == LayerType::c1a);
  REQUIRE(c1.b == 1);
  CHECK(c1.flops == 2.0 * 64 * 640 * 1024);
  CHECK(c1.bytes == 640.0 * 584 + 2.0 * 64 * 512 * 2);
  CHECK(c1.mode.mode == DecodeMode::split_kv);
  CHECK(shapes[1].mode.mode == DecodeMode::one_pass);  // c1a b 128: 128 x 10 >= 132 x 9
  // TP 2 halves nothing here (64 heads / 2 = 32 are padded to 64).
  LayoutOptions tp2;
  tp2.tensor_parallel_size = 2;
  const auto l2 = plan_layout(cfg, topo, gpu("h200"), tp2, Strictness::lenient);
  CHECK(bench_shapes(cfg, topo, l2, {8}, {LayerType::c2a}).at(0).h_q == 64);
}

TEST_CASE("bench shapes: V3.2 runs d_qk 576 rows, V4.0 c128a attends every entry", "[bench]") {
  const auto v32 = released("deepseek-v3.2.json");
  const auto t32 = build_topology(v32);
  const auto l32 = plan_layout(v32, t32, gpu("h200"), LayoutOptions{}, Strictness::lenient);
  const auto s32 = bench_shapes(v32, t32, l32, {64}, {});
  REQUIRE(s32.size() == 1);
  CHECK(s32[0].unsupported.empty());
  CHECK(s32[0].main_format == RowFormatId::fp8_ds_mla_v32);
  CHECK(s32[0].topk == 2048);
  CHECK(s32[0].has_extra == false);
  // 2 x h_q x b x topk x (576 + 512) multiply-adds
  CHECK(s32[0].flops == 2.0 * s32[0].h_q * 64 * 2048 * (576 + 512));
  const auto v4 = released("deepseek-v4-flash.json");
  const auto t4 = build_topology(v4);
  const auto l4 = plan_layout(v4, t4, gpu("h200"), LayoutOptions{}, Strictness::lenient);
  const auto s4 = bench_shapes(v4, t4, l4, {256}, {LayerType::c128a});
  REQUIRE(s4.size() == 1);
  CHECK(s4[0].extra_topk == 8192);  // round_up(cdiv(1048576, 128), 128)
  CHECK(s4[0].mode.mode == DecodeMode::split_kv);
}

TEST_CASE("bench flag limits: at the limit and one past", "[bench][limits]") {
  const auto cfg = released("deepseek-v4.1-flash.json");
  const auto topo = build_topology(cfg);
  const auto layout = plan_layout(cfg, topo, gpu("h200"), LayoutOptions{}, Strictness::lenient);
  CHECK(bench_shapes(cfg, topo, layout, {BenchLimits::max_batch}, {LayerType::swaonly}).size() == 1);
  CHECK_THROWS_AS(bench_shapes(cfg, topo, layout, {BenchLimits::max_batch + 1}, {}), Error);
  CHECK_THROWS_AS(bench_shapes(cfg, topo, layout, {0}, {}), Error);
  CHECK_THROWS_AS(bench_shapes(cfg, topo, layout, {}, {}), Error);
  std::vector<std::int64_t> many(static_cast<std::size_t>(BenchLimits::max_batch_sizes), 1);
  CHECK_NOTHROW(check_bench_batches(many));
  many.push_back(1);
  CHECK_THROWS_AS(check_bench_batches(many), Error);
  CHECK_THROWS_WITH(
      bench_shapes(cfg, topo, layout, {1}, {LayerType::c4a}),
      Catch::Equals("--layer-type[0]: the config has no c4a layer; allowed: c1a, c2a, swaonly (the types it has)"));
  BenchOptions o;
  o.run.replays = static_cast<std::int32_t>(BenchLimits::max_replays);
  CHECK_NOTHROW(check_bench_options(o));
  o.run.replays = static_cast<std::int32_t>(BenchLimits::max_replays + 1);
  CHECK_THROWS_WITH(check_bench_options(o), Catch::Contains("--replays: \'10001\' is out of range"));
  o.run.replays = 1;
  o.run.warmup = -1;
  CHECK_THROWS_AS(check_bench_options(o), Error);
}

TEST_CASE("bench report: rates and floors from the measured ceilings", "[bench]") {
  const auto cfg = released("deepseek-v4.1-flash.json");
  const auto topo = build_topology(cfg);
  FakeBenchDevice dev;
  BenchOptions o;
  o.batches = {1, 256};
  const auto r = run_bench(cfg, topo, gpu("h200"), dev, o);
  CHECK(r.exit_code == 0);
  CHECK(r.kv_cache_dtype == "fp8_ds_mla");
  CHECK(dev.ceilings_calls == 1);
  REQUIRE(r.rows.size() == 6);
  CHECK(dev.timed.size() == 6);
  const auto& row = r.rows[0];  // c1a b 1, split_kv: 21 us per call with the scheduler
  REQUIRE(row.ran);
  CHECK(row.timing.us_per_call == 21.0);
  CHECK(row.tflops == Approx(2.0 * 64 * 640 * 1024 / 21.0 / 1e6));
  CHECK(row.gbps == Approx(row.shape.bytes / 21.0 / 1e3));
  CHECK(row.bytes_floor_us == Approx(row.shape.bytes / 4000e3));
  CHECK(row.flop_floor_us == Approx(row.shape.flops / 800e6));
  CHECK(row.floor_us == Approx(std::max(row.bytes_floor_us, row.flop_floor_us)));
  CHECK(row.floor_fraction == Approx(row.floor_us / 21.0));
  CHECK(r.rows[1].timing.us_per_call == 20.0);  // c1a b 256: one pass, no scheduler
}

TEST_CASE("bench report: rules and unsupported shapes", "[bench]") {
  const auto cfg = released("deepseek-v4.1-flash.json");
  const auto topo = build_topology(cfg);
  SECTION("nvfp4 on SM90 is rejected by the backend rules: nothing runs, exit 3") {
    FakeBenchDevice dev;
    BenchOptions o;
    o.kv_cache_dtype = "nvfp4_ds_mla";
    o.batches = {8};
    const auto r = run_bench(cfg, topo, gpu("h200"), dev, o);
    CHECK(r.exit_code == 3);
    CHECK(dev.timed.empty());
    CHECK(dev.ceilings_calls == 0);
    CHECK_THAT(r.exit_message, Catch::Contains("nvfp4"));
    o.force = true;
    const auto forced = run_bench(cfg, topo, gpu("h200"), dev, o);
    CHECK(forced.exit_code == 0);
    CHECK(forced.forced);
    CHECK(dev.timed.size() == 3);
  }
  SECTION("a device that refuses a format: those rows say why") {
    FakeBenchDevice dev;
    dev.refuse = "fp8_ds_mla_v4";
    BenchOptions o;
    o.batches = {8};
    const auto r = run_bench(cfg, topo, gpu("h200"), dev, o);
    CHECK(r.exit_code == 3);
    CHECK(r.rows.at(0).reason == "refused fp8_ds_mla_v4");
  }
  SECTION("V3.2: its 656-byte rows are benchmarked") {
    FakeBenchDevice dev;
    const auto v32 = released("deepseek-v3.2.json");
    const auto r = run_bench(v32, build_topology(v32), gpu("h200"), dev, BenchOptions{});
    CHECK(r.exit_code == 0);
    REQUIRE_FALSE(r.rows.empty());
    CHECK(r.rows.front().reason.empty());
  }
}

TEST_CASE("bench --json: the document of a report", "[bench][json]") {
  const auto cfg = released("deepseek-v4.1-flash.json");
  const auto topo = build_topology(cfg);
  FakeBenchDevice dev;
  dev.refuse = "fp8_ds_mla_v4";
  BenchOptions o;
  o.batches = {8};
  o.run.replays = 7;
  const auto refused = run_bench(cfg, topo, gpu("h200"), dev, o);
  FakeBenchDevice ok;
  const auto ran = run_bench(cfg, topo, gpu("h200"), ok, o);
  const cli::BenchGpuInfo g{1, "Fake H200", "9.0", 132, "sm90"};
  const auto j = nlohmann::ordered_json::parse(cli::bench_json("v41.json", g, ran, o.run));
  CHECK(j.begin().key() == "schema");
  CHECK(j.at("schema") == "mla-plan/3");
  CHECK(j.at("tool_version") == kVersion);
  CHECK(j.at("config") == "v41.json");
  CHECK(j.at("device") ==
        nlohmann::ordered_json({{"index", 1}, {"name", "Fake H200"}, {"compute_capability", "9.0"}, {"num_sms", 132}}));
  CHECK(j.at("replays") == 7);
  CHECK(j.at("ceilings").at("matmul_how") == "fake matmul");
  REQUIRE(j.at("rows").size() == ran.rows.size());
  const auto& row = j.at("rows").at(0);
  CHECK(row.at("status") == "ran");
  CHECK(row.at("us_per_call") == ran.rows[0].timing.us_per_call);
  CHECK(row.at("floor_fraction") == ran.rows[0].floor_fraction);
  CHECK(j.at("exit_code") == 0);
  const auto k = nlohmann::ordered_json::parse(cli::bench_json("v41.json", g, refused, o.run));
  CHECK(k.at("exit_code") == 3);
  const auto& r = k.at("rows").at(0);
  CHECK(r.at("status") == "unsupported");
  CHECK(r.at("reason") == "refused fp8_ds_mla_v4");
  CHECK_FALSE(r.contains("us_per_call"));
}

TEST_CASE("bench text: the device line, the ceilings and one line per layer type", "[bench]") {
  const auto cfg = released("deepseek-v4.1-flash.json");
  const auto topo = build_topology(cfg);
  BenchOptions o;
  o.batches = {8};
  o.run.replays = 7;
  FakeBenchDevice ok;
  const auto ran = run_bench(cfg, topo, gpu("h200"), ok, o);
  const cli::BenchGpuInfo g{1, "Fake H200", "9.0", 132, "sm90"};
  std::ostringstream text;
  cli::write_bench_text(text, "v41.json", g, ran, o.run);
  const std::string t = text.str();
  CHECK_THAT(t, Catch::StartsWith("mla-plan bench: v41.json on Fake H200 (sm90, 132 SMs), kv " + ran.kv_cache_dtype));
  CHECK_THAT(t, Catch::Contains(", 7 replays\n"));
  CHECK_THAT(t, Catch::Contains("ceilings: copy "));
  CHECK_THAT(t, Catch::Contains("fake matmul"));
  // The header, one line per row, and the legend line.
  std::size_t lines = 0;
  for (char c : t) lines += c == '\n' ? 1 : 0;
  CHECK(lines >= ran.rows.size() + 3);
  for (const auto& r : ran.rows) CHECK_THAT(t, Catch::Contains(std::string(to_string(r.shape.type))));
  CHECK_THAT(t, Catch::Contains("\nus/call: scheduler (split_kv) + decode + combine (split_kv) in one CUDA graph"));
}
