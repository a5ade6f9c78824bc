#include "mlaplan/hardware/quant.hpp"

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "mlaplan/base/error.hpp"

namespace mlaplan {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr std::uint32_t kFp32NaNBits = 0x7FC00000u;
constexpr std::uint8_t kE4m3NaN = 0x7F;
constexpr std::uint8_t kUe8m0NaN = 0xFF;

// ---- minifloat rounding (e4m3, e2m1) ----

struct Minifloat {
  int mant_bits;  // stored mantissa bits
  int emin;       // exponent of the smallest normal
  double max;     // largest finite magnitude (saturation value)
  std::uint8_t sign_bit;
};
constexpr Minifloat kE4m3{3, -6, 448.0, 0x80};
constexpr Minifloat kE2m1{1, 0, 6.0, 0x08};

// Round a non-negative double to an integer, ties to even. Exact for the values used here.
double round_half_even(double q) {
  double f = std::floor(q);
  const double d = q - f;
  if (d > 0.5 || (d == 0.5 && std::fmod(f, 2.0) != 0.0)) f += 1.0;
  return f;
}

// Encodes a finite or infinite float (not NaN) into the minifloat: RNE, saturating, sign kept.
std::uint8_t encode_minifloat(float x, const Minifloat& f) {
  const bool neg = std::signbit(x);
  const double a = std::fabs(static_cast<double>(x));
  double m = 0.0;  // the magnitude after rounding, a value of the format's grid
  if (a >= f.max) {
    m = f.max;
  } else if (a > 0.0) {
    int e = std::ilogb(a);
    if (e < f.emin) e = f.emin;
    const double ulp = std::ldexp(1.0, e - f.mant_bits);
    m = round_half_even(a / ulp) * ulp;  // a / ulp is exact: a has 24 significant bits
    if (m > f.max) m = f.max;
  }
  int field = 0;
  if (m > 0.0) {
    if (m < std::ldexp(1.0, f.emin)) {
      field = static_cast<int>(m / std::ldexp(1.0, f.emin - f.mant_bits));  // subnormal
    } else {
      const int e = std::ilogb(m);
      const int mant = static_cast<int>((std::ldexp(m, -e) - 1.0) * std::ldexp(1.0, f.mant_bits));
      field = ((e - f.emin + 1) << f.mant_bits) | mant;
    }
  }
  return static_cast<std::uint8_t>(field | (neg ? f.sign_bit : 0));
}

// ---- little-endian stores and loads ----

void store_u16(std::uint8_t* p, std::uint16_t v) {
  p[0] = static_cast<std::uint8_t>(v & 0xFFu);
  p[1] = static_cast<std::uint8_t>(v >> 8);
}
std::uint16_t load_u16(const std::uint8_t* p) { return static_cast<std::uint16_t>(p[0] | (p[1] << 8)); }
void store_u32(std::uint8_t* p, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<std::uint8_t>((v >> (8 * i)) & 0xFFu);
}
std::uint32_t load_u32(const std::uint8_t* p) {
  std::uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<std::uint32_t>(p[i]) << (8 * i);
  return v;
}
void store_f32(std::uint8_t* p, float v) {
  store_u32(p, std::isnan(v) ? kFp32NaNBits : std::bit_cast<std::uint32_t>(v));
}
float load_f32(const std::uint8_t* p) { return std::bit_cast<float>(load_u32(p)); }

// ---- tiles ----

struct TileStats {
  float amax = 0.0f;   // max |x| over the tile
  bool finite = true;  // false when any input is NaN or +-inf (the tile is poisoned)
};

TileStats tile_stats(const std::uint16_t* x, std::int64_t n) {
  TileStats st;
  for (std::int64_t i = 0; i < n; ++i) {
    const float v = bf16_to_float(x[i]);
    if (!std::isfinite(v)) {
      st.finite = false;
    } else if (std::fabs(v) > st.amax) {
      st.amax = std::fabs(v);
    }
  }
  return st;
}

// e4m3 values of a tile under a power-of-two scale rule. Returns the scale, NaN when poisoned.
float e4m3_tile(const std::uint16_t* x, std::int64_t n, float (*rule)(float), std::uint8_t* codes) {
  const TileStats st = tile_stats(x, n);
  if (!st.finite) {
    std::memset(codes, kE4m3NaN, static_cast<std::size_t>(n));
    return kNaN;
  }
  const float s = rule(st.amax);
  for (std::int64_t i = 0; i < n; ++i) codes[i] = float_to_e4m3(bf16_to_float(x[i]) / s);
  return s;
}

// e2m1 values of a tile under scale s, two per byte, even element in the low nibble. A NaN scale
// (poisoned tile) writes zeros.
void e2m1_tile(const std::uint16_t* x, std::int64_t n, float s, std::uint8_t* packed) {
  for (std::int64_t i = 0; i < n; i += 2) {
    std::uint8_t lo = 0;
    std::uint8_t hi = 0;
    if (!std::isnan(s)) {
      lo = float_to_e2m1(bf16_to_float(x[i]) / s);
      hi = float_to_e2m1(bf16_to_float(x[i + 1]) / s);
    }
    packed[i / 2] = static_cast<std::uint8_t>(lo | (hi << 4));
  }
}

void e2m1_untile(const std::uint8_t* packed, std::int64_t n, float s, float* out) {
  for (std::int64_t i = 0; i < n; i += 2) {
    const std::uint8_t b = packed[i / 2];
    out[i] = e2m1_to_float(static_cast<std::uint8_t>(b & 0x0Fu)) * s;
    out[i + 1] = e2m1_to_float(static_cast<std::uint8_t>(b >> 4)) * s;
  }
}

void e4m3_untile(const std::uint8_t* codes, std::int64_t n, float s, float* out) {
  for (std::int64_t i = 0; i < n; ++i) out[i] = e4m3_to_float(codes[i]) * s;
}

// ---- per-format row codecs. `data` and `scale` are the row's parts (equal when not striped) ----

void quant_v4(const std::uint16_t* x, std::uint8_t* data, std::uint8_t* scale) {
  for (int k = 0; k < 7; ++k) {
    const float s = e4m3_tile(x + 64 * k, 64, fp8_ds_mla_scale, data + 64 * k);
    scale[k] = std::isnan(s) ? kUe8m0NaN : ue8m0_from_float(s);
  }
  scale[7] = 0;
  for (int j = 0; j < 64; ++j) store_u16(data + 448 + 2 * j, x[448 + j]);
}
void dequant_v4(const std::uint8_t* data, const std::uint8_t* scale, float* out) {
  for (int k = 0; k < 7; ++k) e4m3_untile(data + 64 * k, 64, ue8m0_to_float(scale[k]), out + 64 * k);
  for (int j = 0; j < 64; ++j) out[448 + j] = bf16_to_float(load_u16(data + 448 + 2 * j));
}

void quant_v41_fp8(const std::uint16_t* x, std::uint8_t* row) {
  for (int k = 0; k < 16; ++k) {
    const float s = e4m3_tile(x + 32 * k, 32, fp8_ds_mla_scale, row + 32 * k);
    row[512 + k] = std::isnan(s) ? kUe8m0NaN : ue8m0_from_float(s);
  }
}
void dequant_v41_fp8(const std::uint8_t* row, float* out) {
  for (int k = 0; k < 16; ++k) e4m3_untile(row + 32 * k, 32, ue8m0_to_float(row[512 + k]), out + 32 * k);
}

void quant_v41_fp4(const std::uint16_t* x, std::uint8_t* row) {
  for (int k = 0; k < 32; ++k) {
    const TileStats st = tile_stats(x + 16 * k, 16);
    const std::uint8_t code = st.finite ? v41_fp4_scale_code(st.amax) : kE4m3NaN;
    row[256 + k] = code;
    e2m1_tile(x + 16 * k, 16, e4m3_to_float(code), row + 8 * k);
  }
}
void dequant_v41_fp4(const std::uint8_t* row, float* out) {
  for (int k = 0; k < 32; ++k) e2m1_untile(row + 8 * k, 16, e4m3_to_float(row[256 + k]), out + 16 * k);
}

void quant_v32(const std::uint16_t* x, std::uint8_t* row) {
  for (int k = 0; k < 4; ++k) {
    const float s = e4m3_tile(x + 128 * k, 128, fp8_ds_mla_scale, row + 128 * k);
    store_f32(row + 512 + 4 * k, s);
  }
  for (int j = 0; j < 64; ++j) store_u16(row + 528 + 2 * j, x[512 + j]);
}
void dequant_v32(const std::uint8_t* row, float* out) {
  for (int k = 0; k < 4; ++k) e4m3_untile(row + 128 * k, 128, load_f32(row + 512 + 4 * k), out + 128 * k);
  for (int j = 0; j < 64; ++j) out[512 + j] = bf16_to_float(load_u16(row + 528 + 2 * j));
}

void quant_indexer_fp8(const std::uint16_t* x, std::uint8_t* data, std::uint8_t* scale) {
  store_f32(scale, e4m3_tile(x, 128, indexer_fp8_scale, data));
}
void dequant_indexer_fp8(const std::uint8_t* data, const std::uint8_t* scale, float* out) {
  e4m3_untile(data, 128, load_f32(scale), out);
}

void quant_indexer_fp4(const std::uint16_t* x, std::uint8_t* data, std::uint8_t* scale) {
  for (int k = 0; k < 4; ++k) {
    const TileStats st = tile_stats(x + 32 * k, 32);
    const float s = st.finite ? indexer_fp4_scale(st.amax) : kNaN;
    scale[k] = std::isnan(s) ? kUe8m0NaN : ue8m0_from_float(s);
    e2m1_tile(x + 32 * k, 32, s, data + 16 * k);
  }
}
void dequant_indexer_fp4(const std::uint8_t* data, const std::uint8_t* scale, float* out) {
  for (int k = 0; k < 4; ++k) e2m1_untile(data + 16 * k, 32, ue8m0_to_float(scale[k]), out + 32 * k);
}

void quant_bf16(const std::uint16_t* x, std::uint8_t* row) {
  for (int j = 0; j < 512; ++j) store_u16(row + 2 * j, x[j]);
}
void dequant_bf16(const std::uint8_t* row, float* out) {
  for (int j = 0; j < 512; ++j) out[j] = bf16_to_float(load_u16(row + 2 * j));
}

// Plain e4m3 with the per-tensor scale vLLM's FlashInfer path uses (1.0): the value itself.
void quant_fp8_per_tensor(const std::uint16_t* x, std::uint8_t* row) {
  for (int j = 0; j < 512; ++j) row[j] = float_to_e4m3(bf16_to_float(x[j]));
}
void dequant_fp8_per_tensor(const std::uint8_t* row, float* out) {
  for (int j = 0; j < 512; ++j) out[j] = e4m3_to_float(row[j]);
}

// Checks the arguments every row call shares and returns the row's offsets.
RowOffsets checked_row(const char* fn, RowFormatId id, const void* a, const void* b, std::int64_t rows_per_page,
                       std::int64_t row_in_page) {
  if (a == nullptr || b == nullptr) throw_internal(std::string(fn) + ": null pointer");
  if (!has_quantizer(id)) {
    throw_internal(std::string(fn) + ": " + std::string(row_format(id).name) +
                   " holds fp32 state, not a quantised latent");
  }
  return row_offsets(id, rows_per_page, row_in_page);
}

// Checks the arguments of the paged helpers; returns the number of slots.
std::int64_t checked_pages(const char* fn, RowFormatId id, const void* rows, std::int64_t n, const std::int64_t* slots,
                           const void* pages, std::int64_t num_pages, std::int64_t rows_per_page,
                           std::int64_t page_stride_bytes) {
  if (n < 0 || num_pages < 0 || rows_per_page < 1) {
    throw_internal(std::string(fn) + ": bad sizes (n " + std::to_string(n) + ", pages " + std::to_string(num_pages) +
                   ", rows per page " + std::to_string(rows_per_page) + ")");
  }
  if (n > 0 && (rows == nullptr || slots == nullptr || pages == nullptr)) {
    throw_internal(std::string(fn) + ": null pointer");
  }
  const std::int64_t used = checked_mul(rows_per_page, geometry(id).row_bytes, "page bytes");
  if (page_stride_bytes < used) {
    throw_internal(std::string(fn) + ": page stride " + std::to_string(page_stride_bytes) +
                   " is shorter than a page's " + std::to_string(used) + " bytes");
  }
  (void)checked_mul(num_pages, page_stride_bytes, "paged storage bytes");
  return checked_mul(num_pages, rows_per_page, "slots");
}

void check_slot(const char* fn, std::int64_t i, std::int64_t slot, std::int64_t num_slots) {
  if (slot < -1 || slot >= num_slots) {
    throw_internal(std::string(fn) + ": slot " + std::to_string(slot) + " of row " + std::to_string(i) +
                   " is outside [-1, " + std::to_string(num_slots) + ")");
  }
}

}  // namespace

