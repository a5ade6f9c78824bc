#pragma once
// Row-split small-head sparse-MLA decode (h_q 8 / 16 unpadded, fp8_ds_mla 584 rows, alone or with
// a 584 extra cache), the split_kv path for small batches (docs/kernels.md "The row-split
// small-head kernel").
//
// At b <= 8 a decode step is a chain of dependent latencies, not a stream of bytes: a request's
// 640 rows fill ten 64-row blocks, so the block-granular kernels keep at most ten CTAs busy per
// request, each running the whole per-block pipeline (record, length, ids, rows, MMA, epilogue)
// once. This kernel cuts each request into `pieces` (gridDim.x, chosen on the host so that the
// fp32 partials fit the caller's o_accum) contiguous ranges of index positions and gives each
// range one CTA of 256 threads with no pipeline to fill:
//   1. the range's indices (positions past the request's length or ids outside the cache become
//      -1), then every valid row's 576 data bytes and 8 scale bytes copied into shared memory at
//      once (cp.async, all in flight), 64 rows per chunk;
//   2. scores: one warp per (row, group of 8 heads); lane l owns dims 16l .. 16l + 15 (lanes 0-27
//      the e4m3 NoPE bytes, times their UE8M0 scale; lanes 28-31 the bf16 RoPE), Q of its 8 heads
//      in registers (fp32), 128 FMAs, then one reduce-scatter of the 8 sums over the warp (9
//      shuffles) leaves head l / 4 in lanes 4k .. 4k + 3;
//   3. the online softmax per head over the chunk (one warp per head, log2 domain), P in place;
//   4. O += P V in fp32 FMAs: thread t owns output dims 2t, 2t + 1 of every head (V = the row's
//      512 dims).
// The partial, normalised by its own sum, and its log2 lse go to o_accum / lse_accum at
// (request * pieces + piece); combine_lean.cu merges the pieces of every request (all of them at
// once, at most kLeanMaxPieces), applies the sink and writes bf16 out and the natural-log lse.

#include "common/decode_device.cuh"

