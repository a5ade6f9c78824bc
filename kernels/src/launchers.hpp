#pragma once
// Internal: the launch functions each .cu file defines. CUDA-free so host.cpp (dispatch and
// heuristics) can call them; the stream travels as void* (cudaStream_t).

#include "mlaplan_kernels/kernels.hpp"

namespace mlaplan::kernels::detail {

/// Tile of the decode kernel: rows of K/V per block, heads per CTA, threads per CTA.
inline constexpr int kBlockRows = 64;
inline constexpr int kHeadsPerCta = 64;
inline constexpr int kDecodeThreads = 512;
inline constexpr int kHeadDim = 512;

/// Shared memory of the decode kernel in bytes (see decode_kernel.cuh for the layout).
std::size_t decode_smem_bytes(RowFormat main, bool has_extra, RowFormat extra);

/// True when the current device has compute capability 9.0 (the sm_90a kernels apply); false
/// without a device. Cached per device ordinal.
bool current_device_is_sm90();
/// Multiprocessors of the current device (0 when unknown).
int current_device_sm_count();

/// False when MLAPLAN_DECODE_PDL=0: the split_kv decode is then an ordinary launch (A/B timing of
/// the programmatic launch after the GPU scheduler).
bool decode_pdl_allowed();

/// True when MLAPLAN_DECODE_KERNEL=sm90_pair: h_q 128 then runs the 2-CTA cluster variant of the
/// sm_90a kernel (measured slower than the one-CTA kernel, docs/perf.md "v5"; kept for A/B runs).
bool sm90_pair_enabled();

/// The sm_90a kernel of the 584 variants: the warp-specialised kernel (decode_sm90_ws.cuh) unless
/// MLAPLAN_DECODE_KERNEL names the earlier lock-step kernel (sm90_v5, or sm90_pair for its
/// 2-CTA variant at h_q 128; decode_sm90.cuh), kept for A/B runs.
bool sm90_ws_enabled();

/// True when MLAPLAN_DECODE_KERNEL=sm90_ws6: the warp-specialised kernel runs its v6 math (score
/// exchange, both warpgroups over the same softmax) instead of the seesaw (docs/perf.md "v7");
/// kept for A/B runs and as a second checked path.
bool sm90_ws6_enabled();

/// At h_q 128 the warp-specialised kernel runs as 2-CTA clusters that share the dequantisation (each
/// CTA converts half of every block and copies it into the other's buffer) when a CTA has at least
/// two blocks on average (docs/perf.md "v8"). MLAPLAN_DECODE_KERNEL=sm90_ws_pair forces the pair
/// (1), =sm90_ws_single one CTA per 64 heads (-1), for A/B runs; 0: the rule.
int sm90_ws_pair_choice();

/// MLAPLAN_CLUSTER_SPLIT=1/2/4/8 (A/B runs): cluster_split's CTAs per request instead of
/// cluster_split_ctas(); 0 when unset or not one of those.
int cluster_split_override();

using DecodeLauncher = void (*)(const DecodeParams& p, const LaunchDims& dims);

void launch_decode_584(const DecodeParams& p, const LaunchDims& dims);
void launch_decode_584_584(const DecodeParams& p, const LaunchDims& dims);
/// The sm_90a (wgmma) kernels of the 584 variants (decode_sm90.cuh); host.cpp launches them on
/// compute capability 9.0 only.
void launch_decode_sm90_584(const DecodeParams& p, const LaunchDims& dims);
void launch_decode_sm90_584_584(const DecodeParams& p, const LaunchDims& dims);
void launch_decode_sm90ws_584(const DecodeParams& p, const LaunchDims& dims);
void launch_decode_sm90ws_584_584(const DecodeParams& p, const LaunchDims& dims);
void launch_decode_528(const DecodeParams& p, const LaunchDims& dims);
void launch_decode_528_288(const DecodeParams& p, const LaunchDims& dims);
void launch_combine(const DecodeParams& p, const LaunchDims& dims);

}  // namespace mlaplan::kernels::detail
