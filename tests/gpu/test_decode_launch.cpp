// plan_decode_launch: the one host decision of a decode call (kernel, mode as run, grid, clusters,
// the 2-CTA pair, PDL, combine), over described devices. No GPU is used: this runs in CI.

#include <catch2/catch.hpp>

#include <array>
#include <cstdint>
#include <string>

#include "mlaplan/cache/decode_mode.hpp"
#include "mlaplan/base/error.hpp"
#include "mlaplan_kernels/kernels.hpp"

namespace mk = mlaplan::kernels;
using mlaplan::DecodeMode;

namespace {

// Host memory standing in for device buffers: plan_decode_launch only checks pointers and strides.
alignas(16) std::array<std::uint8_t, 4096> g_mem{};

mk::DecodeParams params(DecodeMode mode, std::int32_t b, std::int32_t h_q, bool extra,
                        mk::RowFormat main = mk::RowFormat::fp8_ds_mla_584,
                        mk::RowFormat extra_format = mk::RowFormat::fp8_ds_mla_584) {
  mk::DecodeParams p;
  p.mode = mode;
  p.b = b;
  p.s_q = 1;
  p.h_q = h_q;
  auto* u16 = reinterpret_cast<std::uint16_t*>(g_mem.data());
  auto* i32 = reinterpret_cast<std::int32_t*>(g_mem.data());
  auto* f32 = reinterpret_cast<float*>(g_mem.data());
  p.q = u16;
  p.out = u16;
  p.lse = f32;
  p.indices = i32;
  p.topk = 128;
  p.main = {main, g_mem.data(), 32, mk::padded_page_stride(main, 32), 4};
  p.has_extra = extra;
  if (extra) {
    p.extra = {extra_format, g_mem.data(), 64, mk::padded_page_stride(extra_format, 64), 4};
    p.extra_indices = i32;
    p.extra_topk = 512;
  }
  if (mode == DecodeMode::split_kv) {
    p.num_sm_parts = mk::decode_num_sm_parts(132, 1, h_q);
    p.sched_records = i32;
    p.num_splits = i32;
    p.o_accum = f32;
    p.lse_accum = f32;
  }
  return p;
}

mk::DecodeDevice device(int major, int minor, int sms) {
  mk::DecodeDevice d;
  d.cc_major = major;
  d.cc_minor = minor;
  d.num_sms = sms;
  return d;
}

}  // namespace

TEST_CASE("decode launch: kernel per device and format, PDL and combine", "[launch]") {
  const auto h200 = device(9, 0, 132);
  const auto b200 = device(10, 0, 148);
  auto l = mk::plan_decode_launch(params(DecodeMode::split_kv, 64, 64, true), h200);
  CHECK(l.kernel == mk::DecodeKernel::sm90_ws);
  CHECK(l.mode == DecodeMode::split_kv);
  CHECK(l.dims.grid_x == 132u);
  CHECK(l.dims.grid_z == 1u);
  CHECK(l.dims.block == 512u);
  CHECK(l.pdl);
  CHECK(l.combine);
  CHECK_FALSE(l.pair);
  CHECK(l.fallback.empty());
  CHECK(l.describe() == "sm90_ws split_kv, grid 132x1x1, 512 threads, PDL, combine");

  auto p = params(DecodeMode::split_kv, 64, 64, true);
  p.force.no_pdl = true;
  CHECK_FALSE(mk::plan_decode_launch(p, h200).pdl);
  p.force = {};
  p.force.kernel = mk::DecodeKernel::generic;
  CHECK(mk::plan_decode_launch(p, h200).kernel == mk::DecodeKernel::generic);

  // The 528 formats and every other arch run the portable kernel.
  CHECK(mk::plan_decode_launch(
            params(DecodeMode::split_kv, 64, 64, true, mk::RowFormat::v41_fp8_528, mk::RowFormat::v41_fp4_288), h200)
            .kernel == mk::DecodeKernel::generic);
  CHECK(mk::plan_decode_launch(params(DecodeMode::split_kv, 64, 64, true), b200).kernel == mk::DecodeKernel::generic);
  p.force.kernel = mk::DecodeKernel::sm90_ws;
  CHECK_THROWS_AS(mk::plan_decode_launch(p, b200), mlaplan::Error);
  // one_pass: no combine, no PDL, one CTA per request.
  l = mk::plan_decode_launch(params(DecodeMode::one_pass, 20, 64, true), b200);
  CHECK(l.dims.grid_x == 20u);
  CHECK_FALSE(l.combine);
  CHECK_FALSE(l.pdl);
}

