// Tests of the row formats (src/hardware/formats.cpp) and the host quantisers (src/hardware/quant.cpp),
// docs/layouts.md: FlashMLA's golden bytes, page sizes, byte maps, scalar conversions over every
// code, scale rules, round trips, re-quantisation, NaN/inf, and the paged helpers.
#include <catch2/catch.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "mlaplan/base/error.hpp"
#include "mlaplan/hardware/formats.hpp"
#include "mlaplan/hardware/quant.hpp"

using namespace mlaplan;

namespace {

constexpr RowFormatId kQuantizable[] = {
    RowFormatId::fp8_ds_mla_v4, RowFormatId::v41_fp8,     RowFormatId::v41_fp4, RowFormatId::fp8_ds_mla_v32,
    RowFormatId::indexer_fp8,   RowFormatId::indexer_fp4, RowFormatId::bf16,    RowFormatId::fp8_per_tensor,
};

std::string name_of(RowFormatId id) { return std::string(row_format(id).name); }

std::vector<std::uint8_t> from_hex(const std::string& hex) {
  REQUIRE(hex.size() % 2 == 0);
  std::vector<std::uint8_t> out(hex.size() / 2);
  for (std::size_t i = 0; i < out.size(); ++i) {
    out[i] = static_cast<std::uint8_t>(std::stoul(hex.substr(2 * i, 2), nullptr, 16));
  }
  return out;
}

// Expects fn to throw mlaplan::Error of the given kind.
template <class Fn>
void expect_error(ErrorKind kind, Fn&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    CHECK(e.kind() == kind);
    return;
  }
  FAIL("no mlaplan::Error thrown");
}

bool same_bits(float a, float b) { return std::bit_cast<std::uint32_t>(a) == std::bit_cast<std::uint32_t>(b); }

// e4m3fn value of a code, written out from the format's definition (independent of quant.cpp).
double e4m3_reference(int code) {
  const int e = (code >> 3) & 15;
  const int m = code & 7;
  const double mag = e == 0 ? m * std::ldexp(1.0, -9) : (1.0 + m / 8.0) * std::ldexp(1.0, e - 7);
  return (code & 0x80) != 0 ? -mag : mag;
}
bool e4m3_is_nan(int code) { return (code & 0x7F) == 0x7F; }

double e2m1_reference(int code) {
  static const double mags[8] = {0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0};
  return (code & 8) != 0 ? -mags[code & 7] : mags[code & 7];
}

// Nearest code by brute force over the finite codes of one sign, ties to the even code,
// magnitudes above the largest saturating. `values[c]` are the magnitudes of codes 0..n-1.
int nearest_code(double a, const std::vector<double>& values) {
  int best = 0;
  for (int c = 1; c < static_cast<int>(values.size()); ++c) {
    const double dc = std::fabs(values[static_cast<std::size_t>(c)] - a);
    const double db = std::fabs(values[static_cast<std::size_t>(best)] - a);
    if (dc < db || (dc == db && c % 2 == 0)) best = c;
  }
  return best;
}

// Random bf16 row for a format: each scale tile gets its own magnitude; some tiles are zero and
// some tiny so the scale floors are hit. max_log2 bounds the magnitude.
std::vector<std::uint16_t> random_row(std::mt19937_64& rng, RowFormatId id, int min_log2, int max_log2) {
  const FormatGeometry g = geometry(id);
  const std::int64_t tile = g.tile > 0 ? g.tile : 32;
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> log2mag(min_log2, max_log2);
  std::uniform_int_distribution<int> kind(0, 15);
  std::vector<std::uint16_t> row(static_cast<std::size_t>(g.dims));
  for (std::int64_t t0 = 0; t0 < g.dims; t0 += tile) {
    const int k = kind(rng);
    const float mag = k == 0 ? 0.0f : std::ldexp(1.0f, k == 1 ? -24 : log2mag(rng));
    for (std::int64_t i = t0; i < std::min(t0 + tile, g.dims); ++i) {
      row[static_cast<std::size_t>(i)] = float_to_bf16(mag * std::clamp(normal(rng), -4.0f, 4.0f));
    }
  }
  return row;
}

// One page holding one row, quantised; returns the page bytes.
std::vector<std::uint8_t> quant_one(RowFormatId id, const std::vector<std::uint16_t>& row,
                                    std::int64_t rows_per_page = 3, std::int64_t t = 1) {
  std::vector<std::uint8_t> page(static_cast<std::size_t>(page_bytes(id, rows_per_page)), 0xCD);
  quantize_row(id, row.data(), page.data(), rows_per_page, t);
  return page;
}
std::vector<float> dequant_one(RowFormatId id, const std::vector<std::uint8_t>& page, std::int64_t rows_per_page = 3,
                               std::int64_t t = 1) {
  std::vector<float> out(static_cast<std::size_t>(geometry(id).dims));
  dequantize_row(id, page.data(), rows_per_page, t, out.data());
  return out;
}

// Error bound of one dequantised value: |x - y| <= bound(x, amax of its tile). Scales are
// recomputed here from the rules in double precision (independent of quant.cpp).
double error_bound(RowFormatId id, std::int64_t dim, double x, double amax) {
  auto pow2_at_least = [](double v) { return std::ldexp(1.0, static_cast<int>(std::ceil(std::log2(v)))); };
  switch (id) {
    case RowFormatId::fp8_ds_mla_v4:
      if (dim >= 448) return 0.0;
      [[fallthrough]];
    case RowFormatId::v41_fp8: {
      const double s = pow2_at_least(std::max(amax / 448.0, 1e-4));
      return std::fabs(x) / 16.0 + s * std::ldexp(1.0, -10);
    }
    case RowFormatId::fp8_ds_mla_v32: {
      if (dim >= 512) return 0.0;
      const double s = pow2_at_least(std::max(amax / 448.0, 1e-4));
      return std::fabs(x) / 16.0 + s * std::ldexp(1.0, -10);
    }
    case RowFormatId::indexer_fp8: {
      const double s = pow2_at_least(std::max(amax, 1e-4) / 448.0);
      return std::fabs(x) / 16.0 + s * std::ldexp(1.0, -10);
    }
    case RowFormatId::indexer_fp4: {
      const double s = pow2_at_least(std::max(amax, 1e-4) / 6.0);
      return std::fabs(x) / 4.0 + s / 4.0;
    }
    case RowFormatId::v41_fp4: {
      const double s = std::max(amax / 6.0 * (1.0 + 1.0 / 16.0), std::ldexp(1.0, -6));
      return std::fabs(x) / 4.0 + s / 4.0;
    }
    case RowFormatId::fp8_per_tensor:  // e4m3 of the value itself (scale 1), saturating at 448
      return std::fabs(x) / 16.0 + std::ldexp(1.0, -10) + std::max(0.0, std::fabs(x) - 448.0);
    case RowFormatId::bf16:
    case RowFormatId::compressor_state: return 0.0;
  }
  return 0.0;
}

