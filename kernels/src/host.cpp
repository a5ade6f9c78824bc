// Host side of the kernels: format geometry, parameter checks, the dispatch table and the launch
// heuristics (kept here, out of the .cu files, so they are testable without a GPU).

#include <algorithm>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "decode_layout.hpp"
#include "launchers.hpp"
#include "mlaplan/error.hpp"
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
  }
  return "unknown";
}

int row_bytes(RowFormat f) {
  switch (f) {
    case RowFormat::fp8_ds_mla_584: return 584;
    case RowFormat::v41_fp8_528: return 528;
    case RowFormat::v41_fp4_288: return 288;
  }
  return 0;
}

int page_alignment(RowFormat f) {
  switch (f) {
    case RowFormat::fp8_ds_mla_584: return 576;
    case RowFormat::v41_fp8_528: return 512;
    case RowFormat::v41_fp4_288: return 256;
  }
  return 1;
}

std::int64_t padded_page_stride(RowFormat f, int page_block_size) {
  if (page_block_size < 1) throw_usage("page_block_size must be >= 1 (got " + std::to_string(page_block_size) + ")");
  return checked_round_up(static_cast<std::int64_t>(page_block_size) * row_bytes(f), page_alignment(f),
                          "page stride", ErrorKind::usage);
}

std::int32_t sm90_num_sm_parts(std::int32_t num_sms, std::int32_t s_q, std::int32_t h_q) {
  if (num_sms < 1 || s_q < 1 || h_q < 64) throw_usage("sm90_num_sm_parts: num_sms, s_q >= 1 and h_q >= 64 required");
  const std::int32_t p = num_sms / s_q / (h_q / 64);
  return p > 1 ? p : 1;
}

std::int64_t o_accum_elems(std::int32_t b, std::int32_t s_q, std::int32_t h_q, std::int32_t num_sm_parts) {
  return checked_mul(lse_accum_elems(b, s_q, h_q, num_sm_parts), kHeadDim, "o_accum size", ErrorKind::usage);
}

std::int64_t lse_accum_elems(std::int32_t b, std::int32_t s_q, std::int32_t h_q, std::int32_t num_sm_parts) {
  const std::int64_t parts = static_cast<std::int64_t>(b) + num_sm_parts;
  return checked_mul(checked_mul(parts, s_q, "lse_accum size", ErrorKind::usage), h_q, "lse_accum size", ErrorKind::usage);
}

namespace detail {

std::size_t decode_smem_bytes(RowFormat /*main*/, bool /*has_extra*/, RowFormat /*extra*/) {
  return DecodeSmem::total;  // one layout serves every format pair (staging rows sized for 584)
}

bool decode_pdl_allowed() {
  static const bool allowed = [] {
    const char* e = std::getenv("MLAPLAN_DECODE_PDL");
    return e == nullptr || std::string_view(e) != "0";
  }();
  return allowed;
}

namespace {
/// MLAPLAN_DECODE_KERNEL (read once; empty when unset): which decode kernel an A/B run asks for.
std::string_view decode_kernel_env() {
  static const std::string value = [] {
    const char* e = std::getenv("MLAPLAN_DECODE_KERNEL");
    return e == nullptr ? std::string() : std::string(e);
  }();
  return value;
}
}  // namespace

bool sm90_pair_enabled() { return decode_kernel_env() == "sm90_pair"; }

int cluster_split_override() {
  static const int value = [] {
    const char* e = std::getenv("MLAPLAN_CLUSTER_SPLIT");
    if (e == nullptr) return 0;
    const int v = std::atoi(e);
    return v == 1 || v == 2 || v == 4 || v == 8 ? v : 0;
  }();
  return value;
}

bool sm90_ws6_enabled() { return decode_kernel_env() == "sm90_ws6"; }

int sm90_ws_pair_choice() {
  const std::string_view e = decode_kernel_env();
  return e == "sm90_ws_pair" ? 1 : e == "sm90_ws_single" ? -1 : 0;
}

bool sm90_ws_enabled() {
  const std::string_view e = decode_kernel_env();
  return e != "sm90_v5" && e != "sm90_pair";
}

}  // namespace detail