// ---- scalar conversions ----

float bf16_to_float(std::uint16_t bits) noexcept {
  return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16);
}

std::uint16_t float_to_bf16(float x) noexcept {
  std::uint32_t u = std::bit_cast<std::uint32_t>(x);
  if (std::isnan(x)) return static_cast<std::uint16_t>((u >> 16) | 0x0040u);
  u += 0x7FFFu + ((u >> 16) & 1u);
  return static_cast<std::uint16_t>(u >> 16);
}

float e4m3_to_float(std::uint8_t code) noexcept {
  const int e = (code >> 3) & 0xF;
  const int m = code & 0x7;
  if (e == 15 && m == 7) return kNaN;
  const float mag =
      e == 0 ? std::ldexp(static_cast<float>(m), -9) : std::ldexp(1.0f + static_cast<float>(m) / 8.0f, e - 7);
  return (code & 0x80) != 0 ? -mag : mag;
}

std::uint8_t float_to_e4m3(float x) noexcept {
  if (std::isnan(x)) return kE4m3NaN;
  return encode_minifloat(x, kE4m3);
}

float e2m1_to_float(std::uint8_t nibble) noexcept {
  const int e = (nibble >> 1) & 0x3;
  const int m = nibble & 0x1;
  const float mag = e == 0 ? 0.5f * static_cast<float>(m) : std::ldexp(1.0f + 0.5f * static_cast<float>(m), e - 1);
  return (nibble & 0x8) != 0 ? -mag : mag;
}

