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
// range one CTA of 256 threads (at most 128 registers a thread and ~97 KiB of shared memory: two
// CTAs an SM), 64 positions (a chunk) at a time through two stages:
//   1. the chunk's indices (positions past the request's length or ids outside the cache become
//      -1), each valid row's source addresses computed once with its id, then the row's 576 data
//      bytes and 8 scale bytes copied into its stage (cp.async, all in flight); chunk k + 1's rows
//      are copied while chunk k is computed and chunk k + 2's indices load meanwhile; Q's rows
//      come in with the first chunk;
//   2. S = Q K^T on tensor cores (mma.sync m16n8k16, bf16 in, fp32 out): warp w takes the chunk's
//      rows 8w .. 8w + 7 as the N side, the heads as the M side (rows 8..15 of A zero at h_q 8);
//      Q's A fragments read from shared memory by ldmatrix per k-step, K's B fragments made
//      straight from the staged bytes (an e4m3 pair times its row's UE8M0 scale is one bf16x2;
//      the RoPE is bf16);
//   3. the online softmax per head over the chunk (one warp per head, log2 domain), P in place;
//   4. O += P V on tensor cores: warp w owns output dims 64w .. 64w + 63 (8 n8 tiles); A is P in
//      bf16 (rows past the chunk 0), B gathers each dim from four rows' staged bytes (V = the row's
//      512 dims).
// The partial, normalised by its own sum, and its log2 lse go to o_accum / lse_accum at
// (request * pieces + piece); combine_lean.cu merges the pieces of every request (all of them at
// once, at most kLeanMaxPieces), applies the sink and writes bf16 out and the natural-log lse.

#include "common/decode_device.cuh"

