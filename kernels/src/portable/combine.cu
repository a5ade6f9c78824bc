// Combine kernel: merges the fp32 partials (fp32 lse) of every split request (docs/scheduler.md,
// "What a kernel does with a record"): lse2 = log2(sum 2^(lse_k - max)) + max, weights
// 2^(lse_k - lse2), out = sum w_k o_k, then the attention sink, bf16 out and natural-log lse.
// One warp per (request, query token, head); lane l owns dims 4l + 128i, i = 0..3 (16-byte loads
// of 4 floats, each warp access 512 contiguous bytes; 8-byte stores of 4 bf16), accumulated in fp32.

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "common/cuda_check.hpp"
#include "common/decode_device.cuh"
#include "common/launchers.hpp"

namespace mlaplan::kernels::detail {
namespace {

// ptxas (CUDA 13.0): 94 (sm_90a) / 96 (sm_100a) registers, no spills: 3,072 per warp, so the 5
// CTAs per SM that the 40 KiB of staged rows allow (below) also fit the register file.
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
  // instead of following it (docs/perf-history.md "v8"). Staged in shared memory (cp.async), not
  // registers: the kernel is a chain of dependent loads, and with the rows in registers (223 of
  // them) only 8 warps fit an SM to wait on it (docs/perf-history.md "v10").
  // Why 5: a partial row is 2 KiB of fp32. With bf16 partials kPre was 10 (every split of a V4.1
  // request, at most 10 blocks): 10 KiB per warp, 40 KiB per CTA of 4 warps, 5 CTAs (20 warps) per
  // SM, bound by shared memory (v10). 10 fp32 rows would take 80 KiB per CTA (dynamic shared memory
  // through cudaFuncSetAttribute, past the 48 KiB static limit): 2 CTAs, 8 warps per SM, the
  // occupancy v10 left behind, for batches whose requests mostly have 1 to 3 partials. 5 fp32 rows
  // keep 40 KiB per CTA, 20 warps per SM and the same 10 KiB per warp in flight before the weights;
  // a request with more partials (V4.1 on 132 SMs: b up to about 24 at h_q 64, 12 at h_q 128, at
  // most about 3 CTAs per SM, where occupancy does not bind) loads the rest after its weights, four
  // rows in flight (the loop below).
  constexpr int kPre = 5;
  constexpr int kChunks = kHeadDim / 4;        // 16-byte chunks of a row: 128
  __shared__ float4 staged[4][kPre][kChunks];  // [warp][partial][chunk]: 40 KiB
  static_assert(sizeof(staged) == 40 * 1024, "5 CTAs of 4 warps per SM (228 KiB)");
  // Partial k's row: 512 fp32 (normalised by its own sum). Lane l holds chunks l + 32i (dims
  // 4l + 128i .. + 3): four 16-byte chunks, each warp access 512 contiguous bytes. A lane reads back
  // only the chunks it copied, so its own cp.async wait orders them.
  auto o_row = [&](int k) {
    return reinterpret_cast<const float4*>(
        p.o_accum + ((static_cast<std::int64_t>(first + k) * p.s_q + s) * p.h_q + head) * kHeadDim);
  };
  float4(&mine)[kPre][kChunks] = staged[threadIdx.x >> 5];
  const int pre_n = min(n, kPre);
  for (int j = 0; j < pre_n; ++j) {
#pragma unroll
    for (int i = 0; i < 4; ++i) cp_async_16(&mine[j][lane + 32 * i], o_row(j) + lane + 32 * i);
  }
  cp_async_commit();

  float mx = lse0;
  for (int k = lane + 32; k < n; k += 32) mx = fmaxf(mx, lse_at(k));
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xFFFFFFFFu, mx, off));

  const std::int64_t orow = (static_cast<std::int64_t>(r) * p.s_q + s) * p.h_q + head;
  // Dims 4 (lane + 32i) .. + 3 of the bf16 row: 8 bytes, each warp store 256 contiguous bytes.
  auto* out = reinterpret_cast<uint2*>(p.out + orow * kHeadDim);
  if (mx == neg_inf) {  // no partial saw a valid key
#pragma unroll
    for (int i = 0; i < 4; ++i) out[lane + 32 * i] = make_uint2(0u, 0u);
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
    const float my_w = k0 + lane < n ? exp2f((k0 == 0 ? lse0 : lse_at(k0 + lane)) - lse2) : 0.0f;
    const int kn = min(32, n - k0);
    if (k0 == 0) {
      cp_async_wait_all();
      for (int j = 0; j < pre_n; ++j) {
        const float w = __shfl_sync(0xFFFFFFFFu, my_w, j);
#pragma unroll
        for (int i = 0; i < 4; ++i) add(i, w, mine[j][lane + 32 * i]);
      }
    }
#pragma unroll 4
    for (int j = k0 == 0 ? pre_n : 0; j < kn; ++j) {
      const float w = __shfl_sync(0xFFFFFFFFu, my_w, j);
      const float4* o = o_row(k0 + j);
#pragma unroll
      for (int i = 0; i < 4; ++i) add(i, w, __ldg(o + lane + 32 * i));
    }
  }
  const float lse = lse2 * 0.6931471805599453f;
  float factor = 1.0f;
  if (p.attn_sink != nullptr) factor = 1.0f / (1.0f + expf(p.attn_sink[head] - lse));
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const __nv_bfloat162 lo = __floats2bfloat162_rn(acc[i].x * factor, acc[i].y * factor);
    const __nv_bfloat162 hi = __floats2bfloat162_rn(acc[i].z * factor, acc[i].w * factor);
    out[lane + 32 * i] =
        make_uint2(*reinterpret_cast<const std::uint32_t*>(&lo), *reinterpret_cast<const std::uint32_t*>(&hi));
  }
  if (lane == 0) p.lse[orow] = lse;
}

}  // namespace

void launch_combine(const DecodeParams& p, const LaunchDims& d) {
  launch_programmatic(combine_kernel, d, p.stream, "combine_kernel (programmatic dependent launch)", p);
}

}  // namespace mlaplan::kernels::detail