std::uint8_t float_to_e2m1(float x) noexcept {
  if (std::isnan(x)) return 0;
  return encode_minifloat(x, kE2m1);
}

float ue8m0_to_float(std::uint8_t code) noexcept {
  if (code == kUe8m0NaN) return kNaN;
  return std::ldexp(1.0f, static_cast<int>(code) - 127);
}

std::uint8_t ue8m0_from_float(float pow2) noexcept {
  if (!std::isfinite(pow2) || pow2 <= 0.0f) return kUe8m0NaN;
  int e = 0;
  const float f = std::frexp(pow2, &e);
  if (f != 0.5f) return kUe8m0NaN;
  const int k = e - 1;
  if (k < -127 || k > 127) return kUe8m0NaN;
  return static_cast<std::uint8_t>(k + 127);
}

// ---- scale rules ----

float ceil_pow2(float x) noexcept {
  if (std::isnan(x) || x <= 0.0f) return kNaN;
  if (std::isinf(x)) return x;
  int e = 0;
  const float f = std::frexp(x, &e);  // x = f * 2^e, f in [0.5, 1)
  return f == 0.5f ? x : std::ldexp(1.0f, e);
}

float fp8_ds_mla_scale(float amax) noexcept {
  if (std::isnan(amax)) return kNaN;
  float r = amax / 448.0f;
  if (r < 1e-4f) r = 1e-4f;
  return ceil_pow2(r);
}