// Largest |code value| of each scale tile of row t (e4m3 or e2m1 codes, before scaling).
std::vector<double> max_code_per_tile(RowFormatId id, const std::vector<std::uint8_t>& page, std::int64_t rows_per_page,
                                      std::int64_t t) {
  const FormatGeometry g = geometry(id);
  const RowOffsets off = row_offsets(id, rows_per_page, t);
  const std::uint8_t* d = page.data() + off.data;
  const bool fp4 = id == RowFormatId::v41_fp4 || id == RowFormatId::indexer_fp4;
  const std::int64_t quantised =
      id == RowFormatId::fp8_ds_mla_v4 ? 448 : (id == RowFormatId::fp8_ds_mla_v32 ? 512 : g.dims);
  std::vector<double> out;
  for (std::int64_t t0 = 0; t0 < quantised; t0 += g.tile) {
    double m = 0.0;
    for (std::int64_t i = t0; i < t0 + g.tile; ++i) {
      const double v = fp4 ? e2m1_reference((d[i / 2] >> (4 * (i % 2))) & 0xF) : e4m3_reference(d[i]);
      m = std::max(m, std::fabs(v));
    }
    out.push_back(m);
  }
  return out;
}

}  // namespace

// ------------------------------------------------------------------------------------------
// Golden vectors: FlashMLA's reference quantiser output, byte for byte.
// ------------------------------------------------------------------------------------------

TEST_CASE("quantisers reproduce FlashMLA's golden bytes and dequantised values", "[formats][quant]") {
  std::ifstream in(MLAPLAN_TESTDATA_DIR "/flashmla-quant-vectors.json");
  REQUIRE(in.good());
  const nlohmann::json doc = nlohmann::json::parse(in);
  const auto& cases = doc.at("cases");
  REQUIRE(cases.size() == 4);

  for (const auto& [case_name, c] : cases.items()) {
    SECTION(case_name) {
      const std::string layout = c.at("layout").get<std::string>();
      const RowFormatId id = layout == "fp8_ds_mla_v4_584" ? RowFormatId::fp8_ds_mla_v4 : RowFormatId::fp8_ds_mla_v32;
      REQUIRE((layout == "fp8_ds_mla_v4_584" || layout == "fp8_ds_mla_v32_656"));
      const FormatGeometry g = geometry(id);
      const auto n = c.at("page_block_size").get<std::int64_t>();
      const auto num_pages = c.at("num_pages").get<std::int64_t>();
      const auto stride = c.at("page_stride_bytes").get<std::int64_t>();
      REQUIRE(c.at("bytes_per_token").get<std::int64_t>() == g.row_bytes);
      if (id == RowFormatId::fp8_ds_mla_v4) CHECK(stride == page_bytes(id, n));  // padded to 576

      // Inputs and expectations of all pages, flattened in slot order.
      std::vector<std::uint16_t> inputs;
      std::vector<std::uint16_t> dequant;
      std::vector<std::vector<std::uint8_t>> expected;
      for (std::int64_t p = 0; p < num_pages; ++p) {
        const auto& ins = c.at("input_bf16_bits").at(static_cast<std::size_t>(p));
        const auto& deq = c.at("dequant_bf16_bits").at(static_cast<std::size_t>(p));
        REQUIRE(static_cast<std::int64_t>(ins.size()) == n * g.dims);
        REQUIRE(static_cast<std::int64_t>(deq.size()) == n * g.dims);
        for (const auto& v : ins) inputs.push_back(static_cast<std::uint16_t>(v.get<std::int16_t>()));
        for (const auto& v : deq) dequant.push_back(static_cast<std::uint16_t>(v.get<std::int16_t>()));
        expected.push_back(from_hex(c.at("pages_hex").at(static_cast<std::size_t>(p)).get<std::string>()));
        REQUIRE(static_cast<std::int64_t>(expected.back().size()) == n * g.row_bytes);
      }

      // quantize_into_pages over all pages at the upstream stride.
      std::vector<std::uint8_t> pages(static_cast<std::size_t>(num_pages * stride), 0xA5);
      std::vector<std::int64_t> slots(static_cast<std::size_t>(num_pages * n));
      for (std::size_t i = 0; i < slots.size(); ++i) slots[i] = static_cast<std::int64_t>(i);
      quantize_into_pages(id, inputs.data(), num_pages * n, slots.data(), pages.data(), num_pages, n, stride);

      for (std::int64_t p = 0; p < num_pages; ++p) {
        const std::uint8_t* page = pages.data() + p * stride;
        std::int64_t mismatches = 0;
        std::int64_t first = -1;
        for (std::int64_t b = 0; b < n * g.row_bytes; ++b) {
          if (page[b] != expected[static_cast<std::size_t>(p)][static_cast<std::size_t>(b)]) {
            ++mismatches;
            if (first < 0) first = b;
          }
        }
        INFO("page " << p << ", first differing byte " << first);
        CHECK(mismatches == 0);
        for (std::int64_t b = n * g.row_bytes; b < stride; ++b) {
          if (page[b] != 0xA5) FAIL("byte " << b << " of the page padding was written");
        }
        // Row by row through quantize_row gives the same page.
        std::vector<std::uint8_t> one(static_cast<std::size_t>(stride), 0xA5);
        for (std::int64_t t = 0; t < n; ++t) {
          quantize_row(id, inputs.data() + (p * n + t) * g.dims, one.data(), n, t);
        }
        CHECK(std::equal(one.begin(), one.end(), page));
        if (id == RowFormatId::fp8_ds_mla_v4) {
          for (std::int64_t t = 0; t < n; ++t) CHECK(page[n * 576 + t * 8 + 7] == 0);
        }
      }

      // Dequantised values equal FlashMLA's exactly.
      std::vector<float> out(inputs.size());
      dequantize_from_pages(id, pages.data(), num_pages, n, stride, slots.data(), num_pages * n, out.data());
      std::int64_t value_mismatches = 0;
      for (std::size_t i = 0; i < out.size(); ++i) {
        if (!same_bits(out[i], bf16_to_float(dequant[i])) || float_to_bf16(out[i]) != dequant[i]) ++value_mismatches;
      }
      CHECK(value_mismatches == 0);
    }
  }
}