namespace {

struct VariantEntry {
  DecodeVariant variant;
  detail::DecodeLauncher launch;
  detail::DecodeLauncher launch_sm90;    ///< the sm_90a (wgmma) lock-step kernel, null where there is none
  detail::DecodeLauncher launch_sm90ws;  ///< the sm_90a warp-specialised kernel, null where there is none
};

const std::vector<VariantEntry>& variant_table() {
  static const std::vector<VariantEntry> table = {
      {{RowFormat::fp8_ds_mla_584, false, RowFormat::fp8_ds_mla_584}, &detail::launch_decode_584,
       &detail::launch_decode_sm90_584, &detail::launch_decode_sm90ws_584},
      {{RowFormat::fp8_ds_mla_584, true, RowFormat::fp8_ds_mla_584}, &detail::launch_decode_584_584,
       &detail::launch_decode_sm90_584_584, &detail::launch_decode_sm90ws_584_584},
      {{RowFormat::v41_fp8_528, false, RowFormat::v41_fp8_528}, &detail::launch_decode_528, nullptr, nullptr},
      {{RowFormat::v41_fp8_528, true, RowFormat::v41_fp4_288}, &detail::launch_decode_528_288, nullptr, nullptr},
  };
  return table;
}

/// The table entry for p's formats, or null (no throw; select_decode_variant reports).
const VariantEntry* find_variant(const DecodeParams& p) {
  for (const auto& e : variant_table()) {
    const DecodeVariant& v = e.variant;
    if (v.main == p.main.format && v.has_extra == p.has_extra && (!v.has_extra || v.extra == p.extra.format)) return &e;
  }
  return nullptr;
}

/// MLAPLAN_DECODE_KERNEL=generic keeps the portable kernel on sm_90 too (A/B timing, tests).
bool sm90_kernel_allowed() { return detail::decode_kernel_env() != "generic"; }

/// The sm_90a launcher for p on the current device, or null (other device, other formats).
detail::DecodeLauncher sm90_launcher(const DecodeParams& p) {
  const VariantEntry* e = find_variant(p);
  if (e == nullptr || e->launch_sm90 == nullptr || !sm90_kernel_allowed() || !detail::current_device_is_sm90()) {
    return nullptr;
  }
  return detail::sm90_ws_enabled() && e->launch_sm90ws != nullptr ? e->launch_sm90ws : e->launch_sm90;
}

std::string variant_name(const DecodeVariant& v) {
  std::string s(to_string(v.main));
  s += v.has_extra ? std::string(" + ") + std::string(to_string(v.extra)) : std::string(" alone");
  return s;
}

void check_cache(const CacheView& c, const char* which) {
  const std::string w(which);
  if (c.data == nullptr) throw_usage(w + " cache: data is null");
  if (c.page_block_size < 1) throw_usage(w + " cache: page_block_size must be >= 1 (got " + std::to_string(c.page_block_size) + ")");
  if (c.num_pages < 1) throw_usage(w + " cache: num_pages must be >= 1 (got " + std::to_string(c.num_pages) + ")");
  const std::int64_t used = static_cast<std::int64_t>(c.page_block_size) * row_bytes(c.format);
  if (c.page_stride_bytes < used) {
    throw_usage(w + " cache: page stride " + std::to_string(c.page_stride_bytes) + " is below " +
                std::to_string(c.page_block_size) + " rows x " + std::to_string(row_bytes(c.format)) + " B = " +
                std::to_string(used));
  }
  if (c.page_stride_bytes % 16 != 0) {
    throw_usage(w + " cache: page stride " + std::to_string(c.page_stride_bytes) + " is not a multiple of 16");
  }
  if (reinterpret_cast<std::uintptr_t>(c.data) % 16 != 0) throw_usage(w + " cache: data is not 16-byte aligned");
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
  if (p.h_q != 64 && p.h_q != 128) throw_usage("decode: h_q must be 64 or 128 (got " + std::to_string(p.h_q) + ")");
  if (p.topk < 1) throw_usage("decode: topk must be >= 1 (got " + std::to_string(p.topk) + ")");
  const bool split = p.mode == DecodeMode::split_kv;
  if (split && (p.num_sm_parts < 1 || p.num_sm_parts > kMaxSmParts)) {
    throw_usage("decode: num_sm_parts must be in [1, " + std::to_string(kMaxSmParts) + "] (got " +
                std::to_string(p.num_sm_parts) + ")");
  }
  if (!(p.softmax_scale > 0.0f)) throw_usage("decode: softmax_scale must be > 0");
  (void)select_decode_variant(p);
  if (p.b == 0) return;
  if (p.mode != DecodeMode::split_kv && p.mode != DecodeMode::one_pass && p.mode != DecodeMode::cluster_split) {
    throw_usage("decode: unknown mode");
  }
  if (p.q == nullptr || p.indices == nullptr || p.out == nullptr || p.lse == nullptr) {
    throw_usage("decode: q, indices, out and lse must be set");
  }
  if (split && (p.o_accum == nullptr || p.lse_accum == nullptr || p.sched_records == nullptr || p.num_splits == nullptr)) {
    throw_usage("decode: split_kv needs o_accum, lse_accum, sched_records and num_splits");
  }
  // The sm_90a epilogues store 16 bytes at a time (decode_sm90_ws.cuh, ws_store_o_staged).
  if (reinterpret_cast<std::uintptr_t>(p.out) % 16 != 0) throw_usage("decode: out is not 16-byte aligned");
  if (split && reinterpret_cast<std::uintptr_t>(p.o_accum) % 16 != 0) throw_usage("decode: o_accum is not 16-byte aligned");
  check_cache(p.main, "main");
  if (p.has_extra) {
    if (p.extra_topk < 1) throw_usage("decode: extra_topk must be >= 1 with an extra cache (got " + std::to_string(p.extra_topk) + ")");
    if (p.extra_indices == nullptr) throw_usage("decode: extra_indices must be set with an extra cache");
    check_cache(p.extra, "extra");
  }
}

LaunchDims decode_launch_dims(const DecodeParams& p) {
  LaunchDims d;
  d.grid_x = static_cast<unsigned>(p.mode == DecodeMode::split_kv ? p.num_sm_parts : p.b);
  d.grid_y = static_cast<unsigned>(p.s_q);
  d.grid_z = static_cast<unsigned>(p.h_q / kHeadsPerCta);
  const detail::DecodeLauncher sm90 = sm90_launcher(p);
  if (sm90 != nullptr && detail::sm90_ws_enabled()) {
    d.block = detail::DecodeSm90WsSmem::kThreads;
    d.smem_bytes = detail::DecodeSm90WsSmem::alloc;
    // one_pass with more CTAs than SMs: one CTA per SM, each taking a contiguous range of whole
    // requests (the kernel derives it from gridDim.x), so that its producers start the next
    // request while its math finishes the last one (docs/perf.md "v8").
    const std::int64_t per_request = static_cast<std::int64_t>(d.grid_y) * d.grid_z;
    const int sms = detail::current_device_sm_count();
    if (p.mode == DecodeMode::cluster_split) {
      // C CTAs per request as one cluster (MLAPLAN_CLUSTER_SPLIT=1/2/4/8 overrides C for A/B runs).
      const std::int64_t n_blocks = decode_request_blocks(p.topk, p.has_extra, p.extra_topk);
      const int forced = detail::cluster_split_override();
      const std::int64_t c = forced > 0 ? forced
                                        : cluster_split_ctas(static_cast<std::int64_t>(p.b) * per_request, n_blocks,
                                                             std::max(sms, 1));
      if (c > 1) {
        d.grid_x = static_cast<unsigned>(p.b * c);
        d.cluster_x = static_cast<unsigned>(c);
      }
    }
    if (p.mode != DecodeMode::split_kv && d.cluster_x == 1 && sms > 0 && static_cast<std::int64_t>(p.b) * per_request > sms) {
      d.grid_x = static_cast<unsigned>(std::max<std::int64_t>(1, sms / per_request));
    }
  } else if (sm90 != nullptr) {
    d.block = detail::DecodeSm90Smem::kThreads;
    d.smem_bytes = detail::DecodeSm90Smem::alloc;
  } else {
    d.block = detail::kDecodeThreads;
    d.smem_bytes = detail::decode_smem_bytes(p.main.format, p.has_extra, p.extra.format);
  }
  return d;
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

void sparse_decode(const DecodeParams& p) {
  check_decode_params(p);
  if (p.b == 0) return;
  const std::size_t v = select_decode_variant(p);
  const detail::DecodeLauncher sm90 = sm90_launcher(p);
  (sm90 != nullptr ? sm90 : variant_table()[v].launch)(p, decode_launch_dims(p));
  if (p.mode == DecodeMode::split_kv) detail::launch_combine(p, combine_launch_dims(p));
}

}  // namespace mlaplan::kernels