TEST_CASE("decode launch: cluster_split, its halving and its fallbacks", "[launch]") {
  const auto h200 = device(9, 0, 132);
  // b 24 at h_q 64, topk 128 + 512 (10 blocks): C = cluster_split_ctas(24, 10, 132).
  const auto c = mlaplan::cluster_split_ctas(24, 10, 132);
  REQUIRE(c == 4);
  auto l = mk::plan_decode_launch(params(DecodeMode::cluster_split, 24, 64, true), h200);
  CHECK(l.mode == DecodeMode::cluster_split);
  CHECK(l.dims.cluster_x == 4u);
  CHECK(l.dims.grid_x == 96u);
  CHECK(l.fallback.empty());
  CHECK(l.describe() == "sm90_ws cluster_split, grid 96x1x1, cluster 4 CTAs per request, 512 threads");

  // Clusters of 4 do not fit, 2 do: the launch takes 2 and says so.
  auto only2 = h200;
  only2.clusters_fit = [](const mk::LaunchDims& d, bool) { return d.cluster_x <= 2; };
  l = mk::plan_decode_launch(params(DecodeMode::cluster_split, 24, 64, true), only2);
  CHECK(l.dims.cluster_x == 2u);
  CHECK(l.dims.grid_x == 48u);
  CHECK(l.fallback == "clusters of 4 CTAs do not fit; ran 2");

  // No cluster fits: one CTA per request, as one_pass.
  auto none = h200;
  none.clusters_fit = [](const mk::LaunchDims& d, bool) { return d.cluster_x <= 1 && d.cluster_z <= 1; };
  l = mk::plan_decode_launch(params(DecodeMode::cluster_split, 24, 64, true), none);
  CHECK(l.asked == DecodeMode::cluster_split);
  CHECK(l.mode == DecodeMode::one_pass);
  CHECK(l.dims.cluster_x == 1u);
  CHECK(l.dims.grid_x == 24u);
  CHECK(l.fallback == "clusters of 4 CTAs do not fit on this device; ran one_pass");

  // A forced cluster size.
  auto p = params(DecodeMode::cluster_split, 24, 64, true);
  p.force.cluster_ctas = 2;
  CHECK(mk::plan_decode_launch(p, h200).dims.cluster_x == 2u);

  // The portable kernel has no clusters: cluster_split runs as one_pass there.
  l = mk::plan_decode_launch(params(DecodeMode::cluster_split, 24, 64, true), device(10, 0, 148));
  CHECK(l.kernel == mk::DecodeKernel::generic);
  CHECK(l.mode == DecodeMode::one_pass);
  CHECK(l.fallback == "cluster_split needs the sm90_ws kernel (compute capability 9.0, fp8_ds_mla 584); ran one_pass");
}

TEST_CASE("decode launch: one CTA per SM over request ranges, the 2-CTA pair", "[launch]") {
  const auto h200 = device(9, 0, 132);
  // one_pass with 200 x 2 CTAs > 132 SMs on sm90_ws: 132 / 2 = 66 CTAs along x.
  auto l = mk::plan_decode_launch(params(DecodeMode::one_pass, 200, 128, true), h200);
  CHECK(l.dims.grid_x == 66u);
  CHECK(l.dims.grid_z == 2u);
  // h_q 128 split_kv, b 64: 64 x 10 blocks >= 2 x 66 partitions: the pair pays and fits.
  l = mk::plan_decode_launch(params(DecodeMode::split_kv, 64, 128, true), h200);
  CHECK(l.dims.grid_x == 66u);
  CHECK(l.pair);
  CHECK(l.dims.cluster_z == 2u);
  // b 4: 40 blocks < 132: one CTA per 64 heads.
  l = mk::plan_decode_launch(params(DecodeMode::split_kv, 4, 128, true), h200);
  CHECK_FALSE(l.pair);
  // Forced on where the pairs do not fit: the fallback says so; forced off: no pair.
  auto nofit = h200;
  nofit.clusters_fit = [](const mk::LaunchDims& d, bool) { return d.cluster_z <= 1; };
  auto p = params(DecodeMode::split_kv, 4, 128, true);
  p.force.pair = 1;
  l = mk::plan_decode_launch(p, nofit);
  CHECK_FALSE(l.pair);
  CHECK(l.fallback == "2-CTA pairs do not fit on this device; ran one CTA per 64 heads");
  CHECK(mk::plan_decode_launch(p, h200).pair);
  p = params(DecodeMode::split_kv, 64, 128, true);
  p.force.pair = -1;
  CHECK_FALSE(mk::plan_decode_launch(p, h200).pair);
  // h_q 64 never pairs.
  CHECK_FALSE(mk::plan_decode_launch(params(DecodeMode::split_kv, 64, 64, true), h200).pair);
}

