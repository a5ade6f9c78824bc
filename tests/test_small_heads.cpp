// 8 or 16 query heads per rank through the tool: vLLM 0.31's TRITON_MLA_SPARSE_DSV41 runs them
// unpadded (mla-plan's small-head kernel runs the same shapes), FlashMLA pads them to 64. The kernel
// shapes, the head-padding finding with and without a measured row (rows injected, never the
// table's), the decode plans, and the heads verify and bench run, on host devices (no GPU).

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "cli_run.hpp"
#include "mlaplan/cache/decode.hpp"
#include "mlaplan/cache/scheduler.hpp"
#include "mlaplan/engine/vllm/release.hpp"
#include "mlaplan/gpu_check/bench.hpp"
#include "mlaplan/gpu_check/verify.hpp"
#include "mlaplan/plan/plan.hpp"
#include "mlaplan/rules/head_padding.hpp"
#include "output/bench_output.hpp"
#include "rule_testing.hpp"

using namespace mlaplan;

namespace {

using testing_rules::config_path;
using testing_rules::eval;
using testing_rules::find;
using testing_rules::gpu;

const std::string kTriton = "TRITON_MLA_SPARSE_DSV41";

const testing_rules::Model& v41() { return testing_rules::v41(); }

/// The rules of vLLM 0.31 (the first release with the Triton backend) at `tp`.
RuleOptions options31(std::optional<std::string> backend, std::int64_t tp, const std::string& kv = "auto") {
  RuleOptions o;
  o.layout.attention_backend = std::move(backend);
  o.layout.tensor_parallel_size = tp;
  o.layout.kv_cache_dtype = kv;
  o.layout.release = backend_release_rules(find_vllm_release("0.31"));
  return o;
}

std::string padding_message(const ModelConfig& cfg, const std::string& g, const RuleOptions& o) {
  const auto f = find(eval(cfg, gpu(g), o), "kernel.head_padding", Severity::info);
  return f ? f->finding.message : std::string("(none)");
}

HeadPaddingMeasurement row(std::string_view gpu_id, std::string_view device, Family family, std::int64_t heads,
                           std::int64_t b, double padded, double unpadded) {
  return {gpu_id, device, family, "c1a", heads, b, padded, unpadded, "2026-12-06", "mla-plan bench ... --tp 8"};
}

/// A bench device whose time depends on the heads: 40 us padded to 64, 10 us at 8 or 16.
class HeadsBenchDevice final : public BenchDevice {
 public:
  std::vector<BenchShape> timed;
  bool refuse_small = false;
  BenchCeilings ceilings() override { return {4000.0, "fake copy", 800.0, "fake matmul"}; }
  std::string unsupported_reason(const BenchShape& s) const override {
    return refuse_small && small_head_count(s.h_q) ? "no small-head kernel here" : std::string();
  }
  BenchTiming time(const BenchShape& s, const BenchRunOptions&) override {
    timed.push_back(s);
    BenchTiming t;
    t.us_per_call = small_head_count(s.h_q) ? 10.0 : 40.0;
    t.us_decode = t.us_per_call;
    t.min_us = t.us_per_call;
    return t;
  }
};

}  // namespace

TEST_CASE("decode_heads: the heads verify and bench run, and the other form bench times", "[small-heads]") {
  CHECK(small_head_count(8));
  CHECK(small_head_count(16));
  CHECK_FALSE(small_head_count(32));
  CHECK_FALSE(small_head_count(64));
  auto heads = [](std::int64_t local, std::int64_t backend) {
    const DecodeHeads h = decode_heads(local, backend);
    return std::make_pair(h.h_q, h.compare_h_q);
  };
  using P = std::pair<std::int64_t, std::int64_t>;
  // Unpadded (TRITON_MLA_SPARSE_DSV41): the local heads, compared with the padded 64.
  CHECK(heads(8, 8) == P{8, 64});
  CHECK(heads(16, 16) == P{16, 64});
  // Padded by the backend (FlashMLA): 64, compared with the unpadded local heads.
  CHECK(heads(8, 64) == P{64, 8});
  CHECK(heads(16, 64) == P{64, 16});
  // Nothing to compare: more heads, or no kernel.
  CHECK(heads(32, 64) == P{64, 0});
  CHECK(heads(64, 64) == P{64, 0});
  CHECK(heads(128, 128) == P{128, 0});
  CHECK(heads(8, 0) == P{0, 0});
  CHECK(heads(0, 64) == P{0, 0});
  // What the layouts of the two backends give it.
  const auto& m = v41();
  const auto tri = resolve_layout_options(m.cfg, m.topo, gpu("h200"), options31(kTriton, 8).layout).options;
  const auto mla = resolve_layout_options(m.cfg, m.topo, gpu("h200"), options31(std::nullopt, 8).layout).options;
  CHECK(decode_heads(tri.parallel.local_query_heads, tri.parallel.padded_query_heads).h_q == 8);
  CHECK(decode_heads(mla.parallel.local_query_heads, mla.parallel.padded_query_heads).h_q == 64);
}

