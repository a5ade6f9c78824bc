// GPU tests of mla-plan's own kernels (docs/kernels.md, "What is tested"): quantize kernels vs the
// host quantizer and FlashMLA's golden bytes, the GPU tile scheduler vs the host plan and
// FlashMLA's golden plans, and the sparse decode (+ combine) vs the fp64 host reference over the
// dequantised cache. Inputs are random (never zeros); unused cache rows, outputs and scratch are
// poisoned with NaN bit patterns.
//
// Runs only where a CUDA device exists: the CTest entry goes through a probe that exits 77 (skip)
// without one. Tag [sanitize] marks the small cases scripts/gpu-check.sh runs under
// compute-sanitizer.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "mlaplan/base/error.hpp"
#include "mlaplan/hardware/formats.hpp"
#include "mlaplan/hardware/quant.hpp"
#include "mlaplan/gpu_check/reference.hpp"
#include "mlaplan/cache/scheduler.hpp"
#include "mlaplan_kernels/kernels.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <future>
#include <limits>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace mk = mlaplan::kernels;
using mk::DeviceBuffer;
using mk::RowFormat;

namespace {

constexpr int D = 512;

std::string testdata_dir() {
  if (const char* e = std::getenv("MLAPLAN_TESTDATA_DIR")) return e;
  return MLAPLAN_TESTDATA_DIR;
}

nlohmann::json load_json(const std::string& name) {
  const std::string path = testdata_dir() + "/" + name;
  std::ifstream f(path);
  if (!f) FAIL("cannot open " << path << " (set MLAPLAN_TESTDATA_DIR)");
  return nlohmann::json::parse(f);
}

mlaplan::RowFormatId core_id(RowFormat f) {
  switch (f) {
    case RowFormat::fp8_ds_mla_584: return mlaplan::RowFormatId::fp8_ds_mla_v4;
    case RowFormat::v41_fp8_528: return mlaplan::RowFormatId::v41_fp8;
    case RowFormat::v41_fp4_288: return mlaplan::RowFormatId::v41_fp4;
    case RowFormat::fp8_ds_mla_656: return mlaplan::RowFormatId::fp8_ds_mla_v32;
    case RowFormat::bf16_1024: return mlaplan::RowFormatId::bf16;
    case RowFormat::fp8_pt_512: return mlaplan::RowFormatId::fp8_per_tensor;
  }
  return mlaplan::RowFormatId::bf16;
}

int num_sms() {
  static const int n = mk::device_info(0).sm_count;
  return n;
}

/// Random bf16 latent rows with per-tile magnitudes that vary over orders of magnitude, so the
/// scales differ from tile to tile (quantizer tests). Never zeros, except where a test plants them.
std::vector<std::uint16_t> random_latents(std::mt19937_64& rng, std::int64_t n, float spread = 1.0f, int dims = D) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> logmag(-1.5f, 1.0f);
  std::vector<std::uint16_t> v(static_cast<std::size_t>(n) * static_cast<std::size_t>(dims));
  for (std::int64_t r = 0; r < n; ++r) {
    for (int tile = 0; tile < dims / 16; ++tile) {
      const float mag = std::pow(10.0f, spread * logmag(rng));
      for (int i = 0; i < 16; ++i) {
        v[static_cast<std::size_t>(r * dims + tile * 16 + i)] = mlaplan::float_to_bf16(normal(rng) * mag);
      }
    }
  }
  return v;
}

/// Decode inputs in the distribution the pass criterion of docs/kernels.md is calibrated for
/// (FlashMLA's own tests: K = randn / 10 clamped to [-1, 1]), with a per-16-dim magnitude in
/// [0.25, 1] so the quantisation scales still vary. `wide` instead draws magnitudes over 0.03..10
/// (stress data: bf16 rounding of the softmax weights then exceeds the element tolerance).
std::vector<std::uint16_t> decode_latents(std::mt19937_64& rng, std::int64_t n, bool wide, int dims = D) {
  if (wide) return random_latents(rng, n, 1.0f, dims);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_real_distribution<float> logmag(std::log10(0.25f), 0.0f);
  std::vector<std::uint16_t> v(static_cast<std::size_t>(n) * static_cast<std::size_t>(dims));
  for (std::int64_t r = 0; r < n; ++r) {
    for (int tile = 0; tile < dims / 16; ++tile) {
      const float mag = 0.1f * std::pow(10.0f, logmag(rng));
      for (int i = 0; i < 16; ++i) {
        v[static_cast<std::size_t>(r * dims + tile * 16 + i)] =
            mlaplan::float_to_bf16(std::clamp(normal(rng) * mag, -1.0f, 1.0f));
      }
    }
  }
  return v;
}

// ------------------------------------------------------------------------------------------------
// Quantize

/// Quantises `latents` at `slots` on the GPU and on the host into pages pre-filled with 0xFF and
/// returns (gpu bytes, host bytes).
std::pair<std::vector<std::uint8_t>, std::vector<std::uint8_t>> quantize_both(
    RowFormat f, const std::vector<std::uint16_t>& latents, const std::vector<std::int64_t>& slots, int page_block_size,
    std::int64_t page_stride, std::int64_t num_pages) {
  const auto n = static_cast<std::int64_t>(slots.size());
  const auto bytes = static_cast<std::size_t>(page_stride * num_pages);
  std::vector<std::uint8_t> host(bytes, 0xFF);
  mlaplan::quantize_into_pages(core_id(f), latents.data(), n, slots.data(), host.data(), num_pages, page_block_size,
                               page_stride);
  DeviceBuffer d_lat = mk::to_device(latents);
  DeviceBuffer d_slots = mk::to_device(slots);
  DeviceBuffer d_cache(bytes);
  d_cache.fill_bytes(0xFF);
  mk::QuantizeParams qp;
  qp.format = f;
  qp.latent = d_lat.as<std::uint16_t>();
  qp.slots = d_slots.as<std::int64_t>();
  qp.n = n;
  qp.cache = d_cache.as<std::uint8_t>();
  qp.page_block_size = page_block_size;
  qp.page_stride_bytes = page_stride;
  qp.num_pages = num_pages;
  mk::quantize(qp);
  mk::synchronize();
  return {mk::to_host<std::uint8_t>(d_cache, bytes), host};
}

std::int64_t first_difference(const std::vector<std::uint8_t>& a, const std::vector<std::uint8_t>& b) {
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (a[i] != b[i]) return static_cast<std::int64_t>(i);
  }
  return -1;
}

// ------------------------------------------------------------------------------------------------
// Decode harness

struct CacheSpec {
  RowFormat format = RowFormat::fp8_ds_mla_584;
  int page_block_size = 64;
  std::int32_t topk = 128;
  float scale = 1.0f;  ///< fp8_pt_512's per-tensor scale (quantize and decode)
};

enum class Lengths { full, random, zero_some, all_zero };
enum class Sink { none, finite, with_inf };

struct DecodeCase {
  std::string name;
  int b = 1;
  int s_q = 1;
  int h_q = 64;
  CacheSpec main;
  bool has_extra = false;
  CacheSpec extra;
  Lengths lengths = Lengths::full;
  double invalid_fraction = 0.0;  // share of -1 entries among the valid positions
  Sink sink = Sink::none;
  int sms = 0;        // 0: the device's SM count
  bool wide = false;  // stress data: only cos_diff, lse and inf/NaN positions are asserted
  std::uint64_t seed = 1;
};

/// One cache of a decode case on the device plus its dequantised rows on the host.
struct BuiltCache {
  DeviceBuffer data;
  std::int64_t page_stride = 0;
  std::int64_t num_pages = 0;
  std::vector<float> rows;  // [num_rows, row_dims]; rows never written stay NaN
  mk::CacheView view;
};