TEST_CASE("decode launch: parameter errors are the checks' own", "[launch]") {
  auto p = params(DecodeMode::split_kv, 64, 96, true);
  CHECK_THROWS_AS(mk::plan_decode_launch(p, device(9, 0, 132)), mlaplan::Error);
  p = params(DecodeMode::split_kv, 64, 64, true, mk::RowFormat::v41_fp4_288, mk::RowFormat::v41_fp4_288);
  CHECK_THROWS_AS(mk::plan_decode_launch(p, device(9, 0, 132)), mlaplan::Error);
  CHECK(std::string(mk::to_string(mk::DecodeKernel::sm90_ws)) == "sm90_ws");
}

TEST_CASE("plan_decode_launch: V3.2's 656-byte rows and the plain rows run the portable kernel", "[decode_launch]") {
  const auto h200 = device(9, 0, 132);
  auto p = params(DecodeMode::split_kv, 8, 128, false, mk::RowFormat::fp8_ds_mla_656);
  p.d_qk = 576;
  p.topk = 2048;
  const auto L = mk::plan_decode_launch(p, h200);
  CHECK(L.kernel == mk::DecodeKernel::generic);
  CHECK(L.mode == DecodeMode::split_kv);
  CHECK(L.dims.block == 512);
  CHECK(L.dims.grid_x == 66);
  CHECK(L.dims.grid_z == 2);
  // Q and K tiles of 64 x (576 + 8) bf16, two score halves (P inside the second), raw rows 672 apart.
  CHECK(L.dims.smem_bytes == 2u * 64 * 584 * 2 + 2u * 64 * 68 * 4 + 64u * 672 + 3u * 64 * 4 + 2u * 64 * 4);
  CHECK(L.combine);
  // cluster_split has no portable kernel: one_pass, and the launch says so.
  p = params(DecodeMode::cluster_split, 8, 64, false, mk::RowFormat::fp8_ds_mla_656);
  p.d_qk = 576;
  const auto C = mk::plan_decode_launch(p, h200);
  CHECK(C.mode == DecodeMode::one_pass);
  CHECK(C.fallback == "cluster_split needs the sm90_ws kernel (compute capability 9.0, fp8_ds_mla 584); ran one_pass");
  // d_qk must be the rows' dims.
  p.d_qk = 512;
  try {
    (void)mk::plan_decode_launch(p, h200);
    FAIL("expected an error");
  } catch (const mlaplan::Error& e) {
    CHECK(e.kind() == mlaplan::ErrorKind::usage);
    CHECK(std::string(e.what()) == "decode: d_qk 512 does not match the main cache's fp8_ds_mla_656 rows (576 dims)");
  }
  // bf16 rows: no staging area.
  const auto B = mk::plan_decode_launch(
      params(DecodeMode::one_pass, 4, 64, true, mk::RowFormat::bf16_1024, mk::RowFormat::bf16_1024), h200);
  CHECK(B.kernel == mk::DecodeKernel::generic);
  CHECK(B.dims.smem_bytes == 2u * 64 * 520 * 2 + 2u * 64 * 68 * 4 + 64u * 72 * 2 + 3u * 64 * 4 + 2u * 64 * 4);
  // fp8 per-tensor rows: staged like the others; the scale must be a positive finite number.
  auto f = params(DecodeMode::one_pass, 4, 64, true, mk::RowFormat::fp8_pt_512, mk::RowFormat::fp8_pt_512);
  CHECK(mk::plan_decode_launch(f, h200).dims.smem_bytes ==
        2u * 64 * 520 * 2 + 2u * 64 * 68 * 4 + 64u * 72 * 2 + 64u * 592 + 3u * 64 * 4 + 2u * 64 * 4);
  f.extra.scale = 0.0f;
  CHECK_THROWS_WITH(mk::plan_decode_launch(f, h200),
                    "extra cache: the per-tensor scale of fp8_pt_512 must be finite and > 0 (got 0.000000)");
  // A pair the table does not list: refused with the list.
  try {
    (void)mk::plan_decode_launch(
        params(DecodeMode::one_pass, 4, 64, true, mk::RowFormat::bf16_1024, mk::RowFormat::fp8_pt_512), h200);
    FAIL("expected an error");
  } catch (const mlaplan::Error& e) {
    CHECK(e.kind() == mlaplan::ErrorKind::unsupported);
    CHECK_THAT(std::string(e.what()), Catch::StartsWith("no decode kernel for bf16_1024 + fp8_pt_512; compiled: "));
    CHECK_THAT(std::string(e.what()), Catch::Contains("fp8_ds_mla_656 alone"));
  }
}