TEST_CASE("kernel shapes with TRITON_MLA_SPARSE_DSV41 at TP8 on an H200: 8 heads unpadded", "[small-heads]") {
  const auto& m = v41();
  for (const std::int64_t tp : {8, 4}) {
    INFO("TP " << tp);
    const std::int64_t local = 64 / tp;
    const auto o = options31(kTriton, tp);
    const auto shapes = kernel_shapes(m.cfg, m.topo, gpu("h200"), o.layout);
    REQUIRE_FALSE(shapes.empty());
    int decode = 0;
    for (const auto& s : shapes) {
      INFO(s.phase << " " << s.kernel);
      CHECK(s.local_heads == local);
      CHECK(s.kernel_heads == local);  // not 64
      CHECK(s.status == ShapeStatus::available);
      CHECK(s.kv_layout == "fp8_ds_mla");
      if (s.phase == "decode") {
        ++decode;
        CHECK(s.kernel == "Triton small-head sparse sm90 decode");
        CHECK(s.note == "Triton kernels compiled for the shape at start-up (BLOCK_H 16); the " + std::to_string(local) +
                            " heads unpadded: mla-plan's small-head kernels (small_heads_sm90; small_heads_lean for "
                            "split_kv at small batches) run this shape in verify and bench");
      } else {
        CHECK(s.note.find("small_heads") == std::string::npos);  // mla-plan has no prefill kernel
      }
    }
    CHECK(decode >= 2);
    const auto rs = eval(m.cfg, gpu("h200"), o);
    CHECK(testing_rules::errors(rs) == 0);
    CHECK_FALSE(find(rs, "kernel.shape", Severity::warning));
    CHECK_FALSE(find(rs, "kernel.head_padding", Severity::info));  // nothing is padded
  }
  // FlashMLA, vLLM's default on the same GPU, pads the same 8 heads to 64.
  for (const auto& s : kernel_shapes(m.cfg, m.topo, gpu("h200"), options31(std::nullopt, 8).layout)) {
    CHECK(s.local_heads == 8);
    CHECK(s.kernel_heads == 64);
  }
}