float indexer_fp8_scale(float amax) noexcept {
  if (std::isnan(amax)) return kNaN;
  const float a = amax < 1e-4f ? 1e-4f : amax;
  return ceil_pow2(a / 448.0f);
}

float indexer_fp4_scale(float amax) noexcept {
  if (std::isnan(amax)) return kNaN;
  const float a = amax < 1e-4f ? 1e-4f : amax;
  return ceil_pow2(a / 6.0f);
}

std::uint8_t v41_fp4_scale_code(float amax) noexcept {
  if (std::isnan(amax)) return kE4m3NaN;
  const std::uint8_t c = float_to_e4m3(std::fabs(amax) / 6.0f);
  return c < 0x08 ? std::uint8_t{0x08} : c;
}

// ---- rows and pages ----

bool has_quantizer(RowFormatId id) noexcept { return id != RowFormatId::compressor_state; }

void quantize_row(RowFormatId id, const std::uint16_t* bf16_in, std::uint8_t* page_base, std::int64_t rows_per_page,
                  std::int64_t row_in_page) {
  const RowOffsets off = checked_row("quantize_row", id, bf16_in, page_base, rows_per_page, row_in_page);
  std::uint8_t* data = page_base + off.data;
  std::uint8_t* scale = page_base + off.scale;
  switch (id) {
    case RowFormatId::fp8_ds_mla_v4: quant_v4(bf16_in, data, scale); return;
    case RowFormatId::v41_fp8: quant_v41_fp8(bf16_in, data); return;
    case RowFormatId::v41_fp4: quant_v41_fp4(bf16_in, data); return;
    case RowFormatId::fp8_ds_mla_v32: quant_v32(bf16_in, data); return;
    case RowFormatId::indexer_fp8: quant_indexer_fp8(bf16_in, data, scale); return;
    case RowFormatId::indexer_fp4: quant_indexer_fp4(bf16_in, data, scale); return;
    case RowFormatId::bf16: quant_bf16(bf16_in, data); return;
    case RowFormatId::fp8_per_tensor: quant_fp8_per_tensor(bf16_in, data); return;
    case RowFormatId::compressor_state: break;
  }
  throw_internal("quantize_row: unhandled format");
}