TEST_CASE("row formats of the kernels: bytes, dims, alignment", "[decode_launch]") {
  CHECK(mk::row_bytes(mk::RowFormat::fp8_ds_mla_656) == 656);
  CHECK(mk::row_dims(mk::RowFormat::fp8_ds_mla_656) == 576);
  CHECK(mk::row_bytes(mk::RowFormat::bf16_1024) == 1024);
  CHECK(mk::row_bytes(mk::RowFormat::fp8_pt_512) == 512);
  CHECK(mk::row_dims(mk::RowFormat::fp8_ds_mla_584) == 512);
  CHECK(mk::padded_page_stride(mk::RowFormat::fp8_ds_mla_656, 64) == 64 * 656);
  CHECK(mk::padded_page_stride(mk::RowFormat::bf16_1024, 3) == 3072);
  CHECK(mk::padded_page_stride(mk::RowFormat::fp8_pt_512, 3) == 1536);
}

TEST_CASE("no usable GPU: each cause has its own sentence", "[device]") {
  mk::DeviceProbe p;
  CHECK(mk::device_problem_message(p, "verify").empty());
  p.problem = mk::DeviceProblem::no_driver;
  CHECK(mk::device_problem_message(p, "verify") ==
        "no NVIDIA driver on this machine (the CUDA runtime reports none): verify runs the project's kernels on a "
        "local GPU (plan, check and report need none)");
  p.problem = mk::DeviceProblem::driver_too_old;
  p.driver_version = 12040;
  p.runtime_version = 13000;
  CHECK(mk::device_problem_message(p, "bench") ==
        "the NVIDIA driver supports CUDA 12.4, older than this build's CUDA 13.0 runtime: update the driver (bench "
        "runs the project's kernels on a local GPU (plan, check and report need none))");
  p.problem = mk::DeviceProblem::no_device;
  p.driver_version = 13000;
  CHECK(mk::device_problem_message(p, "verify") ==
        "the NVIDIA driver (CUDA 13.0) finds no CUDA device: verify runs the project's kernels on a local GPU (plan, "
        "check and report need none)");
  p.problem = mk::DeviceProblem::other;
  p.detail = "cudaErrorOperatingSystem: OS call failed or operation not supported on this OS";
  CHECK(mk::device_problem_message(p, "verify") ==
        "the CUDA runtime could not count the devices (cudaErrorOperatingSystem: OS call failed or operation not "
        "supported on this OS): verify runs the project's kernels on a local GPU (plan, check and report need none)");
  CHECK(mk::unsupported_device_message(1, "NVIDIA A100-SXM4-80GB", 8, 0) ==
        "device 1 (NVIDIA A100-SXM4-80GB, compute capability 8.0) is not a GPU the kernels were built for: they run "
        "on compute capability 9.0 (sm_90a: H100, H200) and 10.0 (sm_100a: B200, GB200); plan and check still plan "
        "for it");
  // This machine: either a device, or one of the causes with its sentence (never a bare CUDA error).
  const mk::DeviceProbe here = mk::probe_devices();
  if (here.problem == mk::DeviceProblem::none) {
    CHECK(here.count > 0);
  } else {
    CHECK(here.count == 0);
    CHECK_FALSE(mk::device_problem_message(here, "verify").empty());
  }
}