TEST_CASE("kernel.head_padding: what running the heads unpadded saves, measured on this GPU or not at all",
          "[small-heads]") {
  const auto& m = v41();
  const std::string base =
      "TP 8: 8 of 64 query heads per rank run in a 64-head kernel (56 idle, 7/8 of the attention math) on "
      "FLASHMLA_SPARSE_DSV41; unpadded: ";
  const std::string triton =
      " (TRITON_MLA_SPARSE_DSV41 runs 8 heads unpadded on vLLM 0.31.0 with its own Triton kernel, which these times do "
      "not measure)";
  SECTION("no measured row: not measured, and how to measure it") {
    const ScopedHeadPaddingMeasurements none({});
    const auto f = find(eval(m.cfg, gpu("h200"), options31(std::nullopt, 8)), "kernel.head_padding", Severity::info);
    REQUIRE(f);
    CHECK(f->finding.message ==
          base + "not measured on NVIDIA H200 SXM 141GB: run `mla-plan bench CONFIG --tp 8` there" + triton);
    CHECK(f->finding.fix ==
          "DP attention (--data-parallel-size) keeps all 64 heads on each rank, or use --attention-backend "
          "TRITON_MLA_SPARSE_DSV41 (vLLM 0.31.0 runs the 8 heads unpadded on SM90)");
    // TP4: 16 heads.
    CHECK(padding_message(m.cfg, "h200", options31(std::nullopt, 4)) ==
          "TP 4: 16 of 64 query heads per rank run in a 64-head kernel (48 idle, 3/4 of the attention math) on "
          "FLASHMLA_SPARSE_DSV41; unpadded: not measured on NVIDIA H200 SXM 141GB: run `mla-plan bench CONFIG --tp "
          "4` there (TRITON_MLA_SPARSE_DSV41 runs 16 heads unpadded on vLLM 0.31.0 with its own Triton kernel, which "
          "these times do not measure)");
  }
  SECTION("rows of this GPU: quoted by b; other GPUs', heads' and families' rows are not") {
    const ScopedHeadPaddingMeasurements rows({
        row("h200", "NVIDIA H200", Family::deepseek_v41, 8, 64, 50.0, 21.0),
        row("h200", "NVIDIA H200", Family::deepseek_v41, 8, 1, 20.0, 10.0),
        row("h200", "NVIDIA H200", Family::deepseek_v41, 16, 8, 30.0, 20.0),  // TP4's
        row("b200", "NVIDIA B200", Family::deepseek_v41, 8, 8, 30.0, 15.0),   // another GPU
        row("h200", "NVIDIA H200", Family::deepseek_v4, 8, 8, 30.0, 15.0),    // another model
    });
    CHECK(padding_message(m.cfg, "h200", options31(std::nullopt, 8)) ==
          base +
              "measured on NVIDIA H200 (2026-12-06): mla-plan's unpadded 8-head kernel takes 0.50 of its padded "
              "64-head kernel's time at b 1 "
              "(c1a: 10.0 us against 20.0 us), 0.42 at b 64 (c1a: 21.0 us against 50.0 us)" +
              triton);
    CHECK_THAT(
        padding_message(m.cfg, "h200", options31(std::nullopt, 4)),
        Catch::Contains("unpadded: measured on NVIDIA H200 (2026-12-06): mla-plan's unpadded 16-head kernel takes "
                        "0.67 of its padded 64-head kernel's time at b 8 (c1a: 20.0 us against 30.0 us) (TRITON"));
    // An H100 has no row: not measured there.
    CHECK_THAT(padding_message(m.cfg, "h100", options31(std::nullopt, 8)),
               Catch::Contains("unpadded: not measured on NVIDIA H100 SXM 80GB: run `mla-plan bench CONFIG --tp 8`"));
    // A device read at run time matches by its name.
    Target detected = detected_target("NVIDIA H200", {9, 0}, 132, std::int64_t{140} << 30);
    CHECK_THAT(head_padding_measured_text(detected, Family::deepseek_v41, 8, 8, head_padding_measurements()),
               Catch::StartsWith("measured on NVIDIA H200 (2026-12-06): mla-plan's unpadded 8-head kernel takes 0.50"));
    detected.name = "NVIDIA H200 NVL";
    CHECK_THAT(head_padding_measured_text(detected, Family::deepseek_v41, 8, 8, head_padding_measurements()),
               Catch::StartsWith("not measured on NVIDIA H200 NVL: run `mla-plan bench CONFIG --tp 8` there"));
  }
  SECTION(
      "where the Triton backend does not apply, no Triton option; where mla-plan's kernel cannot run it, no "
      "measurement either") {
    const ScopedHeadPaddingMeasurements none({});
    // Before 0.31: no such backend.
    RuleOptions o30 = options31(std::nullopt, 8);
    o30.layout.release = backend_release_rules(find_vllm_release("0.30"));
    const auto f30 = find(eval(m.cfg, gpu("h200"), o30), "kernel.head_padding", Severity::info);
    REQUIRE(f30);
    CHECK_THAT(f30->finding.message, Catch::EndsWith("run `mla-plan bench CONFIG --tp 8` there"));
    CHECK(f30->finding.fix == "DP attention (--data-parallel-size) keeps all 64 heads on each rank");
    // A kv dtype the Triton backend refuses (fp8_e4m3 becomes fp8_ds_mla on FlashMLA).
    const auto e4 =
        find(eval(m.cfg, gpu("h200"), options31(std::nullopt, 8, "fp8_e4m3")), "kernel.head_padding", Severity::info);
    REQUIRE(e4);
    CHECK_THAT(e4->finding.message, !Catch::Contains("TRITON"));
    CHECK_THAT(e4->finding.fix, !Catch::Contains("TRITON"));
    // SM100: FlashMLA over fp8_ds_mla rows is measurable there, the Triton backend is SM90's.
    const std::string b200 = padding_message(m.cfg, "b200", options31(std::nullopt, 8, "fp8_ds_mla"));
    CHECK_THAT(b200, Catch::Contains("unpadded: not measured on NVIDIA B200 180GB"));
    CHECK_THAT(b200, !Catch::Contains("TRITON"));
    // Mega attention's nvfp4_ds_mla rows: no small-head kernel reads them, nothing to measure.
    const std::string mega = padding_message(m.cfg, "b200", options31(std::nullopt, 8));
    CHECK_THAT(mega, Catch::EndsWith("of the attention math) on FLASHMLA_MEGA_ATTN_DSV41"));
    // V4.0 and V3.2: measurable (584 and 656 rows), no Triton backend.
    const std::string v40 = padding_message(testing_rules::v40().cfg, "h200", options31(std::nullopt, 8));
    CHECK_THAT(v40, Catch::Contains("unpadded: not measured on NVIDIA H200 SXM 141GB"));
    CHECK_THAT(v40, !Catch::Contains("TRITON"));
    const std::string v32 = padding_message(testing_rules::v32().cfg, "h200", options31(std::nullopt, 8));
    CHECK_THAT(v32,
               Catch::Contains("TP 8: 16 of 128 query heads") &&
                   Catch::Contains("not measured on NVIDIA H200 SXM 141GB: run `mla-plan bench CONFIG --tp 8` there") &&
                   !Catch::Contains("TRITON"));
  }
}