/// Draws indices [b, s_q, topk] (valid positions: random rows or -1; positions past the length:
/// rows that are never written, i.e. NaN-poisoned) and builds the cache.
BuiltCache build_cache(std::mt19937_64& rng, const CacheSpec& spec, int b, int s_q,
                       const std::vector<std::int32_t>& lens, double invalid_fraction, bool wide,
                       std::vector<std::int32_t>& idx) {
  const std::int64_t used = std::max<std::int64_t>(1, static_cast<std::int64_t>(b) * s_q * spec.topk);
  const std::int64_t num_pages = (used * 2 + spec.page_block_size - 1) / spec.page_block_size + 1;
  const std::int64_t num_rows = num_pages * spec.page_block_size;
  // Rows < num_rows / 2 may be attended; rows above are poison targets for skipped positions.
  const std::int64_t half = num_rows / 2;
  std::uniform_int_distribution<std::int64_t> live(0, half - 1);
  std::uniform_int_distribution<std::int64_t> dead(half, num_rows - 1);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  idx.assign(static_cast<std::size_t>(b) * s_q * spec.topk, -1);
  std::set<std::int64_t> chosen;
  for (int bi = 0; bi < b; ++bi) {
    for (int s = 0; s < s_q; ++s) {
      for (int t = 0; t < spec.topk; ++t) {
        const std::size_t k = (static_cast<std::size_t>(bi) * s_q + s) * spec.topk + t;
        if (t < lens[static_cast<std::size_t>(bi)]) {
          if (u(rng) < invalid_fraction) continue;  // -1
          const std::int64_t id = live(rng);
          idx[k] = static_cast<std::int32_t>(id);
          chosen.insert(id);
        } else {
          idx[k] = static_cast<std::int32_t>(dead(rng));
        }
      }
    }
  }
  BuiltCache c;
  c.num_pages = num_pages;
  c.page_stride = mk::padded_page_stride(spec.format, spec.page_block_size);
  const std::vector<std::int64_t> slots(chosen.begin(), chosen.end());
  const int dims = mk::row_dims(spec.format);
  const std::vector<std::uint16_t> lat =
      decode_latents(rng, std::max<std::int64_t>(1, static_cast<std::int64_t>(slots.size())), wide, dims);
  c.data = DeviceBuffer(static_cast<std::size_t>(c.page_stride * num_pages));
  c.data.fill_bytes(0xFF);  // every row not written decodes to NaN
  if (!slots.empty()) {
    DeviceBuffer d_lat = mk::to_device(lat);
    DeviceBuffer d_slots = mk::to_device(slots);
    mk::QuantizeParams qp;
    qp.format = spec.format;
    qp.latent = d_lat.as<std::uint16_t>();
    qp.slots = d_slots.as<std::int64_t>();
    qp.n = static_cast<std::int64_t>(slots.size());
    qp.cache = c.data.as<std::uint8_t>();
    qp.page_block_size = spec.page_block_size;
    qp.page_stride_bytes = c.page_stride;
    qp.num_pages = num_pages;
    qp.scale = spec.scale;
    mk::quantize(qp);
    mk::synchronize();
  }
  // Host copy of what the GPU wrote, dequantised by the host dequantiser (fp8_pt_512: codes x the
  // per-tensor scale).
  const auto bytes = mk::to_host<std::uint8_t>(c.data, static_cast<std::size_t>(c.page_stride * num_pages));
  c.rows.assign(static_cast<std::size_t>(num_rows) * static_cast<std::size_t>(dims),
                std::numeric_limits<float>::quiet_NaN());
  for (const std::int64_t id : slots) {
    float* row = c.rows.data() + id * dims;
    mlaplan::dequantize_from_pages(core_id(spec.format), bytes.data(), num_pages, spec.page_block_size, c.page_stride,
                                   &id, 1, row);
    if (spec.format == RowFormat::fp8_pt_512) {
      for (int d = 0; d < dims; ++d) row[d] *= spec.scale;
    }
  }
  c.view.format = spec.format;
  c.view.data = c.data.as<std::uint8_t>();
  c.view.page_block_size = spec.page_block_size;
  c.view.page_stride_bytes = c.page_stride;
  c.view.num_pages = num_pages;
  c.view.scale = spec.scale;
  return c;
}

std::vector<std::int32_t> draw_lengths(std::mt19937_64& rng, Lengths mode, int b, std::int32_t topk) {
  std::vector<std::int32_t> l(static_cast<std::size_t>(b), topk);
  std::uniform_int_distribution<std::int32_t> any(0, topk);
  std::uniform_int_distribution<int> pick(0, 3);
  for (auto& x : l) {
    switch (mode) {
      case Lengths::full: break;
      case Lengths::random: x = any(rng); break;
      case Lengths::zero_some: x = pick(rng) == 0 ? 0 : any(rng); break;
      case Lengths::all_zero: x = 0; break;
    }
  }
  if (mode == Lengths::zero_some && b > 1) l[0] = 0;
  return l;
}

struct DecodeResult {
  mlaplan::DecodeComparison cmp;
  mlaplan::DecodeComparison cmp_one_pass;  ///< the same inputs run with DecodeMode::one_pass
  mlaplan::DecodeComparison cmp_cluster;   ///< ... with DecodeMode::cluster_split
  unsigned cluster_ctas = 1;               ///< its CTAs per request as launched (DecodeLaunch)
  /// split_kv again with every other path the device has for the case (DecodeParams::force): the
  /// portable kernel where sm90_ws runs, the 2-CTA pair forced on and off at h_q 128.
  std::vector<std::pair<std::string, mlaplan::DecodeComparison>> forced;
  std::int32_t parts = 0;
  std::int32_t split_requests = 0;
  std::int32_t max_splits = 0;  ///< most partials of one request in the plan
};

