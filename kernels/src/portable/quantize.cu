// Quantize kernels: bf16 latents [n, 512] ([n, 576] for fp8_ds_mla_656) -> rows of a KV format at
// given slots. One warp per row; lane l owns dims 16l..16l+15 (and lanes 0..7 the 656 layout's
// RoPE units). Byte maps: docs/layouts.md; rules: mlaplan/hardware/quant.hpp.

#include <cuda_runtime.h>

#include <cstdint>

#include "common/cuda_check.hpp"
#include "common/formats.cuh"
#include "mlaplan_kernels/kernels.hpp"

namespace mlaplan::kernels::detail {
namespace {

constexpr int kWarpsPerBlock = 8;

struct LaneValues {
  float v[16];
  float amax;
  bool finite;
};

__device__ __forceinline__ LaneValues load_lane(const std::uint16_t* row, int lane) {
  const uint4* src = reinterpret_cast<const uint4*>(row + 16 * lane);
  const uint4 a = src[0];
  const uint4 b = src[1];
  const std::uint32_t w[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
  LaneValues r;
  r.amax = 0.0f;
  r.finite = true;
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    r.v[2 * i] = bf16_bits_to_float(w[i] & 0xFFFFu);
    r.v[2 * i + 1] = bf16_bits_to_float(w[i] >> 16);
  }
#pragma unroll
  for (int i = 0; i < 16; ++i) {
    r.finite = r.finite && isfinite(r.v[i]);
    r.amax = fmaxf(r.amax, fabsf(r.v[i]));
  }
  return r;
}

/// amax and the all-finite flag over a tile of `lanes` consecutive lanes (1, 2, 4 or 8).
__device__ __forceinline__ void reduce_tile(LaneValues& t, int lanes) {
  for (int off = 1; off < lanes; off <<= 1) {
    t.amax = fmaxf(t.amax, __shfl_xor_sync(0xFFFFFFFFu, t.amax, off));
    t.finite = __shfl_xor_sync(0xFFFFFFFFu, static_cast<int>(t.finite), off) != 0 && t.finite;
  }
}

/// 16 e4m3 codes of v / scale, or 0x7F everywhere for a poisoned tile.
__device__ __forceinline__ uint4 encode_e4m3x16(const LaneValues& t, float scale) {
  std::uint32_t w[4] = {0, 0, 0, 0};
#pragma unroll
  for (int i = 0; i < 16; ++i) {
    const std::uint32_t c = t.finite ? float_to_e4m3(__fdiv_rn(t.v[i], scale)) : 0x7Fu;
    w[i / 4] |= c << (8 * (i % 4));
  }
  return make_uint4(w[0], w[1], w[2], w[3]);
}

__global__ void quantize_kernel(const QuantizeParams p) {
  const int lane = static_cast<int>(threadIdx.x) & 31;
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * kWarpsPerBlock + (threadIdx.x >> 5);
  if (i >= p.n) return;
  const std::int64_t slot = p.slots[i];
  if (slot < 0 || slot >= p.num_pages * p.page_block_size) return;
  const std::int64_t page = slot / p.page_block_size;
  const std::int64_t t = slot % p.page_block_size;
  std::uint8_t* base = p.cache + page * p.page_stride_bytes;
  const std::uint16_t* row = p.latent + i * (p.format == RowFormat::fp8_ds_mla_656 ? 576 : 512);
  LaneValues v = load_lane(row, lane);

  if (p.format == RowFormat::fp8_ds_mla_584) {
    // data part at t*576: 448 e4m3 (7 tiles of 64) then 64 raw bf16; scale part at N*576 + t*8.
    std::uint8_t* data = base + t * 576;
    std::uint8_t* scales = base + static_cast<std::int64_t>(p.page_block_size) * 576 + t * 8;
    reduce_tile(v, 4);  // lanes 28..31 form their own (unused) group
    if (lane < 28) {
      const float scale = v.finite ? fp8_pow2_scale(v.amax) : 1.0f;
      *reinterpret_cast<uint4*>(data + 16 * lane) = encode_e4m3x16(v, scale);
      if ((lane & 3) == 0) {
        scales[lane / 4] = v.finite ? static_cast<std::uint8_t>(__float_as_uint(scale) >> 23) : 0xFF;
      }
      if (lane == 0) scales[7] = 0;
    } else {
      const uint4* src = reinterpret_cast<const uint4*>(row + 16 * lane);
      uint4* dst = reinterpret_cast<uint4*>(data + 448 + 32 * (lane - 28));
      dst[0] = src[0];
      dst[1] = src[1];
    }
  } else if (p.format == RowFormat::v41_fp8_528) {
    // 512 e4m3 (16 tiles of 32) then 16 UE8M0 bytes.
    std::uint8_t* r = base + t * 528;
    reduce_tile(v, 2);
    const float scale = v.finite ? fp8_pow2_scale(v.amax) : 1.0f;
    *reinterpret_cast<uint4*>(r + 16 * lane) = encode_e4m3x16(v, scale);
    if ((lane & 1) == 0) r[512 + lane / 2] = v.finite ? static_cast<std::uint8_t>(__float_as_uint(scale) >> 23) : 0xFF;
  } else if (p.format == RowFormat::fp8_ds_mla_656) {
    // 512 e4m3 (4 tiles of 128 dims = 8 lanes), 4 fp32 scales, then the 64 RoPE dims as raw bf16.
    std::uint8_t* r = base + t * 656;
    reduce_tile(v, 8);
    const float scale = v.finite ? fp8_pow2_scale(v.amax) : __uint_as_float(0x7FC00000u);
    *reinterpret_cast<uint4*>(r + 16 * lane) = encode_e4m3x16(v, scale);
    if ((lane & 7) == 0) *reinterpret_cast<float*>(r + 512 + 4 * (lane >> 3)) = scale;
    if (lane < 8) *reinterpret_cast<uint4*>(r + 528 + 16 * lane) = reinterpret_cast<const uint4*>(row + 512)[lane];
  } else if (p.format == RowFormat::bf16_1024) {
    const uint4* src = reinterpret_cast<const uint4*>(row + 16 * lane);
    uint4* dst = reinterpret_cast<uint4*>(base + t * 1024 + 32 * lane);
    dst[0] = src[0];
    dst[1] = src[1];
  } else if (p.format == RowFormat::fp8_pt_512) {
    // Element by element (no tiles): NaN -> 0x7F, +-inf saturates to +-448, as the host's.
    std::uint32_t w[4] = {0, 0, 0, 0};
#pragma unroll
    for (int k = 0; k < 16; ++k)
      w[k / 4] |= static_cast<std::uint32_t>(float_to_e4m3(__fdiv_rn(v.v[k], p.scale))) << (8 * (k % 4));
    *reinterpret_cast<uint4*>(base + t * 512 + 16 * lane) = make_uint4(w[0], w[1], w[2], w[3]);
  } else {
    // v41_fp4_288: 256 bytes of e2m1 pairs (even dim in the low nibble), then 32 e4m3 scales.
    std::uint8_t* r = base + t * 288;
    const std::uint8_t code = v.finite ? fp4_scale_code(v.amax) : static_cast<std::uint8_t>(0x7F);
    const float scale = e4m3_to_float(code);
    std::uint32_t w[2] = {0, 0};
#pragma unroll
    for (int k = 0; k < 16; ++k) {
      const std::uint32_t nib = v.finite ? float_to_e2m1(__fdiv_rn(v.v[k], scale)) : 0u;
      w[k / 8] |= nib << (4 * (k % 8));
    }
    *reinterpret_cast<uint2*>(r + 8 * lane) = make_uint2(w[0], w[1]);
    r[256 + lane] = code;
  }
}

}  // namespace
}  // namespace mlaplan::kernels::detail