TEST_CASE("plan_decode_launch: h_q 8 and 16 run the small-head kernels unpadded", "[launch]") {
  for (const int h : {8, 16}) {
    INFO("h_q " << h);
    // split_kv on sm_90a, 584 rows: the warp-specialised small-head kernel by default, one CTA
    // per partition (132 / s_q on 132 SMs), all heads in it, 512 threads, PDL and combine; in
    // one_pass a CTA per request up to one per SM, then request ranges.
    auto p = params(DecodeMode::split_kv, 64, h, true);
    CHECK(p.num_sm_parts == 132);
    auto l = mk::plan_decode_launch(p, device(9, 0, 132));
    CHECK(l.kernel == mk::DecodeKernel::small_heads_sm90);
    CHECK(l.dims.grid_x == 132);
    CHECK(l.dims.grid_z == 1);
    CHECK(l.dims.block == 512);
    CHECK(l.dims.smem_bytes > 150u * 1024u);
    CHECK(l.dims.smem_bytes <= 227u * 1024u);
    CHECK(l.combine);
    CHECK(l.pdl);
    CHECK(l.describe().find("small_heads_sm90 split_kv, grid 132x1x1, 512 threads, PDL, combine") == 0);
    CHECK(mk::plan_decode_launch(params(DecodeMode::one_pass, 37, h, true), device(9, 0, 132)).dims.grid_x == 37);
    CHECK(mk::plan_decode_launch(params(DecodeMode::one_pass, 200, h, true), device(9, 0, 132)).dims.grid_x == 132);
    // Asked for by name it is the same launch.
    auto pw = params(DecodeMode::split_kv, 64, h, true);
    pw.force.kernel = mk::DecodeKernel::small_heads_sm90;
    CHECK(mk::plan_decode_launch(pw, device(9, 0, 132)).describe() == l.describe());
    // Forced: the portable small-head kernel, 256 threads, a CTA per request in one_pass.
    auto pp = params(DecodeMode::split_kv, 64, h, true);
    pp.force.kernel = mk::DecodeKernel::small_heads;
    l = mk::plan_decode_launch(pp, device(9, 0, 132));
    CHECK(l.kernel == mk::DecodeKernel::small_heads);
    CHECK(l.dims.block == 256);
    CHECK(l.dims.smem_bytes > 200u * 1024u);
    CHECK(l.dims.smem_bytes <= 227u * 1024u);
    CHECK(l.describe().find("small_heads split_kv, grid 132x1x1, 256 threads, PDL, combine") == 0);
    auto po = params(DecodeMode::one_pass, 200, h, true);
    po.force.kernel = mk::DecodeKernel::small_heads;
    CHECK(mk::plan_decode_launch(po, device(9, 0, 132)).dims.grid_x == 200);
    // Elsewhere (sm_100a): the portable one, a CTA per request in one_pass; cluster_split has no
    // small-head form and runs one_pass.
    l = mk::plan_decode_launch(params(DecodeMode::one_pass, 37, h, true), device(10, 0, 148));
    CHECK(l.kernel == mk::DecodeKernel::small_heads);
    CHECK(l.dims.grid_x == 37);
    CHECK_FALSE(l.combine);
    l = mk::plan_decode_launch(params(DecodeMode::one_pass, 200, h, true), device(10, 0, 148));
    CHECK(l.dims.grid_x == 200);
    auto ps = params(DecodeMode::split_kv, 64, h, true);
    ps.force.kernel = mk::DecodeKernel::small_heads_sm90;
    CHECK_THROWS_AS(mk::plan_decode_launch(ps, device(10, 0, 148)), mlaplan::Error);
    l = mk::plan_decode_launch(params(DecodeMode::cluster_split, 37, h, true), device(9, 0, 132));
    CHECK(l.mode == DecodeMode::one_pass);
    CHECK(l.dims.cluster_x == 1);
    CHECK(l.fallback == "cluster_split has no small-head kernel; ran one_pass");
    // V3.2's 656-byte rows: the portable small-head kernel, with its own (two-stage) shared memory.
    auto v32 = params(DecodeMode::split_kv, 4, h, false, mk::RowFormat::fp8_ds_mla_656);
    v32.d_qk = 576;
    CHECK(mk::plan_decode_launch(v32, device(9, 0, 132)).kernel == mk::DecodeKernel::small_heads);
    // A forced 64-head kernel is refused, as is a format pair without a small-head kernel.
    p.force.kernel = mk::DecodeKernel::sm90_ws;
    CHECK_THROWS_AS(mk::plan_decode_launch(p, device(9, 0, 132)), mlaplan::Error);
    auto v41 = params(DecodeMode::split_kv, 4, h, true, mk::RowFormat::v41_fp8_528, mk::RowFormat::v41_fp4_288);
    try {
      (void)mk::plan_decode_launch(v41, device(10, 0, 148));
      FAIL("expected unsupported");
    } catch (const mlaplan::Error& e) {
      CHECK(e.kind() == mlaplan::ErrorKind::unsupported);
      CHECK(std::string(e.what()).find("runs unpadded on the small-head kernel, built for fp8_ds_mla_584 alone") !=
            std::string::npos);
    }
  }
  CHECK(mk::decode_num_sm_parts(132, 2, 8) == 66);
  CHECK(mk::decode_num_sm_parts(132, 1, 128) == 66);
  CHECK(std::string(mk::to_string(mk::DecodeKernel::small_heads)) == "small_heads");
  CHECK(std::string(mk::to_string(mk::DecodeKernel::small_heads_sm90)) == "small_heads_sm90");
  CHECK_THROWS_AS(mk::plan_decode_launch(params(DecodeMode::split_kv, 4, 32, true), device(9, 0, 132)), mlaplan::Error);
}