DecodeResult run_decode_case(const DecodeCase& c) {
  std::mt19937_64 rng(c.seed);
  const int b = c.b;
  const auto main_len = draw_lengths(rng, c.lengths, b, c.main.topk);
  const auto extra_len = c.has_extra ? draw_lengths(rng, c.lengths, b, c.extra.topk) : std::vector<std::int32_t>{};
  std::vector<std::int32_t> idx, eidx;
  BuiltCache main = build_cache(rng, c.main, b, c.s_q, main_len, c.invalid_fraction, c.wide, idx);
  BuiltCache extra;
  if (c.has_extra) extra = build_cache(rng, c.extra, b, c.s_q, extra_len, c.invalid_fraction, c.wide, eidx);

  const std::int64_t qrows = static_cast<std::int64_t>(b) * c.s_q * c.h_q;
  const int dqk = mk::row_dims(c.main.format);
  std::vector<std::uint16_t> q(static_cast<std::size_t>(qrows) * static_cast<std::size_t>(dqk));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (auto& x : q) x = mlaplan::float_to_bf16(std::clamp(normal(rng), -1.0f, 1.0f));
  std::vector<float> sink(static_cast<std::size_t>(c.h_q));
  std::uniform_real_distribution<float> su(-2.0f, 6.0f);
  for (auto& x : sink) x = su(rng);
  if (c.sink == Sink::with_inf) {
    sink[0] = std::numeric_limits<float>::infinity();
    sink[1] = -std::numeric_limits<float>::infinity();
    sink[static_cast<std::size_t>(c.h_q - 1)] = std::numeric_limits<float>::infinity();
  }

  // Plan on the GPU.
  const int sms = c.sms > 0 ? c.sms : num_sms();
  const std::int32_t parts = mk::decode_num_sm_parts(sms, c.s_q, c.h_q);
  DeviceBuffer d_len = mk::to_device(main_len);
  DeviceBuffer d_elen = mk::to_device(c.has_extra ? extra_len : std::vector<std::int32_t>{0});
  DeviceBuffer d_rec(static_cast<std::size_t>(parts) * 8 * 4);
  DeviceBuffer d_splits(static_cast<std::size_t>(b + 1) * 4);
  mk::ScheduleParams sp;
  sp.b = b;
  sp.topk = c.main.topk;
  sp.topk_length = d_len.as<std::int32_t>();
  sp.has_extra = c.has_extra;
  sp.extra_topk = c.extra.topk;
  sp.extra_topk_length = c.has_extra ? d_elen.as<std::int32_t>() : nullptr;
  sp.num_sm_parts = parts;
  sp.records = d_rec.as<std::int32_t>();
  sp.num_splits = d_splits.as<std::int32_t>();
  mk::schedule(sp);

  DeviceBuffer d_q = mk::to_device(q);
  DeviceBuffer d_idx = mk::to_device(idx);
  DeviceBuffer d_eidx = mk::to_device(c.has_extra ? eidx : std::vector<std::int32_t>{0});
  DeviceBuffer d_sink = mk::to_device(sink);
  DeviceBuffer d_out(static_cast<std::size_t>(qrows) * D * 2);
  DeviceBuffer d_lse(static_cast<std::size_t>(qrows) * 4);
  DeviceBuffer d_oacc(static_cast<std::size_t>(mk::o_accum_elems(b, c.s_q, c.h_q, parts)) * sizeof(float));
  DeviceBuffer d_lacc(static_cast<std::size_t>(mk::lse_accum_elems(b, c.s_q, c.h_q, parts)) * 4);
  for (DeviceBuffer* poison : {&d_out, &d_lse, &d_oacc, &d_lacc}) poison->fill_bytes(0xFF);

  mk::DecodeParams p;
  p.b = b;
  p.s_q = c.s_q;
  p.h_q = c.h_q;
  p.d_qk = dqk;
  p.q = d_q.as<std::uint16_t>();
  p.main = main.view;
  p.indices = d_idx.as<std::int32_t>();
  p.topk = c.main.topk;
  p.topk_length = d_len.as<std::int32_t>();
  p.has_extra = c.has_extra;
  if (c.has_extra) {
    p.extra = extra.view;
    p.extra_indices = d_eidx.as<std::int32_t>();
    p.extra_topk = c.extra.topk;
    p.extra_topk_length = d_elen.as<std::int32_t>();
  }
  p.attn_sink = c.sink == Sink::none ? nullptr : d_sink.as<float>();
  p.sched_records = d_rec.as<std::int32_t>();
  p.num_splits = d_splits.as<std::int32_t>();
  p.num_sm_parts = parts;
  p.out = d_out.as<std::uint16_t>();
  p.lse = d_lse.as<float>();
  p.o_accum = d_oacc.as<float>();
  p.lse_accum = d_lacc.as<float>();
  const mk::DecodeLaunch launched = mk::sparse_decode(p);
  mk::synchronize();

  const auto out_bits = mk::to_host<std::uint16_t>(d_out, static_cast<std::size_t>(qrows) * D);
  const auto lse = mk::to_host<float>(d_lse, static_cast<std::size_t>(qrows));
  std::vector<float> out(out_bits.size());
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = mlaplan::bf16_to_float(out_bits[i]);
  const auto splits = mk::to_host<std::int32_t>(d_splits, static_cast<std::size_t>(b + 1));

  // Reference over the dequantised rows, split over threads by request.
  std::vector<float> qf(q.size());
  for (std::size_t i = 0; i < q.size(); ++i) qf[i] = mlaplan::bf16_to_float(q[i]);
  mlaplan::RefDecodeInput in;
  in.b = b;
  in.s_q = c.s_q;
  in.h_q = c.h_q;
  in.d_qk = dqk;
  in.q = qf.data();
  in.main.dense = main.rows.data();
  in.main.num_rows = main.num_pages * c.main.page_block_size;
  in.indices = idx.data();
  in.topk = c.main.topk;
  in.topk_length = main_len.data();
  in.has_extra = c.has_extra;
  if (c.has_extra) {
    in.extra.dense = extra.rows.data();
    in.extra.num_rows = extra.num_pages * c.extra.page_block_size;
    in.extra_indices = eidx.data();
    in.extra_topk = c.extra.topk;
    in.extra_topk_length = extra_len.data();
  }
  in.attn_sink = c.sink == Sink::none ? nullptr : sink.data();
  in.softmax_scale = p.softmax_scale;
  std::vector<float> ref_out(out.size());
  std::vector<float> ref_lse(lse.size());
  const int threads = std::max(1, std::min<int>(b, static_cast<int>(std::thread::hardware_concurrency())));
  std::vector<std::future<void>> jobs;
  for (int t = 0; t < threads; ++t) {
    const int b0 = b * t / threads, b1 = b * (t + 1) / threads;
    jobs.push_back(std::async(std::launch::async, [&, b0, b1] {
      mlaplan::reference_decode_range(in, b0, b1, ref_out.data(), ref_lse.data());
    }));
  }
  for (auto& j : jobs) j.get();

  DecodeResult r;
  mlaplan::DecodeTolerance tol;
  if (c.wide) tol.abs = tol.rel = std::numeric_limits<double>::infinity();
  r.cmp = mlaplan::compare_decode(out, ref_out, lse, ref_lse, tol);

  // The same inputs in one pass per request and split over a cluster per request (no plan, no
  // scratch, no combine kernel): outputs poisoned again, scratch pointers null so that any use of
  // them faults.
  for (const mk::DecodeMode m : {mk::DecodeMode::one_pass, mk::DecodeMode::cluster_split}) {
    for (DeviceBuffer* poison : {&d_out, &d_lse}) poison->fill_bytes(0xFF);
    mk::DecodeParams p1 = p;
    p1.mode = m;
    p1.sched_records = nullptr;
    p1.num_splits = nullptr;
    p1.num_sm_parts = 0;
    p1.o_accum = nullptr;
    p1.lse_accum = nullptr;
    const mk::DecodeLaunch l1 = mk::sparse_decode(p1);
    if (m == mk::DecodeMode::cluster_split) r.cluster_ctas = l1.dims.cluster_x;
    mk::synchronize();
    const auto bits1 = mk::to_host<std::uint16_t>(d_out, static_cast<std::size_t>(qrows) * D);
    const auto lse1 = mk::to_host<float>(d_lse, static_cast<std::size_t>(qrows));
    std::vector<float> out1(bits1.size());
    for (std::size_t i = 0; i < out1.size(); ++i) out1[i] = mlaplan::bf16_to_float(bits1[i]);
    (m == mk::DecodeMode::one_pass ? r.cmp_one_pass : r.cmp_cluster) =
        mlaplan::compare_decode(out1, ref_out, lse1, ref_lse, tol);
  }
  // The other paths of this device for the same inputs, in split_kv with the same plan.
  std::vector<std::pair<std::string, mk::DecodeForce>> forces;
  const mk::DecodeDevice here = mk::current_decode_device();
  const bool sm90a_here = here.cc_major == 9 && here.cc_minor == 0;
  if (launched.kernel == mk::DecodeKernel::small_heads_lean) {
    // The block-granular small-head kernels beside the row-split one (the default at small b).
    if (sm90a_here && c.main.format == RowFormat::fp8_ds_mla_584) {
      forces.push_back(
          {"warp-specialised small-head kernel", mk::DecodeForce{mk::DecodeKernel::small_heads_sm90, 0, 0, false}});
    }
    forces.push_back({"portable small-head kernel", mk::DecodeForce{mk::DecodeKernel::small_heads, 0, 0, false}});
  }
  if (launched.kernel == mk::DecodeKernel::small_heads_sm90) {
    // The portable small-head kernel beside the warp-specialised one (the default on sm_90a).
    forces.push_back({"portable small-head kernel", mk::DecodeForce{mk::DecodeKernel::small_heads, 0, 0, false}});
  }
  if ((launched.kernel == mk::DecodeKernel::small_heads_sm90 || launched.kernel == mk::DecodeKernel::small_heads) &&
      mk::lean_pieces(p) >= 1) {
    // The row-split kernel where it can run but is not the default (more than 64 positions a piece).
    forces.push_back({"row-split small-head kernel", mk::DecodeForce{mk::DecodeKernel::small_heads_lean, 0, 0, false}});
  }
  if (launched.kernel == mk::DecodeKernel::sm90_ws) {
    forces.push_back({"generic kernel", mk::DecodeForce{mk::DecodeKernel::generic, 0, 0, false}});
    if (c.h_q == 128) {
      forces.push_back({"2-CTA pair", mk::DecodeForce{std::nullopt, 1, 0, false}});
      forces.push_back({"no pair", mk::DecodeForce{std::nullopt, -1, 0, false}});
    }
  }
  forces.push_back({"ordinary launch (no PDL)", mk::DecodeForce{std::nullopt, 0, 0, true}});
  for (const auto& [label, force] : forces) {
    for (DeviceBuffer* poison : {&d_out, &d_lse}) poison->fill_bytes(0xFF);
    mk::DecodeParams pf = p;
    pf.force = force;
    (void)mk::sparse_decode(pf);
    mk::synchronize();
    const auto bits = mk::to_host<std::uint16_t>(d_out, static_cast<std::size_t>(qrows) * D);
    const auto lsef = mk::to_host<float>(d_lse, static_cast<std::size_t>(qrows));
    std::vector<float> outf(bits.size());
    for (std::size_t i = 0; i < outf.size(); ++i) outf[i] = mlaplan::bf16_to_float(bits[i]);
    r.forced.emplace_back(label, mlaplan::compare_decode(outf, ref_out, lsef, ref_lse, tol));
  }
  r.parts = parts;
  for (int i = 0; i < b; ++i) {
    const std::int32_t n = splits[static_cast<std::size_t>(i + 1)] - splits[static_cast<std::size_t>(i)];
    r.split_requests += n > 1;
    r.max_splits = std::max(r.max_splits, n);
  }
  std::printf("decode %-46s b %3d s_q %d h_q %3d P %3d split %3d | %s\n", c.name.c_str(), b, c.s_q, c.h_q, parts,
              r.split_requests, r.cmp.message.c_str());
  std::printf("decode %-46s one_pass                               | %s\n", c.name.c_str(),
              r.cmp_one_pass.message.c_str());
  std::printf("decode %-46s cluster_split (%d CTAs per request)      | %s\n", c.name.c_str(),
              static_cast<int>(r.cluster_ctas), r.cmp_cluster.message.c_str());
  for (const auto& [label, cmp] : r.forced) {
    std::printf("decode %-46s %-38s | %s\n", c.name.c_str(), label.c_str(), cmp.message.c_str());
  }
  std::fflush(stdout);
  return r;
}

