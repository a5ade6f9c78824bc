#pragma once
// Every KV-cache row format as data, in one place: byte map of a row, page alignment, whether a
// page is striped (all data parts first, then all scale parts), page sizes, and the byte offsets
// of row t inside a page of N rows. The quantisers (quant.hpp), the planner and the kernels all
// take their geometry from here. docs/layouts.md draws each format and says where the facts come
// from.

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

namespace mlaplan {

/// The row formats mla-plan knows. Bytes per row in the comments.
enum class RowFormatId {
  fp8_ds_mla_v4,     ///< 584: V4/V4.1 main cache under fp8_ds_mla; page-striped
  v41_fp8,           ///< 528: V4.1 window cache under nvfp4_ds_mla
  v41_fp4,           ///< 288: V4.1 compressed cache under nvfp4_ds_mla
  fp8_ds_mla_v32,    ///< 656: V3.2 main cache
  indexer_fp8,       ///< 132: indexer key, fp8; page-striped
  indexer_fp4,       ///< 68:  indexer key, fp4 (MXFP4); page-striped
  compressor_state,  ///< 4096: fp32 compressor state (no quantisation)
  bf16,              ///< 1024: plain bf16 latent (FlashInfer SM10x under bfloat16 / auto)
  fp8_per_tensor,    ///< 512: plain e4m3 latent, one per-tensor scale outside the cache (FlashInfer SM10x under fp8)
};

/// Which part of a page a field lives in. Rows of a format that is not page-striped have only a
/// data part (the whole row).
enum class Region { data, scale };

/// One field of a row's byte map.
struct FormatField {
  std::string_view name;
  std::int64_t offset;       ///< bytes from the start of the row's part in `region`
  std::int64_t size;         ///< bytes
  std::string_view element;  ///< "e4m3", "bf16", "ue8m0", "e2m1x2" (one byte, two values), "fp32", "pad"
  std::int64_t count;        ///< elements of `element` (an e2m1x2 element is one byte)
  std::string_view covers;   ///< what the field holds, e.g. "dims 0-447 (NoPE)"
  Region region = Region::data;
};

/// Compile-time geometry of a format: what kernels and quantisers need to address a row.
struct FormatGeometry {
  std::int64_t row_bytes;       ///< data_bytes + scale_bytes
  std::int64_t data_bytes;      ///< bytes of a row in the data part (row_bytes if not striped)
  std::int64_t scale_bytes;     ///< bytes of a row in the scale part (0 if not striped)
  bool page_striped;            ///< page = N data parts, then N scale parts
  std::int64_t page_alignment;  ///< page bytes round up to a multiple of this (1 = none)
  std::int64_t dims;            ///< values a row stores (512 latent, 576 for V3.2, 128 indexer)
  std::int64_t tile;            ///< values per scale (0 = no scale)
};

/// The geometry table. The one place these numbers are written down.
constexpr FormatGeometry geometry(RowFormatId id) noexcept {
  switch (id) {
    case RowFormatId::fp8_ds_mla_v4: return {584, 576, 8, true, 576, 512, 64};
    case RowFormatId::v41_fp8: return {528, 528, 0, false, 512, 512, 32};
    case RowFormatId::v41_fp4: return {288, 288, 0, false, 256, 512, 16};
    case RowFormatId::fp8_ds_mla_v32: return {656, 656, 0, false, 1, 576, 128};
    case RowFormatId::indexer_fp8: return {132, 128, 4, true, 576, 128, 128};
    case RowFormatId::indexer_fp4: return {68, 64, 4, true, 576, 128, 32};
    case RowFormatId::compressor_state: return {4096, 4096, 0, false, 1, 512, 0};
    case RowFormatId::bf16: return {1024, 1024, 0, false, 512, 512, 0};
    case RowFormatId::fp8_per_tensor: return {512, 512, 0, false, 512, 512, 0};
  }
  return {0, 0, 0, false, 1, 0, 0};
}

/// A row format described for people and for the planner.
struct RowFormat {
  RowFormatId id;
  std::string_view name;   ///< stable id used in output and on the command line, e.g. "fp8_ds_mla_v4"
  std::string_view title;  ///< one line for people
  std::int64_t row_bytes;
  std::int64_t page_alignment;      ///< 576, 512, 256, or 1 (none). Indexer caches: see indexer_page_alignment
  bool page_striped;                ///< page = N data parts then N scale parts (584 and both indexer formats)
  std::int64_t data_bytes;          ///< per row, in the data part
  std::int64_t scale_bytes;         ///< per row, in the scale part (0 when not striped)
  std::int64_t dims;                ///< values a row stores
  std::int64_t tile;                ///< values per scale (0 = none)
  std::vector<FormatField> fields;  ///< byte map of one row; offsets relative to the row's part
  std::string_view scale_rule;      ///< how the quantiser picks a scale
  std::string_view source;          ///< where the layout and the rule come from (or "our definition")
  std::string_view used_by;
};

/// The description of one format.
const RowFormat& row_format(RowFormatId id);
/// All formats, in enum order.
std::span<const RowFormat> all_row_formats();
/// The format named `name` (RowFormat::name), or nothing.
std::optional<RowFormatId> parse_row_format(std::string_view name);

/// round_up(rows * row_bytes, alignment), overflow-checked (Error invalid_config when it does not
/// fit in int64). rows >= 1, row_bytes >= 1, alignment >= 1 (0 is read as 1) or Error internal.
std::int64_t padded_page_bytes(std::int64_t rows, std::int64_t row_bytes, std::int64_t alignment);
/// padded_page_bytes(rows_per_page, row_bytes, page_alignment) of the format.
std::int64_t page_bytes(RowFormatId id, std::int64_t rows_per_page);
/// Page alignment of an indexer-key cache that sits next to a main cache of `main_format`:
/// 576 next to fp8_ds_mla_v4, 512 next to v41_fp8 / v41_fp4 (nvfp4_ds_mla) and next to the
/// plain bf16 / fp8 rows of FlashInfer, 1 for V3.2 (the public sources give V3.2 no page
/// padding). Error internal for other formats.
std::int64_t indexer_page_alignment(RowFormatId main_format);

/// Where row t of a page of N rows starts, in bytes from the page start.
struct RowOffsets {
  std::int64_t data;   ///< start of the row's data part (the whole row when not striped)
  std::int64_t scale;  ///< start of the row's scale part; equals `data` when not striped
};

/// The offset rule, for callers that hold a geometry (kernels, loops): striped formats put row t's
/// data part at t*data_bytes and its scale part at N*data_bytes + t*scale_bytes; others put the
/// row at t*row_bytes. No checks.
constexpr RowOffsets row_offsets_unchecked(const FormatGeometry& g, std::int64_t rows_per_page,
                                           std::int64_t row_in_page) noexcept {
  if (g.page_striped) {
    return {row_in_page * g.data_bytes, rows_per_page * g.data_bytes + row_in_page * g.scale_bytes};
  }
  return {row_in_page * g.row_bytes, row_in_page * g.row_bytes};
}

/// row_offsets_unchecked for a format, after checking 1 <= rows_per_page, 0 <= row_in_page <
/// rows_per_page and that the page's used bytes fit in int64 (Error internal / invalid_config).
RowOffsets row_offsets(RowFormatId id, std::int64_t rows_per_page, std::int64_t row_in_page);

/// Bytes of one element kind ("e4m3" 1, "bf16" 2, "ue8m0" 1, "e2m1x2" 1, "fp32" 4, "pad" 1);
/// 0 for an unknown name.
std::int64_t element_bytes(std::string_view element);

}  // namespace mlaplan
