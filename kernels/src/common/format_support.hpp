#pragma once
// Host-side glue between the core's row formats (mlaplan/hardware/formats.hpp) and the kernels' (C++20
// host sources only): which kernel format serves a layout's format, and whether a compiled decode
// variant covers a (main, extra) pair.

#include <cstdint>
#include <optional>
#include <string>

#include "mlaplan/hardware/formats.hpp"
#include "mlaplan_kernels/kernels.hpp"

namespace mlaplan::kernels::detail {

inline std::optional<RowFormat> kernel_format(RowFormatId id) {
  switch (id) {
    case RowFormatId::fp8_ds_mla_v4: return RowFormat::fp8_ds_mla_584;
    case RowFormatId::v41_fp8: return RowFormat::v41_fp8_528;
    case RowFormatId::v41_fp4: return RowFormat::v41_fp4_288;
    case RowFormatId::fp8_ds_mla_v32: return RowFormat::fp8_ds_mla_656;
    case RowFormatId::bf16: return RowFormat::bf16_1024;
    case RowFormatId::fp8_per_tensor: return RowFormat::fp8_pt_512;
    default: return std::nullopt;
  }
}

/// "" when a compiled decode variant reads `main` (+ `extra`) at `h_q` heads (8 / 16: one with a
/// small-head kernel), else why not.
inline std::string decode_support_reason(RowFormatId main_id, bool has_extra, RowFormatId extra_id,
                                         std::int32_t h_q = 64) {
  const auto main = kernel_format(main_id);
  const auto extra = has_extra ? kernel_format(extra_id) : std::optional<RowFormat>(RowFormat::fp8_ds_mla_584);
  const std::string pair =
      std::string(row_format(main_id).name) + (has_extra ? " + " + std::string(row_format(extra_id).name) : " alone");
  if (!main || !extra) {
    return "no decode kernel in this build for " + pair +
           " (kernels exist for fp8_ds_mla_v4 584 (+ 584), v41_fp8 528 (+ v41_fp4 288), fp8_ds_mla_v32 656, "
           "bf16 1024 (+ 1024) and fp8_per_tensor 512 (+ 512))";
  }
  for (const auto& v : supported_decode_variants()) {
    if (v.main == *main && v.has_extra == has_extra && (!has_extra || v.extra == *extra)) {
      if (small_head_count(h_q) && !v.small_heads) {
        return "no small-head decode kernel (h_q " + std::to_string(h_q) + " unpadded) in this build for " + pair +
               " (the small-head kernel reads fp8_ds_mla_v4 584 (+ 584) and fp8_ds_mla_v32 656)";
      }
      return {};
    }
  }
  return "no decode kernel in this build for " + pair;
}

}  // namespace mlaplan::kernels::detail