void check_case(const DecodeCase& c) {
  INFO("case " << c.name);
  const DecodeResult r = run_decode_case(c);
  INFO(r.cmp.message);
  REQUIRE(r.cmp.pass);
  INFO("one_pass: " << r.cmp_one_pass.message);
  REQUIRE(r.cmp_one_pass.pass);
  INFO("cluster_split: " << r.cmp_cluster.message);
  REQUIRE(r.cmp_cluster.pass);
  for (const auto& [label, cmp] : r.forced) {
    INFO(label << ": " << cmp.message);
    REQUIRE(cmp.pass);
  }
}

CacheSpec fp8(int page, std::int32_t topk) { return {RowFormat::fp8_ds_mla_584, page, topk}; }

}  // namespace

// ------------------------------------------------------------------------------------------------

TEST_CASE("device is a supported GPU", "[gpu][sanitize]") {
  REQUIRE(mk::device_count() >= 1);
  const mk::DeviceInfo d = mk::device_info(0);
  std::printf("device 0: %s, cc %d.%d, %d SMs, %lld MiB, L2 %lld KiB, driver %d, runtime %d\n", d.name.c_str(),
              d.cc_major, d.cc_minor, d.sm_count, static_cast<long long>(d.global_mem_bytes >> 20),
              static_cast<long long>(d.l2_bytes >> 10), d.driver_version, d.runtime_version);
  REQUIRE_NOTHROW(mk::require_supported_device(0));
  REQUIRE(mk::last_error_string().empty());
}

TEST_CASE("quantize 584 reproduces FlashMLA's golden bytes", "[gpu][quant][sanitize]") {
  const auto j = load_json("flashmla-quant-vectors.json");
  int checked = 0;
  for (const auto& [name, cs] : j.at("cases").items()) {
    if (cs.at("layout").get<std::string>() != "fp8_ds_mla_v4_584") continue;
    const int pbs = cs.at("page_block_size").get<int>();
    const std::int64_t pages = cs.at("num_pages").get<std::int64_t>();
    const std::int64_t stride = cs.at("page_stride_bytes").get<std::int64_t>();
    std::vector<std::uint16_t> lat;
    std::vector<std::int64_t> slots;
    for (std::int64_t pg = 0; pg < pages; ++pg) {
      for (const auto& bits : cs.at("input_bf16_bits").at(static_cast<std::size_t>(pg))) {
        lat.push_back(static_cast<std::uint16_t>(bits.get<int>()));
      }
      for (int t = 0; t < pbs; ++t) slots.push_back(pg * pbs + t);
    }
    const auto [gpu, host] = quantize_both(RowFormat::fp8_ds_mla_584, lat, slots, pbs, stride, pages);
    for (std::int64_t pg = 0; pg < pages; ++pg) {
      const std::string hex = cs.at("pages_hex").at(static_cast<std::size_t>(pg)).get<std::string>();
      INFO(name << " page " << pg);
      REQUIRE(hex.size() == static_cast<std::size_t>(pbs) * 584 * 2);
      for (std::size_t i = 0; i < hex.size() / 2; ++i) {
        const auto want = static_cast<std::uint8_t>(std::stoul(hex.substr(2 * i, 2), nullptr, 16));
        const std::uint8_t got = gpu[static_cast<std::size_t>(pg * stride) + i];
        if (got != want) FAIL("byte " << i << ": gpu " << int(got) << ", FlashMLA " << int(want));
      }
    }
    ++checked;
  }
  REQUIRE(checked == 2);
}

TEST_CASE("the small-head sm_90a producers' e4m3 conversion equals the float path for every code and scale",
          "[gpu][quant]") {
  const mk::ConversionCheck c = mk::check_e4m3_conversion();
  INFO("first mismatch: scale byte " << c.first_scale << ", code pair 0x" << std::hex << c.first_codes);
  REQUIRE(c.checked == std::int64_t{256} * 65536 * 2);
  REQUIRE(c.mismatches == 0);
  std::printf("e4m3 conversion: %lld values (256 scale bytes x 65536 code pairs x 2) equal the float path\n",
              static_cast<long long>(c.checked));
}

TEST_CASE("quantize kernels equal the host quantizer byte for byte", "[gpu][quant]") {
  std::mt19937_64 rng(20261130);
  for (RowFormat f : {RowFormat::fp8_ds_mla_584, RowFormat::v41_fp8_528, RowFormat::v41_fp4_288,
                      RowFormat::fp8_ds_mla_656, RowFormat::bf16_1024, RowFormat::fp8_pt_512}) {
    const int dims = mk::row_dims(f);
    for (int pbs : {32, 64, 53}) {
      const std::int64_t pages = 7;
      const std::int64_t stride = mk::padded_page_stride(f, pbs);
      const std::int64_t rows = pages * pbs;
      std::vector<std::int64_t> slots(static_cast<std::size_t>(rows));
      for (std::int64_t i = 0; i < rows; ++i) slots[static_cast<std::size_t>(i)] = i;
      std::shuffle(slots.begin(), slots.end(), rng);
      slots.resize(static_cast<std::size_t>(rows * 3 / 4));  // a quarter of the rows stay unwritten
      slots[3] = -1;                                         // skipped
      auto lat = random_latents(rng, static_cast<std::int64_t>(slots.size()), 3.0f, dims);
      // Edge tiles: all zero, huge, tiny, negative tiny (-0 codes), an exact power of two, NaN, inf.
      auto tile = [&](std::size_t row, int t, float v) {
        for (int i = 0; i < 16; ++i) {
          lat[row * static_cast<std::size_t>(dims) + static_cast<std::size_t>(t * 16 + i)] =
              mlaplan::float_to_bf16(v * (i % 3 == 0 ? -1.0f : 1.0f));
        }
      };
      tile(0, 0, 0.0f);
      tile(0, 1, 0.0f);
      tile(0, 2, 0.0f);
      tile(0, 3, 0.0f);
      tile(1, 4, 1e4f);
      tile(1, 8, 3e-7f);
      tile(2, 9, -1e-9f);
      tile(2, 12, 448.0f);
      tile(4, 5, std::numeric_limits<float>::quiet_NaN());
      tile(5, 6, std::numeric_limits<float>::infinity());
      tile(6, 31, 6.0f);
      if (dims == 576) tile(7, 33, std::numeric_limits<float>::quiet_NaN());  // raw RoPE: copied as it is
      const auto [gpu, host] = quantize_both(f, lat, slots, pbs, stride, pages);
      const std::int64_t diff = first_difference(gpu, host);
      INFO("format " << mk::to_string(f) << ", page " << pbs << ", stride " << stride << ": first differing byte "
                     << diff << " (page " << diff / stride << ", offset " << diff % stride << ")");
      REQUIRE(diff == -1);
    }
  }
  std::printf("quantize: 584/528/288/656/bf16 1024/fp8 512 at pages 32/64/53 equal the host quantizer\n");
}