namespace mlaplan::kernels::detail {

template <bool kHasExtra, int kHeads>
__global__ void __launch_bounds__(LeanGeometry::kThreads, 2) small_decode_lean_kernel(const DecodeParams p) {
  using L = LeanGeometry;
  static_assert(kHeads == 8 || kHeads == 16, "8 or 16 heads");
  extern __shared__ __align__(16) std::uint8_t smem[];
  float* sc = reinterpret_cast<float*>(smem + L::scores);  // [kChunk][kHeads]: scores, then P
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

  // This CTA's positions [pos0, pos1) of the request's list (main positions, then extra ones), in
  // chunks of kChunk: chunk k is [pos0 + kChunk k, min(pos0 + kChunk (k + 1), pos1)).
  const int n_total = p.topk + (kHasExtra ? p.extra_topk : 0);
  const int per = (n_total + pieces - 1) / pieces;
  const int pos0 = min(piece * per, n_total);
  const int pos1 = min(pos0 + per, n_total);
  const int n_chunks = (pos1 - pos0 + L::kChunk - 1) / L::kChunk;
  const int len = min(p.topk_length != nullptr ? p.topk_length[r] : p.topk, p.topk);
  int elen = 0;
  if constexpr (kHasExtra)
    elen = min(p.extra_topk_length != nullptr ? p.extra_topk_length[r] : p.extra_topk, p.extra_topk);
  const std::int64_t main_rows = p.main.num_pages * p.main.page_block_size;
  const std::int64_t extra_rows = kHasExtra ? p.extra.num_pages * p.extra.page_block_size : 0;

  // The index value of this thread's position in chunk k (threads < kChunk), -1 where there is no
  // position or it is past its list's length: a load only, so that its latency overlaps other work
  // until publish() uses it.
  auto fetch = [&](int k) {
    const int pos = pos0 + k * L::kChunk + tid;
    if (tid >= L::kChunk || k >= n_chunks || pos >= pos1) return -1;
    if (!kHasExtra || pos < p.topk) return pos < len ? __ldg(p.indices + bs * p.topk + pos) : -1;
    const int j = pos - p.topk;
    return j < elen ? __ldg(p.extra_indices + bs * p.extra_topk + j) : -1;
  };
  // Chunk k's id (-1: invalid) and its row's data and scale addresses into stage k % kStages.
  auto publish = [&](int k, int v) {
    if (tid >= L::kChunk) return;
    const int st = k % L::kStages;
    const int pos = pos0 + k * L::kChunk + tid;
    const bool extra = kHasExtra && pos >= p.topk;
    const int id = v >= 0 && v < (extra ? extra_rows : main_rows) ? v : -1;
    reinterpret_cast<int*>(smem + L::ids)[st * L::kChunk + tid] = id;
    if (id >= 0) {
      const CacheView& pool = extra ? p.extra : p.main;
      const std::int64_t page = id / pool.page_block_size;
      const std::int64_t t = id - page * pool.page_block_size;
      const std::uint8_t* base = pool.data + page * pool.page_stride_bytes;
      reinterpret_cast<const std::uint8_t**>(smem + L::src)[st * L::kChunk + tid] = base + t * 576;
      reinterpret_cast<const std::uint8_t**>(smem + L::scl)[st * L::kChunk + tid] =
          base + pool.page_block_size * 576 + t * 8;
    }
  };
  // Chunk k's rows into stage k % kStages (cp.async, one commit group); invalid rows as zeros, so
  // that P V needs no test (their P is 0).
  auto stage = [&](int k) {
    const int st = k % L::kStages;
    const int nrows = min(L::kChunk, pos1 - pos0 - k * L::kChunk);
    const int* ids = reinterpret_cast<const int*>(smem + L::ids) + st * L::kChunk;
    const std::uint8_t* const* src = reinterpret_cast<const std::uint8_t* const*>(smem + L::src) + st * L::kChunk;
    const std::uint8_t* const* scl = reinterpret_cast<const std::uint8_t* const*>(smem + L::scl) + st * L::kChunk;
    std::uint8_t* raw = smem + L::raw + st * L::kChunk * L::kRowStride;
    for (int i = tid; i < nrows * L::kUnits; i += L::kThreads) {
      const int row = i / L::kUnits;
      const int u = i - row * L::kUnits;
      std::uint8_t* dst = raw + row * L::kRowStride;
      if (ids[row] < 0) {
        if (u < L::kUnits - 1) *reinterpret_cast<uint4*>(dst + 16 * u) = make_uint4(0u, 0u, 0u, 0u);
        else *reinterpret_cast<uint2*>(dst + 576) = make_uint2(0u, 0u);
      } else if (u < L::kUnits - 1) {
        cp_async_16(dst + 16 * u, src[row] + 16 * u);
      } else {
        cp_async_8(dst + 576, scl[row]);
      }
    }
  };

  // Q's rows into shared memory in the first chunk's commit group; the MMAs read its A fragments
  // with ldmatrix (rows 8..15 zero at h_q 8).
  {
    std::uint8_t* sq = smem + L::q;
    const std::uint8_t* gq = reinterpret_cast<const std::uint8_t*>(p.q + bs * p.h_q * 512);
    for (int i = tid; i < kHeads * 64; i += L::kThreads)
      cp_async_16(sq + (i >> 6) * L::kQStride + 16 * (i & 63), gq + 16 * i);
  }
  const int g = lane >> 2;
  const int t = lane & 3;
  // ldmatrix x4 address of this lane for k-step 0: matrices (heads 0-7 | 8-15) x (dims 0-7 | 8-15).
  const std::uint8_t* q_lane = smem + L::q + ((lane & 7) + 8 * ((lane >> 3) & 1)) * L::kQStride + 16 * (lane >> 4);

  // O: n8 tile j of this warp's 64 dims: [0] / [1] head g, dims 64w + 8j + 2t (+1); [2] / [3] head g + 8.
  float acc[8][4];
#pragma unroll
  for (int j = 0; j < 8; ++j) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.0f;
  if (tid < kHeads) {
    s_m[tid] = kNegInf;
    s_l[tid] = 0.0f;
  }

  // Prologue: the first two chunks' indices in flight together; chunk 0's rows (and Q) copied.
  const int v0 = fetch(0);
  int pending = fetch(1);
  publish(0, v0);
  __syncthreads();
  stage(0);
  cp_async_commit();

  for (int k = 0; k < n_chunks; ++k) {
    const int st = k % L::kStages;
    const int nrows = min(L::kChunk, pos1 - pos0 - k * L::kChunk);
    const int* ids = reinterpret_cast<const int*>(smem + L::ids) + st * L::kChunk;
    const std::uint8_t* raw = smem + L::raw + st * L::kChunk * L::kRowStride;
    // Chunk k + 1's rows in flight while chunk k is computed; chunk k + 2's indices loading.
    if (k + 1 < n_chunks) {
      publish(k + 1, pending);
      __syncthreads();
      stage(k + 1);
      cp_async_commit();
      pending = fetch(k + 2);
      asm volatile("cp.async.wait_group 1;\n" ::: "memory");
    } else {
      cp_async_wait_all();
    }
    __syncthreads();

    // 1. S = Q K^T, log2 domain: warp w, rows 8w .. 8w + 7; this lane's B row is 8w + g. Two
    // accumulators (even and odd k-steps) halve the chain of dependent MMAs.
    if (warp * 8 < nrows) {
      const std::uint8_t* rw = raw + (warp * 8 + g) * L::kRowStride;
      float ce[4] = {0.0f, 0.0f, 0.0f, 0.0f};
      float co[4] = {0.0f, 0.0f, 0.0f, 0.0f};
      auto qfrag = [&](int ks, std::uint32_t(&a)[4]) {
        ldmatrix_x4(a, q_lane + 32 * ks);
        if constexpr (kHeads == 8) a[1] = a[3] = 0u;
      };
#pragma unroll
      for (int ks = 0; ks < 28; ++ks) {  // e4m3 dims 0..447, scale byte ks / 4
        std::uint32_t a[4];
        qfrag(ks, a);
        const float sc8 = ue8m0_to_float(rw[576 + (ks >> 2)]);
        const std::uint32_t b0 = e4m3x2_to_bf16x2(*reinterpret_cast<const std::uint16_t*>(rw + 16 * ks + 2 * t), sc8);
        const std::uint32_t b1 =
            e4m3x2_to_bf16x2(*reinterpret_cast<const std::uint16_t*>(rw + 16 * ks + 8 + 2 * t), sc8);
        mma_bf16_16816((ks & 1) ? co : ce, a, b0, b1);
      }
#pragma unroll
      for (int ks = 28; ks < 32; ++ks) {  // bf16 RoPE dims 448..511 at bytes 448 + 2 (dim - 448)
        std::uint32_t a[4];
        qfrag(ks, a);
        const std::uint8_t* rope = rw + 448 + 2 * (16 * (ks - 28) + 2 * t);
        mma_bf16_16816((ks & 1) ? co : ce, a, *reinterpret_cast<const std::uint32_t*>(rope),
                       *reinterpret_cast<const std::uint32_t*>(rope + 16));
      }
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        const int row = warp * 8 + 2 * t + j;
        if (row < nrows) {
          const bool ok = ids[row] >= 0;
          sc[row * kHeads + g] = ok ? (ce[j] + co[j]) * scale_log2 : kNegInf;
          if constexpr (kHeads == 16) sc[row * kHeads + g + 8] = ok ? (ce[2 + j] + co[2 + j]) * scale_log2 : kNegInf;
        }
      }
    }
    __syncthreads();

    // 2. Online softmax per head over the chunk's rows (at most 64: two per lane); P in place.
    for (int h = warp; h < kHeads; h += L::kWarps) {
      const float v0h = lane < nrows ? sc[lane * kHeads + h] : kNegInf;
      const float v1h = lane + 32 < nrows ? sc[(lane + 32) * kHeads + h] : kNegInf;
      float cm = fmaxf(v0h, v1h);
#pragma unroll
      for (int off = 16; off > 0; off >>= 1) cm = fmaxf(cm, __shfl_xor_sync(0xFFFFFFFFu, cm, off));
      const float m_old = s_m[h];
      const float m_new = fmaxf(m_old, cm);
      float p0 = 0.0f, p1 = 0.0f, alpha = 1.0f;
      if (m_new != kNegInf) {
        p0 = exp2f(v0h - m_new);
        p1 = exp2f(v1h - m_new);
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

    // 3. O = O * alpha + P V: A = P (heads x 16 rows, bf16; rows past the chunk 0), B = V (16 rows
    // x 8 dims): this lane's rows r0 + 2t, + 1, + 8, + 9 at dim 64w + 8j + g. Invalid rows are
    // staged as zeros (P 0); rows past the chunk are stale bytes, so their values are selected 0.
    {
      const float a_lo = s_a[g];
      const float a_hi = kHeads == 16 ? s_a[g + 8] : 0.0f;
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        acc[j][0] *= a_lo;
        acc[j][1] *= a_lo;
        acc[j][2] *= a_hi;
        acc[j][3] *= a_hi;
      }
    }
    for (int r0 = 0; r0 < nrows; r0 += 16) {
      auto pval = [&](int h, int row) { return h < kHeads && row < nrows ? sc[row * kHeads + h] : 0.0f; };
      std::uint32_t pa[4];
      pa[0] = pack_bf16x2(pval(g, r0 + 2 * t), pval(g, r0 + 2 * t + 1));
      pa[1] = pack_bf16x2(pval(g + 8, r0 + 2 * t), pval(g + 8, r0 + 2 * t + 1));
      pa[2] = pack_bf16x2(pval(g, r0 + 8 + 2 * t), pval(g, r0 + 9 + 2 * t));
      pa[3] = pack_bf16x2(pval(g + 8, r0 + 8 + 2 * t), pval(g + 8, r0 + 9 + 2 * t));
      int rows[4] = {r0 + 2 * t, r0 + 2 * t + 1, r0 + 8 + 2 * t, r0 + 9 + 2 * t};
      bool in[4];
      const std::uint8_t* rp[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        in[i] = rows[i] < nrows;
        rp[i] = raw + (in[i] ? rows[i] : 0) * L::kRowStride;
      }
      if (warp < 7) {  // e4m3 dims: one scale byte per row for this warp's 64 dims
        float scl[4];
#pragma unroll
        for (int i = 0; i < 4; ++i) scl[i] = in[i] ? ue8m0_to_float(rp[i][576 + warp]) : 0.0f;
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          const int dim = 64 * warp + 8 * j + g;
          float v[4];
#pragma unroll
          for (int i = 0; i < 4; ++i) v[i] = in[i] ? e4m3_to_float(rp[i][dim]) * scl[i] : 0.0f;
          mma_bf16_16816(acc[j], pa, pack_bf16x2(v[0], v[1]), pack_bf16x2(v[2], v[3]));
        }
      } else {  // bf16 RoPE dims 448..511
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          const int off = 448 + 2 * (8 * j + g);
          std::uint32_t u[4];
#pragma unroll
          for (int i = 0; i < 4; ++i) u[i] = in[i] ? *reinterpret_cast<const std::uint16_t*>(rp[i] + off) : 0u;
          mma_bf16_16816(acc[j], pa, u[0] | (u[1] << 16), u[2] | (u[3] << 16));
        }
      }
    }
    __syncthreads();  // the next chunk's publish / stage overwrite this stage's ids and rows, and P
  }

  // The partial (normalised by its own sum; zeros and lse -inf when no row was valid).
  const std::int64_t prow = (static_cast<std::int64_t>(r) * pieces + piece) * p.s_q + s;
  {
    const float l_lo = s_l[g];
    const float inv_lo = l_lo > 0.0f ? 1.0f / l_lo : 0.0f;
    float* o_lo = p.o_accum + (prow * p.h_q + g) * 512 + 64 * warp + 2 * t;
#pragma unroll
    for (int j = 0; j < 8; ++j)
      *reinterpret_cast<float2*>(o_lo + 8 * j) = make_float2(acc[j][0] * inv_lo, acc[j][1] * inv_lo);
    if constexpr (kHeads == 16) {
      const float l_hi = s_l[g + 8];
      const float inv_hi = l_hi > 0.0f ? 1.0f / l_hi : 0.0f;
      float* o_hi = o_lo + 8 * 512;
#pragma unroll
      for (int j = 0; j < 8; ++j)
        *reinterpret_cast<float2*>(o_hi + 8 * j) = make_float2(acc[j][2] * inv_hi, acc[j][3] * inv_hi);
    }
  }
  if (tid < kHeads) p.lse_accum[prow * p.h_q + tid] = partial_lse(s_l[tid], s_m[tid]);
}

template <bool kHasExtra, int kHeads>
void launch_small_decode_lean(const DecodeParams& p, const DecodeLaunch& launch) {
  launch_decode_grid(&small_decode_lean_kernel<kHasExtra, kHeads>, p, launch, "small_decode_lean_kernel<<<...>>>");
}

}  // namespace mlaplan::kernels::detail