TEST_CASE("decode plans of 8 or 16 unpadded heads: sm90-sparse's partitions, one CTA covering every head",
          "[small-heads]") {
  CHECK(sched_params(SchedKernel::sm90_sparse, 132, 1, 8).num_sm_parts == 132);
  CHECK(sched_params(SchedKernel::sm90_sparse, 132, 2, 16).num_sm_parts == 66);
  CHECK(sched_params(SchedKernel::sm90_sparse, 132, 1, 16).fixed_overhead == 5);
  CHECK(sched_params(SchedKernel::sm90_sparse, 132, 1, 8).num_sm_parts ==
        sched_params(SchedKernel::sm90_sparse, 132, 1, 64).num_sm_parts);
  CHECK_THROWS_AS(sched_params(SchedKernel::sm90_sparse, 132, 1, 32), Error);
  CHECK(decode_kernel_for({9, 0}, 8) == SchedKernel::sm90_sparse);
  CHECK(decode_kernel_for({9, 0}, 16) == SchedKernel::sm90_sparse);
  CHECK_FALSE(decode_kernel_for({10, 0}, 8));  // the small-head plans are SM90's (the Triton backend's arch)
  CHECK_FALSE(decode_kernel_for({12, 0}, 16));
  CHECK_FALSE(decode_kernel_for({9, 0}, 32));
  // No cluster form: one_pass or split_kv for every batch.
  for (const std::int64_t b : {1, 8, 20, 34, 55, 66, 100, 132, 256}) {
    for (const std::int64_t h : {8, 16}) {
      INFO("b " << b << " h_q " << h);
      CHECK(choose_decode_mode(b, 1, h, 128, true, 512, 132).mode != DecodeMode::cluster_split);
    }
  }
  // The Triton plan: no FlashMLA plan in it; plan_decode_schedules (what verify runs) at h_q 8.
  PlanRequest r;
  r.target.gpu = "h200";
  r.layout.tensor_parallel_size = 8;
  r.layout.attention_backend = kTriton;
  r.suggestions = false;
  const Plan p = make_plan(config_path("deepseek-v4.1-flash.json"), r);
  REQUIRE(p.layout);
  CHECK(p.exit_code == 0);
  CHECK(p.schedules.empty());
  const auto& m = v41();
  const auto s = plan_decode_schedules(m.cfg, m.topo, *p.layout, p.batch);
  REQUIRE(s.size() == 3);
  for (const auto& x : s) {
    CHECK(x.input.h_q == 8);
    CHECK(x.input.kernel == SchedKernel::sm90_sparse);
    CHECK(x.plan.params.num_sm_parts == 132);
    CHECK(x.mode.mode != DecodeMode::cluster_split);
  }
}