TEST_CASE("GPU scheduler reproduces FlashMLA's golden plans", "[gpu][sched]") {
  const auto j = load_json("flashmla-sched-vectors.json");
  int checked = 0;
  for (const auto& cs : j.at("cases")) {
    const int b = cs.at("b").get<int>();
    const int parts =
        mk::sm90_num_sm_parts(cs.at("num_sms").get<int>(), cs.at("s_q").get<int>(), cs.at("h_q").get<int>());
    const auto lens = cs.at("lengths").get<std::vector<std::int32_t>>();
    const bool has_extra = !cs.at("extra_lengths").is_null();
    const auto elens =
        has_extra ? cs.at("extra_lengths").get<std::vector<std::int32_t>>() : std::vector<std::int32_t>{0};
    DeviceBuffer d_len = mk::to_device(lens), d_elen = mk::to_device(elens);
    DeviceBuffer d_rec(static_cast<std::size_t>(parts) * 32), d_splits(static_cast<std::size_t>(b + 1) * 4);
    mk::ScheduleParams sp;
    sp.b = b;
    sp.topk = cs.at("topk").get<std::int32_t>();
    sp.topk_length = d_len.as<std::int32_t>();
    sp.has_extra = has_extra;
    sp.extra_topk = has_extra ? cs.at("extra_topk").get<std::int32_t>() : 0;
    sp.extra_topk_length = has_extra ? d_elen.as<std::int32_t>() : nullptr;
    sp.num_sm_parts = parts;
    sp.records = d_rec.as<std::int32_t>();
    sp.num_splits = d_splits.as<std::int32_t>();
    mk::schedule(sp);
    const auto rec = mk::to_host<std::int32_t>(d_rec, static_cast<std::size_t>(parts) * 8);
    const auto splits = mk::to_host<std::int32_t>(d_splits, static_cast<std::size_t>(b + 1));
    const auto want = cs.at("records").get<std::vector<std::vector<std::int32_t>>>();
    INFO("golden case " << checked << " (b " << b << ", h_q " << cs.at("h_q") << ", s_q " << cs.at("s_q") << ")");
    REQUIRE(want.size() == static_cast<std::size_t>(parts));
    REQUIRE(splits == cs.at("num_splits").get<std::vector<std::int32_t>>());
    for (int pi = 0; pi < parts; ++pi) {
      // every record, idle partitions included (begin_block = n_0 - 1 there, as FlashMLA writes it)
      const auto& w = want[static_cast<std::size_t>(pi)];
      for (int k = 0; k < 8; ++k) {
        INFO("partition " << pi << " field " << k);
        REQUIRE(rec[static_cast<std::size_t>(pi * 8 + k)] == w[static_cast<std::size_t>(k)]);
      }
    }
    ++checked;
  }
  std::printf("scheduler: %d golden FlashMLA plans reproduced\n", checked);
  REQUIRE(checked > 0);
}

namespace {

/// Runs the GPU scheduler on `in` and requires every record and num_splits to equal the host plan.
void require_gpu_schedule_equals_host(const mlaplan::SchedInput& in, std::int32_t topk, std::int32_t extra_topk) {
  const mlaplan::SchedPlan plan = mlaplan::plan_schedule(in);
  const int b = static_cast<int>(in.lengths.size());
  const int parts = plan.params.num_sm_parts;
  REQUIRE(parts == mk::sm90_num_sm_parts(in.num_sms, in.s_q, in.h_q));
  DeviceBuffer d_len = mk::to_device(in.lengths);
  DeviceBuffer d_elen = mk::to_device(in.has_extra ? in.extra_lengths : std::vector<std::int32_t>{0});
  DeviceBuffer d_rec(static_cast<std::size_t>(parts) * 32), d_splits(static_cast<std::size_t>(b + 1) * 4);
  d_rec.fill_bytes(0xAB);  // every record must be written
  mk::ScheduleParams sp;
  sp.b = b;
  sp.topk = topk;
  sp.topk_length = d_len.as<std::int32_t>();
  sp.has_extra = in.has_extra;
  sp.extra_topk = extra_topk;
  sp.extra_topk_length = in.has_extra ? d_elen.as<std::int32_t>() : nullptr;
  sp.num_sm_parts = parts;
  sp.records = d_rec.as<std::int32_t>();
  sp.num_splits = d_splits.as<std::int32_t>();
  mk::schedule(sp);
  const auto rec = mk::to_host<std::int32_t>(d_rec, static_cast<std::size_t>(parts) * 8);
  const auto splits = mk::to_host<std::int32_t>(d_splits, static_cast<std::size_t>(b + 1));
  INFO("b " << b << ", h_q " << in.h_q << ", s_q " << in.s_q << ", sms " << in.num_sms);
  REQUIRE(splits == plan.num_splits);
  for (int pi = 0; pi < parts; ++pi) {
    const auto& w = plan.records[static_cast<std::size_t>(pi)];
    for (int k = 0; k < 8; ++k) {
      INFO("partition " << pi << " field " << k);
      REQUIRE(rec[static_cast<std::size_t>(pi * 8 + k)] == w[static_cast<std::size_t>(k)]);
    }
  }
}

}  // namespace

TEST_CASE("GPU scheduler equals the host plan on random batches", "[gpu][sched][sanitize]") {
  std::mt19937_64 rng(77);
  for (int trial = 0; trial < 60; ++trial) {
    std::uniform_int_distribution<int> bdist(1, trial < 30 ? 40 : 600);
    const int b = bdist(rng);
    const int h_q = (trial % 2) ? 128 : 64;
    const int s_q = (trial % 4) < 2 ? 1 : 2;
    const int sms = (trial % 5 == 0) ? 7 : 132;
    const std::int32_t topk = (trial % 3 == 0) ? 64 : 128;
    const bool has_extra = trial % 3 != 2;
    const std::int32_t extra_topk = 512;
    std::uniform_int_distribution<std::int32_t> ld(0, topk), eld(0, extra_topk);
    mlaplan::SchedInput in;
    in.kernel = mlaplan::SchedKernel::sm90_sparse;
    in.num_sms = sms;
    in.s_q = s_q;
    in.h_q = h_q;
    for (int i = 0; i < b; ++i) in.lengths.push_back(trial % 7 == 0 ? 0 : ld(rng));
    in.has_extra = has_extra;
    if (has_extra) {
      for (int i = 0; i < b; ++i) in.extra_lengths.push_back(eld(rng));
    }
    INFO("trial " << trial);
    require_gpu_schedule_equals_host(in, topk, extra_topk);
  }
}

TEST_CASE("GPU scheduler: both plan paths and widths narrower than the lengths", "[gpu][sched]") {
  // With widths 128 + 512 the parallel plan's tables fit 48 KiB up to b = 711 (17 b + P + 2 ints);
  // larger batches take the one-thread sweep. Declaring a width of 1 while the lengths go up to
  // 128 makes the parallel kernel fall back to its own sweep.
  std::mt19937_64 rng(78);
  std::uniform_int_distribution<std::int32_t> ld(0, 128), eld(0, 512);
  for (int b : {1, 2, 700, 711, 712, 5000}) {
    for (std::int32_t declared_topk : {128, 1}) {
      mlaplan::SchedInput in;
      in.kernel = mlaplan::SchedKernel::sm90_sparse;
      in.num_sms = 132;
      in.h_q = 64;
      in.has_extra = true;
      for (int i = 0; i < b; ++i) {
        in.lengths.push_back(ld(rng));
        in.extra_lengths.push_back(eld(rng));
      }
      INFO("declared topk " << declared_topk);
      require_gpu_schedule_equals_host(in, declared_topk, 512);
    }
  }
}