TEST_CASE("golden vectors cover the edge cases they claim", "[formats][quant]") {
  // The tiny-tile floor shows up as UE8M0 byte 0x72 = 2^-13 and the all-zero row as 0x72 too.
  CHECK(ue8m0_from_float(fp8_ds_mla_scale(0.0f)) == 0x72);
  CHECK(ue8m0_from_float(fp8_ds_mla_scale(1e-6f)) == 0x72);
  // A 1e4 tile (bf16 9984 or 10048): scale 32, byte 0x84.
  CHECK(fp8_ds_mla_scale(bf16_to_float(float_to_bf16(1e4f))) == 32.0f);
  CHECK(ue8m0_from_float(32.0f) == 0x84);
}

// ------------------------------------------------------------------------------------------
// Formats as data
// ------------------------------------------------------------------------------------------

TEST_CASE("page sizes match the published V4.1 page examples", "[formats]") {
  // fp8_ds_mla: window 32 rows, SM90 B = 64, SM100 B = 128.
  CHECK(32 * 584 == 18688);
  CHECK(page_bytes(RowFormatId::fp8_ds_mla_v4, 32) == 19008);   // window, and SM90 c2
  CHECK(page_bytes(RowFormatId::fp8_ds_mla_v4, 64) == 37440);   // SM90 c1, SM100 c2
  CHECK(page_bytes(RowFormatId::fp8_ds_mla_v4, 128) == 74880);  // SM100 c1
  // fp8 indexer next to an fp8_ds_mla main cache (576-aligned), SM90.
  CHECK(indexer_page_alignment(RowFormatId::fp8_ds_mla_v4) == 576);
  CHECK(padded_page_bytes(64, 132, indexer_page_alignment(RowFormatId::fp8_ds_mla_v4)) == 8640);
  CHECK(padded_page_bytes(32, 132, indexer_page_alignment(RowFormatId::fp8_ds_mla_v4)) == 4608);
  CHECK(page_bytes(RowFormatId::indexer_fp8, 64) == 8640);  // the format's own default is 576
  // nvfp4_ds_mla on SM100: window 32 x 528, compressed c1 128 x 288, c2 64 x 288.
  CHECK(page_bytes(RowFormatId::v41_fp8, 32) == 16896);
  CHECK(page_bytes(RowFormatId::v41_fp4, 128) == 36864);
  CHECK(page_bytes(RowFormatId::v41_fp4, 64) == 18432);
  CHECK(indexer_page_alignment(RowFormatId::v41_fp8) == 512);
  CHECK(padded_page_bytes(64, 68, indexer_page_alignment(RowFormatId::v41_fp8)) == 4608);
  // No alignment: exact products.
  CHECK(page_bytes(RowFormatId::fp8_ds_mla_v32, 64) == 64 * 656);
  CHECK(page_bytes(RowFormatId::compressor_state, 8) == 8 * 4096);
  CHECK(padded_page_bytes(3, 100, 0) == 300);
  CHECK(padded_page_bytes(3, 100, 1) == 300);
}

TEST_CASE("page sizes reject bad arguments and overflow", "[formats]") {
  expect_error(ErrorKind::internal, [] { (void)page_bytes(RowFormatId::fp8_ds_mla_v4, 0); });
  expect_error(ErrorKind::internal, [] { (void)padded_page_bytes(4, 0, 576); });
  expect_error(ErrorKind::internal, [] { (void)padded_page_bytes(4, 584, -1); });
  expect_error(ErrorKind::invalid_config,
               [] { (void)page_bytes(RowFormatId::fp8_ds_mla_v4, std::numeric_limits<std::int64_t>::max() / 100); });
  // Fits before rounding, not after.
  const std::int64_t big = std::numeric_limits<std::int64_t>::max();
  REQUIRE(big % 576 != 0);
  expect_error(ErrorKind::invalid_config, [&] { (void)padded_page_bytes(big, 1, 576); });
  CHECK(padded_page_bytes(big, 1, 1) == big);
  expect_error(ErrorKind::internal, [] { (void)indexer_page_alignment(RowFormatId::indexer_fp8); });
}

TEST_CASE("each byte map tiles its row exactly", "[formats]") {
  const auto formats = all_row_formats();
  REQUIRE(formats.size() == 9);
  std::map<std::string, int> names;
  for (std::size_t i = 0; i < formats.size(); ++i) {
    const RowFormat& f = formats[i];
    INFO(f.name);
    CHECK(static_cast<std::size_t>(f.id) == i);
    CHECK(&row_format(f.id) == &f);
    CHECK(parse_row_format(f.name) == f.id);
    CHECK(++names[std::string(f.name)] == 1);
    const FormatGeometry g = geometry(f.id);
    CHECK(f.row_bytes == g.row_bytes);
    CHECK(f.page_alignment == g.page_alignment);
    CHECK(f.page_striped == g.page_striped);
    CHECK(f.dims == g.dims);
    CHECK(f.data_bytes + f.scale_bytes == f.row_bytes);
    CHECK(f.page_striped == (f.scale_bytes > 0));
    CHECK(!f.title.empty());
    CHECK(!f.source.empty());
    CHECK(!f.used_by.empty());
    CHECK(!f.scale_rule.empty());

    std::int64_t total = 0;
    std::int64_t values = 0;
    for (Region r : {Region::data, Region::scale}) {
      std::vector<FormatField> part;
      for (const FormatField& x : f.fields) {
        if (x.region == r) part.push_back(x);
      }
      std::sort(part.begin(), part.end(),
                [](const FormatField& a, const FormatField& b) { return a.offset < b.offset; });
      std::int64_t at = 0;
      for (const FormatField& x : part) {
        INFO(x.name);
        CHECK(x.offset == at);  // no gap, no overlap
        CHECK(x.size > 0);
        CHECK(element_bytes(x.element) > 0);
        CHECK(x.size == element_bytes(x.element) * x.count);
        CHECK(!x.covers.empty());
        at += x.size;
        total += x.size;
        const bool is_scale = x.name.find("scale") != std::string_view::npos && x.name != "score_state";
        if (!is_scale && x.element != "pad") values += x.element == "e2m1x2" ? 2 * x.count : x.count;
      }
      CHECK(at == (r == Region::data ? f.data_bytes : f.scale_bytes));
    }
    CHECK(total == f.row_bytes);
    if (f.id == RowFormatId::compressor_state) {
      CHECK(values == 2 * f.dims);
    } else {
      CHECK(values == f.dims);
    }
    if (f.tile > 0)
      CHECK((f.id == RowFormatId::fp8_ds_mla_v4    ? 448
             : f.id == RowFormatId::fp8_ds_mla_v32 ? 512
                                                   : f.dims) %
                f.tile ==
            0);
  }
  CHECK_FALSE(parse_row_format("fp8_ds_mla").has_value());
  CHECK_FALSE(parse_row_format("").has_value());
  CHECK(parse_row_format("v41_fp4") == RowFormatId::v41_fp4);
}

