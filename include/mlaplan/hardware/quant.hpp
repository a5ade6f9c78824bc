#pragma once
// Exact host quantisers and dequantisers for every row format of formats.hpp. These are the
// definition the GPU kernels must match bit for bit; docs/layouts.md states the same rules with
// drawings. Everything is plain float32 arithmetic with IEEE round-to-nearest-even:
//
//   * amax of a tile = max |x| over its bf16 inputs (exact in float32).
//   * Divisions are correctly rounded float32 divisions (on the GPU: `x / s` with IEEE division,
//     __fdiv_rn, not __fdividef). With a power-of-two scale they are exact.
//   * Conversions to e4m3 / e2m1 round to nearest even and saturate (e4m3 to +-448, e2m1 to +-6);
//     the sign of the input is kept, so a negative value that rounds to zero gives -0. This is
//     what cvt.rn.satfinite.{e4m3x2,e2m1x2}.f32 does.
//   * Dequantisation is code value x scale in float32, exact for every code our quantisers write.
//
// Scale rules (per tile; all scales are powers of two except v41_fp4's):
//   fp8_ds_mla_v4 (64 dims), fp8_ds_mla_v32 (128), v41_fp8 (32):
//       scale = 2^ceil(log2(max(amax/448, 1e-4)))      -- FlashMLA's quantiser
//   indexer_fp8 (128):  scale = 2^ceil(log2(max(amax, 1e-4)/448))   -- vLLM's indexer writer
//   indexer_fp4 (32):   scale = 2^ceil(log2(max(amax, 1e-4)/6))     -- DeepGEMM's reference
//   v41_fp4 (16):       scale = max(e4m3(amax/6), 2^-6)             -- OUR DEFINITION (see below)
//   ceil(log2(.)) is computed exactly (the smallest power of two >= the value).
//
// v41_fp4 is our definition: the public sources give the byte map (e2m1 values, one e4m3 scale per
// 16 dims, no global scale) but not the rule. We take the NVFP4-style choice amax/6 rounded to
// e4m3, and floor the scale at e4m3's smallest normal, 2^-6. The floor guards all-zero tiles and
// makes re-quantisation exact: quant(dequant(quant(x))) == quant(x) byte for byte.
//
// Non-finite inputs: a tile that holds any NaN or +-inf is poisoned. Its scale is written as the
// format's NaN code (UE8M0 0xFF, fp32 0x7FC00000, e4m3 0x7F), its e4m3 values as 0x7F and its
// e2m1 values as 0; every value of the tile dequantises to NaN. Raw bf16 fields (RoPE of the 584
// and 656 layouts, the bf16 format) are copied bit for bit, inf and NaN included. FlashMLA's
// reference quantiser also yields an all-NaN tile after dequantisation for such inputs.
//
// Re-quantising dequantised values: dequant(quant(dequant(quant(x)))) == dequant(quant(x)) for
// every finite input. The bytes are equal too, except for power-of-two-scaled tiles whose largest
// code is exactly half the range (e4m3 224, e2m1 3) and whose scale is above its floor: there
// the second pass picks scale/2 and doubles every code (the same values).

#include <cstdint>

#include "mlaplan/hardware/formats.hpp"

namespace mlaplan {

// ---- scalar conversions ----

/// bf16 bit pattern -> float (exact).
float bf16_to_float(std::uint16_t bits) noexcept;
/// float -> bf16 bits, round to nearest even; NaN stays NaN (sign and top payload kept, quiet
/// bit set); overflow rounds to inf as IEEE does.
std::uint16_t float_to_bf16(float x) noexcept;
/// e4m3 (OCP e4m3fn: bias 7, no inf, 0x7F/0xFF NaN, max 448) -> float (exact).
float e4m3_to_float(std::uint8_t code) noexcept;
/// float -> e4m3fn: round to nearest even, saturate to +-448 (inf too), NaN -> 0x7F, sign kept.
std::uint8_t float_to_e4m3(float x) noexcept;
/// e2m1 nibble (low 4 bits; values 0, .5, 1, 1.5, 2, 3, 4, 6, bit 3 the sign) -> float (exact).
float e2m1_to_float(std::uint8_t nibble) noexcept;
/// float -> e2m1 nibble: round to nearest even, saturate to +-6 (inf too), sign kept, NaN -> 0.
std::uint8_t float_to_e2m1(float x) noexcept;
/// UE8M0 byte -> 2^(byte-127) (byte 0 gives 2^-127, a float subnormal); 0xFF -> NaN.
float ue8m0_to_float(std::uint8_t code) noexcept;
/// A power-of-two float 2^k (-127 <= k <= 127) -> its UE8M0 byte k+127; anything else
/// (NaN, inf, zero, not a power of two, out of range) -> 0xFF.
std::uint8_t ue8m0_from_float(float pow2) noexcept;

// ---- scale rules (finite amax >= 0; NaN in, NaN out; inf in, inf out) ----

/// Smallest power of two >= x, for x > 0 (subnormals included); may overflow to inf.
float ceil_pow2(float x) noexcept;
/// 2^ceil(log2(max(amax/448, 1e-4))): fp8_ds_mla_v4, fp8_ds_mla_v32, v41_fp8.
float fp8_ds_mla_scale(float amax) noexcept;
/// 2^ceil(log2(max(amax, 1e-4)/448)): indexer_fp8.
float indexer_fp8_scale(float amax) noexcept;
/// 2^ceil(log2(max(amax, 1e-4)/6)): indexer_fp4.
float indexer_fp4_scale(float amax) noexcept;
/// e4m3 code of max(e4m3(amax/6), 2^-6): v41_fp4 (our definition). NaN -> 0x7F.
std::uint8_t v41_fp4_scale_code(float amax) noexcept;

// ---- rows and pages ----

/// Whether the format has a quantiser (every format but compressor_state).
bool has_quantizer(RowFormatId id) noexcept;

/// Quantises one row of geometry(id).dims bf16 values into row `row_in_page` of the page at
/// `page_base` holding `rows_per_page` rows, at row_offsets(id, ...). Writes exactly the row's
/// bytes (for the 584 layout the pad byte is written 0) and nothing else. Error internal on a
/// null pointer, a row outside the page, or compressor_state.
void quantize_row(RowFormatId id, const std::uint16_t* bf16_in, std::uint8_t* page_base, std::int64_t rows_per_page,
                  std::int64_t row_in_page);

/// Reads row `row_in_page` back as geometry(id).dims floats. Same errors as quantize_row.
void dequantize_row(RowFormatId id, const std::uint8_t* page_base, std::int64_t rows_per_page, std::int64_t row_in_page,
                    float* out);

/// Quantises n rows (`rows` is [n, dims] bf16) into paged storage: `pages` holds `num_pages`
/// pages, `page_stride_bytes` apart (>= rows_per_page * row_bytes; padding is never written).
/// slots[i] = page * rows_per_page + row, or -1 to skip row i. Error internal for a slot outside
/// [-1, num_pages * rows_per_page), a short stride, or a null pointer.
void quantize_into_pages(RowFormatId id, const std::uint16_t* rows, std::int64_t n, const std::int64_t* slots,
                         std::uint8_t* pages, std::int64_t num_pages, std::int64_t rows_per_page,
                         std::int64_t page_stride_bytes);

/// The inverse: out is [n, dims]; a row whose slot is -1 is left as it was.
void dequantize_from_pages(RowFormatId id, const std::uint8_t* pages, std::int64_t num_pages,
                           std::int64_t rows_per_page, std::int64_t page_stride_bytes, const std::int64_t* slots,
                           std::int64_t n, float* out);

}  // namespace mlaplan