void dequantize_row(RowFormatId id, const std::uint8_t* page_base, std::int64_t rows_per_page, std::int64_t row_in_page,
                    float* out) {
  const RowOffsets off = checked_row("dequantize_row", id, page_base, out, rows_per_page, row_in_page);
  const std::uint8_t* data = page_base + off.data;
  const std::uint8_t* scale = page_base + off.scale;
  switch (id) {
    case RowFormatId::fp8_ds_mla_v4: dequant_v4(data, scale, out); return;
    case RowFormatId::v41_fp8: dequant_v41_fp8(data, out); return;
    case RowFormatId::v41_fp4: dequant_v41_fp4(data, out); return;
    case RowFormatId::fp8_ds_mla_v32: dequant_v32(data, out); return;
    case RowFormatId::indexer_fp8: dequant_indexer_fp8(data, scale, out); return;
    case RowFormatId::indexer_fp4: dequant_indexer_fp4(data, scale, out); return;
    case RowFormatId::bf16: dequant_bf16(data, out); return;
    case RowFormatId::fp8_per_tensor: dequant_fp8_per_tensor(data, out); return;
    case RowFormatId::compressor_state: break;
  }
  throw_internal("dequantize_row: unhandled format");
}

void quantize_into_pages(RowFormatId id, const std::uint16_t* rows, std::int64_t n, const std::int64_t* slots,
                         std::uint8_t* pages, std::int64_t num_pages, std::int64_t rows_per_page,
                         std::int64_t page_stride_bytes) {
  const std::int64_t num_slots =
      checked_pages("quantize_into_pages", id, rows, n, slots, pages, num_pages, rows_per_page, page_stride_bytes);
  const std::int64_t dims = geometry(id).dims;
  for (std::int64_t i = 0; i < n; ++i) {
    check_slot("quantize_into_pages", i, slots[i], num_slots);
    if (slots[i] < 0) continue;
    const std::int64_t page = slots[i] / rows_per_page;
    quantize_row(id, rows + i * dims, pages + page * page_stride_bytes, rows_per_page, slots[i] % rows_per_page);
  }
}

void dequantize_from_pages(RowFormatId id, const std::uint8_t* pages, std::int64_t num_pages,
                           std::int64_t rows_per_page, std::int64_t page_stride_bytes, const std::int64_t* slots,
                           std::int64_t n, float* out) {
  const std::int64_t num_slots =
      checked_pages("dequantize_from_pages", id, out, n, slots, pages, num_pages, rows_per_page, page_stride_bytes);
  const std::int64_t dims = geometry(id).dims;
  for (std::int64_t i = 0; i < n; ++i) {
    check_slot("dequantize_from_pages", i, slots[i], num_slots);
    if (slots[i] < 0) continue;
    const std::int64_t page = slots[i] / rows_per_page;
    dequantize_row(id, pages + page * page_stride_bytes, rows_per_page, slots[i] % rows_per_page, out + i * dims);
  }
}

}  // namespace mlaplan