TEST_CASE("row offsets follow the striped and contiguous rules", "[formats]") {
  // 584: data at t*576, scales at N*576 + t*8.
  CHECK(row_offsets(RowFormatId::fp8_ds_mla_v4, 5, 3).data == 3 * 576);
  CHECK(row_offsets(RowFormatId::fp8_ds_mla_v4, 5, 3).scale == 5 * 576 + 3 * 8);
  CHECK(row_offsets(RowFormatId::fp8_ds_mla_v4, 4, 0).scale == 2304);
  // Indexer keys: values at t*128 (t*64), scales at N*128 + t*4 (N*64 + t*4).
  CHECK(row_offsets(RowFormatId::indexer_fp8, 64, 1).data == 128);
  CHECK(row_offsets(RowFormatId::indexer_fp8, 64, 1).scale == 64 * 128 + 4);
  CHECK(row_offsets(RowFormatId::indexer_fp4, 64, 2).data == 128);
  CHECK(row_offsets(RowFormatId::indexer_fp4, 64, 2).scale == 64 * 64 + 8);
  // Contiguous rows.
  CHECK(row_offsets(RowFormatId::fp8_ds_mla_v32, 4, 2).data == 1312);
  CHECK(row_offsets(RowFormatId::fp8_ds_mla_v32, 4, 2).scale == 1312);
  CHECK(row_offsets(RowFormatId::v41_fp4, 128, 127).data == 127 * 288);
  // The last row's last byte is the page's last used byte.
  for (const RowFormat& f : all_row_formats()) {
    const RowOffsets last = row_offsets(f.id, 7, 6);
    const std::int64_t end = f.page_striped ? last.scale + f.scale_bytes : last.data + f.row_bytes;
    CHECK(end == 7 * f.row_bytes);
  }
  expect_error(ErrorKind::internal, [] { (void)row_offsets(RowFormatId::bf16, 4, 4); });
  expect_error(ErrorKind::internal, [] { (void)row_offsets(RowFormatId::bf16, 4, -1); });
  expect_error(ErrorKind::internal, [] { (void)row_offsets(RowFormatId::bf16, 0, 0); });
}

// ------------------------------------------------------------------------------------------
// Scalar conversions
// ------------------------------------------------------------------------------------------

TEST_CASE("e4m3 decodes and encodes every code", "[quant]") {
  for (int c = 0; c < 256; ++c) {
    INFO("code " << c);
    const auto code = static_cast<std::uint8_t>(c);
    const float v = e4m3_to_float(code);
    if (e4m3_is_nan(c)) {
      CHECK(std::isnan(v));
      continue;
    }
    CHECK(static_cast<double>(v) == e4m3_reference(c));
    CHECK(std::signbit(v) == ((c & 0x80) != 0));
    CHECK(float_to_e4m3(v) == code);  // -0 included
  }
  CHECK(e4m3_to_float(0x7E) == 448.0f);
  CHECK(e4m3_to_float(0x38) == 1.0f);
  CHECK(e4m3_to_float(0x08) == std::ldexp(1.0f, -6));
  CHECK(e4m3_to_float(0x01) == std::ldexp(1.0f, -9));
  CHECK(e4m3_to_float(0x76) == 224.0f);
  // Strictly increasing over the positive finite codes.
  for (int c = 0; c < 0x7E; ++c)
    CHECK(e4m3_to_float(static_cast<std::uint8_t>(c)) < e4m3_to_float(static_cast<std::uint8_t>(c + 1)));
}

TEST_CASE("e4m3 rounds to nearest even and saturates", "[quant]") {
  // Every midpoint between neighbours goes to the even code; just off it goes to the nearer one.
  for (int c = 0; c < 0x7E; ++c) {
    const float lo = e4m3_to_float(static_cast<std::uint8_t>(c));
    const float hi = e4m3_to_float(static_cast<std::uint8_t>(c + 1));
    const float mid = (lo + hi) / 2.0f;  // exact: both have at most 4 significant bits
    INFO("between codes " << c << " and " << c + 1);
    const int even = c % 2 == 0 ? c : c + 1;
    CHECK(float_to_e4m3(mid) == even);
    CHECK(float_to_e4m3(-mid) == (even | 0x80));
    CHECK(float_to_e4m3(std::nextafter(mid, 0.0f)) == c);
    CHECK(float_to_e4m3(std::nextafter(mid, 1000.0f)) == c + 1);
  }
  for (float big : {448.0f, 449.0f, 463.99f, 464.0f, 480.0f, 1e30f, std::numeric_limits<float>::infinity()}) {
    CHECK(float_to_e4m3(big) == 0x7E);
    CHECK(float_to_e4m3(-big) == 0xFE);
  }
  CHECK(float_to_e4m3(std::numeric_limits<float>::quiet_NaN()) == 0x7F);
  CHECK(float_to_e4m3(-std::numeric_limits<float>::quiet_NaN()) == 0x7F);
  CHECK(float_to_e4m3(std::ldexp(1.0f, -11)) == 0x00);   // below half the smallest subnormal
  CHECK(float_to_e4m3(-std::ldexp(1.0f, -11)) == 0x80);  // sign kept
  CHECK(float_to_e4m3(std::ldexp(1.0f, -10)) == 0x00);   // tie with 0 -> even (0)
  CHECK(float_to_e4m3(std::ldexp(1.5f, -10)) == 0x01);
  CHECK(float_to_e4m3(std::numeric_limits<float>::denorm_min()) == 0x00);

  // Random floats against a brute-force nearest-code search.
  std::vector<double> mags;
  for (int c = 0; c <= 0x7E; ++c) mags.push_back(e4m3_reference(c));
  std::mt19937_64 rng(1);
  std::uniform_real_distribution<double> expo(-14.0, 10.0);
  std::uniform_int_distribution<int> sign(0, 1);
  int mismatches = 0;
  for (int i = 0; i < 100000; ++i) {
    const auto x = static_cast<float>(std::exp2(expo(rng)));
    const bool neg = sign(rng) == 1;
    const int want = nearest_code(static_cast<double>(x), mags) | (neg ? 0x80 : 0);
    if (float_to_e4m3(neg ? -x : x) != want) ++mismatches;
  }
  CHECK(mismatches == 0);
}