namespace mlaplan::kernels::detail {

template <bool kHasExtra, int kHeads>
__global__ void __launch_bounds__(LeanGeometry::kThreads) small_decode_lean_kernel(const DecodeParams p) {
  using L = LeanGeometry;
  static_assert(kHeads == 8 || kHeads == 16, "8 or 16 heads");
  constexpr int kGroups = kHeads / 8;  // groups of 8 heads; a warp works on one
  constexpr int kRowStep = L::kWarps / kGroups;
  extern __shared__ __align__(16) std::uint8_t smem[];
  std::uint8_t* raw = smem + L::raw;
  float* sc = reinterpret_cast<float*>(smem + L::scores);  // [kChunk][kHeads]: scores, then P
  int* ids = reinterpret_cast<int*>(smem + L::ids);
  float* s_m = reinterpret_cast<float*>(smem + L::stats);  // running maximum per head (log2 domain)
  float* s_l = s_m + L::kMaxHeads;                         // running sum per head
  float* s_a = s_l + L::kMaxHeads;                         // this chunk's rescale of O per head

  const int tid = static_cast<int>(threadIdx.x);
  const int warp = tid >> 5;
  const int lane = tid & 31;
  const int piece = static_cast<int>(blockIdx.x);
  const int pieces = static_cast<int>(gridDim.x);
  const int s = static_cast<int>(blockIdx.y);
  const int r = static_cast<int>(blockIdx.z);
  const std::int64_t bs = static_cast<std::int64_t>(r) * p.s_q + s;
  const float scale_log2 = p.softmax_scale * 1.4426950408889634f;
  const float kNegInf = -__int_as_float(0x7F800000);
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
  grid_dependency_wait();

  // This CTA's positions [pos0, pos1) of the request's list (main positions, then extra ones).
  const int n_total = p.topk + (kHasExtra ? p.extra_topk : 0);
  const int per = (n_total + pieces - 1) / pieces;
  const int pos0 = min(piece * per, n_total);
  const int pos1 = min(pos0 + per, n_total);
  const int len = min(p.topk_length != nullptr ? p.topk_length[r] : p.topk, p.topk);
  int elen = 0;
  if constexpr (kHasExtra)
    elen = min(p.extra_topk_length != nullptr ? p.extra_topk_length[r] : p.extra_topk, p.extra_topk);

  // Q of this warp's 8 heads, dims 16 lane .. + 15, in fp32 (exact from bf16).
  const int g = kGroups == 1 ? 0 : (warp & 1);
  float qf[8][16];
#pragma unroll
  for (int h = 0; h < 8; ++h) {
    const uint4* src = reinterpret_cast<const uint4*>(p.q + (bs * p.h_q + 8 * g + h) * 512 + 16 * lane);
    const uint4 a = __ldg(src);
    const uint4 b = __ldg(src + 1);
    const std::uint32_t w[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      qf[h][2 * i] = bf16_bits_to_float(w[i] & 0xFFFFu);
      qf[h][2 * i + 1] = bf16_bits_to_float(w[i] >> 16);
    }
  }
  // Kept in registers: without this ptxas re-loads Q from global memory for every row (it fitted
  // the kernel in 124 registers by treating the read-only loads as free to repeat, and the first
  // build ran 2-4x slower than planned: docs/perf-history.md "v22").
#pragma unroll
  for (int h = 0; h < 8; ++h) {
#pragma unroll
    for (int i = 0; i < 16; ++i) asm volatile("" : "+f"(qf[h][i]));
  }

  float acc[kHeads][2];
#pragma unroll
  for (int h = 0; h < kHeads; ++h) acc[h][0] = acc[h][1] = 0.0f;
  if (tid < kHeads) {
    s_m[tid] = kNegInf;
    s_l[tid] = 0.0f;
  }
  const int d0 = 2 * tid;  // this thread's output dims d0, d0 + 1
  const std::int64_t main_rows = p.main.num_pages * p.main.page_block_size;
  const std::int64_t extra_rows = kHasExtra ? p.extra.num_pages * p.extra.page_block_size : 0;
  __syncthreads();

  for (int c0 = pos0; c0 < pos1; c0 += L::kChunk) {
    const int nrows = min(L::kChunk, pos1 - c0);
    // 1. The chunk's ids (the index is loaded whatever the length, so both loads are in flight
    // together), then its rows into shared memory.
    if (tid < L::kChunk) {
      int id = -1;
      if (tid < nrows) {
        const int pos = c0 + tid;
        if (!kHasExtra || pos < p.topk) {
          const int v = __ldg(p.indices + bs * p.topk + pos);
          id = pos < len && v >= 0 && v < main_rows ? v : -1;
        } else {
          const int j = pos - p.topk;
          const int v = __ldg(p.extra_indices + bs * p.extra_topk + j);
          id = j < elen && v >= 0 && v < extra_rows ? v : -1;
        }
      }
      ids[tid] = id;
    }
    __syncthreads();
    for (int i = tid; i < nrows * L::kUnits; i += L::kThreads) {
      const int row = i / L::kUnits;
      const int u = i - row * L::kUnits;
      const int id = ids[row];
      std::uint8_t* dst = raw + row * L::kRowStride;
      if (id < 0) {  // zeros, so that P V needs no test (its P is 0)
        if (u < L::kUnits - 1) *reinterpret_cast<uint4*>(dst + 16 * u) = make_uint4(0u, 0u, 0u, 0u);
        else *reinterpret_cast<uint2*>(dst + 576) = make_uint2(0u, 0u);
        continue;
      }
      const bool extra = kHasExtra && c0 + row >= p.topk;
      const std::uint8_t* data = extra ? p.extra.data : p.main.data;
      const std::int64_t pbs = extra ? p.extra.page_block_size : p.main.page_block_size;
      const std::int64_t stride = extra ? p.extra.page_stride_bytes : p.main.page_stride_bytes;
      const std::int64_t page = id / pbs;
      const std::int64_t t = id - page * pbs;
      const std::uint8_t* base = data + page * stride;
      if (u < L::kUnits - 1) {
        cp_async_16(dst + 16 * u, base + t * 576 + 16 * u);
      } else {
        cp_async_8(dst + 576, base + pbs * 576 + t * 8);
      }
    }
    cp_async_commit();
    cp_async_wait_all();
    __syncthreads();

    // 2. Scores, log2 domain: a warp per (row, head group).
    for (int row = warp / kGroups; row < nrows; row += kRowStep) {
      const int id = ids[row];
#ifdef MLAPLAN_LEAN_NO_MATH  // timing experiment only: the chain without the FMAs (wrong results)
      if ((lane & 3) == 0) sc[row * kHeads + 8 * g + (lane >> 2)] = id < 0 ? kNegInf : 0.0f;
      continue;
#endif
      if (id < 0) {
        if ((lane & 3) == 0) sc[row * kHeads + 8 * g + (lane >> 2)] = kNegInf;
        continue;
      }
      const std::uint8_t* rw = raw + row * L::kRowStride;
      float k[16];
      if (lane < 28) {
        const uint4 x = *reinterpret_cast<const uint4*>(rw + 16 * lane);
        uint4 lo, hi;
        e4m3x16_to_bf16(x, ue8m0_to_float(rw[576 + (lane >> 2)]), lo, hi);
        const std::uint32_t w[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
#pragma unroll
        for (int i = 0; i < 8; ++i) {
          k[2 * i] = bf16_bits_to_float(w[i] & 0xFFFFu);
          k[2 * i + 1] = bf16_bits_to_float(w[i] >> 16);
        }
      } else {
        const uint4* y = reinterpret_cast<const uint4*>(rw + 448 + 32 * (lane - 28));
        const uint4 a = y[0];
        const uint4 b = y[1];
        const std::uint32_t w[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
#pragma unroll
        for (int i = 0; i < 8; ++i) {
          k[2 * i] = bf16_bits_to_float(w[i] & 0xFFFFu);
          k[2 * i + 1] = bf16_bits_to_float(w[i] >> 16);
        }
      }
      float part[8];
#pragma unroll
      for (int h = 0; h < 8; ++h) {
        float a = 0.0f;
#pragma unroll
        for (int i = 0; i < 16; ++i) a = fmaf(qf[h][i], k[i], a);
        part[h] = a;
      }
      // Reduce-scatter over the warp: after the xor-16, -8 and -4 steps lane l holds head l / 4
      // summed over the lanes that differ in bits 4..2; xor 2 and 1 finish the sum.
      const bool b4 = (lane & 16) != 0;
      float t4[4];
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const float send = b4 ? part[j] : part[j + 4];
        t4[j] = (b4 ? part[j + 4] : part[j]) + __shfl_xor_sync(0xFFFFFFFFu, send, 16);
      }
      const bool b3 = (lane & 8) != 0;
      float t2[2];
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        const float send = b3 ? t4[j] : t4[j + 2];
        t2[j] = (b3 ? t4[j + 2] : t4[j]) + __shfl_xor_sync(0xFFFFFFFFu, send, 8);
      }
      const bool b2 = (lane & 4) != 0;
      float t1 = (b2 ? t2[1] : t2[0]) + __shfl_xor_sync(0xFFFFFFFFu, b2 ? t2[0] : t2[1], 4);
      t1 += __shfl_xor_sync(0xFFFFFFFFu, t1, 2);
      t1 += __shfl_xor_sync(0xFFFFFFFFu, t1, 1);
      if ((lane & 3) == 0) sc[row * kHeads + 8 * g + (lane >> 2)] = t1 * scale_log2;
    }
    __syncthreads();

    // 3. Online softmax per head over the chunk's rows (at most 64: two per lane); P in place.
    for (int h = warp; h < kHeads; h += L::kWarps) {
      const float v0 = lane < nrows ? sc[lane * kHeads + h] : kNegInf;
      const float v1 = lane + 32 < nrows ? sc[(lane + 32) * kHeads + h] : kNegInf;
      float cm = fmaxf(v0, v1);
#pragma unroll
      for (int off = 16; off > 0; off >>= 1) cm = fmaxf(cm, __shfl_xor_sync(0xFFFFFFFFu, cm, off));
      const float m_old = s_m[h];
      const float m_new = fmaxf(m_old, cm);
      float p0 = 0.0f, p1 = 0.0f, alpha = 1.0f;
      if (m_new != kNegInf) {
        p0 = exp2f(v0 - m_new);
        p1 = exp2f(v1 - m_new);
        alpha = exp2f(m_old - m_new);
      }
      if (lane < nrows) sc[lane * kHeads + h] = p0;
      if (lane + 32 < nrows) sc[(lane + 32) * kHeads + h] = p1;
      float sum = p0 + p1;
#pragma unroll
      for (int off = 16; off > 0; off >>= 1) sum += __shfl_xor_sync(0xFFFFFFFFu, sum, off);
      __syncwarp();  // every lane's read of s_m[h] before lane 0 rewrites it (racecheck's warp-level WAR)
      if (lane == 0) {
        s_l[h] = s_l[h] * alpha + sum;
        s_m[h] = m_new;
        s_a[h] = alpha;
      }
    }
    __syncthreads();

    // 4. O = O * alpha + P V over the chunk's rows (an invalid row is zeros with P 0).
#pragma unroll
    for (int h = 0; h < kHeads; ++h) {
      const float a = s_a[h];
      acc[h][0] *= a;
      acc[h][1] *= a;
    }
#ifdef MLAPLAN_LEAN_NO_MATH
    if (nrows > 0) continue;
#endif
#pragma unroll 4
    for (int row = 0; row < nrows; ++row) {
      const std::uint8_t* rw = raw + row * L::kRowStride;
      std::uint32_t two;
      if (d0 < 448) {
        two = e4m3x2_to_bf16x2(*reinterpret_cast<const std::uint16_t*>(rw + d0), ue8m0_to_float(rw[576 + (d0 >> 6)]));
      } else {
        two = *reinterpret_cast<const std::uint32_t*>(rw + 448 + 2 * (d0 - 448));
      }
      const float v0 = bf16_bits_to_float(two & 0xFFFFu);
      const float v1 = bf16_bits_to_float(two >> 16);
      const float4* pr = reinterpret_cast<const float4*>(sc + row * kHeads);
#pragma unroll
      for (int q4 = 0; q4 < kHeads / 4; ++q4) {
        const float4 pv = pr[q4];
        acc[4 * q4 + 0][0] = fmaf(pv.x, v0, acc[4 * q4 + 0][0]);
        acc[4 * q4 + 0][1] = fmaf(pv.x, v1, acc[4 * q4 + 0][1]);
        acc[4 * q4 + 1][0] = fmaf(pv.y, v0, acc[4 * q4 + 1][0]);
        acc[4 * q4 + 1][1] = fmaf(pv.y, v1, acc[4 * q4 + 1][1]);
        acc[4 * q4 + 2][0] = fmaf(pv.z, v0, acc[4 * q4 + 2][0]);
        acc[4 * q4 + 2][1] = fmaf(pv.z, v1, acc[4 * q4 + 2][1]);
        acc[4 * q4 + 3][0] = fmaf(pv.w, v0, acc[4 * q4 + 3][0]);
        acc[4 * q4 + 3][1] = fmaf(pv.w, v1, acc[4 * q4 + 3][1]);
      }
    }
    __syncthreads();  // the next chunk overwrites ids, rows and P
  }

  // The partial (normalised by its own sum; zeros and lse -inf when no row was valid).
  const std::int64_t prow = (static_cast<std::int64_t>(r) * pieces + piece) * p.s_q + s;
#pragma unroll
  for (int h = 0; h < kHeads; ++h) {
    const float l = s_l[h];
    const float inv = l > 0.0f ? 1.0f / l : 0.0f;
    *reinterpret_cast<float2*>(p.o_accum + (prow * p.h_q + h) * 512 + d0) =
        make_float2(acc[h][0] * inv, acc[h][1] * inv);
  }
  if (tid < kHeads) p.lse_accum[prow * p.h_q + tid] = partial_lse(s_l[tid], s_m[tid]);
}

template <bool kHasExtra, int kHeads>
void launch_small_decode_lean(const DecodeParams& p, const DecodeLaunch& launch) {
  launch_decode_grid(&small_decode_lean_kernel<kHasExtra, kHeads>, p, launch, "small_decode_lean_kernel<<<...>>>");
}

}  // namespace mlaplan::kernels::detail