TEST_CASE("plan with TRITON_MLA_SPARSE_DSV41: the unpadded shapes and no FlashMLA plan", "[small-heads][cli]") {
  const auto r = testing_cli::run(
      {testing_cli::config_file("deepseek-v4.1-flash.json"), "--tp", "8", "--attention-backend", kTriton, "--details"});
  REQUIRE(r.code == 0);
  CHECK_THAT(r.out, Catch::Contains("mla-plan's small-head kernel runs the same unpadded shapes in verify and bench"));
  CHECK_THAT(r.out, Catch::Contains(" 8 -> 8 "));
  CHECK_THAT(r.out, !Catch::Contains("8 -> 64"));
  CHECK_THAT(r.out, Catch::Contains("\ndecode schedules: none; TRITON_MLA_SPARSE_DSV41 takes no FlashMLA tile plan: "
                                    "its metadata builder asks for an empty one and its Triton kernel splits the keys "
                                    "itself, so no FlashMLA plan describes its decode\n"));
  CHECK_THAT(r.out, Catch::Contains("parallelism: TP 8 (8 query heads per rank, unpadded)"));
  CHECK_THAT(r.out, !Catch::Contains("SM partitions busy"));
  CHECK_THAT(r.out, !Catch::Contains("-head kernel ("));  // no head-padding note: nothing is padded
}

TEST_CASE("verify runs the heads the backend runs: 8 unpadded with the Triton backend, 64 with FlashMLA",
          "[small-heads][verify]") {
  const auto& m = v41();
  auto dev = make_host_verify_device();
  VerifyOptions o;
  o.batch.context_lens = {1, 130, 700, 4000};
  o.timing_iterations = 1;
  o.kv_cache_dtypes = {"fp8_ds_mla"};
  o.layout.tensor_parallel_size = 8;
  o.layout.attention_backend = kTriton;
  const auto tri = run_verify(m.cfg, m.topo, gpu("h200"), *dev, o);
  INFO(tri.exit_message);
  CHECK(tri.exit_code == 0);
  REQUIRE(tri.cells.size() == 3);
  for (const auto& c : tri.cells) {
    INFO(to_string(c.type) << ": " << c.reason);
    CHECK(c.status == VerifyStatus::pass);
    CHECK(c.h_q == 8);
    CHECK(c.launch.grid_z == 1);  // a CTA covers all 8 heads
  }
  // cluster_split: the small-head kernel has none, one_pass runs.
  o.decode_modes = {DecodeMode::cluster_split};
  const auto cl = run_verify(m.cfg, m.topo, gpu("h200"), *dev, o);
  REQUIRE_FALSE(cl.cells.empty());
  for (const auto& c : cl.cells) {
    CHECK(c.status == VerifyStatus::pass);
    CHECK(c.launch.mode == DecodeMode::one_pass);
    CHECK(c.launch.fallback == "cluster_split has no small-head kernel; ran one_pass");
  }
  // FlashMLA pads: 64.
  o.decode_modes.clear();
  o.layout.attention_backend.reset();
  const auto mla = run_verify(m.cfg, m.topo, gpu("h200"), *dev, o);
  CHECK(mla.exit_code == 0);
  for (const auto& c : mla.cells) CHECK(c.h_q == 64);
  // The rank options of a TP x DP layout keep the backend's heads.
  o.layout.attention_backend = kTriton;
  o.layout.data_parallel_size = 2;
  const auto rank = run_verify(m.cfg, m.topo, gpu("h200"), *dev, verify_rank_options(m.cfg, o, 1));
  REQUIRE_FALSE(rank.cells.empty());
  CHECK(rank.cells.front().h_q == 8);
}