TEST_CASE("e2m1 decodes, encodes, rounds to nearest even and saturates", "[quant]") {
  for (int c = 0; c < 16; ++c) {
    INFO("code " << c);
    const float v = e2m1_to_float(static_cast<std::uint8_t>(c));
    CHECK(static_cast<double>(v) == e2m1_reference(c));
    CHECK(std::signbit(v) == ((c & 8) != 0));
    CHECK(float_to_e2m1(v) == c);
    CHECK(e2m1_to_float(static_cast<std::uint8_t>(c | 0xF0)) == v);  // high bits ignored
  }
  // Midpoints: 0.25 -> 0, 0.75 -> 1, 1.25 -> 1, 1.75 -> 2, 2.5 -> 2, 3.5 -> 4, 5 -> 4.
  const float mids[] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f};
  const int want[] = {0, 2, 2, 4, 4, 6, 6};
  for (int i = 0; i < 7; ++i) {
    INFO("midpoint " << mids[i]);
    CHECK(float_to_e2m1(mids[i]) == want[i]);
    CHECK(float_to_e2m1(-mids[i]) == (want[i] | 8));
    CHECK(float_to_e2m1(std::nextafter(mids[i], 0.0f)) == i);
    CHECK(float_to_e2m1(std::nextafter(mids[i], 10.0f)) == i + 1);
  }
  for (float big : {6.0f, 6.5f, 7.0f, 100.0f, std::numeric_limits<float>::infinity()}) {
    CHECK(float_to_e2m1(big) == 7);
    CHECK(float_to_e2m1(-big) == 15);
  }
  CHECK(float_to_e2m1(-0.1f) == 8);
  CHECK(float_to_e2m1(std::numeric_limits<float>::quiet_NaN()) == 0);
  std::vector<double> mags;
  for (int c = 0; c < 8; ++c) mags.push_back(e2m1_reference(c));
  std::mt19937_64 rng(2);
  std::uniform_real_distribution<double> expo(-4.0, 4.0);
  int mismatches = 0;
  for (int i = 0; i < 20000; ++i) {
    const auto x = static_cast<float>(std::exp2(expo(rng)));
    if (float_to_e2m1(x) != nearest_code(static_cast<double>(x), mags)) ++mismatches;
  }
  CHECK(mismatches == 0);
}

TEST_CASE("bf16 conversions are exact, round to nearest even and keep NaN", "[quant]") {
  int bad = 0;
  for (std::uint32_t b = 0; b < 65536; ++b) {
    const auto bits = static_cast<std::uint16_t>(b);
    const float f = bf16_to_float(bits);
    if (std::isnan(f)) {
      if (!std::isnan(bf16_to_float(float_to_bf16(f)))) ++bad;
    } else if (float_to_bf16(f) != bits) {
      ++bad;
    }
  }
  CHECK(bad == 0);
  CHECK(float_to_bf16(std::bit_cast<float>(0x3F808000u)) == 0x3F80);  // tie -> even
  CHECK(float_to_bf16(std::bit_cast<float>(0x3F818000u)) == 0x3F82);  // tie -> even
  CHECK(float_to_bf16(std::bit_cast<float>(0x3F808001u)) == 0x3F81);  // above the tie
  CHECK(float_to_bf16(std::bit_cast<float>(0x7F7FFFFFu)) == 0x7F80);  // overflow -> inf
  CHECK(float_to_bf16(std::numeric_limits<float>::infinity()) == 0x7F80);
  CHECK(float_to_bf16(-0.0f) == 0x8000);
  CHECK(std::isnan(bf16_to_float(float_to_bf16(std::bit_cast<float>(0x7F800001u)))));  // low payload only
  CHECK(float_to_bf16(std::bit_cast<float>(0xFFC00000u)) == 0xFFC0);
  CHECK(bf16_to_float(0x3F80) == 1.0f);
  CHECK(bf16_to_float(0xC000) == -2.0f);
}

TEST_CASE("UE8M0 bytes and powers of two", "[quant]") {
  for (int b = 0; b < 255; ++b) {
    const float v = ue8m0_to_float(static_cast<std::uint8_t>(b));
    CHECK(v == std::ldexp(1.0f, b - 127));
    CHECK(ue8m0_from_float(v) == b);
  }
  CHECK(std::isnan(ue8m0_to_float(0xFF)));
  CHECK(ue8m0_from_float(3.0f) == 0xFF);
  CHECK(ue8m0_from_float(0.0f) == 0xFF);
  CHECK(ue8m0_from_float(-1.0f) == 0xFF);
  CHECK(ue8m0_from_float(std::numeric_limits<float>::infinity()) == 0xFF);
  CHECK(ue8m0_from_float(std::ldexp(1.0f, -128)) == 0xFF);
  CHECK(ceil_pow2(1.0f) == 1.0f);
  CHECK(ceil_pow2(1.5f) == 2.0f);
  CHECK(ceil_pow2(std::nextafter(2.0f, 3.0f)) == 4.0f);
  CHECK(ceil_pow2(std::ldexp(1.0f, -140)) == std::ldexp(1.0f, -140));
  CHECK(ceil_pow2(std::ldexp(3.0f, -140)) == std::ldexp(1.0f, -138));
  CHECK(std::isinf(ceil_pow2(std::ldexp(1.5f, 127))));
  CHECK(std::isnan(ceil_pow2(0.0f)));
}

// ------------------------------------------------------------------------------------------
// Scale rules
// ------------------------------------------------------------------------------------------

TEST_CASE("fp8 scale rules give powers of two with the documented floors", "[quant]") {
  // fp8_ds_mla: floor 1e-4 on amax/448 -> 2^-13.
  CHECK(fp8_ds_mla_scale(0.0f) == std::ldexp(1.0f, -13));
  CHECK(fp8_ds_mla_scale(1e-6f) == std::ldexp(1.0f, -13));
  CHECK(fp8_ds_mla_scale(448.0f * std::ldexp(1.0f, -13)) == std::ldexp(1.0f, -13));
  // An exact power of two times 448 gives that power exactly; the next bf16 above doubles it.
  for (int k = -12; k <= 100; ++k) {
    const float amax = 448.0f * std::ldexp(1.0f, k);
    CHECK(fp8_ds_mla_scale(amax) == std::ldexp(1.0f, k));
    const float above = bf16_to_float(static_cast<std::uint16_t>(float_to_bf16(amax) + 1));
    CHECK(fp8_ds_mla_scale(above) == std::ldexp(1.0f, k + 1));
  }
  CHECK(fp8_ds_mla_scale(448.0f) == 1.0f);
  CHECK(fp8_ds_mla_scale(450.0f) == 2.0f);
  CHECK(fp8_ds_mla_scale(bf16_to_float(0x7F7F)) == std::ldexp(1.0f, 120));  // largest bf16

  // indexer fp8: floor 1e-4 on amax -> 2^-22.
  CHECK(indexer_fp8_scale(0.0f) == std::ldexp(1.0f, -22));
  CHECK(indexer_fp8_scale(448.0f) == 1.0f);
  CHECK(indexer_fp8_scale(0.01f) == std::ldexp(1.0f, -15));
  // indexer fp4: floor 1e-4 on amax, divide by 6 -> 2^-15.
  CHECK(indexer_fp4_scale(0.0f) == std::ldexp(1.0f, -15));
  CHECK(indexer_fp4_scale(6.0f) == 1.0f);
  CHECK(indexer_fp4_scale(6.5f) == 2.0f);

  // Over random bf16 amax: a power of two, >= the target, < twice the target.
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<double> expo(-30.0, 30.0);
  for (int i = 0; i < 20000; ++i) {
    const float amax = bf16_to_float(float_to_bf16(static_cast<float>(std::exp2(expo(rng)))));
    const struct {
      float scale;
      double target;
    } rules[] = {
        {fp8_ds_mla_scale(amax), std::max(static_cast<double>(amax) / 448.0, static_cast<double>(1e-4f))},
        {indexer_fp8_scale(amax), std::max(static_cast<double>(amax), static_cast<double>(1e-4f)) / 448.0},
        {indexer_fp4_scale(amax), std::max(static_cast<double>(amax), static_cast<double>(1e-4f)) / 6.0},
    };
    for (const auto& r : rules) {
      CHECK(ue8m0_from_float(r.scale) != 0xFF);
      CHECK(static_cast<double>(r.scale) >= r.target);
      CHECK(static_cast<double>(r.scale) < 2.0 * r.target);
    }
  }
  CHECK(std::isnan(fp8_ds_mla_scale(std::numeric_limits<float>::quiet_NaN())));
  CHECK(std::isinf(fp8_ds_mla_scale(std::numeric_limits<float>::infinity())));
}