TEST_CASE("plan_decode_launch: the row-split small-head kernel at small batches", "[launch]") {
  for (const int h : {8, 16}) {
    INFO("h_q " << h);
    // V4.1's 128 + 512 positions, 132 partitions. b 1: min(16, 133, 40) = 16 pieces of 40
    // positions; b 8: min(16, 140 / 8 = 17, 40) = 16; both at most 64 positions per piece, so the
    // default, on sm_90a and elsewhere (plain CUDA), a CTA per (piece, token, request).
    for (const int b : {1, 8}) {
      INFO("b " << b);
      const auto p = params(DecodeMode::split_kv, b, h, true);
      CHECK(mk::lean_pieces(p) == 16);
      for (const auto& dev : {device(9, 0, 132), device(10, 0, 148)}) {
        const auto l = mk::plan_decode_launch(p, dev);
        CHECK(l.kernel == mk::DecodeKernel::small_heads_lean);
        CHECK(l.pieces == 16);
        CHECK(l.dims.grid_x == 16);
        CHECK(l.dims.grid_y == 1);
        CHECK(l.dims.grid_z == static_cast<unsigned>(b));
        CHECK(l.dims.block == 256);
        CHECK(2 * l.dims.smem_bytes <= 227u * 1024u);  // two CTAs an SM
        CHECK(l.combine);
        CHECK(l.pdl);
        CHECK(l.describe() == "small_heads_lean split_kv, grid 16x1x" + std::to_string(b) +
                                  ", 16 pieces per request, 256 threads, PDL, combine");
      }
    }
    // b 16: 148 / 16 = 9 pieces of 72 positions: more than 64, so the warp-specialised kernel by
    // default; forced, the row-split one runs it (two chunks per CTA).
    auto p16 = params(DecodeMode::split_kv, 16, h, true);
    CHECK(mk::lean_pieces(p16) == 9);
    CHECK(mk::plan_decode_launch(p16, device(9, 0, 132)).kernel == mk::DecodeKernel::small_heads_sm90);
    p16.force.kernel = mk::DecodeKernel::small_heads_lean;
    auto l = mk::plan_decode_launch(p16, device(9, 0, 132));
    CHECK(l.kernel == mk::DecodeKernel::small_heads_lean);
    CHECK(l.pieces == 9);
    // The other small-head kernels stay available by name at b 1, and no_pdl is honoured.
    auto p1 = params(DecodeMode::split_kv, 1, h, true);
    p1.force.kernel = mk::DecodeKernel::small_heads_sm90;
    CHECK(mk::plan_decode_launch(p1, device(9, 0, 132)).kernel == mk::DecodeKernel::small_heads_sm90);
    p1.force.kernel = mk::DecodeKernel::small_heads;
    CHECK(mk::plan_decode_launch(p1, device(9, 0, 132)).kernel == mk::DecodeKernel::small_heads);
    p1.force = {};
    p1.force.no_pdl = true;
    CHECK_FALSE(mk::plan_decode_launch(p1, device(9, 0, 132)).pdl);
    // Fewer positions: at least 16 per piece (128 + 0: 8 pieces).
    CHECK(mk::lean_pieces(params(DecodeMode::split_kv, 1, h, false)) == 8);
    // b 200: room for one partial a request (332 / 200 = 1): one piece of 640 positions (ten
    // chunks), not the default; forced, it runs.
    auto p200 = params(DecodeMode::split_kv, 200, h, true);
    CHECK(mk::lean_pieces(p200) == 1);
    CHECK(mk::plan_decode_launch(p200, device(9, 0, 132)).kernel == mk::DecodeKernel::small_heads_sm90);
    p200.force.kernel = mk::DecodeKernel::small_heads_lean;
    CHECK(mk::plan_decode_launch(p200, device(9, 0, 132)).describe() ==
          "small_heads_lean split_kv, grid 1x1x200, 1 piece per request, 256 threads, PDL, combine");
    // Where it does not run: one_pass, V3.2's 656-byte rows; forced there it is refused with the
    // reason.
    for (auto q : {params(DecodeMode::one_pass, 1, h, true),
                   params(DecodeMode::split_kv, 1, h, false, mk::RowFormat::fp8_ds_mla_656)}) {
      if (q.main.format == mk::RowFormat::fp8_ds_mla_656) q.d_qk = 576;
      CHECK(mk::lean_pieces(q) == 0);
      CHECK(mk::plan_decode_launch(q, device(9, 0, 132)).kernel != mk::DecodeKernel::small_heads_lean);
      q.force.kernel = mk::DecodeKernel::small_heads_lean;
      try {
        (void)mk::plan_decode_launch(q, device(9, 0, 132));
        FAIL("expected unsupported");
      } catch (const mlaplan::Error& e) {
        CHECK(e.kind() == mlaplan::ErrorKind::unsupported);
        CHECK(std::string(e.what()).find("the small_heads_lean kernel runs split_kv on fp8_ds_mla_584 rows") !=
              std::string::npos);
      }
    }
  }
  // A benchmark's forced kernel per mode: the row-split one in split_kv only, the others as given.
  CHECK(mk::forced_kernel_for_mode(mk::DecodeKernel::small_heads_lean, DecodeMode::split_kv) ==
        mk::DecodeKernel::small_heads_lean);
  CHECK_FALSE(mk::forced_kernel_for_mode(mk::DecodeKernel::small_heads_lean, DecodeMode::one_pass).has_value());
  CHECK_FALSE(mk::forced_kernel_for_mode(mk::DecodeKernel::small_heads_lean, DecodeMode::cluster_split).has_value());
  CHECK(mk::forced_kernel_for_mode(mk::DecodeKernel::small_heads_sm90, DecodeMode::one_pass) ==
        mk::DecodeKernel::small_heads_sm90);
  CHECK_FALSE(mk::forced_kernel_for_mode(std::nullopt, DecodeMode::split_kv).has_value());
  // A 64-head shape never takes it, even forced.
  auto p64 = params(DecodeMode::split_kv, 1, 64, true);
  CHECK(mk::lean_pieces(p64) == 0);
  p64.force.kernel = mk::DecodeKernel::small_heads_lean;
  CHECK_THROWS_AS(mk::plan_decode_launch(p64, device(9, 0, 132)), mlaplan::Error);
}

TEST_CASE("decode_kernel_named: every kernel by its to_string name, nothing else", "[launch]") {
  for (const auto k : {mk::DecodeKernel::generic, mk::DecodeKernel::sm90_ws, mk::DecodeKernel::small_heads,
                       mk::DecodeKernel::small_heads_sm90, mk::DecodeKernel::small_heads_lean}) {
    INFO(mk::to_string(k));
    const auto named = mk::decode_kernel_named(mk::to_string(k));
    REQUIRE(named.has_value());
    CHECK(*named == k);
    CHECK(std::string(mk::kDecodeKernelNames).find(std::string(mk::to_string(k))) != std::string::npos);
  }
  for (const char* bad :
       {"", "small", "Small_heads", "small_heads ", "sm90", "unknown", "small_heads_sm90x", "small_heads_lean "}) {
    INFO("'" << bad << "'");
    CHECK_FALSE(mk::decode_kernel_named(bad).has_value());
  }
}