TEST_CASE("sparse decode, small cases for the sanitizers", "[gpu][decode][sanitize]") {
  DecodeCase c;
  c.name = "584 + 584 extra, split, sink, -1";
  c.b = 3;
  c.h_q = 64;
  c.main = fp8(32, 64);
  c.has_extra = true;
  c.extra = fp8(53, 128);
  c.lengths = Lengths::zero_some;
  c.invalid_fraction = 0.2;
  c.sink = Sink::with_inf;
  c.sms = 4;
  c.seed = 5;
  check_case(c);
  c.name = "528 + 288 extra, h_q 128, s_q 2";
  c.h_q = 128;
  c.s_q = 2;
  c.main = {RowFormat::v41_fp8_528, 32, 64};
  c.extra = {RowFormat::v41_fp4_288, 64, 64};
  c.sms = 6;
  c.seed = 6;
  check_case(c);
  c.name = "584 alone, h_q 128, s_q 2 (also with the 2-CTA pair forced on and off)";
  c.main = fp8(32, 64);
  c.has_extra = false;
  c.sms = 6;
  c.seed = 7;
  check_case(c);
  // More CTAs than a device's SMs in one_pass: the sm_90a warp-specialised kernel then runs one CTA
  // per SM over a range of whole requests (plan_decode_launch).
  c.name = "584 + 584 extra, b 140, h_q 128: one_pass over request ranges";
  c.b = 140;
  c.s_q = 1;
  c.main = fp8(64, 64);
  c.has_extra = true;
  c.extra = fp8(32, 64);
  c.lengths = Lengths::zero_some;
  c.invalid_fraction = 0.1;
  c.sink = Sink::finite;
  c.sms = 0;
  c.seed = 8;
  check_case(c);
  // The other geometries of the portable kernel: d_qk 576 (P in the second S half) and the direct
  // bf16 path (rows copied into sK after P V).
  c.name = "656 alone, h_q 128, s_q 2";
  c.b = 3;
  c.s_q = 2;
  c.main = {RowFormat::fp8_ds_mla_656, 32, 128};
  c.has_extra = false;
  c.sms = 5;
  c.seed = 9;
  check_case(c);
  c.name = "bf16 + bf16 extra, -1, some empty";
  c.s_q = 1;
  c.h_q = 64;
  c.main = {RowFormat::bf16_1024, 32, 64};
  c.has_extra = true;
  c.extra = {RowFormat::bf16_1024, 64, 128};
  c.seed = 10;
  check_case(c);
  c.name = "fp8 per-tensor + extra, scale 0.25";
  c.main = {RowFormat::fp8_pt_512, 32, 64, 0.25f};
  c.extra = {RowFormat::fp8_pt_512, 64, 128, 0.25f};
  c.seed = 11;
  check_case(c);
}

// h_q 8 and 16 run unpadded on the small-head kernels (on sm_90a the 584 rows on
// sm90/decode_small_ws.cuh, with small/decode_small.cuh forced beside it; elsewhere and for 656
// rows on small/decode_small.cuh): every format they are
// built for, split requests (few SMs: several partitions per request), partitions spanning
// requests, one_pass with more requests than SMs, sinks, -1 indices, empty requests, s_q 2, and
// NaN-poisoned rows behind every position past a length.
TEST_CASE("sparse decode small heads (h_q 8 / 16) vs the host reference", "[gpu][decode][sanitize]") {
  DecodeCase c;
  c.name = "small h8: 584 + 584 extra, split, sink, -1";
  c.b = 3;
  c.h_q = 8;
  c.main = fp8(64, 128);
  c.has_extra = true;
  c.extra = fp8(32, 192);
  c.lengths = Lengths::zero_some;
  c.invalid_fraction = 0.2;
  c.sink = Sink::with_inf;
  c.sms = 7;
  c.seed = 41;
  check_case(c);
  c.name = "small h16: 584 + 584 extra, s_q 2, random lengths";
  c.h_q = 16;
  c.s_q = 2;
  c.lengths = Lengths::random;
  c.sink = Sink::finite;
  c.sms = 5;
  c.seed = 42;
  check_case(c);
  c.name = "small h8: 584 alone, full, partitions across requests";
  c.b = 9;
  c.h_q = 8;
  c.s_q = 1;
  c.main = fp8(64, 128);
  c.has_extra = false;
  c.lengths = Lengths::full;
  c.invalid_fraction = 0.0;
  c.sink = Sink::none;
  c.sms = 4;
  c.seed = 43;
  check_case(c);
  c.name = "small h16: 656 (d_qk 576) alone, split";
  c.b = 2;
  c.h_q = 16;
  c.main = {RowFormat::fp8_ds_mla_656, 64, 256};
  c.lengths = Lengths::zero_some;
  c.invalid_fraction = 0.1;
  c.sink = Sink::with_inf;
  c.sms = 6;
  c.seed = 44;
  check_case(c);
  c.name = "small h8: 656 alone, s_q 2";
  c.h_q = 8;
  c.s_q = 2;
  c.lengths = Lengths::random;
  c.sms = 3;
  c.seed = 45;
  check_case(c);
  // The row-split kernel as the default (at most 64 positions a piece): 16 pieces of 20 positions,
  // pieces straddling the main / extra boundary, empty pieces past short lengths, -1 ids, sinks.
  c.name = "small h16: 584 + 584 extra, s_q 2, row-split default";
  c.b = 2;
  c.h_q = 16;
  c.s_q = 2;
  c.main = fp8(64, 128);
  c.has_extra = true;
  c.extra = fp8(32, 192);
  c.lengths = Lengths::random;
  c.invalid_fraction = 0.2;
  c.sink = Sink::finite;
  c.sms = 132;
  c.seed = 46;
  check_case(c);
  c.name = "small h8: 584 + 584 extra, zero lengths, row-split default";
  c.h_q = 8;
  c.s_q = 1;
  c.b = 5;
  c.lengths = Lengths::zero_some;
  c.sink = Sink::with_inf;
  c.seed = 47;
  check_case(c);
}

TEST_CASE("sparse decode small heads at the V4.1 decode shape vs the host reference", "[gpu][decode]") {
  for (const int h : {8, 16}) {
    DecodeCase c;
    c.h_q = h;
    c.main = fp8(64, 128);
    c.has_extra = true;
    c.extra = fp8(64, 512);
    c.name = "small V4.1 shape b 8, h_q " + std::to_string(h);
    c.b = 8;
    c.seed = 50 + h;
    check_case(c);
    c.name = "small V4.1 shape b 200 variable, h_q " + std::to_string(h);
    c.b = 200;
    c.lengths = Lengths::zero_some;
    c.invalid_fraction = 1.0 / 17;
    c.sink = Sink::finite;
    c.seed = 60 + h;
    check_case(c);
  }
}

TEST_CASE("sparse decode fp8_ds_mla 584 vs the host reference", "[gpu][decode]") {
  std::vector<DecodeCase> cases;
  auto add = [&](DecodeCase c) { cases.push_back(std::move(c)); };
  {
    DecodeCase c;
    c.name = "b1 window 128 page 64";
    c.main = fp8(64, 128);
    c.seed = 11;
    add(c);
    c.name = "b1 h128 s_q 2";
    c.h_q = 128;
    c.s_q = 2;
    c.seed = 12;
    add(c);
  }
  {  // V4.1-Flash layer types
    DecodeCase c;
    c.name = "swaonly: window 128 page 32";
    c.b = 37;
    c.main = fp8(32, 128);
    c.lengths = Lengths::random;
    c.seed = 13;
    add(c);
    c.name = "swaonly h128 s_q 2 sink";
    c.h_q = 128;
    c.s_q = 2;
    c.sink = Sink::finite;
    c.seed = 14;
    add(c);
    c.name = "c2a: + extra 512 page 32";
    c.b = 24;
    c.h_q = 128;
    c.s_q = 1;
    c.has_extra = true;
    c.extra = fp8(32, 512);
    c.lengths = Lengths::full;
    c.sink = Sink::finite;
    c.seed = 15;
    add(c);
    c.name = "c1a: + extra 512 page 64, s_q 2, sink +-inf";
    c.b = 9;
    c.h_q = 64;
    c.s_q = 2;
    c.extra = fp8(64, 512);
    c.lengths = Lengths::random;
    c.sink = Sink::with_inf;
    c.seed = 16;
    add(c);
    c.name = "c1a full, b 64, h128 (no split)";
    c.b = 64;
    c.h_q = 128;
    c.s_q = 1;
    c.lengths = Lengths::full;
    c.sink = Sink::none;
    c.seed = 17;
    add(c);
    c.name = "c1a full, b 133 h64 (b not a multiple of P)";
    c.b = 133;
    c.h_q = 64;
    c.seed = 18;
    add(c);
    c.name = "many requests per CTA in one_pass: b 300 h64, window 128 + extra 64";
    c.b = 300;
    c.main = fp8(64, 128);
    c.extra = fp8(64, 64);
    c.lengths = Lengths::random;
    c.sink = Sink::finite;
    c.seed = 41;
    add(c);
  }
  {  // padded strides, odd page sizes, topk not a multiple of 64
    DecodeCase c;
    c.name = "page 53 main + page 53 extra, topk 100 / 200";
    c.b = 5;
    c.main = fp8(53, 100);
    c.has_extra = true;
    c.extra = fp8(53, 200);
    c.lengths = Lengths::random;
    c.invalid_fraction = 0.3;
    c.seed = 19;
    add(c);
  }
  {  // edge cases
    DecodeCase c;
    c.name = "topk 64 with zero lengths (h64)";
    c.b = 40;
    c.main = fp8(64, 64);
    c.lengths = Lengths::zero_some;
    c.seed = 20;
    add(c);
    c.name = "topk 64 + extra 64 with zero lengths (h128 s_q 2)";
    c.h_q = 128;
    c.s_q = 2;
    c.has_extra = true;
    c.extra = fp8(64, 64);
    c.seed = 21;
    add(c);
    c.name = "all lengths zero";
    c.b = 6;
    c.lengths = Lengths::all_zero;
    c.sink = Sink::finite;
    c.seed = 22;
    add(c);
    c.name = "all indices -1";
    c.lengths = Lengths::full;
    c.invalid_fraction = 1.0;
    c.sink = Sink::with_inf;
    c.seed = 23;
    add(c);
    c.name = "few partitions (7 SMs): many requests each";
    c.b = 29;
    c.h_q = 64;
    c.s_q = 1;
    c.main = fp8(32, 128);
    c.extra = fp8(64, 512);
    c.lengths = Lengths::random;
    c.invalid_fraction = 0.1;
    c.sink = Sink::finite;
    c.sms = 7;
    c.seed = 24;
    add(c);
  }
  {  // stress data: element tolerance not asserted (see decode_latents)
    DecodeCase c;
    c.name = "stress: wide magnitudes, c1a, b 16 h128";
    c.b = 16;
    c.h_q = 128;
    c.main = fp8(64, 128);
    c.has_extra = true;
    c.extra = fp8(64, 512);
    c.lengths = Lengths::random;
    c.wide = true;
    c.seed = 25;
    add(c);
  }
  for (const auto& c : cases) check_case(c);
}