namespace mlaplan::kernels {

void quantize(const QuantizeParams& p) {
  if (p.n < 0) throw_usage("quantize: n must be >= 0 (got " + std::to_string(p.n) + ")");
  if (p.n == 0) return;
  if (p.latent == nullptr || p.slots == nullptr || p.cache == nullptr)
    throw_usage("quantize: latent, slots and cache must be set");
  if (p.page_block_size < 1 || p.num_pages < 1) throw_usage("quantize: page_block_size and num_pages must be >= 1");
  if (p.page_stride_bytes < static_cast<std::int64_t>(p.page_block_size) * row_bytes(p.format) ||
      p.page_stride_bytes % 16 != 0) {
    throw_usage("quantize: page stride " + std::to_string(p.page_stride_bytes) +
                " must be >= " + std::to_string(static_cast<std::int64_t>(p.page_block_size) * row_bytes(p.format)) +
                " and a multiple of 16");
  }
  if (p.format == RowFormat::fp8_pt_512 && !(p.scale > 0.0f && p.scale < 3.0e38f)) {
    throw_usage("quantize: the per-tensor scale of fp8_pt_512 must be finite and > 0 (got " + std::to_string(p.scale) +
                ")");
  }
  if (reinterpret_cast<std::uintptr_t>(p.latent) % 16 != 0 || reinterpret_cast<std::uintptr_t>(p.cache) % 16 != 0) {
    throw_usage("quantize: latent and cache must be 16-byte aligned");
  }
  const std::int64_t blocks = (p.n + detail::kWarpsPerBlock - 1) / detail::kWarpsPerBlock;
  if (blocks > 0x7FFFFFFF) throw_usage("quantize: too many rows (" + std::to_string(p.n) + ")");
  detail::quantize_kernel<<<static_cast<unsigned>(blocks), 32 * detail::kWarpsPerBlock, 0,
                            static_cast<cudaStream_t>(p.stream)>>>(p);
  MLAPLAN_CUDA_CHECK_LAUNCH("quantize_kernel<<<...>>>");
}

}  // namespace mlaplan::kernels
