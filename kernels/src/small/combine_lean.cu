// Combine of the row-split small-head kernel (decode_lean.cuh): request r's partials are its
// `pieces` consecutive rows r * pieces .. of o_accum / lse_accum (no tile-scheduler records), at
// most kLeanMaxPieces of them, so a thread loads every partial's 4 dims and every lse at once:
// one latency after the decode instead of one per few partials. Then as combine.cu: lse2 =
// log2(sum 2^(lse_k - max)) + max, out = sum 2^(lse_k - lse2) o_k, the attention sink, bf16 out
// and the natural-log lse (+inf and zeros when no partial saw a valid key).
// One CTA of 128 threads per (request, query token, head); thread t owns dims 4t .. 4t + 3.

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "common/cuda_check.hpp"
#include "common/decode_device.cuh"
#include "common/launchers.hpp"

namespace mlaplan::kernels::detail {
namespace {

__global__ void __launch_bounds__(128) combine_lean_kernel(const DecodeParams p, const int pieces) {
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
  const int r = static_cast<int>(blockIdx.x);
  const int s = static_cast<int>(blockIdx.y);
  const int head = static_cast<int>(blockIdx.z);
  const int t = static_cast<int>(threadIdx.x);
  const float neg_inf = -__int_as_float(0x7F800000);
  const std::int64_t first = static_cast<std::int64_t>(r) * pieces;

  float lse[kLeanMaxPieces];
  float4 o[kLeanMaxPieces];
#pragma unroll
  for (int k = 0; k < kLeanMaxPieces; ++k) {
    lse[k] = neg_inf;
    o[k] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (k < pieces) {
      const std::int64_t row = ((first + k) * p.s_q + s) * p.h_q + head;
      lse[k] = __ldg(p.lse_accum + row);
      o[k] = __ldg(reinterpret_cast<const float4*>(p.o_accum + row * kHeadDim) + t);
    }
  }
  float mx = neg_inf;
#pragma unroll
  for (int k = 0; k < kLeanMaxPieces; ++k) mx = fmaxf(mx, lse[k]);

  const std::int64_t orow = (static_cast<std::int64_t>(r) * p.s_q + s) * p.h_q + head;
  auto* out = reinterpret_cast<uint2*>(p.out + orow * kHeadDim) + t;
  if (mx == neg_inf) {  // no partial saw a valid key
    *out = make_uint2(0u, 0u);
    if (t == 0) p.lse[orow] = __int_as_float(0x7F800000);
    return;
  }
  float sum = 0.0f;
#pragma unroll
  for (int k = 0; k < kLeanMaxPieces; ++k) sum += exp2f(lse[k] - mx);
  const float lse2 = log2f(sum) + mx;
  float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
  for (int k = 0; k < kLeanMaxPieces; ++k) {
    const float w = exp2f(lse[k] - lse2);  // 0 for an empty piece (lse -inf, o 0)
    acc.x = fmaf(w, o[k].x, acc.x);
    acc.y = fmaf(w, o[k].y, acc.y);
    acc.z = fmaf(w, o[k].z, acc.z);
    acc.w = fmaf(w, o[k].w, acc.w);
  }
  const float lse_nat = lse2 * 0.6931471805599453f;
  float factor = 1.0f;
  if (p.attn_sink != nullptr) factor = 1.0f / (1.0f + expf(__ldg(p.attn_sink + head) - lse_nat));
  const __nv_bfloat162 lo = __floats2bfloat162_rn(acc.x * factor, acc.y * factor);
  const __nv_bfloat162 hi = __floats2bfloat162_rn(acc.z * factor, acc.w * factor);
  *out = make_uint2(*reinterpret_cast<const std::uint32_t*>(&lo), *reinterpret_cast<const std::uint32_t*>(&hi));
  if (t == 0) p.lse[orow] = lse_nat;
}

}  // namespace

void launch_combine_lean(const DecodeParams& p, int pieces) {
  LaunchDims d;
  d.grid_x = static_cast<unsigned>(p.b);
  d.grid_y = static_cast<unsigned>(p.s_q);
  d.grid_z = static_cast<unsigned>(p.h_q);
  d.block = 128;
  launch_programmatic(combine_lean_kernel, d, p.stream, "combine_lean_kernel (programmatic dependent launch)", p,
                      pieces);
}

}  // namespace mlaplan::kernels::detail