// The split-KV partials are fp32 (DecodeParams::o_accum): a split request carries no rounding the
// same request in one pass does not, so split_kv is as accurate as one_pass against the fp64
// reference. Same random inputs in both modes, every request split into several partials.
//
// What is required: the RMS error (sqrt(cos_diff) of compare_decode: cos_diff = sum (a - r)^2 /
// sum (a^2 + r^2), the same denominator in both modes) of split_kv <= 1.05 x one_pass's. The max abs
// error is printed and warned above 1.05 x one_pass's + 1e-6, but only required <= 1.3 x: it is one
// element's bf16 rounding (half an ulp of the largest outputs, plus the side of a rounding midpoint
// a value falls on), so it moves by 10-15% between two runs of equal accuracy. A host emulation of
// both modes' arithmetic (bf16 P, fp32 sums, bf16 out; 8 requests x 64 heads of 10 blocks, one or
// two blocks per partial, 50 seeds each) gave, split_kv against one_pass: fp32 partials RMS
// 0.987-0.995x, max abs 0.85-1.18x (above 1.05x in 20 of 100 runs); bf16 partials RMS 1.26-1.28x,
// max abs 0.94-1.56x.
TEST_CASE("sparse decode: split_kv (fp32 partials) is as accurate as one_pass", "[gpu][decode]") {
  std::vector<DecodeCase> cases;
  {
    DecodeCase c;  // V4.1 c1a: 10 blocks per request; 132 SMs: one block per partition, 10 partials
    c.name = "584 + 584 extra 512, b 8 h64";
    c.b = 8;
    c.h_q = 64;
    c.main = fp8(64, 128);
    c.has_extra = true;
    c.extra = fp8(64, 512);
    c.lengths = Lengths::full;
    c.seed = 61;
    cases.push_back(c);
    c.name = "584 + 584 extra 512, b 4 h128, sink";  // sm_90a: also the 2-CTA pair forced on and off
    c.b = 4;
    c.h_q = 128;
    c.sink = Sink::finite;
    c.seed = 62;
    cases.push_back(c);
    c.name = "528 + 288 extra 512 (portable kernel), b 8 h64";
    c.b = 8;
    c.h_q = 64;
    c.main = {RowFormat::v41_fp8_528, 64, 128};
    c.extra = {RowFormat::v41_fp4_288, 64, 512};
    c.sink = Sink::none;
    c.seed = 63;
    cases.push_back(c);
  }
  for (const auto& c : cases) {
    INFO("case " << c.name);
    const DecodeResult r = run_decode_case(c);
    INFO("split_kv: " << r.cmp.message);
    INFO("one_pass: " << r.cmp_one_pass.message);
    REQUIRE(r.cmp.pass);
    REQUIRE(r.cmp_one_pass.pass);
    INFO(r.split_requests << " of " << c.b << " requests split, at most " << r.max_splits << " partials");
    REQUIRE(r.split_requests == c.b);
    REQUIRE(r.max_splits >= 3);
    const mlaplan::DecodeComparison& one = r.cmp_one_pass;
    REQUIRE(one.max_abs > 0.0);
    REQUIRE(one.cos_diff > 0.0);
    // split_kv as planned, and the paths of the same kernel (the 2-CTA pair on / off, no PDL); the
    // portable kernel forced on sm_90a is printed only (its one_pass is not what ran here).
    std::vector<std::pair<std::string, const mlaplan::DecodeComparison*>> splits{{"split_kv", &r.cmp}};
    for (const auto& [label, cmp] : r.forced) splits.emplace_back("split_kv, " + label, &cmp);
    for (const auto& [label, cmp] : splits) {
      const double max_ratio = cmp->max_abs / one.max_abs;
      const double rms_ratio = std::sqrt(std::max(cmp->cos_diff, 0.0) / one.cos_diff);
      std::printf(
          "accuracy %-46s %-36s max_abs %.3e vs one_pass %.3e (x%.3f) | rel_rms %.3e vs one_pass %.3e (x%.3f)\n",
          c.name.c_str(), label.c_str(), cmp->max_abs, one.max_abs, max_ratio, std::sqrt(std::max(cmp->cos_diff, 0.0)),
          std::sqrt(one.cos_diff), rms_ratio);
      std::fflush(stdout);
      if (label.find("generic kernel") != std::string::npos) continue;
      INFO(label << ": max_abs " << cmp->max_abs << " (one_pass " << one.max_abs << "), rms x" << rms_ratio);
      if (cmp->max_abs > 1.05 * one.max_abs + 1e-6) WARN("max abs error above 1.05 x one_pass's");
      REQUIRE(rms_ratio <= 1.05);
      REQUIRE(cmp->max_abs <= 1.3 * one.max_abs + 1e-6);
    }
  }
}

TEST_CASE("sparse decode V4.1 fp8 528 main + fp4 288 extra vs the host reference", "[gpu][decode]") {
  DecodeCase c;
  c.name = "528 window 128 page 32";
  c.b = 11;
  c.main = {RowFormat::v41_fp8_528, 32, 128};
  c.lengths = Lengths::random;
  c.seed = 31;
  check_case(c);
  c.name = "528 + 288 extra 512 page 64, h128";
  c.h_q = 128;
  c.has_extra = true;
  c.extra = {RowFormat::v41_fp4_288, 64, 512};
  c.sink = Sink::with_inf;
  c.seed = 32;
  check_case(c);
  c.name = "528 + 288 extra 512 page 32, b 48 s_q 2";
  c.b = 48;
  c.h_q = 64;
  c.s_q = 2;
  c.extra = {RowFormat::v41_fp4_288, 32, 512};
  c.lengths = Lengths::zero_some;
  c.invalid_fraction = 0.1;
  c.seed = 33;
  check_case(c);
}

