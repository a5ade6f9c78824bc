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

// ---- e4m3 x UE8M0 scale -> bf16 without conversion instructions (the small-head sm_90a producers) ----
//
// An e4m3fn code s.eeee.mmm placed as the bf16 bits s.0000eeee.mmm0000 is the code's value times
// 2^-120 exactly: normal codes (e >= 1) become normal bf16 numbers 2^(e - 127) (1.mmm), subnormal
// codes (e = 0, value m/8 2^-6) bf16 subnormals m/8 2^-126. One byte permute, one shift and one
// mask give two of them (bf16x2); a bf16x2 multiply by 2^(b - 7) (the UE8M0 scale 2^(b - 127)
// times 2^120) then rounds the exact product once, as the float path above does, so the bits
// equal e4m3x2_to_bf16x2's for every code and scale byte (check_e4m3_conversion compares all
// 256 scale bytes x 65536 code pairs on the device). Where 2^(b - 7) is not a bf16 number
// (b > 134) or the scale is NaN (b = 255), two multiplies: by 2^120 (exact), then by the scale. The
// permute / shift / mask run on the integer pipe instead of e4m3x2_to_bf16x2's two conversions per
// pair. NaN codes (0x7F, 0xFF) would come out as +-480 x scale: e4m3_nan_bits finds them and the
// caller multiplies by NaN instead.

/// Bytes lo and lo + 1 of w (kSel 0x1804: bytes 0, 1; 0x3A24: bytes 2, 3) as bf16x2 bits of their
/// e4m3 values times 2^-120. The permute builds [b_hi, sign(b_lo) x 8, b_lo, 0]; an arithmetic
/// shift by 4 puts each code's 7 low bits at 4..10 (20..26) and its sign at 15 (31); the mask
/// keeps those.
template <unsigned kSel>
__device__ __forceinline__ std::uint32_t e4m3x2_bits_scaled_down(std::uint32_t w) {
  std::uint32_t x;
  asm("prmt.b32 %0, %1, %2, %3;\n" : "=r"(x) : "r"(w), "r"(0u), "n"(kSel));
  return static_cast<std::uint32_t>(static_cast<std::int32_t>(x) >> 4) & 0x87F087F0u;
}

/// a x b + (-0) on bf16x2 bit patterns, rounded to nearest even once, subnormals kept.
__device__ __forceinline__ std::uint32_t bf16x2_mul(std::uint32_t a, std::uint32_t b) {
  std::uint32_t d;
  asm("fma.rn.bf16x2 %0, %1, %2, %3;\n" : "=r"(d) : "r"(a), "r"(b), "r"(0x80008000u));
  return d;
}

/// Nonzero when some byte of w is an e4m3fn NaN code (0x7F or 0xFF); OR several words' results and
/// test once with e4m3_nan_found. (w & 0x7F7F7F7F) + 0x01010101 sets bit 7 of a byte exactly where
/// its 7 low bits are all ones; no carry crosses a byte.
__device__ __forceinline__ std::uint32_t e4m3_nan_bits(std::uint32_t w) { return (w & 0x7F7F7F7Fu) + 0x01010101u; }
__device__ __forceinline__ bool e4m3_nan_found(std::uint32_t acc) { return (acc & 0x80808080u) != 0u; }

/// 16 e4m3 codes (one 16-byte unit) times 2^(b - 127) (UE8M0 byte b; b = 0: 2^-127, b = 255: NaN)
/// into 16 bf16, dims 0..7 in lo, 8..15 in hi; nan: some code the caller checked is a NaN code,
/// every output becomes NaN. The same bits as e4m3x16_to_bf16(raw, ue8m0_to_float(b), ...) where
/// no code is NaN.
__device__ __forceinline__ void e4m3x16_ue8m0_to_bf16(const uint4& raw, std::uint32_t b, bool nan, uint4& lo,
                                                      uint4& hi) {
  std::uint32_t v[8] = {e4m3x2_bits_scaled_down<0x1804u>(raw.x), e4m3x2_bits_scaled_down<0x3A24u>(raw.x),
                        e4m3x2_bits_scaled_down<0x1804u>(raw.y), e4m3x2_bits_scaled_down<0x3A24u>(raw.y),
                        e4m3x2_bits_scaled_down<0x1804u>(raw.z), e4m3x2_bits_scaled_down<0x3A24u>(raw.z),
                        e4m3x2_bits_scaled_down<0x1804u>(raw.w), e4m3x2_bits_scaled_down<0x3A24u>(raw.w)};
  if (b <= 134u && !nan) {
    const std::uint32_t m = ((b + 120u) << 7) * 0x10001u;  // 2^(b - 7) in both halves
#pragma unroll
    for (int i = 0; i < 8; ++i) v[i] = bf16x2_mul(v[i], m);
  } else {
    const std::uint32_t s = nan || b == 255u ? 0x7FC0u : (b == 0u ? 0x0040u : b << 7);  // 2^(b - 127)
#pragma unroll
    for (int i = 0; i < 8; ++i) v[i] = bf16x2_mul(bf16x2_mul(v[i], 0x7B807B80u), s * 0x10001u);  // x 2^120, x scale
  }
  lo = make_uint4(v[0], v[1], v[2], v[3]);
  hi = make_uint4(v[4], v[5], v[6], v[7]);
}

}  // namespace mlaplan::kernels::detail
