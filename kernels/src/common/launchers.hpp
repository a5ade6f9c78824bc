#pragma once
// Internal: the launch functions each .cu file defines. CUDA-free so dispatch.cpp (the one launch
// decision, plan_decode_launch) can call them; the stream travels as void* (cudaStream_t). The
// launchers only launch what the DecodeLaunch they are given says.

#include "mlaplan_kernels/kernels.hpp"

namespace mlaplan::kernels::detail {

/// Tile of the decode kernel: rows of K/V per block, heads per CTA, threads per CTA.
inline constexpr int kBlockRows = 64;
inline constexpr int kHeadsPerCta = 64;
inline constexpr int kDecodeThreads = 512;
inline constexpr int kHeadDim = 512;

/// Shared memory of the decode kernel in bytes (see decode_kernel.cuh for the layout).
std::size_t decode_smem_bytes(RowFormat main, bool has_extra, RowFormat extra);

using DecodeLauncher = void (*)(const DecodeParams& p, const DecodeLaunch& launch);

// The portable kernel (portable/decode_kernel.cuh), one instantiation per file.
void launch_decode_584(const DecodeParams& p, const DecodeLaunch& launch);
void launch_decode_584_584(const DecodeParams& p, const DecodeLaunch& launch);
void launch_decode_528(const DecodeParams& p, const DecodeLaunch& launch);
void launch_decode_528_288(const DecodeParams& p, const DecodeLaunch& launch);
void launch_decode_656(const DecodeParams& p, const DecodeLaunch& launch);
void launch_decode_bf16(const DecodeParams& p, const DecodeLaunch& launch);
void launch_decode_bf16_bf16(const DecodeParams& p, const DecodeLaunch& launch);
void launch_decode_fp8pt(const DecodeParams& p, const DecodeLaunch& launch);
void launch_decode_fp8pt_fp8pt(const DecodeParams& p, const DecodeLaunch& launch);
// The warp-specialised sm_90a kernel (sm90/decode_ws.cuh): plain, 2-CTA pair (launch.pair) or
// cluster_split (launch.dims.cluster_x > 1).
void launch_decode_sm90ws_584(const DecodeParams& p, const DecodeLaunch& launch);
void launch_decode_sm90ws_584_584(const DecodeParams& p, const DecodeLaunch& launch);
/// The occupancy query behind DecodeDevice::clusters_fit on the current device (dispatch.cpp picks
/// the instantiation's).
bool sm90ws_clusters_fit(const LaunchDims& d, bool has_extra);
bool sm90ws_clusters_fit_584(const LaunchDims& d);
bool sm90ws_clusters_fit_584_584(const LaunchDims& d);

// The small-head kernel (small/decode_small.cuh): h_q 8 or 16 unpadded, one instantiation per file.
void launch_small_decode_584_h8(const DecodeParams& p, const DecodeLaunch& launch);
void launch_small_decode_584_h16(const DecodeParams& p, const DecodeLaunch& launch);
void launch_small_decode_584_584_h8(const DecodeParams& p, const DecodeLaunch& launch);
void launch_small_decode_584_584_h16(const DecodeParams& p, const DecodeLaunch& launch);
void launch_small_decode_656_h8(const DecodeParams& p, const DecodeLaunch& launch);
void launch_small_decode_656_h16(const DecodeParams& p, const DecodeLaunch& launch);
// The warp-specialised small-head kernel (sm90/decode_small_ws.cuh): h_q 8 or 16, sm_90a, 584 rows.
void launch_small_decode_sm90ws_584(const DecodeParams& p, const DecodeLaunch& launch);
void launch_small_decode_sm90ws_584_584(const DecodeParams& p, const DecodeLaunch& launch);
/// Shared memory of the small-head kernel for a main format (SmallSmemT).
std::size_t small_decode_smem_bytes(RowFormat main);

void launch_combine(const DecodeParams& p, const LaunchDims& dims);

// The row-split small-head kernel (small/decode_lean.cuh): h_q 8 or 16, 584 rows, split_kv at
// small batches; each request cut into `pieces` ranges of index positions, one CTA each, merged by
// its own combine (small/combine_lean.cu).
/// Most pieces per request: the lean combine holds every piece's 4 dims and lse in registers.
inline constexpr int kLeanMaxPieces = 16;
/// Fewest index positions per piece the host rule gives a CTA (below this the pieces' partials
/// cost more to merge than their rows take to read).
inline constexpr int kLeanMinRows = 16;
/// Shared memory and threads of the row-split kernel (a chunk of 64 staged rows at a time).
struct LeanGeometry {
  static constexpr int kThreads = 256;
  static constexpr int kWarps = kThreads / 32;
  static constexpr int kChunk = 64;       ///< rows staged at once
  static constexpr int kStages = 2;       ///< chunk buffers: the next chunk's rows load while one is computed
  static constexpr int kUnits = 37;       ///< copies per row: 36 x 16 data bytes, 1 x 8 scale bytes
  static constexpr int kRowStride = 592;  ///< 576 data + 8 scale bytes, padded to 16
  static constexpr int kMaxHeads = 16;
  static constexpr int raw = 0;                                       ///< [kStages][kChunk][kRowStride] staged rows
  static constexpr int scores = raw + kStages * kChunk * kRowStride;  ///< [kChunk][h_q] fp32
  static constexpr int ids = scores + kChunk * kMaxHeads * 4;         ///< [kStages][kChunk] int32
  static constexpr int src = ids + kStages * kChunk * 4;              ///< [kStages][kChunk] row data address (8 B)
  static constexpr int scl = src + kStages * kChunk * 8;              ///< [kStages][kChunk] row scale address (8 B)
  static constexpr int stats = scl + kStages * kChunk * 8;            ///< m, l, alpha: [kMaxHeads] fp32 each
  static constexpr int kQStride = 1040;  ///< bytes per Q row in shared memory (512 bf16 + 16 B pad: no bank conflicts)
  static constexpr int q = stats + 3 * kMaxHeads * 4;  ///< [kMaxHeads][kQStride] bf16 Q
  static constexpr int total = q + kMaxHeads * kQStride;
  static_assert(src % 8 == 0 && q % 16 == 0, "aligned arrays");
  static_assert(2 * total <= 227 * 1024, "two CTAs an SM");
};
void launch_small_decode_lean_584_h8(const DecodeParams& p, const DecodeLaunch& launch);
void launch_small_decode_lean_584_h16(const DecodeParams& p, const DecodeLaunch& launch);
void launch_small_decode_lean_584_584_h8(const DecodeParams& p, const DecodeLaunch& launch);
void launch_small_decode_lean_584_584_h16(const DecodeParams& p, const DecodeLaunch& launch);
void launch_combine_lean(const DecodeParams& p, int pieces);

}  // namespace mlaplan::kernels::detail
