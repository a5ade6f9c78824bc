// Combine kernel: merges the bf16 partials (fp32 lse) of every split request (docs/scheduler.md,
// "What a kernel does with a record"): lse2 = log2(sum 2^(lse_k - max)) + max, weights
// 2^(lse_k - lse2), out = sum w_k o_k, then the attention sink, bf16 out and natural-log lse.
// One warp per (request, query token, head); lane l owns dims 4l + 128i (8-byte loads of 4 bf16),
// accumulated in fp32.

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "common/cuda_check.hpp"
#include "common/launchers.hpp"

namespace mlaplan::kernels::detail {
namespace {

__global__ void __launch_bounds__(128) combine_kernel(const DecodeParams p) {
  // Launched as a programmatic dependent of the decode kernel (launch_combine): the CTAs may
  // start while the decode still runs; this waits until it has finished and its writes are
  // visible.
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
  const int r = static_cast<int>(blockIdx.x);
  const int s = static_cast<int>(blockIdx.y);
  const int head = static_cast<int>(blockIdx.z) * 4 + static_cast<int>(threadIdx.x >> 5);
  const int lane = static_cast<int>(threadIdx.x) & 31;
  const int first = p.num_splits[r];
  const int n = p.num_splits[r + 1] - first;
  if (n <= 1) return;  // written directly by the decode kernel

  // The first kPre partials' rows are loaded before the weights are known (they do not depend on
  // them): their latency overlaps that of the lse loads and reductions below instead of following
  // it (docs/perf-history.md "v8"). 10 covers every split of a V4.1 decode request (at most 10 blocks).
  constexpr int kPre = 10;
  // Partial k's row: 512 bf16 (normalised by its own sum), four values (8 bytes) per load.
  struct PartialRow {
    const uint2* at;
    __device__ float4 operator[](int i) const {
      const uint2 u = __ldg(at + i);
      return make_float4(__uint_as_float(u.x << 16), __uint_as_float(u.x & 0xFFFF0000u), __uint_as_float(u.y << 16),
                         __uint_as_float(u.y & 0xFFFF0000u));
    }
  };
  auto o_row = [&](int k) {
    return PartialRow{reinterpret_cast<const uint2*>(
        p.o_accum + ((static_cast<std::int64_t>(first + k) * p.s_q + s) * p.h_q + head) * kHeadDim)};
  };
  float4 pre[kPre][4];
#pragma unroll
  for (int j = 0; j < kPre; ++j) {
#pragma unroll
    for (int i = 0; i < 4; ++i) pre[j][i] = j < n ? o_row(j)[lane + 32 * i] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  }

  const float neg_inf = -__int_as_float(0x7F800000);
  auto lse_at = [&](int k) { return p.lse_accum[(static_cast<std::int64_t>(first + k) * p.s_q + s) * p.h_q + head]; };
  float mx = neg_inf;
  for (int k = lane; k < n; k += 32) mx = fmaxf(mx, lse_at(k));
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xFFFFFFFFu, mx, off));

  const std::int64_t orow = (static_cast<std::int64_t>(r) * p.s_q + s) * p.h_q + head;
  auto* out = reinterpret_cast<std::uint32_t*>(p.out + orow * kHeadDim);
  if (mx == neg_inf) {  // no partial saw a valid key
#pragma unroll
    for (int i = 0; i < 4; ++i) *reinterpret_cast<uint2*>(out + (4 * lane + 128 * i) / 2) = make_uint2(0u, 0u);
    if (lane == 0) p.lse[orow] = __int_as_float(0x7F800000);
    return;
  }
  float sum = 0.0f;
  for (int k = lane; k < n; k += 32) sum += exp2f(lse_at(k) - mx);
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) sum += __shfl_xor_sync(0xFFFFFFFFu, sum, off);
  const float lse2 = log2f(sum) + mx;

  // Weights of 32 partials at a time live in the lanes; the loads of the partials do not depend
  // on them, so several partials are in flight at once. An empty partial has weight 0 and o = 0.
  float4 acc[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) acc[i] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  auto add = [&](int i, float w, const float4& v) {
    acc[i].x += w * v.x;
    acc[i].y += w * v.y;
    acc[i].z += w * v.z;
    acc[i].w += w * v.w;
  };
  for (int k0 = 0; k0 < n; k0 += 32) {
    const float my_w = k0 + lane < n ? exp2f(lse_at(k0 + lane) - lse2) : 0.0f;
    const int kn = min(32, n - k0);
    if (k0 == 0) {
#pragma unroll
      for (int j = 0; j < kPre; ++j) {
        const float w = __shfl_sync(0xFFFFFFFFu, my_w, j);  // 0 past n (and pre[j] is 0 there)
#pragma unroll
        for (int i = 0; i < 4; ++i) add(i, w, pre[j][i]);
      }
    }
#pragma unroll 4
    for (int j = k0 == 0 ? kPre : 0; j < kn; ++j) {
      const float w = __shfl_sync(0xFFFFFFFFu, my_w, j);
      const PartialRow o = o_row(k0 + j);
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        add(i, w, o[lane + 32 * i]);
      }
    }
  }
  const float lse = lse2 * 0.6931471805599453f;
  float factor = 1.0f;
  if (p.attn_sink != nullptr) factor = 1.0f / (1.0f + expf(p.attn_sink[head] - lse));
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const __nv_bfloat162 lo = __floats2bfloat162_rn(acc[i].x * factor, acc[i].y * factor);
    const __nv_bfloat162 hi = __floats2bfloat162_rn(acc[i].z * factor, acc[i].w * factor);
    uint2 w2;
    w2.x = *reinterpret_cast<const std::uint32_t*>(&lo);
    w2.y = *reinterpret_cast<const std::uint32_t*>(&hi);
    *reinterpret_cast<uint2*>(out + (4 * lane + 128 * i) / 2) = w2;
  }
  if (lane == 0) p.lse[orow] = lse;
}

}  // namespace

void launch_combine(const DecodeParams& p, const LaunchDims& d) {
  // Programmatic dependent launch: the combine's launch overlaps the decode kernel's tail instead
  // of following its completion; the kernel's griddepcontrol.wait keeps the data dependency.
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(d.grid_x, d.grid_y, d.grid_z);
  cfg.blockDim = dim3(d.block);
  cfg.dynamicSmemBytes = d.smem_bytes;
  cfg.stream = static_cast<cudaStream_t>(p.stream);
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  MLAPLAN_CUDA_CHECK(cudaLaunchKernelEx(&cfg, combine_kernel, p));
  MLAPLAN_CUDA_CHECK_LAUNCH("combine_kernel (programmatic dependent launch)");
}

}  // namespace mlaplan::kernels::detail