TEST_CASE("bench times 8 or 16 heads both unpadded and padded to 64", "[small-heads][bench]") {
  const auto& m = v41();
  BenchOptions o;
  o.batches = {1, 64};
  o.types = {LayerType::c1a};
  o.layout.tensor_parallel_size = 8;
  SECTION("FlashMLA pads: the row at 64, the unpadded 8 beside it") {
    HeadsBenchDevice dev;
    const auto r = run_bench(m.cfg, m.topo, gpu("h200"), dev, o);
    CHECK(r.exit_code == 0);
    REQUIRE(r.rows.size() == 2);
    CHECK(dev.timed.size() == 4);
    for (const auto& row : r.rows) {
      CHECK(row.shape.h_q == 64);
      CHECK(row.shape.compare_h_q == 8);
      REQUIRE(row.heads);
      CHECK(row.heads->ran);
      CHECK(row.heads->shape.h_q == 8);
      CHECK(row.heads->shape.compare_h_q == 0);
      CHECK(row.heads->shape.flops == row.shape.flops / 8);  // FLOPs scale with the heads
      CHECK(row.heads->shape.mode.mode != DecodeMode::cluster_split);
      CHECK(row.heads->unpadded_h_q == 8);
      CHECK(row.heads->padded_h_q == 64);
      CHECK(row.heads->unpadded_us == 10.0);
      CHECK(row.heads->padded_us == 40.0);
      CHECK(row.heads->unpadded_over_padded == 0.25);
    }
    const cli::BenchGpuInfo g{0, "Fake H200", "9.0", 132, "sm90"};
    std::ostringstream text;
    cli::write_bench_text(text, "v41.json", g, r, o.run);
    CHECK_THAT(text.str(), Catch::Contains("\n  unpadded 8 heads: 10.0 us, padded to 64: 40.0 us, 0.25x (h_q 8: "));
    CHECK_THAT(text.str(), Catch::Contains("\nunpadded / padded: "));
    const auto j = nlohmann::json::parse(cli::bench_json("v41.json", g, r, o.run));
    const auto& h = j.at("rows").at(0).at("heads_comparison");
    CHECK(h.at("h_q") == 8);
    CHECK(h.at("status") == "ran");
    CHECK(h.at("unpadded_us") == 10.0);
    CHECK(h.at("padded_us") == 40.0);
    CHECK(h.at("unpadded_over_padded") == 0.25);
  }
  SECTION("TRITON_MLA_SPARSE_DSV41 runs them unpadded: the row at 8, padded 64 beside it") {
    HeadsBenchDevice dev;
    o.layout.attention_backend = kTriton;
    const auto r = run_bench(m.cfg, m.topo, gpu("h200"), dev, o);
    CHECK(r.exit_code == 0);
    REQUIRE(r.rows.size() == 2);
    for (const auto& row : r.rows) {
      INFO(row.reason);
      CHECK(row.ran);
      CHECK(row.shape.h_q == 8);
      REQUIRE(row.heads);
      CHECK(row.heads->shape.h_q == 64);
      CHECK(row.heads->unpadded_us == 10.0);
      CHECK(row.heads->padded_us == 40.0);
      CHECK(row.heads->unpadded_over_padded == 0.25);
    }
  }
  SECTION("a device without the small-head kernel: the padded row, the comparison says why") {
    HeadsBenchDevice dev;
    dev.refuse_small = true;
    const auto r = run_bench(m.cfg, m.topo, gpu("h200"), dev, o);
    REQUIRE_FALSE(r.rows.empty());
    const auto& row = r.rows.front();
    CHECK(row.ran);
    REQUIRE(row.heads);
    CHECK_FALSE(row.heads->ran);
    CHECK(row.heads->reason == "no small-head kernel here");
    CHECK(row.heads->unpadded_over_padded == 0);
    std::ostringstream text;
    cli::write_bench_text(text, "v41.json", cli::BenchGpuInfo{0, "Fake", "9.0", 132, "sm90"}, r, o.run);
    CHECK_THAT(text.str(), Catch::Contains("  unpadded 8 heads: not timed, padded to 64: 40.0 us (h_q 8: no small-head "
                                           "kernel here)\n"));
  }
  SECTION("64 heads per rank: nothing to compare") {
    HeadsBenchDevice dev;
    o.layout.tensor_parallel_size = 1;
    const auto r = run_bench(m.cfg, m.topo, gpu("h200"), dev, o);
    for (const auto& row : r.rows) CHECK_FALSE(row.heads);
    const auto j =
        nlohmann::json::parse(cli::bench_json("v41.json", cli::BenchGpuInfo{0, "Fake", "9.0", 132, "sm90"}, r, o.run));
    CHECK(j.at("rows").at(0).at("heads_comparison").is_null());
  }
}
