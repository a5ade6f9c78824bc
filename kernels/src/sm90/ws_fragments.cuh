#pragma once
// Fragment helpers of the warp-specialised sm_90a decode (decode_ws.cuh): the swizzled Q tile,
// row sums, masking, rescaling and the epilogue over the wgmma accumulator layout.

#include "common/decode_device.cuh"

namespace mlaplan::kernels::detail {

/// Head dims 256 wg .. 256 wg + 255 of the 64 query rows of (request x s_q + token) bs, heads
/// head0 .., copied (cp.async, not yet committed) into the sm_90a kernels' Q tile: 8 chunks of 64
/// dims x 64 rows, 128-byte rows swizzled (16-byte unit u of row r at u ^ (r & 7)), the layout
/// wgmma reads. By the 128 threads of warpgroup wg (wt = thread in the warpgroup).
__device__ __forceinline__ void issue_q_half_sw128(const DecodeParams& p, std::uint8_t* sQ, std::int64_t bs, int head0,
                                                   int wg, int wt) {
  constexpr int kChunk = 64 * 128;
  const std::uint16_t* qsrc = p.q + (bs * p.h_q + head0) * 512 + 256 * wg;
#pragma unroll
  for (int k = 0; k < 16; ++k) {
    const int i = wt + 128 * k;
    const int row = i >> 5;
    const int unit = i & 31;
    const int u = unit & 7;
    cp_async_16(sQ + (4 * wg + (unit >> 3)) * kChunk + row * 128 + ((u ^ (row & 7)) << 4), qsrc + row * 512 + unit * 8);
  }
}

/// The full row sums of the sm_90a kernels' two rows per thread: each of a quad's 4 threads holds
/// its 16 keys' part of a row (wgmma accumulator layout), added across the quad.
__device__ __forceinline__ void quad_row_sums(const float (&l_run)[2], float (&l_row)[2]) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float l = l_run[h];
    l += __shfl_xor_sync(0xFFFFFFFFu, l, 1);
    l += __shfl_xor_sync(0xFFFFFFFFu, l, 2);
    l_row[h] = l;
  }
}

/// Invalid keys -> -inf in this thread's S fragment of a 64-key block (element 4j + 2h + e: key
/// 8j + 2 t4 + e; bit k of kmask: key k valid); nothing to do when every key is valid.
__device__ __forceinline__ void mask_invalid_keys(float (&sacc)[32], std::uint64_t kmask, int t4) {
  if (kmask == ~0ull) return;
  const float kNegInf = -__int_as_float(0x7F800000);
  const std::uint64_t mine = kmask >> (2 * t4);  // bit 8j + e: key 8j + 2 t4 + e
#pragma unroll
  for (int j = 0; j < 8; ++j) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      float& v = sacc[4 * j + i];
      v = ((mine >> (8 * j + (i & 1))) & 1u) != 0 ? v : kNegInf;
    }
  }
}

/// The maximum raw score of row row0 + 8h of a 64-key block over the quad that holds it (this
/// thread's S fragment: element 4j + 2h + e is key 8j + 2 t4 + e; -inf when every key is masked).
__device__ __forceinline__ float block_row_max(const float (&sacc)[32], int h) {
  float mx = -__int_as_float(0x7F800000);
#pragma unroll
  for (int j = 0; j < 8; ++j) mx = fmaxf(mx, fmaxf(sacc[4 * j + 2 * h], sacc[4 * j + 2 * h + 1]));
  mx = fmaxf(mx, __shfl_xor_sync(0xFFFFFFFFu, mx, 1));
  mx = fmaxf(mx, __shfl_xor_sync(0xFFFFFFFFu, mx, 2));
  return mx;
}

/// O (this thread's 64 x 256 fragment of the sm_90a kernels: rows row0 and row0 + 8 alternate in
/// pairs) times the rows' rescale factors.
__device__ __forceinline__ void rescale_o_rows(float (&o)[128], const float (&alpha)[2]) {
#pragma unroll
  for (int j = 0; j < 32; ++j) {
    o[4 * j] *= alpha[0];
    o[4 * j + 1] *= alpha[0];
    o[4 * j + 2] *= alpha[1];
    o[4 * j + 3] *= alpha[1];
  }
}

/// P (bf16) as the A fragments of the 4 k steps of P V (keys 16 ks ..): the S accumulator elements
/// of 8-column blocks 2 ks and 2 ks + 1.
__device__ __forceinline__ void pack_p_fragments(const float (&sacc)[32], std::uint32_t (&pa)[4][4]) {
#pragma unroll
  for (int ks = 0; ks < 4; ++ks) {
    pa[ks][0] = pack_bf16x2(sacc[8 * ks], sacc[8 * ks + 1]);
    pa[ks][1] = pack_bf16x2(sacc[8 * ks + 2], sacc[8 * ks + 3]);
    pa[ks][2] = pack_bf16x2(sacc[8 * ks + 4], sacc[8 * ks + 5]);
    pa[ks][3] = pack_bf16x2(sacc[8 * ks + 6], sacc[8 * ks + 7]);
  }
}

}  // namespace mlaplan::kernels::detail
