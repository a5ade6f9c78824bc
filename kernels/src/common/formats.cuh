#pragma once
// Device-side element conversions and scale rules of the KV row formats. They follow the host
// definitions in include/mlaplan/hardware/quant.hpp exactly (IEEE float32 division, round to nearest even,
// saturation, sign kept), so GPU-quantised bytes equal host-quantised bytes.

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>

namespace mlaplan::kernels::detail {

__device__ __forceinline__ float bf16_bits_to_float(std::uint32_t bits) { return __uint_as_float(bits << 16); }

/// float -> e4m3fn, round to nearest even, saturate to +-448, sign kept (cvt.rn.satfinite).
__device__ __forceinline__ std::uint8_t float_to_e4m3(float x) {
  return static_cast<std::uint8_t>(__nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3));
}

/// e4m3fn -> float (exact).
__device__ __forceinline__ float e4m3_to_float(std::uint8_t code) {
  const __half_raw h = __nv_cvt_fp8_to_halfraw(static_cast<__nv_fp8_storage_t>(code), __NV_E4M3);
  return __half2float(__half(h));
}

/// UE8M0 byte -> 2^(byte - 127); 0 -> 2^-127 (subnormal), 0xFF -> NaN.
__device__ __forceinline__ float ue8m0_to_float(std::uint32_t b) {
  // Selects, not branches (the decode's producers convert one scale per 16-byte unit).
  std::uint32_t u = b << 23;
  u = b == 0u ? 0x00400000u : u;
  u = b == 0xFFu ? 0x7FC00000u : u;
  return __uint_as_float(u);
}

/// Smallest power of two >= x for normal x > 0.
__device__ __forceinline__ float ceil_pow2_normal(float x) {
  const std::uint32_t bits = __float_as_uint(x);
  const std::uint32_t exp = bits & 0x7F800000u;
  return (bits & 0x007FFFFFu) == 0 ? x : __uint_as_float(exp + 0x00800000u);
}

/// 2^ceil(log2(max(amax/448, 1e-4))) for finite amax >= 0 (fp8_ds_mla and v41_fp8 tiles).
__device__ __forceinline__ float fp8_pow2_scale(float amax) {
  return ceil_pow2_normal(fmaxf(__fdiv_rn(amax, 448.0f), 1e-4f));
}

/// float -> e2m1 nibble: round to nearest even, saturate to +-6, sign kept (bit 3).
__device__ __forceinline__ std::uint32_t float_to_e2m1(float x) {
  const float a = fabsf(x);
  std::uint32_t c;
  if (a <= 0.25f) c = 0;       // 0.25 ties to 0 (even)
  else if (a < 0.75f) c = 1;   // 0.5
  else if (a <= 1.25f) c = 2;  // 1.0 (0.75 and 1.25 tie to the even code 2)
  else if (a < 1.75f) c = 3;   // 1.5
  else if (a <= 2.5f) c = 4;   // 2.0 (1.75 and 2.5 tie to 4)
  else if (a < 3.5f) c = 5;    // 3.0
  else if (a <= 5.0f) c = 6;   // 4.0 (3.5 and 5 tie to 6)
  else c = 7;                  // 6.0, saturated
  return c | (signbit(x) ? 8u : 0u);
}

/// e2m1 nibble -> float (exact).
__device__ __forceinline__ float e2m1_to_float(std::uint32_t nib) {
  const std::uint32_t m = nib & 7u;
  // codes 0..7: 0, 0.5, 1, 1.5, 2, 3, 4, 6; for m >= 2 the value is 2^((m>>1)-1) * (1 + (m&1)/2)
  const float mag =
      m < 2 ? 0.5f * static_cast<float>(m) : static_cast<float>(1u << ((m >> 1) - 1u)) * ((m & 1u) ? 1.5f : 1.0f);
  return (nib & 8u) ? -mag : mag;
}

/// e4m3 code of max(e4m3(amax/6), 2^-6) for finite amax >= 0 (v41_fp4 tiles).
__device__ __forceinline__ std::uint8_t fp4_scale_code(float amax) {
  const std::uint8_t c = float_to_e4m3(__fdiv_rn(amax, 6.0f));
  return c < 0x08 ? static_cast<std::uint8_t>(0x08) : c;
}

/// Two e4m3 codes (low byte first) -> two floats, multiplied by `scale`, packed as bf16x2.
/// Exact: e4m3 x a power of two (or x an e4m3 scale) fits bf16.
__device__ __forceinline__ std::uint32_t e4m3x2_to_bf16x2(std::uint32_t two, float scale) {
  const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(two), __NV_E4M3);
  const float2 f = __half22float2(__half2(h));
  const __nv_bfloat162 b = __floats2bfloat162_rn(f.x * scale, f.y * scale);
  return *reinterpret_cast<const std::uint32_t*>(&b);
}

/// 16 e4m3 values (one 16-byte unit) times a scale into 16 bf16: dims 0..7 in lo, 8..15 in hi.
__device__ __forceinline__ void e4m3x16_to_bf16(const uint4& raw, float scale, uint4& lo, uint4& hi) {
  lo.x = e4m3x2_to_bf16x2(raw.x & 0xFFFFu, scale);
  lo.y = e4m3x2_to_bf16x2(raw.x >> 16, scale);
  lo.z = e4m3x2_to_bf16x2(raw.y & 0xFFFFu, scale);
  lo.w = e4m3x2_to_bf16x2(raw.y >> 16, scale);
  hi.x = e4m3x2_to_bf16x2(raw.z & 0xFFFFu, scale);
  hi.y = e4m3x2_to_bf16x2(raw.z >> 16, scale);
  hi.z = e4m3x2_to_bf16x2(raw.w & 0xFFFFu, scale);
  hi.w = e4m3x2_to_bf16x2(raw.w >> 16, scale);
}

}  // namespace mlaplan::kernels::detail