TEST_CASE("v41_fp4 scale rule: amax/6 rounded to e4m3, floored at 2^-6", "[quant]") {
  CHECK(v41_fp4_scale_code(0.0f) == 0x08);
  CHECK(v41_fp4_scale_code(0.01f) == 0x08);
  CHECK(v41_fp4_scale_code(6.0f) == 0x38);            // 1.0
  CHECK(v41_fp4_scale_code(6.0f * 1.0625f) == 0x38);  // tie between 1.0 and 1.125 -> even
  CHECK(v41_fp4_scale_code(6.0f * 1.1f) == 0x39);
  CHECK(v41_fp4_scale_code(6.0f * 448.0f) == 0x7E);
  CHECK(v41_fp4_scale_code(1e6f) == 0x7E);
  CHECK(v41_fp4_scale_code(std::numeric_limits<float>::quiet_NaN()) == 0x7F);
  // Never below 2^-6, never NaN for finite amax.
  for (int b = 0; b < 0x7F80; b += 7) {
    const std::uint8_t c = v41_fp4_scale_code(bf16_to_float(static_cast<std::uint16_t>(b)));
    CHECK(c >= 0x08);
    CHECK(c <= 0x7E);
  }
}

// ------------------------------------------------------------------------------------------
// Rows: round trips, re-quantisation, special values
// ------------------------------------------------------------------------------------------

TEST_CASE("every format round-trips random rows within its error bound", "[quant]") {
  std::mt19937_64 rng(4);
  for (RowFormatId id : kQuantizable) {
    SECTION(name_of(id)) {
      const FormatGeometry g = geometry(id);
      const std::int64_t tile = g.tile > 0 ? g.tile : g.dims;
      const int max_log2 = id == RowFormatId::v41_fp4 ? 8 : 20;  // v41_fp4 saturates above 6 x 448
      int failures = 0;
      for (int r = 0; r < 300; ++r) {
        const auto row = random_row(rng, id, -20, max_log2);
        const auto page = quant_one(id, row);
        const auto out = dequant_one(id, page);
        for (std::int64_t t0 = 0; t0 < g.dims; t0 += tile) {
          double amax = 0.0;
          for (std::int64_t i = t0; i < std::min(t0 + tile, g.dims); ++i) {
            amax = std::max(amax, std::fabs(static_cast<double>(bf16_to_float(row[static_cast<std::size_t>(i)]))));
          }
          for (std::int64_t i = t0; i < std::min(t0 + tile, g.dims); ++i) {
            const double x = bf16_to_float(row[static_cast<std::size_t>(i)]);
            const double y = out[static_cast<std::size_t>(i)];
            if (!(std::fabs(x - y) <= error_bound(id, i, x, amax))) ++failures;
          }
        }
      }
      CHECK(failures == 0);
    }
  }
}

TEST_CASE("re-quantising dequantised rows gives the same values and, but for half-range tiles, the same bytes",
          "[quant]") {
  std::mt19937_64 rng(5);
  for (RowFormatId id : kQuantizable) {
    SECTION(name_of(id)) {
      const bool fp4 = id == RowFormatId::v41_fp4 || id == RowFormatId::indexer_fp4;
      const double half_range = fp4 ? 3.0 : 224.0;
      int value_changes = 0;
      int unexplained_byte_changes = 0;
      int byte_changes = 0;
      for (int r = 0; r < 400; ++r) {
        const auto row = random_row(rng, id, -16, id == RowFormatId::v41_fp4 ? 8 : 16);
        const auto page1 = quant_one(id, row);
        const auto y1 = dequant_one(id, page1);
        std::vector<std::uint16_t> again(y1.size());
        for (std::size_t i = 0; i < y1.size(); ++i) {
          again[i] = float_to_bf16(y1[i]);
          if (!same_bits(bf16_to_float(again[i]), y1[i])) ++value_changes;  // exact in bf16
        }
        const auto page2 = quant_one(id, again);
        const auto y2 = dequant_one(id, page2);
        for (std::size_t i = 0; i < y1.size(); ++i) {
          if (!same_bits(y1[i], y2[i])) ++value_changes;
        }
        if (page1 != page2) {
          ++byte_changes;
          bool explained = false;
          if (id != RowFormatId::v41_fp4 && id != RowFormatId::bf16 && id != RowFormatId::fp8_per_tensor) {
            for (double m : max_code_per_tile(id, page1, 3, 1)) explained = explained || m == half_range;
          }
          if (!explained) ++unexplained_byte_changes;
        }
      }
      CHECK(value_changes == 0);
      CHECK(unexplained_byte_changes == 0);
      if (id == RowFormatId::v41_fp4 || id == RowFormatId::bf16 || id == RowFormatId::fp8_per_tensor) {
        CHECK(byte_changes == 0);
      } else {
        CHECK(byte_changes > 0);  // the half-range exception does occur with power-of-two scales
      }
    }
  }
}

