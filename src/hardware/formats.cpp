#include "mlaplan/hardware/formats.hpp"

#include <utility>
#include <string>

#include "mlaplan/base/error.hpp"

namespace mlaplan {
namespace {

constexpr std::string_view kPow2Rule448 =
    "per tile: scale = 2^ceil(log2(max(amax/448, 1e-4))) (amax and amax/448 in float32 from the bf16 "
    "inputs), value = e4m3(x/scale) round-to-nearest-even";

RowFormat make(RowFormatId id, std::string_view name, std::string_view title, std::vector<FormatField> fields,
               std::string_view scale_rule, std::string_view source, std::string_view used_by) {
  const FormatGeometry g = geometry(id);
  return RowFormat{id,           name,          title,  g.row_bytes, g.page_alignment,  g.page_striped,
                   g.data_bytes, g.scale_bytes, g.dims, g.tile,      std::move(fields), scale_rule,
                   source,       used_by};
}

std::vector<RowFormat> build_table() {
  std::vector<RowFormat> t;
  t.push_back(make(
      RowFormatId::fp8_ds_mla_v4, "fp8_ds_mla_v4", "V4 fp8_ds_mla (FlashMLA MODEL1/V4 layout), 584 B, page-striped",
      {
          {"nope", 0, 448, "e4m3", 448, "dims 0-447 (NoPE), 7 tiles of 64", Region::data},
          {"rope", 448, 128, "bf16", 64, "dims 448-511 (RoPE), raw bf16", Region::data},
          {"scales", 0, 7, "ue8m0", 7, "byte k scales dims 64k..64k+63 (value 2^(byte-127))", Region::scale},
          {"pad", 7, 1, "pad", 1, "written 0", Region::scale},
      },
      kPow2Rule448,
      "layout and rule: FlashMLA's FP8 sparse formats and reference quantiser (golden bytes in "
      "tests/data/flashmla-quant-vectors.json); use: vLLM's DeepSeek V4 KV-cache spec",
      "V4 and V4.1 main/window/compressed caches under --kv-cache-dtype auto|fp8|fp8_ds_mla"));
  t.push_back(
      make(RowFormatId::v41_fp8, "v41_fp8", "V4.1 fp8, 528 B: 512 e4m3 + 16 UE8M0",
           {
               {"values", 0, 512, "e4m3", 512, "dims 0-511 (NoPE and RoPE), 16 tiles of 32", Region::data},
               {"scales", 512, 16, "ue8m0", 16, "byte k scales dims 32k..32k+31 (value 2^(byte-127))", Region::data},
           },
           "as fp8_ds_mla_v4 with tiles of 32 over all 512 dims: scale = 2^ceil(log2(max(amax/448, "
           "1e-4))), value = e4m3(x/scale) RNE",
           "byte map: vLLM's DeepSeek V4.1 KV-cache spec (nvfp4_ds_mla); scale rule: the fp8_ds_mla power-of-two "
           "rule applied per 32 dims; rows stored contiguously (our reading: no striping is documented)",
           "V4.1 window cache under nvfp4_ds_mla (SM100 only)"));
  t.push_back(
      make(RowFormatId::v41_fp4, "v41_fp4", "V4.1 fp4, 288 B: 512 e2m1 + 32 e4m3 scales",
           {
               {"values", 0, 256, "e2m1x2", 256, "dims 0-511, two per byte, even dim in the low nibble", Region::data},
               {"scales", 256, 32, "e4m3", 32, "byte k scales dims 16k..16k+15", Region::data},
           },
           "our definition: per 16 dims, scale code = max(e4m3(amax/6) RNE saturating, 0x08 = 2^-6), "
           "value = e2m1(x/scale) RNE saturating to +-6; no global scale",
           "byte map: vLLM's DeepSeek V4.1 KV-cache spec (nvfp4_ds_mla); scale rule: our definition (not in "
           "the public sources); rows stored contiguously (our reading)",
           "V4.1 compressed cache under nvfp4_ds_mla (SM100 only), next to a v41_fp8 main cache"));
  t.push_back(make(RowFormatId::fp8_ds_mla_v32, "fp8_ds_mla_v32",
                   "V3.2 fp8_ds_mla, 656 B: NoPE e4m3, fp32 scales, RoPE bf16",
                   {
                       {"nope", 0, 512, "e4m3", 512, "dims 0-511 (NoPE), 4 tiles of 128", Region::data},
                       {"scales", 512, 16, "fp32", 4, "scale k for dims 128k..128k+127 (a power of two)", Region::data},
                       {"rope", 528, 128, "bf16", 64, "dims 512-575 (RoPE), raw bf16", Region::data},
                   },
                   "per 128 NoPE dims: scale = 2^ceil(log2(max(amax/448, 1e-4))) stored as fp32, value = "
                   "e4m3(x/scale) RNE",
                   "FlashMLA's V3.2 FP8 sparse format and reference quantiser (golden bytes in "
                   "tests/data/flashmla-quant-vectors.json)",
                   "V3.2 main cache"));
  t.push_back(make(RowFormatId::indexer_fp8, "indexer_fp8",
                   "indexer key fp8, 132 B: 128 e4m3 + fp32 scale, page-striped",
                   {
                       {"values", 0, 128, "e4m3", 128, "dims 0-127", Region::data},
                       {"scale", 0, 4, "fp32", 1, "scale of all 128 dims (a power of two)", Region::scale},
                   },
                   "per row: scale = 2^ceil(log2(max(amax, 1e-4)/448)) stored as fp32 (the 1e-4 floor is on amax), "
                   "value = e4m3(x/scale) RNE",
                   "vLLM's indexer-key cache writer (UE8M0 scale format, DeepSeek V3.2/V4 indexers) and DeepGEMM's "
                   "paged-logits tests: a page holds N x 128 values, then N fp32 scales",
                   "V3.2, V4, V4.1 indexer-key caches (default)"));
  t.push_back(
      make(RowFormatId::indexer_fp4, "indexer_fp4", "indexer key fp4 (MXFP4), 68 B: 128 e2m1 + 4 UE8M0, page-striped",
           {
               {"values", 0, 64, "e2m1x2", 64, "dims 0-127, two per byte, even dim in the low nibble", Region::data},
               {"scales", 0, 4, "ue8m0", 4, "byte k scales dims 32k..32k+31 (value 2^(byte-127))", Region::scale},
           },
           "per 32 dims: scale = 2^ceil(log2(max(amax, 1e-4)/6)), value = e2m1(x/scale) RNE saturating to +-6",
           "DeepGEMM's fp4 paged-logits tests (a page holds N x 64 packed bytes, then N x 4 UE8M0 bytes; "
           "scale rule as its reference quantiser, which rounds e2m1 ties toward zero where we round to "
           "nearest even)",
           "V4/V4.1 indexer-key caches, fp4 option (DeepSeek's reported figures assume it)"));
  t.push_back(make(RowFormatId::compressor_state, "compressor_state",
                   "compressor state, 4096 B: fp32 kv_state + score_state",
                   {
                       {"kv_state", 0, 2048, "fp32", 512, "running kv state, 512 values", Region::data},
                       {"score_state", 2048, 2048, "fp32", 512, "running score state, 512 values", Region::data},
                   },
                   "none (fp32 state, not quantised)", "vLLM's DeepSeek V4.1 compressor-state cache",
                   "ring per request for V4.1 ratio-2 KV sources"));
  t.push_back(make(RowFormatId::bf16, "bf16", "plain bf16 latent, 1024 B",
                   {
                       {"values", 0, 1024, "bf16", 512, "dims 0-511", Region::data},
                   },
                   "none (raw bf16)",
                   "vLLM's FlashInfer sparse-MLA backend for V4.1 on SM10x (plain rows, pages aligned to 512)",
                   "FLASHINFER_MLA_SPARSE_DSV41 on SM10x under --kv-cache-dtype bfloat16 or auto"));
  t.push_back(make(
      RowFormatId::fp8_per_tensor, "fp8_per_tensor", "plain e4m3 latent, 512 B, one per-tensor scale",
      {
          {"values", 0, 512, "e4m3", 512, "dims 0-511, x / scale with one scale for the whole cache", Region::data},
      },
      "one per-tensor scale held outside the cache (vLLM sets it to 1.0): stored value = e4m3(x / scale), "
      "round to nearest even, saturating at +-448",
      "vLLM's FlashInfer sparse-MLA backend for V4.1 on SM10x (the plain per-tensor FP8 KV layout, pages "
      "aligned to 512)",
      "FLASHINFER_MLA_SPARSE_DSV41 on SM10x under --kv-cache-dtype fp8 or fp8_e4m3"));
  return t;
}

const std::vector<RowFormat>& table() {
  static const std::vector<RowFormat> t = build_table();
  return t;
}

}  // namespace

const RowFormat& row_format(RowFormatId id) {
  const auto& t = table();
  const auto i = static_cast<std::size_t>(id);
  if (i >= t.size() || t[i].id != id) throw_internal("row_format: unknown format id " + std::to_string(i));
  return t[i];
}

std::span<const RowFormat> all_row_formats() { return table(); }

std::optional<RowFormatId> parse_row_format(std::string_view name) {
  for (const RowFormat& f : table()) {
    if (f.name == name) return f.id;
  }
  return std::nullopt;
}

std::int64_t padded_page_bytes(std::int64_t rows, std::int64_t row_bytes, std::int64_t alignment) {
  if (rows < 1 || row_bytes < 1 || alignment < 0) {
    throw_internal("padded_page_bytes: bad arguments (rows " + std::to_string(rows) + ", row_bytes " +
                   std::to_string(row_bytes) + ", alignment " + std::to_string(alignment) + ")");
  }
  const std::int64_t used = checked_mul(rows, row_bytes, "page bytes");
  return checked_round_up(used, alignment == 0 ? 1 : alignment, "page bytes");
}

std::int64_t page_bytes(RowFormatId id, std::int64_t rows_per_page) {
  const FormatGeometry g = geometry(id);
  return padded_page_bytes(rows_per_page, g.row_bytes, g.page_alignment);
}

std::int64_t indexer_page_alignment(RowFormatId main_format) {
  switch (main_format) {
    case RowFormatId::fp8_ds_mla_v4: return 576;
    case RowFormatId::v41_fp8:
    case RowFormatId::v41_fp4:
    case RowFormatId::bf16:
    case RowFormatId::fp8_per_tensor: return 512;
    case RowFormatId::fp8_ds_mla_v32: return 1;
    default: break;
  }
  throw_internal("indexer_page_alignment: " + std::string(row_format(main_format).name) +
                 " is not a main-cache format");
}

RowOffsets row_offsets(RowFormatId id, std::int64_t rows_per_page, std::int64_t row_in_page) {
  if (rows_per_page < 1 || row_in_page < 0 || row_in_page >= rows_per_page) {
    throw_internal("row_offsets: row " + std::to_string(row_in_page) + " of a page of " +
                   std::to_string(rows_per_page) + " rows");
  }
  const FormatGeometry g = geometry(id);
  (void)checked_mul(rows_per_page, g.row_bytes, "page bytes");  // every offset below is smaller
  return row_offsets_unchecked(g, rows_per_page, row_in_page);
}

std::int64_t element_bytes(std::string_view element) {
  if (element == "e4m3" || element == "ue8m0" || element == "e2m1x2" || element == "pad") return 1;
  if (element == "bf16") return 2;
  if (element == "fp32") return 4;
  return 0;
}

}  // namespace mlaplan
