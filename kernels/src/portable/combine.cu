// Combine kernel: merges the bf16 partials (fp32 lse) of every split request (docs/scheduler.md,
// "What a kernel does with a record"): lse2 = log2(sum 2^(lse_k - max)) + max, weights
// 2^(lse_k - lse2), out = sum w_k o_k, then the attention sink, bf16 out and natural-log lse.
// One warp per (request, query token, head); lane l owns dims 8l .. 8l + 7 and 256 + 8l .. 256 + 8l + 7
// (16-byte loads of 8 bf16), accumulated in fp32.

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "common/cuda_check.hpp"
#include "common/decode_device.cuh"
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

  const float neg_inf = -__int_as_float(0x7F800000);
  auto lse_at = [&](int k) { return p.lse_accum[(static_cast<std::int64_t>(first + k) * p.s_q + s) * p.h_q + head]; };
  // The first 32 partials' lse (every split of a V4.1 request) loaded once, kept in the lanes.
  const float lse0 = lane < n ? lse_at(lane) : neg_inf;

  // The first kPre partials' rows are copied into shared memory before the weights are known
  // (they do not depend on them): their latency overlaps that of the lse loads and reductions below
  // instead of following it (docs/perf-history.md "v8"). 10 covers every split of a V4.1 decode
  // request (at most 10 blocks). Staged in shared memory (cp.async), not registers: the kernel is a
  // chain of dependent loads, and with the rows in registers (223 of them) only 8 warps fit an SM
  // to wait on it (docs/perf-history.md "v10").
  constexpr int kPre = 10;
  __shared__ uint4 staged[4][kPre][64];  // [warp][partial][16-byte chunk of the row]: 40 KiB
  // Partial k's row: 512 bf16 (normalised by its own sum). Lane l holds dims 8l .. 8l + 7 and
  // 256 + 8l .. 256 + 8l + 7: two 16-byte chunks, each warp access 512 contiguous bytes. A lane
  // reads back only the chunks it copied, so its own cp.async wait orders them.
  auto o_row = [&](int k) {
    return reinterpret_cast<const uint4*>(
        p.o_accum + ((static_cast<std::int64_t>(first + k) * p.s_q + s) * p.h_q + head) * kHeadDim);
  };
  uint4(&mine)[kPre][64] = staged[threadIdx.x >> 5];
  const int pre_n = min(n, kPre);
  for (int j = 0; j < pre_n; ++j) {
    cp_async_16(&mine[j][lane], o_row(j) + lane);
    cp_async_16(&mine[j][lane + 32], o_row(j) + lane + 32);
  }
  cp_async_commit();

  float mx = lse0;
  for (int k = lane + 32; k < n; k += 32) mx = fmaxf(mx, lse_at(k));
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xFFFFFFFFu, mx, off));

  const std::int64_t orow = (static_cast<std::int64_t>(r) * p.s_q + s) * p.h_q + head;
  auto* out = reinterpret_cast<std::uint32_t*>(p.out + orow * kHeadDim);
  if (mx == neg_inf) {  // no partial saw a valid key
#pragma unroll
    for (int i = 0; i < 2; ++i) *reinterpret_cast<uint4*>(out + (8 * lane + 256 * i) / 2) = make_uint4(0u, 0u, 0u, 0u);
    if (lane == 0) p.lse[orow] = __int_as_float(0x7F800000);
    cp_async_wait_all();  // nothing in flight into shared memory when the CTA exits
    return;
  }
  float sum = lane < n ? exp2f(lse0 - mx) : 0.0f;
  for (int k = lane + 32; k < n; k += 32) sum += exp2f(lse_at(k) - mx);
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) sum += __shfl_xor_sync(0xFFFFFFFFu, sum, off);
  const float lse2 = log2f(sum) + mx;

  // Weights of 32 partials at a time live in the lanes; the loads of the partials do not depend
  // on them, so several partials are in flight at once. An empty partial has weight 0 and o = 0.
  float acc[2][8];
#pragma unroll
  for (int i = 0; i < 2; ++i) {
#pragma unroll
    for (int e = 0; e < 8; ++e) acc[i][e] = 0.0f;
  }
  auto add = [&](int i, float w, const uint4& v) {
    const std::uint32_t u[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      acc[i][2 * e] += w * __uint_as_float(u[e] << 16);
      acc[i][2 * e + 1] += w * __uint_as_float(u[e] & 0xFFFF0000u);
    }
  };
  for (int k0 = 0; k0 < n; k0 += 32) {
    const float my_w = k0 + lane < n ? exp2f((k0 == 0 ? lse0 : lse_at(k0 + lane)) - lse2) : 0.0f;
    const int kn = min(32, n - k0);
    if (k0 == 0) {
      cp_async_wait_all();
      for (int j = 0; j < pre_n; ++j) {
        const float w = __shfl_sync(0xFFFFFFFFu, my_w, j);
#pragma unroll
        for (int i = 0; i < 2; ++i) add(i, w, mine[j][lane + 32 * i]);
      }
    }
#pragma unroll 4
    for (int j = k0 == 0 ? pre_n : 0; j < kn; ++j) {
      const float w = __shfl_sync(0xFFFFFFFFu, my_w, j);
      const uint4* o = o_row(k0 + j);
#pragma unroll
      for (int i = 0; i < 2; ++i) add(i, w, __ldg(o + lane + 32 * i));
    }
  }
  const float lse = lse2 * 0.6931471805599453f;
  float factor = 1.0f;
  if (p.attn_sink != nullptr) factor = 1.0f / (1.0f + expf(p.attn_sink[head] - lse));
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    std::uint32_t w4[4];
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const __nv_bfloat162 v = __floats2bfloat162_rn(acc[i][2 * e] * factor, acc[i][2 * e + 1] * factor);
      w4[e] = *reinterpret_cast<const std::uint32_t*>(&v);
    }
    *reinterpret_cast<uint4*>(out + (8 * lane + 256 * i) / 2) = make_uint4(w4[0], w4[1], w4[2], w4[3]);
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