TEST_CASE("a half-range tile re-quantises to half the scale and doubled codes", "[quant]") {
  // 584 layout, tile 0 all 228: scale 2^ceil(log2(228/448)) = 1, codes e4m3(228) = 224 (0x76).
  std::vector<std::uint16_t> row(512, float_to_bf16(1.0f));
  for (int i = 0; i < 64; ++i) row[static_cast<std::size_t>(i)] = float_to_bf16(228.0f);
  const auto page1 = quant_one(RowFormatId::fp8_ds_mla_v4, row, 1, 0);
  CHECK(page1[0] == 0x76);
  CHECK(page1[576] == 127);  // 2^0
  const auto y1 = dequant_one(RowFormatId::fp8_ds_mla_v4, page1, 1, 0);
  CHECK(y1[0] == 224.0f);
  std::vector<std::uint16_t> again(512);
  for (std::size_t i = 0; i < 512; ++i) again[i] = float_to_bf16(y1[i]);
  const auto page2 = quant_one(RowFormatId::fp8_ds_mla_v4, again, 1, 0);
  CHECK(page2[0] == 0x7E);   // 448
  CHECK(page2[576] == 126);  // 2^-1
  CHECK(dequant_one(RowFormatId::fp8_ds_mla_v4, page2, 1, 0) == y1);
  // The other tiles did not move.
  CHECK(std::equal(page1.begin() + 64, page1.begin() + 576, page2.begin() + 64));
  CHECK(std::equal(page1.begin() + 577, page1.end(), page2.begin() + 577));
}

TEST_CASE("all-zero rows quantise to zeros under each scale floor", "[quant]") {
  const std::vector<std::uint16_t> zeros(576, 0);
  for (RowFormatId id : kQuantizable) {
    INFO(name_of(id));
    const auto page = quant_one(id, zeros, 2, 1);
    for (float v : dequant_one(id, page, 2, 1)) CHECK(v == 0.0f);
  }
  const auto v4 = quant_one(RowFormatId::fp8_ds_mla_v4, zeros, 1, 0);
  for (int k = 0; k < 7; ++k) CHECK(v4[static_cast<std::size_t>(576 + k)] == 0x72);  // 2^-13
  const auto fp4 = quant_one(RowFormatId::v41_fp4, zeros, 1, 0);
  for (int k = 0; k < 32; ++k) CHECK(fp4[static_cast<std::size_t>(256 + k)] == 0x08);  // 2^-6
  const auto ifp4 = quant_one(RowFormatId::indexer_fp4, zeros, 1, 0);
  for (int k = 0; k < 4; ++k) CHECK(ifp4[static_cast<std::size_t>(64 + k)] == 127 - 15);  // 2^-15
  const auto ifp8 = quant_one(RowFormatId::indexer_fp8, zeros, 1, 0);
  CHECK(std::bit_cast<float>(static_cast<std::uint32_t>(ifp8[128] | (ifp8[129] << 8) | (ifp8[130] << 16)) |
                             (static_cast<std::uint32_t>(ifp8[131]) << 24)) == std::ldexp(1.0f, -22));
}

TEST_CASE("fp4 values pack two per byte, even dim in the low nibble", "[quant]") {
  // v41_fp4 tile 0: dims 0, 1 = 6, -3 with amax 6 -> scale 1.0 -> nibbles 7 and 13.
  std::vector<std::uint16_t> row(512, 0);
  row[0] = float_to_bf16(6.0f);
  row[1] = float_to_bf16(-3.0f);
  row[2] = float_to_bf16(0.5f);
  const auto page = quant_one(RowFormatId::v41_fp4, row, 1, 0);
  CHECK(page[0] == 0xD7);
  CHECK(page[1] == 0x01);
  CHECK(page[256] == 0x38);
  // indexer_fp4 the same way; dims 32.. are tile 1.
  std::vector<std::uint16_t> key(128, 0);
  key[0] = float_to_bf16(1.0f);
  key[1] = float_to_bf16(6.0f);
  key[33] = float_to_bf16(-12.0f);
  const auto ip = quant_one(RowFormatId::indexer_fp4, key, 1, 0);
  CHECK(ip[0] == 0x72);   // 1.0 -> code 2 (low), 6.0 -> code 7 (high), scale 1
  CHECK(ip[16] == 0xF0);  // dim 32 = 0 (low), dim 33 = -12 / 2 = -6 -> 15 (high)
  CHECK(ip[64] == 127);   // 2^0
  CHECK(ip[65] == 128);   // 2^1
}

TEST_CASE("NaN and inf poison their tile and pass through raw bf16 fields", "[quant]") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();

  SECTION("fp8_ds_mla_v4") {
    std::vector<std::uint16_t> row(512, float_to_bf16(0.75f));
    row[70] = float_to_bf16(nan);    // tile 1
    row[200] = float_to_bf16(inf);   // tile 3
    row[460] = float_to_bf16(-inf);  // RoPE
    row[500] = float_to_bf16(nan);   // RoPE
    const auto page = quant_one(RowFormatId::fp8_ds_mla_v4, row, 2, 1);
    const std::size_t scale = 2 * 576 + 8;
    CHECK(page[scale + 1] == 0xFF);
    CHECK(page[scale + 3] == 0xFF);
    CHECK(page[scale + 0] == ue8m0_from_float(fp8_ds_mla_scale(0.75f)));
    CHECK(page[scale + 7] == 0);
    for (int i = 64; i < 128; ++i) CHECK(page[static_cast<std::size_t>(576 + i)] == 0x7F);
    const auto out = dequant_one(RowFormatId::fp8_ds_mla_v4, page, 2, 1);
    for (int i = 0; i < 448; ++i) {
      const bool poisoned = (i >= 64 && i < 128) || (i >= 192 && i < 256);
      CHECK(std::isnan(out[static_cast<std::size_t>(i)]) == poisoned);
      if (!poisoned) CHECK(out[static_cast<std::size_t>(i)] == 0.75f);
    }
    CHECK(out[460] == -inf);
    CHECK(std::isnan(out[500]));
    CHECK(out[461] == 0.75f);
  }
  SECTION("fp8_ds_mla_v32 writes a NaN fp32 scale") {
    std::vector<std::uint16_t> row(576, float_to_bf16(-2.0f));
    row[300] = float_to_bf16(inf);  // tile 2
    row[570] = float_to_bf16(inf);  // RoPE
    const auto page = quant_one(RowFormatId::fp8_ds_mla_v32, row, 1, 0);
    CHECK(page[512 + 8] == 0x00);
    CHECK(page[512 + 9] == 0x00);
    CHECK(page[512 + 10] == 0xC0);
    CHECK(page[512 + 11] == 0x7F);
    const auto out = dequant_one(RowFormatId::fp8_ds_mla_v32, page, 1, 0);
    for (int i = 0; i < 512; ++i) CHECK(std::isnan(out[static_cast<std::size_t>(i)]) == (i >= 256 && i < 384));
    CHECK(out[570] == inf);
    CHECK(out[0] == -2.0f);
  }
  SECTION("fp4 formats") {
    std::vector<std::uint16_t> row(512, float_to_bf16(1.0f));
    row[17] = float_to_bf16(-inf);  // v41_fp4 tile 1
    const auto page = quant_one(RowFormatId::v41_fp4, row, 1, 0);
    CHECK(page[256 + 1] == 0x7F);
    for (int b = 8; b < 16; ++b) CHECK(page[static_cast<std::size_t>(b)] == 0);
    const auto out = dequant_one(RowFormatId::v41_fp4, page, 1, 0);
    for (int i = 0; i < 512; ++i) CHECK(std::isnan(out[static_cast<std::size_t>(i)]) == (i >= 16 && i < 32));
    std::vector<std::uint16_t> key(128, float_to_bf16(1.0f));
    key[100] = float_to_bf16(nan);  // indexer_fp4 tile 3
    const auto ip = quant_one(RowFormatId::indexer_fp4, key, 1, 0);
    CHECK(ip[64 + 3] == 0xFF);
    const auto kout = dequant_one(RowFormatId::indexer_fp4, ip, 1, 0);
    for (int i = 0; i < 128; ++i) CHECK(std::isnan(kout[static_cast<std::size_t>(i)]) == (i >= 96));
  }
  SECTION("a NaN-filled row reads back as NaN in every format") {
    const std::vector<std::uint16_t> row(576, float_to_bf16(nan));
    for (RowFormatId id : kQuantizable) {
      INFO(name_of(id));
      for (float v : dequant_one(id, quant_one(id, row))) CHECK(std::isnan(v));
    }
  }
}