TEST_CASE("sparse decode V3.2 fp8_ds_mla 656 (d_qk 576) vs the host reference", "[gpu][decode]") {
  DecodeCase c;
  c.name = "656 topk 2048 page 64, h64, random lengths, sink";
  c.b = 9;
  c.main = {RowFormat::fp8_ds_mla_656, 64, 2048};
  c.lengths = Lengths::random;
  c.invalid_fraction = 0.05;
  c.sink = Sink::finite;
  c.seed = 41;
  check_case(c);
  c.name = "656 topk 2048 page 64, h128, some empty";
  c.h_q = 128;
  c.b = 20;
  c.lengths = Lengths::zero_some;
  c.sink = Sink::with_inf;
  c.seed = 42;
  check_case(c);
  c.name = "656 topk 512 page 53, b 140 (one_pass: more requests than SMs)";
  c.h_q = 64;
  c.b = 140;
  c.main = {RowFormat::fp8_ds_mla_656, 53, 512};
  c.lengths = Lengths::full;
  c.seed = 43;
  check_case(c);
}

TEST_CASE("sparse decode plain rows (bf16 1024, fp8 512 per-tensor) vs the host reference", "[gpu][decode]") {
  DecodeCase c;
  c.name = "bf16 window 128 page 64";
  c.b = 12;
  c.main = {RowFormat::bf16_1024, 64, 128};
  c.lengths = Lengths::random;
  c.seed = 51;
  check_case(c);
  c.name = "bf16 + bf16 extra 512, h128, sink, -1";
  c.h_q = 128;
  c.has_extra = true;
  c.extra = {RowFormat::bf16_1024, 64, 512};
  c.invalid_fraction = 0.1;
  c.sink = Sink::with_inf;
  c.seed = 52;
  check_case(c);
  c.name = "fp8 per-tensor (scale 1) + extra 512, b 40";
  c.h_q = 64;
  c.b = 40;
  c.main = {RowFormat::fp8_pt_512, 64, 128};
  c.extra = {RowFormat::fp8_pt_512, 64, 512};
  c.lengths = Lengths::zero_some;
  c.seed = 53;
  check_case(c);
  c.name = "fp8 per-tensor scale 0.0625 / 0.5, h128";
  c.h_q = 128;
  c.main.scale = 0.0625f;
  c.extra.scale = 0.5f;
  c.sink = Sink::finite;
  c.seed = 54;
  check_case(c);
}

TEST_CASE("decode rejects what it does not support", "[gpu][decode][sanitize]") {
  mk::DecodeParams p;
  p.b = 1;
  p.topk = 64;
  p.num_sm_parts = 1;
  p.main.format = RowFormat::v41_fp4_288;  // fp4 is only an extra-cache format
  try {
    mk::check_decode_params(p);
    FAIL("expected an error");
  } catch (const mlaplan::Error& e) {
    REQUIRE(e.kind() == mlaplan::ErrorKind::unsupported);
    REQUIRE(std::string(e.what()).find("no decode kernel for v41_fp4_288 alone") == 0);
  }
  p.main.format = RowFormat::fp8_ds_mla_584;
  p.h_q = 96;
  REQUIRE_THROWS_AS(mk::check_decode_params(p), mlaplan::Error);
}

TEST_CASE("decode plan mode: one pass when the SMs get enough requests", "[gpu][decode][sanitize]") {
  using mk::DecodeMode;
  // V4.1-Flash decode shape on 132 SMs: window 128 + extra 512 = 640 rows.
  // 10 blocks per request: split-KV below 55 CTAs, 2-CTA clusters from 55 to 66, one pass from 67
  // (tests/test_decode.cpp has the rule's edges; docs/perf-history.md "v10", "v14").
  REQUIRE(mk::decode_plan_mode(1, 1, 64, 128, true, 512, 132) == DecodeMode::split_kv);
  REQUIRE(mk::decode_plan_mode(19, 1, 64, 128, true, 512, 132) == DecodeMode::split_kv);
  REQUIRE(mk::decode_plan_mode(32, 1, 64, 128, true, 512, 132) == DecodeMode::split_kv);
  REQUIRE(mk::decode_plan_mode(64, 1, 64, 128, true, 512, 132) == DecodeMode::cluster_split);
  REQUIRE(mk::decode_plan_mode(132, 1, 64, 128, true, 512, 132) == DecodeMode::one_pass);
  REQUIRE(mk::decode_plan_mode(8, 1, 128, 128, true, 512, 132) == DecodeMode::split_kv);
  REQUIRE(mk::decode_plan_mode(32, 1, 128, 128, true, 512, 132) == DecodeMode::cluster_split);
  REQUIRE(mk::decode_plan_mode(64, 1, 128, 128, true, 512, 132) == DecodeMode::one_pass);
  REQUIRE(mk::decode_plan_mode(1, 1, 64, 64, false, 0, 132) == DecodeMode::one_pass);
  REQUIRE(mk::decode_plan_mode(1, 1, 64, 128, false, 0, 132) == DecodeMode::one_pass);
  REQUIRE(mk::decode_plan_mode(33, 1, 64, 128, false, 0, 132) == DecodeMode::one_pass);
  REQUIRE(mk::decode_plan_mode(66, 2, 64, 128, true, 512, 132) == DecodeMode::one_pass);
  // Longer requests keep the scheduler (load balance over uneven lengths).
  REQUIRE(mk::decode_plan_mode(256, 1, 64, 128, true, 513, 132) == DecodeMode::split_kv);
  REQUIRE(mk::decode_plan_mode(256, 1, 64, 2048, false, 0, 132) == DecodeMode::split_kv);
  REQUIRE(mk::decode_plan_mode(256, 1, 64, 640, false, 0, 132) == DecodeMode::one_pass);
  REQUIRE(mk::decode_plan_mode(0, 1, 64, 128, true, 512, 132) == DecodeMode::one_pass);
  REQUIRE_THROWS_AS(mk::decode_plan_mode(1, 0, 64, 128, true, 512, 132), mlaplan::Error);
  REQUIRE(mk::to_string(DecodeMode::one_pass) == "one_pass");
  // The launch on this device (plan_decode_launch's rules over described devices are tested in
  // tests/gpu/test_decode_launch.cpp): one_pass with more CTAs than SMs on the sm_90a kernel runs
  // one CTA per SM over request ranges; cluster_split takes cluster_split_ctas CTAs per request
  // there, and runs as one_pass with the portable kernel elsewhere.
  alignas(16) static std::uint8_t mem[4096] = {};
  mk::DecodeParams p;
  p.mode = DecodeMode::one_pass;
  p.b = 200;
  p.s_q = 1;
  p.h_q = 128;
  p.q = p.out = reinterpret_cast<std::uint16_t*>(mem);
  p.lse = reinterpret_cast<float*>(mem);
  p.indices = p.extra_indices = reinterpret_cast<std::int32_t*>(mem);
  p.topk = 128;
  p.main = {RowFormat::fp8_ds_mla_584, mem, 32, mk::padded_page_stride(RowFormat::fp8_ds_mla_584, 32), 4};
  p.has_extra = true;
  p.extra = {RowFormat::fp8_ds_mla_584, mem, 64, mk::padded_page_stride(RowFormat::fp8_ds_mla_584, 64), 4};
  p.extra_topk = 512;
  const mk::DecodeDevice dev = mk::current_decode_device();
  const int sms = mk::device_info(0).sm_count;
  REQUIRE(dev.num_sms == sms);
  const bool sm90 = dev.cc_major == 9 && dev.cc_minor == 0;
  const mk::DecodeLaunch l = mk::plan_decode_launch(p, dev);
  REQUIRE(l.dims.grid_z == 2u);
  REQUIRE(l.kernel == (sm90 ? mk::DecodeKernel::sm90_ws : mk::DecodeKernel::generic));
  REQUIRE(l.dims.grid_x == (sm90 && 200 * 2 > sms ? static_cast<unsigned>(std::max(1, sms / 2)) : 200u));
  mk::DecodeParams pc = p;
  pc.mode = DecodeMode::cluster_split;
  pc.b = 8;
  pc.h_q = 64;
  const mk::DecodeLaunch lc = mk::plan_decode_launch(pc, dev);
  if (sm90) {
    const auto c = static_cast<unsigned>(mlaplan::cluster_split_ctas(8, 10, sms));
    REQUIRE(lc.dims.cluster_x == c);
    REQUIRE(lc.dims.grid_x == 8u * c);
    REQUIRE(lc.fallback.empty());
  } else {
    REQUIRE(lc.mode == DecodeMode::one_pass);
    REQUIRE_FALSE(lc.fallback.empty());
  }
  REQUIRE(mk::to_string(DecodeMode::cluster_split) == "cluster_split");
}
