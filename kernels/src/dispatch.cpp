// The one dispatch of the kernels: format geometry, parameter checks, the table of compiled decode
// instantiations (a (main, extra) pair it does not list is refused) and the launch decision
// plan_decode_launch (kept here, out of the .cu files, so they are testable without a GPU).

#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include "common/decode_layout.hpp"
#include "common/launchers.hpp"
#include "mlaplan/base/error.hpp"
#include "mlaplan_kernels/kernels.hpp"

namespace mlaplan::kernels {

using detail::kBlockRows;
using detail::kHeadDim;
using detail::kHeadsPerCta;

std::string_view to_string(RowFormat f) {
  switch (f) {
    case RowFormat::fp8_ds_mla_584: return "fp8_ds_mla_584";
    case RowFormat::v41_fp8_528: return "v41_fp8_528";
    case RowFormat::v41_fp4_288: return "v41_fp4_288";
    case RowFormat::fp8_ds_mla_656: return "fp8_ds_mla_656";
    case RowFormat::bf16_1024: return "bf16_1024";
    case RowFormat::fp8_pt_512: return "fp8_pt_512";
  }
  return "unknown";
}

int row_bytes(RowFormat f) {
  switch (f) {
    case RowFormat::fp8_ds_mla_584: return 584;
    case RowFormat::v41_fp8_528: return 528;
    case RowFormat::v41_fp4_288: return 288;
    case RowFormat::fp8_ds_mla_656: return 656;
    case RowFormat::bf16_1024: return 1024;
    case RowFormat::fp8_pt_512: return 512;
  }
  return 0;
}

int row_dims(RowFormat f) { return f == RowFormat::fp8_ds_mla_656 ? 576 : 512; }

int page_alignment(RowFormat f) {
  switch (f) {
    case RowFormat::fp8_ds_mla_584: return 576;
    case RowFormat::v41_fp8_528: return 512;
    case RowFormat::v41_fp4_288: return 256;
    case RowFormat::fp8_ds_mla_656: return 1;
    case RowFormat::bf16_1024: return 512;
    case RowFormat::fp8_pt_512: return 512;
  }
  return 1;
}

std::int64_t padded_page_stride(RowFormat f, int page_block_size) {
  if (page_block_size < 1) throw_usage("page_block_size must be >= 1 (got " + std::to_string(page_block_size) + ")");
  return checked_round_up(static_cast<std::int64_t>(page_block_size) * row_bytes(f), page_alignment(f), "page stride",
                          ErrorKind::usage);
}

std::int32_t sm90_num_sm_parts(std::int32_t num_sms, std::int32_t s_q, std::int32_t h_q) {
  if (num_sms < 1 || s_q < 1 || h_q < 64) throw_usage("sm90_num_sm_parts: num_sms, s_q >= 1 and h_q >= 64 required");
  const std::int32_t p = num_sms / s_q / (h_q / 64);
  return p > 1 ? p : 1;
}

std::int32_t decode_num_sm_parts(std::int32_t num_sms, std::int32_t s_q, std::int32_t h_q) {
  if (!small_head_count(h_q)) return sm90_num_sm_parts(num_sms, s_q, h_q);
  if (num_sms < 1 || s_q < 1) throw_usage("decode_num_sm_parts: num_sms and s_q >= 1 required");
  return std::max<std::int32_t>(num_sms / s_q, 1);
}

std::int64_t o_accum_elems(std::int32_t b, std::int32_t s_q, std::int32_t h_q, std::int32_t num_sm_parts) {
  return checked_mul(lse_accum_elems(b, s_q, h_q, num_sm_parts), kHeadDim, "o_accum size", ErrorKind::usage);
}

std::int64_t lse_accum_elems(std::int32_t b, std::int32_t s_q, std::int32_t h_q, std::int32_t num_sm_parts) {
  const std::int64_t parts = static_cast<std::int64_t>(b) + num_sm_parts;
  return checked_mul(checked_mul(parts, s_q, "lse_accum size", ErrorKind::usage), h_q, "lse_accum size",
                     ErrorKind::usage);
}

namespace detail {

std::size_t decode_smem_bytes(RowFormat main, bool /*has_extra*/, RowFormat /*extra*/) {
  // The main format decides the geometry (portable/decode_kernel.cuh, DecodeGeometry).
  switch (main) {
    case RowFormat::fp8_ds_mla_656: return DecodeSmem656::total;
    case RowFormat::bf16_1024: return DecodeSmemDirect::total;
    default: return DecodeSmem::total;
  }
}

std::size_t small_decode_smem_bytes(RowFormat main) {
  return main == RowFormat::fp8_ds_mla_656 ? SmallSmem656::total : SmallSmem::total;
}

}  // namespace detail

namespace detail {

bool sm90ws_clusters_fit(const LaunchDims& d, bool has_extra) {
  return has_extra ? sm90ws_clusters_fit_584_584(d) : sm90ws_clusters_fit_584(d);
}

}  // namespace detail

namespace {

struct VariantEntry {
  DecodeVariant variant;
  detail::DecodeLauncher launch;                     ///< the portable kernel
  detail::DecodeLauncher launch_ws;                  ///< the warp-specialised sm_90a kernel, null where there is none
  detail::DecodeLauncher launch_h8 = nullptr;        ///< the small-head kernel at h_q 8, null where there is none
  detail::DecodeLauncher launch_h16 = nullptr;       ///< ... at h_q 16
  detail::DecodeLauncher launch_small_ws = nullptr;  ///< the warp-specialised small-head kernel (sm_90a), or null
  detail::DecodeLauncher launch_lean_h8 = nullptr;   ///< the row-split small-head kernel at h_q 8, or null
  detail::DecodeLauncher launch_lean_h16 = nullptr;  ///< ... at h_q 16
};

const std::vector<VariantEntry>& variant_table() {
  static const std::vector<VariantEntry> table = {
      {{RowFormat::fp8_ds_mla_584, false, RowFormat::fp8_ds_mla_584, true},
       &detail::launch_decode_584,
       &detail::launch_decode_sm90ws_584,
       &detail::launch_small_decode_584_h8,
       &detail::launch_small_decode_584_h16,
       &detail::launch_small_decode_sm90ws_584,
       &detail::launch_small_decode_lean_584_h8,
       &detail::launch_small_decode_lean_584_h16},
      {{RowFormat::fp8_ds_mla_584, true, RowFormat::fp8_ds_mla_584, true},
       &detail::launch_decode_584_584,
       &detail::launch_decode_sm90ws_584_584,
       &detail::launch_small_decode_584_584_h8,
       &detail::launch_small_decode_584_584_h16,
       &detail::launch_small_decode_sm90ws_584_584,
       &detail::launch_small_decode_lean_584_584_h8,
       &detail::launch_small_decode_lean_584_584_h16},
      {{RowFormat::v41_fp8_528, false, RowFormat::v41_fp8_528}, &detail::launch_decode_528, nullptr},
      {{RowFormat::v41_fp8_528, true, RowFormat::v41_fp4_288}, &detail::launch_decode_528_288, nullptr},
      {{RowFormat::fp8_ds_mla_656, false, RowFormat::fp8_ds_mla_656, true},
       &detail::launch_decode_656,
       nullptr,
       &detail::launch_small_decode_656_h8,
       &detail::launch_small_decode_656_h16},
      {{RowFormat::bf16_1024, false, RowFormat::bf16_1024}, &detail::launch_decode_bf16, nullptr},
      {{RowFormat::bf16_1024, true, RowFormat::bf16_1024}, &detail::launch_decode_bf16_bf16, nullptr},
      {{RowFormat::fp8_pt_512, false, RowFormat::fp8_pt_512}, &detail::launch_decode_fp8pt, nullptr},
      {{RowFormat::fp8_pt_512, true, RowFormat::fp8_pt_512}, &detail::launch_decode_fp8pt_fp8pt, nullptr},
  };
  return table;
}

std::string variant_name(const DecodeVariant& v) {
  std::string s(to_string(v.main));
  s += v.has_extra ? std::string(" + ") + std::string(to_string(v.extra)) : std::string(" alone");
  return s;
}

void check_cache(const CacheView& c, const char* which) {
  const std::string w(which);
  if (c.data == nullptr) throw_usage(w + " cache: data is null");
  if (c.page_block_size < 1)
    throw_usage(w + " cache: page_block_size must be >= 1 (got " + std::to_string(c.page_block_size) + ")");
  if (c.num_pages < 1) throw_usage(w + " cache: num_pages must be >= 1 (got " + std::to_string(c.num_pages) + ")");
  const std::int64_t used = static_cast<std::int64_t>(c.page_block_size) * row_bytes(c.format);
  if (c.page_stride_bytes < used) {
    throw_usage(w + " cache: page stride " + std::to_string(c.page_stride_bytes) + " is below " +
                std::to_string(c.page_block_size) + " rows x " + std::to_string(row_bytes(c.format)) +
                " B = " + std::to_string(used));
  }
  if (c.page_stride_bytes % 16 != 0) {
    throw_usage(w + " cache: page stride " + std::to_string(c.page_stride_bytes) + " is not a multiple of 16");
  }
  if (reinterpret_cast<std::uintptr_t>(c.data) % 16 != 0) throw_usage(w + " cache: data is not 16-byte aligned");
  if (c.format == RowFormat::fp8_pt_512 && !(c.scale > 0.0f && c.scale < 3.0e38f)) {
    throw_usage(w + " cache: the per-tensor scale of fp8_pt_512 must be finite and > 0 (got " +
                std::to_string(c.scale) + ")");
  }
}

}  // namespace

const std::vector<DecodeVariant>& supported_decode_variants() {
  static const std::vector<DecodeVariant> v = [] {
    std::vector<DecodeVariant> r;
    for (const auto& e : variant_table()) r.push_back(e.variant);
    return r;
  }();
  return v;
}

std::size_t select_decode_variant(const DecodeParams& p) {
  const auto& t = variant_table();
  for (std::size_t i = 0; i < t.size(); ++i) {
    const DecodeVariant& v = t[i].variant;
    if (v.main == p.main.format && v.has_extra == p.has_extra && (!v.has_extra || v.extra == p.extra.format)) return i;
  }
  std::string list;
  for (const auto& e : t) list += (list.empty() ? "" : ", ") + variant_name(e.variant);
  const DecodeVariant asked{p.main.format, p.has_extra, p.extra.format};
  throw_unsupported("no decode kernel for " + variant_name(asked) + "; compiled: " + list);
}

void check_decode_params(const DecodeParams& p) {
  if (p.b < 0) throw_usage("decode: b must be >= 0 (got " + std::to_string(p.b) + ")");
  if (p.s_q < 1) throw_usage("decode: s_q must be >= 1 (got " + std::to_string(p.s_q) + ")");
  if (p.h_q != 64 && p.h_q != 128 && !small_head_count(p.h_q))
    throw_usage("decode: h_q must be 8, 16, 64 or 128 (got " + std::to_string(p.h_q) + ")");
  if (p.topk < 1) throw_usage("decode: topk must be >= 1 (got " + std::to_string(p.topk) + ")");
  const bool split = p.mode == DecodeMode::split_kv;
  if (split && (p.num_sm_parts < 1 || p.num_sm_parts > kMaxSmParts)) {
    throw_usage("decode: num_sm_parts must be in [1, " + std::to_string(kMaxSmParts) + "] (got " +
                std::to_string(p.num_sm_parts) + ")");
  }
  if (!(p.softmax_scale > 0.0f)) throw_usage("decode: softmax_scale must be > 0");
  const DecodeVariant& variant = variant_table()[select_decode_variant(p)].variant;
  if (small_head_count(p.h_q) && !variant.small_heads) {
    std::string list;
    for (const auto& e : variant_table()) {
      if (e.variant.small_heads) list += (list.empty() ? "" : ", ") + variant_name(e.variant);
    }
    throw_unsupported("decode: h_q " + std::to_string(p.h_q) + " runs unpadded on the small-head kernel, built for " +
                      list + "; " + variant_name(variant) + " takes h_q 64 or 128 (pad the heads)");
  }
  if (p.d_qk != row_dims(p.main.format)) {
    throw_usage("decode: d_qk " + std::to_string(p.d_qk) + " does not match the main cache's " +
                std::string(to_string(p.main.format)) + " rows (" + std::to_string(row_dims(p.main.format)) + " dims)");
  }
  if (p.b == 0) return;
  if (p.mode != DecodeMode::split_kv && p.mode != DecodeMode::one_pass && p.mode != DecodeMode::cluster_split) {
    throw_usage("decode: unknown mode");
  }
  if (p.q == nullptr || p.indices == nullptr || p.out == nullptr || p.lse == nullptr) {
    throw_usage("decode: q, indices, out and lse must be set");
  }
  if (split &&
      (p.o_accum == nullptr || p.lse_accum == nullptr || p.sched_records == nullptr || p.num_splits == nullptr)) {
    throw_usage("decode: split_kv needs o_accum, lse_accum, sched_records and num_splits");
  }
  // The sm_90a epilogues store 16 bytes at a time (sm90/decode_ws.cuh, ws_store_o_staged).
  if (reinterpret_cast<std::uintptr_t>(p.out) % 16 != 0) throw_usage("decode: out is not 16-byte aligned");
  if (split && reinterpret_cast<std::uintptr_t>(p.o_accum) % 16 != 0)
    throw_usage("decode: o_accum is not 16-byte aligned");
  check_cache(p.main, "main");
  if (p.has_extra) {
    if (p.extra_topk < 1)
      throw_usage("decode: extra_topk must be >= 1 with an extra cache (got " + std::to_string(p.extra_topk) + ")");
    if (p.extra_indices == nullptr) throw_usage("decode: extra_indices must be set with an extra cache");
    check_cache(p.extra, "extra");
  }
}

std::string_view to_string(DecodeKernel k) {
  switch (k) {
    case DecodeKernel::generic: return "generic";
    case DecodeKernel::sm90_ws: return "sm90_ws";
    case DecodeKernel::small_heads: return "small_heads";
    case DecodeKernel::small_heads_sm90: return "small_heads_sm90";
    case DecodeKernel::small_heads_lean: return "small_heads_lean";
  }
  return "unknown";
}

std::optional<DecodeKernel> decode_kernel_named(std::string_view name) {
  for (const DecodeKernel k : {DecodeKernel::generic, DecodeKernel::sm90_ws, DecodeKernel::small_heads,
                               DecodeKernel::small_heads_sm90, DecodeKernel::small_heads_lean}) {
    if (to_string(k) == name) return k;
  }
  return std::nullopt;
}

std::string DecodeLaunch::describe() const {
  std::string s = std::string(to_string(kernel)) + " " + std::string(to_string(mode));
  s += ", grid " + std::to_string(dims.grid_x) + "x" + std::to_string(dims.grid_y) + "x" + std::to_string(dims.grid_z);
  if (dims.cluster_x > 1) s += ", cluster " + std::to_string(dims.cluster_x) + " CTAs per request";
  if (pair) s += ", 2-CTA pair";
  if (pieces > 0) s += ", " + std::to_string(pieces) + (pieces == 1 ? " piece" : " pieces") + " per request";
  s += ", " + std::to_string(dims.block) + " threads";
  if (pdl) s += ", PDL";
  if (combine) s += ", combine";
  return s;
}

std::optional<DecodeKernel> forced_kernel_for_mode(std::optional<DecodeKernel> forced, DecodeMode mode) {
  if (forced == DecodeKernel::small_heads_lean && mode != DecodeMode::split_kv) return std::nullopt;
  return forced;
}

int lean_pieces(const DecodeParams& p) {
  if (p.mode != DecodeMode::split_kv || !small_head_count(p.h_q) || p.b < 1 || p.num_sm_parts < 1) return 0;
  if (p.main.format != RowFormat::fp8_ds_mla_584 || (p.has_extra && p.extra.format != RowFormat::fp8_ds_mla_584)) {
    return 0;
  }
  const std::int64_t n = static_cast<std::int64_t>(p.topk) + (p.has_extra ? p.extra_topk : 0);
  // b x pieces partials must fit o_accum's b + num_sm_parts rows (per query token).
  const std::int64_t by_scratch = (static_cast<std::int64_t>(p.b) + p.num_sm_parts) / p.b;
  const std::int64_t by_rows = (n + detail::kLeanMinRows - 1) / detail::kLeanMinRows;
  const std::int64_t s = std::min<std::int64_t>({detail::kLeanMaxPieces, by_scratch, by_rows});
  return s >= 1 ? static_cast<int>(s) : 0;
}

bool lean_by_default(const DecodeParams& p, int pieces) {
  if (pieces < 2) return false;
  const std::int64_t n = static_cast<std::int64_t>(p.topk) + (p.has_extra ? p.extra_topk : 0);
  return (n + pieces - 1) / pieces <= kLeanDefaultMaxRows;
}

DecodeLaunch plan_decode_launch(const DecodeParams& p, const DecodeDevice& dev) {
  check_decode_params(p);
  const VariantEntry& e = variant_table()[select_decode_variant(p)];
  DecodeLaunch L;
  L.asked = p.mode;
  L.mode = p.mode;
  const bool sm90a = dev.cc_major == 9 && dev.cc_minor == 0;
  if (small_head_count(p.h_q)) {
    // The small-head kernels, every head in one CTA, no clusters. split_kv at small batches: the
    // row-split kernel (584 rows, every arch) where its rule says so (lean_pieces, lean_by_default)
    // unless another small-head kernel is forced. Otherwise the warp-specialised one where it
    // exists (compute capability 9.0, 584 rows; one CTA per SM at most in one_pass, each over a
    // range of requests) unless the portable one is forced; the portable one elsewhere (one CTA
    // per request or partition).
    const bool ws_small = e.launch_small_ws != nullptr && sm90a;
    const int pieces = e.launch_lean_h8 != nullptr ? lean_pieces(p) : 0;
    if (p.force.kernel == DecodeKernel::small_heads_lean) {
      if (pieces < 1) {
        throw_unsupported(
            "decode: the small_heads_lean kernel runs split_kv on fp8_ds_mla_584 rows (alone or + 584) "
            "with num_sm_parts >= 1; asked for " +
            std::string(to_string(p.mode)) + ", " + variant_name(e.variant) + ", b " + std::to_string(p.b) +
            ", num_sm_parts " + std::to_string(p.num_sm_parts));
      }
    } else if (p.force.kernel.has_value() && p.force.kernel != DecodeKernel::small_heads &&
               !(p.force.kernel == DecodeKernel::small_heads_sm90 && ws_small)) {
      throw_unsupported("decode: h_q " + std::to_string(p.h_q) + " runs on the small-head kernels only (" +
                        (ws_small ? "small_heads_sm90, small_heads" : "small_heads") +
                        (pieces >= 2 ? " or small_heads_lean" : "") + " here); asked for " +
                        std::string(to_string(*p.force.kernel)));
    }
    if (p.force.kernel == DecodeKernel::small_heads_lean ||
        (!p.force.kernel.has_value() && lean_by_default(p, pieces))) {
      L.kernel = DecodeKernel::small_heads_lean;
      L.pieces = pieces;
      LaunchDims& d = L.dims;
      d.grid_x = static_cast<unsigned>(pieces);
      d.grid_y = static_cast<unsigned>(p.s_q);
      d.grid_z = static_cast<unsigned>(p.b);
      d.block = detail::LeanGeometry::kThreads;
      d.smem_bytes = detail::LeanGeometry::total;
      L.combine = true;
      L.pdl = !p.force.no_pdl;
      return L;
    }
    const bool ws = ws_small && p.force.kernel != DecodeKernel::small_heads;
    L.kernel = ws ? DecodeKernel::small_heads_sm90 : DecodeKernel::small_heads;
    if (L.mode == DecodeMode::cluster_split) {
      L.mode = DecodeMode::one_pass;
      L.fallback = "cluster_split has no small-head kernel; ran one_pass";
    }
    LaunchDims& d = L.dims;
    d.grid_x = static_cast<unsigned>(L.mode == DecodeMode::split_kv ? p.num_sm_parts : p.b);
    d.grid_y = static_cast<unsigned>(p.s_q);
    d.grid_z = 1;
    if (ws) {
      d.block = detail::DecodeSm90SmallSmem::kThreads;
      d.smem_bytes = detail::DecodeSm90SmallSmem::alloc;
      if (L.mode == DecodeMode::one_pass && dev.num_sms > 0 && static_cast<std::int64_t>(p.b) * p.s_q > dev.num_sms) {
        d.grid_x = static_cast<unsigned>(std::max<std::int64_t>(1, dev.num_sms / p.s_q));
      }
    } else {
      d.block = static_cast<unsigned>(detail::SmallSmem::kDecodeThreads);
      d.smem_bytes = detail::small_decode_smem_bytes(p.main.format);
    }
    L.combine = L.mode == DecodeMode::split_kv;
    L.pdl = L.combine && !p.force.no_pdl;
    return L;
  }
  if (p.force.kernel == DecodeKernel::small_heads || p.force.kernel == DecodeKernel::small_heads_sm90 ||
      p.force.kernel == DecodeKernel::small_heads_lean) {
    throw_unsupported("decode: the " + std::string(to_string(*p.force.kernel)) +
                      " kernel runs h_q 8 or 16; asked for h_q " + std::to_string(p.h_q));
  }
  const bool ws_here = e.launch_ws != nullptr && sm90a;
  if (p.force.kernel == DecodeKernel::sm90_ws && !ws_here) {
    throw_unsupported(
        "decode: the sm90_ws kernel runs fp8_ds_mla_584 (alone or + 584) on compute capability 9.0; "
        "asked for " +
        variant_name(e.variant) + " on " + std::to_string(dev.cc_major) + "." + std::to_string(dev.cc_minor));
  }
  const bool ws = ws_here && p.force.kernel != DecodeKernel::generic;
  L.kernel = ws ? DecodeKernel::sm90_ws : DecodeKernel::generic;
  LaunchDims& d = L.dims;
  d.grid_x = static_cast<unsigned>(p.mode == DecodeMode::split_kv ? p.num_sm_parts : p.b);
  d.grid_y = static_cast<unsigned>(p.s_q);
  d.grid_z = static_cast<unsigned>(p.h_q / kHeadsPerCta);
  if (ws) {
    d.block = detail::DecodeSm90WsSmem::kThreads;
    d.smem_bytes = detail::DecodeSm90WsSmem::alloc;
  } else {
    d.block = detail::kDecodeThreads;
    d.smem_bytes = detail::decode_smem_bytes(p.main.format, p.has_extra, p.extra.format);
  }
  L.combine = p.mode == DecodeMode::split_kv;
  L.pdl = p.mode == DecodeMode::split_kv && !p.force.no_pdl;
  auto fits = [&](const LaunchDims& x) { return !dev.clusters_fit || dev.clusters_fit(x, p.has_extra); };
  const std::int64_t per_request = static_cast<std::int64_t>(d.grid_y) * d.grid_z;
  const std::int64_t n_blocks = decode_request_blocks(p.topk, p.has_extra, p.extra_topk);

  // cluster_split: C CTAs per request as one cluster along x (sm90_ws only), halved until every
  // cluster is resident at once; with no cluster left the request runs in one CTA (one_pass).
  if (p.mode == DecodeMode::cluster_split) {
    if (!ws) {
      L.mode = DecodeMode::one_pass;
      L.fallback = "cluster_split needs the sm90_ws kernel (compute capability 9.0, fp8_ds_mla 584); ran one_pass";
    } else {
      const std::int64_t asked_c =
          p.force.cluster_ctas > 0
              ? p.force.cluster_ctas
              : cluster_split_ctas(static_cast<std::int64_t>(p.b) * per_request, n_blocks, std::max(dev.num_sms, 1));
      std::int64_t c = asked_c;
      for (; c > 1; c /= 2) {
        LaunchDims x = d;
        x.grid_x = static_cast<unsigned>(p.b * c);
        x.cluster_x = static_cast<unsigned>(c);
        if (fits(x)) {
          d = x;
          break;
        }
      }
      if (c <= 1) {
        L.mode = DecodeMode::one_pass;
        if (asked_c > 1) {
          L.fallback = "clusters of " + std::to_string(asked_c) + " CTAs do not fit on this device; ran one_pass";
        }
      } else if (c < asked_c) {
        L.fallback = "clusters of " + std::to_string(asked_c) + " CTAs do not fit; ran " + std::to_string(c);
      }
    }
  }
  // one_pass with more CTAs than SMs on sm90_ws: one CTA per SM, each over a contiguous range of
  // whole requests, so that its producers start the next request while its math finishes the
  // last (docs/perf-history.md "v8").
  if (ws && L.mode == DecodeMode::one_pass && dev.num_sms > 0 &&
      static_cast<std::int64_t>(p.b) * per_request > dev.num_sms) {
    d.grid_x = static_cast<unsigned>(std::max<std::int64_t>(1, dev.num_sms / per_request));
  }
  // h_q 128 on sm90_ws: the two 64-head CTAs of a request share the dequantisation as a 2-CTA
  // cluster when a CTA has at least two blocks on average (below that the cluster's start and lock
  // step cost more than the halved conversion saves: docs/perf-history.md "v8") and the pairs fit.
  if (ws && d.cluster_x == 1 && d.grid_z == 2) {
    const bool pays =
        static_cast<std::int64_t>(p.b) * p.s_q * n_blocks >= 2 * static_cast<std::int64_t>(d.grid_x) * d.grid_y;
    if (p.force.pair > 0 || (p.force.pair == 0 && pays)) {
      LaunchDims x = d;
      x.cluster_z = 2;
      if (fits(x)) {
        d = x;
        L.pair = true;
      } else if (p.force.pair > 0) {
        L.fallback = "2-CTA pairs do not fit on this device; ran one CTA per 64 heads";
      }
    }
  }
  return L;
}

LaunchDims combine_launch_dims(const DecodeParams& p) {
  // One warp per (request, query, head); four heads per block. Requests that were not split
  // return at once.
  LaunchDims d;
  d.grid_x = static_cast<unsigned>(p.b);
  d.grid_y = static_cast<unsigned>(p.s_q);
  d.grid_z = static_cast<unsigned>(p.h_q / 4);
  d.block = 128;
  d.smem_bytes = 0;
  return d;
}

DecodeLaunch sparse_decode(const DecodeParams& p) {
  check_decode_params(p);
  if (p.b == 0) {
    DecodeLaunch none;
    none.asked = none.mode = p.mode;
    return none;
  }
  const DecodeLaunch L = plan_decode_launch(p, current_decode_device());
  const VariantEntry& e = variant_table()[select_decode_variant(p)];
  if (L.kernel == DecodeKernel::small_heads_lean) {
    (p.h_q == 8 ? e.launch_lean_h8 : e.launch_lean_h16)(p, L);
    detail::launch_combine_lean(p, L.pieces);
    return L;
  }
  if (L.kernel == DecodeKernel::small_heads_sm90) {
    e.launch_small_ws(p, L);
  } else if (L.kernel == DecodeKernel::small_heads) {
    (p.h_q == 8 ? e.launch_h8 : e.launch_h16)(p, L);
  } else {
    (L.kernel == DecodeKernel::sm90_ws ? e.launch_ws : e.launch)(p, L);
  }
  if (L.combine) detail::launch_combine(p, combine_launch_dims(p));
  return L;
}

}  // namespace mlaplan::kernels