// ------------------------------------------------------------------------------------------
// Paged helpers and argument checks
// ------------------------------------------------------------------------------------------

TEST_CASE("quantize_into_pages writes exactly the slotted rows", "[quant]") {
  std::mt19937_64 rng(6);
  for (RowFormatId id : kQuantizable) {
    SECTION(name_of(id)) {
      const FormatGeometry g = geometry(id);
      const std::int64_t n_rows = 5;  // not a power of two
      const std::int64_t num_pages = 3;
      const std::int64_t stride = page_bytes(id, n_rows);
      std::vector<std::int64_t> slots = {7, -1, 0, 14, 3, -1, 9};
      std::vector<std::uint16_t> rows;
      for (std::size_t i = 0; i < slots.size(); ++i) {
        const auto r = random_row(rng, id, -8, 8);
        rows.insert(rows.end(), r.begin(), r.end());
      }
      std::vector<std::uint8_t> pages(static_cast<std::size_t>(num_pages * stride), 0xCD);
      quantize_into_pages(id, rows.data(), static_cast<std::int64_t>(slots.size()), slots.data(), pages.data(),
                          num_pages, n_rows, stride);
      std::vector<std::uint8_t> expect(pages.size(), 0xCD);
      for (std::size_t i = 0; i < slots.size(); ++i) {
        if (slots[i] < 0) continue;
        quantize_row(id, rows.data() + static_cast<std::int64_t>(i) * g.dims,
                     expect.data() + (slots[i] / n_rows) * stride, n_rows, slots[i] % n_rows);
      }
      CHECK(pages == expect);
      // Slots never written keep the fill everywhere in their bytes.
      const RowOffsets free_row = row_offsets(id, n_rows, 1);  // slot 1 (page 0, row 1) is unused
      CHECK(pages[static_cast<std::size_t>(free_row.data)] == 0xCD);

      std::vector<float> out(rows.size(), -7.0f);
      dequantize_from_pages(id, pages.data(), num_pages, n_rows, stride, slots.data(),
                            static_cast<std::int64_t>(slots.size()), out.data());
      for (std::size_t i = 0; i < slots.size(); ++i) {
        const auto first = out.begin() + static_cast<std::ptrdiff_t>(i) * g.dims;
        if (slots[i] < 0) {
          CHECK(std::all_of(first, first + g.dims, [](float v) { return v == -7.0f; }));
          continue;
        }
        std::vector<float> one(static_cast<std::size_t>(g.dims));
        dequantize_row(id, pages.data() + (slots[i] / n_rows) * stride, n_rows, slots[i] % n_rows, one.data());
        CHECK(std::equal(one.begin(), one.end(), first, same_bits));
      }
    }
  }
}

TEST_CASE("row and page helpers reject bad arguments", "[quant]") {
  std::vector<std::uint16_t> row(576, 0);
  std::vector<std::uint8_t> page(static_cast<std::size_t>(page_bytes(RowFormatId::fp8_ds_mla_v4, 4)), 0);
  std::vector<float> out(576);
  const auto id = RowFormatId::fp8_ds_mla_v4;
  expect_error(ErrorKind::internal, [&] { quantize_row(id, row.data(), page.data(), 4, 4); });
  expect_error(ErrorKind::internal, [&] { quantize_row(id, nullptr, page.data(), 4, 0); });
  expect_error(ErrorKind::internal, [&] { dequantize_row(id, page.data(), 4, -1, out.data()); });
  expect_error(ErrorKind::internal,
               [&] { quantize_row(RowFormatId::compressor_state, row.data(), page.data(), 1, 0); });
  expect_error(ErrorKind::internal,
               [&] { dequantize_row(RowFormatId::compressor_state, page.data(), 1, 0, out.data()); });
  CHECK_FALSE(has_quantizer(RowFormatId::compressor_state));
  CHECK(has_quantizer(RowFormatId::bf16));

  std::int64_t slot = 4;  // one page of 4 rows: slots 0..3
  expect_error(ErrorKind::internal, [&] { quantize_into_pages(id, row.data(), 1, &slot, page.data(), 1, 4, 2880); });
  slot = -2;
  expect_error(ErrorKind::internal, [&] { quantize_into_pages(id, row.data(), 1, &slot, page.data(), 1, 4, 2880); });
  slot = 0;
  expect_error(ErrorKind::internal, [&] { quantize_into_pages(id, row.data(), 1, &slot, page.data(), 1, 4, 2335); });
  expect_error(ErrorKind::internal, [&] { dequantize_from_pages(id, page.data(), 1, 4, 2880, &slot, -1, out.data()); });
  expect_error(ErrorKind::internal, [&] { quantize_into_pages(id, row.data(), 1, nullptr, page.data(), 1, 4, 2880); });
  // n = 0 touches nothing and needs no pointers.
  quantize_into_pages(id, nullptr, 0, nullptr, nullptr, 0, 4, 2880);
  // The unpadded stride is enough.
  quantize_into_pages(id, row.data(), 1, &slot, page.data(), 1, 4, 2336);
  CHECK(page[4 * 576] == 0x72);
}
