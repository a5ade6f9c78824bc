#pragma once
// Warp-specialised SM90 (sm_90a) sparse-MLA decode for the fp8_ds_mla 584 row format (main cache
// alone or main + extra 584 cache): the default kernel of the 584 variants on compute capability
// 9.0 (docs/kernels.md, "Decode on sm_90a"; docs/perf-history.md, "v6" and "v7").
//
// Same contract as decode_kernel.cuh (DecodeParams, split_kv records or
// one_pass, the partial outputs combine.cu merges). Grid (P or b, s_q, h_q / 64), 512 threads,
// one CTA per SM (DecodeSm90WsSmem):
// - warpgroups 2 and 3, the producers (64 registers after setmaxnreg): for every 64-row block of
//   the CTA's work, in order, each thread loads a quarter of one row (9 x 16 bytes + the row's 8
//   scale bytes) into registers, waits until K buffer (block & 1) is free (mbarrier `empty`),
//   dequantises into it (128-byte swizzled, the layout wgmma reads; rows without a valid id ->
//   zeros), writes the block's valid-row bits and arrives on `full`. The next block's rows are
//   prefetched into L2 meanwhile, and the row ids are loaded two blocks ahead.
// - warpgroups 0 and 1, the math (192 registers): the seesaw (ws_math_seesaw): each warpgroup owns
//   every other block's Q K^T and softmax and hands P to the other (docs/perf-history.md "v7").
// - kPair (h_q 128 when a CTA has at least two blocks, plan_decode_launch): the two 64-head CTAs
//   of a request form a cluster; each dequantises half of every block (32 rows, 8 threads per row)
//   into its own buffer and copies it into the other's with cp.async.bulk (shared::cluster),
//   completing on the other's `full`.
// - one_pass with more CTAs than SMs (plan_decode_launch): one CTA per SM, each over a contiguous
//   range of whole requests; the producers prefetch the next request's Q into L2.
// The producers meet the math only through the mbarrier pairs, so the gather and dequantisation
// of block i + 1 overlap the MMAs and the softmax of block i.
//
// Registers: ptxas compiles the whole kernel against the launch's limit (65536 / 512 = 128), then
// honours setmaxnreg inside each role; an instruction that needs more than the launch limit (a
// 256-column wgmma: 158) does not compile, hence the two 128-column halves of P V.

#include <cstdio>

#include "common/decode_layout.hpp"
#include "sm90/ws_fragments.cuh"
#include "sm90/wgmma.cuh"

namespace mlaplan::kernels::detail {

using W9 = DecodeSm90WsSmem;

/// The blocks of request r that this CTA walks, and where its row ids are (both roles compute the
/// same sequence).
struct WsRequest {
  int n_main = 0;       ///< blocks of the main cache
  int blk0 = 0;         ///< first block (main blocks first, then extra)
  int blk1 = 0;         ///< one past the last
  std::int64_t bs = 0;  ///< request x s_q + query token
  int s = 0;            ///< the query token
  std::int32_t main_limit = 0;
  std::int32_t extra_limit = 0;
};

/// 2^x with the MUFU approximation, subnormal results flushed to zero (ex2.approx.ftz: relative
/// error 2^-22; exp2(-inf) = +0). The softmax's P lies in [0, 1] relative to the running max, so a
/// flushed value below 2^-126 changes no bf16 P and no fp32 sum.
__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

#if defined(MLAPLAN_WS_TRACE)
// Per-block timelines (a build with -DMLAPLAN_WS_TRACE only): lane 0 of producer warp 0 and of warp
// 0 of each math warpgroup, in CTAs (0, 0, 0) and (gridDim.x / 2, 0, 0) of a one_pass launch,
// records (clock64 << 8 | event) per event (the last such launch's); ws_trace_dump prints them.
__device__ unsigned long long g_ws_trace[2][3][512];
/// Prints this translation unit's traces (each .cu has its own g_ws_trace, hence internal linkage).
[[maybe_unused]] static void ws_trace_print(const char* label) {
  static unsigned long long h[2][3][512];
  if (cudaMemcpyFromSymbol(h, g_ws_trace, sizeof(h)) != cudaSuccess) return;
  for (int c = 0; c < 2; ++c)
    for (int r = 0; r < 3; ++r) {
      std::printf("%s cta %d role %d:", label, c, r);
      for (int i = 0; i < 512 && h[c][r][i] != 0; ++i) std::printf(" %llu:%llu", h[c][r][i] >> 8, h[c][r][i] & 255);
      std::printf("\n");
    }
}
#endif
struct WsTrace {
  int slot = -1;
  int n = 0;
  __device__ __forceinline__ void init(int role, bool one_pass) {
#if defined(MLAPLAN_WS_TRACE)
    const bool cta = one_pass && gridDim.x > 1 && blockIdx.y == 0 && blockIdx.z == 0 &&
                     (blockIdx.x == 0 || blockIdx.x == gridDim.x / 2);
    const int tid = static_cast<int>(threadIdx.x);
    slot = cta && tid == (role == 0 ? 256 : 128 * (role - 1)) ? (blockIdx.x == 0 ? 0 : 3) + role : -1;
#else
    (void)role;
    (void)one_pass;
#endif
  }
  __device__ __forceinline__ void operator()(int event) {
#if defined(MLAPLAN_WS_TRACE)
    if (slot >= 0 && n < 512)
      g_ws_trace[slot / 3][slot % 3][n++] = (static_cast<unsigned long long>(clock64()) << 8) | event;
#else
    (void)event;
#endif
  }
};

template <bool kHasExtra>
__device__ __forceinline__ WsRequest ws_request(const DecodeParams& p, int r, int s, int begin_req, int end_req,
                                                int begin_block, int end_block) {
  WsRequest q;
  const std::int32_t len = p.topk_length != nullptr ? p.topk_length[r] : p.topk;
  const std::int32_t elen = kHasExtra ? (p.extra_topk_length != nullptr ? p.extra_topk_length[r] : p.extra_topk) : 0;
  q.n_main = (max(len, 1) + W9::kRows - 1) / W9::kRows;
  const int n_blocks = q.n_main + (kHasExtra ? (max(elen, 0) + W9::kRows - 1) / W9::kRows : 0);
  q.blk0 = r == begin_req ? begin_block : 0;
  q.blk1 = r == end_req ? min(end_block, n_blocks) : n_blocks;
  q.bs = static_cast<std::int64_t>(r) * p.s_q + s;
  q.s = s;
  q.main_limit = min(len, p.topk);
  q.extra_limit = kHasExtra ? min(elen, p.extra_topk) : 0;
  return q;
}

#if MLAPLAN_SM90A_WGMMA
/// Q: issue_q_half_sw128 (decode_kernel.cuh), then wait; complete and visible to wgmma for this
/// thread on return (a barrier over the readers follows).
__device__ __forceinline__ void ws_load_q_half(const DecodeParams& p, std::uint8_t* sQ, std::int64_t bs, int head0,
                                               int wg, int wt) {
  static_assert(W9::kDim == 512 && W9::kChunkBytes == 64 * 128, "the Q tile of issue_q_half_sw128");
  issue_q_half_sw128(p, sQ, bs, head0, wg, wt);
  cp_async_commit();
  cp_async_wait_all();
  fence_proxy_async();
}

/// S = Q K^T over kSteps k steps of 16 dims (4 per 64-dim chunk) from the descriptors of Q and of
/// the K buffer (both K-major, 128-byte swizzled): kSteps wgmma m64n64k16; committed, not awaited.
template <int kSteps>
__device__ __forceinline__ void ws_issue_qk(float (&sacc)[32], std::uint64_t q_desc, std::uint64_t kd) {
#pragma unroll
  for (int k = 0; k < 32; ++k) sacc[k] = 0.0f;
  wgmma_fence();
#pragma unroll
  for (int ks = 0; ks < kSteps; ++ks) {
    const std::uint32_t off = ((ks >> 2) * W9::kChunkBytes + (ks & 3) * 32) >> 4;
    wgmma_m64n64k16_ss(sacc, desc_add(q_desc, off), desc_add(kd, off), ks > 0 ? 1 : 0);
  }
  wgmma_commit();
}

/// O[:, this warpgroup's 256 dims] += P V over a 64-key block: 8 wgmma m64n128k16, P from registers
/// (pa: the A fragments), V = the K buffer at descriptor vd read MN-major; committed, not awaited.
__device__ __forceinline__ void ws_issue_pv(float (&o)[128], std::uint32_t (&pa)[4][4], std::uint64_t vd) {
  reg_fence(o);
  reg_fence(pa);
  wgmma_fence();
#pragma unroll
  for (int ks = 0; ks < 4; ++ks) {
    // dims 0..127 and 128..255 of this warpgroup (chunks 0, 1 and 2, 3): two n128 instructions
    wgmma_m64n128k16_rs_tb(o, pa[ks], desc_add(vd, (ks * 2048) >> 4));
    wgmma_m64n128k16_rs_tb(o + 64, pa[ks], desc_add(vd, (2 * W9::kChunkBytes + ks * 2048) >> 4));
  }
  wgmma_commit();
}
#endif  // MLAPLAN_SM90A_WGMMA

/// The online softmax of one 64-key block on this thread's S fragment (element 4j + 2h + e: head row
/// row0 + 8h, key 8j + 2 t4 + e): keys whose bit in kmask is 0 become -inf; the row maxima m_run
/// (log2 domain, scores times scale_log2) move to include the block; S becomes P = exp2(S scale -
/// m) in place; this thread's part of the row sums l_run is rescaled and increased; alpha is the
/// factor for what was accumulated at the old maxima; pa holds P as the bf16 A fragments of P V.
__device__ __forceinline__ void ws_softmax_block(float (&sacc)[32], std::uint64_t kmask, int t4, float scale_log2,
                                                 float (&m_run)[2], float (&l_run)[2], float (&alpha)[2],
                                                 std::uint32_t (&pa)[4][4]) {
  const float kNegInf = -__int_as_float(0x7F800000);
  mask_invalid_keys(sacc, kmask, t4);
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const float m_new = fmaxf(m_run[h], block_row_max(sacc, h) * scale_log2);
    // No valid key in this row so far (m_new -inf): every score is -inf, so exponents relative to 0
    // give P = 0; alpha is then 0 too, against O = 0 and l = 0.
    const float m_use = m_new == kNegInf ? 0.0f : m_new;
    alpha[h] = fast_exp2(m_run[h] - m_use);
    float sum = 0.0f;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        float& v = sacc[4 * j + 2 * h + e];
        v = fast_exp2(fmaf(v, scale_log2, -m_use));
        sum += v;
      }
    }
    l_run[h] = l_run[h] * alpha[h] + sum;
    m_run[h] = m_new;
  }
  pack_p_fragments(sacc, pa);
}

/// The epilogue of one math warpgroup through shared memory (docs/perf-history.md "v8"): the
/// request's O rows (bf16, the attention sink applied, lse) or the partial at split_idx (fp32,
/// normalised by its own sum; log2-domain lse in fp32), for this warpgroup's 256 dims
/// of the CTA's 64 heads, staged through `stage` (32 KiB, this warpgroup's half of the Q tile: every
/// Q K^T that reads it has retired by then (seesaw: the other warpgroup's last Q K^T came before a P
/// this warpgroup has consumed; v6 math: only this warpgroup reads its half), and the next
/// request's Q is copied in only after a barrier over the readers) so that
/// every global store is 16 bytes and every warp store covers whole 128-byte lines. The fragment
/// writes are XOR-swizzled by row (conflict-free bf16, the 2 wavefronts a 256-byte fp32 warp store
/// needs). bar_id: a named barrier of this warpgroup's 128 threads. head0: the CTA's first head.
__device__ __forceinline__ void ws_store_o_staged(const DecodeParams& p, const float (&o)[128], const float (&l_row)[2],
                                                  const float (&m_run)[2], std::int64_t bs, int s, bool split,
                                                  int split_idx, int head0, int wg, std::uint8_t* stage, int bar_id) {
  const int tw = static_cast<int>(threadIdx.x) & 127;
  const int wq = tw >> 5;
  const int g = (tw & 31) >> 2;
  const int t4 = tw & 3;
  float factor[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const float l = l_row[h];
    const int hd = head0 + 16 * wq + g + 8 * h;
    if (!split) {
      const std::int64_t orow = bs * p.h_q + hd;
      const RowFinish f = finish_row(p, l, m_run[h], hd);
      factor[h] = f.factor;
      if (wg == 0 && t4 == 0) p.lse[orow] = f.lse;
    } else {
      const std::int64_t arow = (static_cast<std::int64_t>(split_idx) * p.s_q + s) * p.h_q + hd;
      factor[h] = l > 0.0f ? 1.0f / l : 0.0f;
      if (wg == 0 && t4 == 0) p.lse_accum[arow] = partial_lse(l, m_run[h]);
    }
  }
  if (!split) {
    // bf16 out. Row r (64) = 512 bytes; its 16-byte chunk c (dims 8c .. 8c + 7 of this warpgroup's
    // 256) at chunk c ^ (r & 7). The thread's fragment element j (dims 8j + 2 t4, + 1) of row r is
    // in chunk j.
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = 16 * wq + g + 8 * h;
#pragma unroll
      for (int j = 0; j < 32; ++j) {
        *reinterpret_cast<std::uint32_t*>(stage + r * 512 + ((j ^ (r & 7)) << 4) + 4 * t4) =
            pack_bf16x2(o[4 * j + 2 * h] * factor[h], o[4 * j + 2 * h + 1] * factor[h]);
      }
    }
    named_barrier_sync(bar_id, 128);
    // A warp writes one 512-byte row segment per instruction.
#pragma unroll 4
    for (int i = 0; i < 16; ++i) {
      const int idx = 128 * i + tw;
      const int r = idx >> 5;
      const int c = idx & 31;
      const uint4 v = *reinterpret_cast<const uint4*>(stage + r * 512 + ((c ^ (r & 7)) << 4));
      *reinterpret_cast<uint4*>(p.out + (bs * p.h_q + head0 + r) * 512 + 256 * wg + 8 * c) = v;
    }
  } else {
    // fp32 o_accum: 64 rows x 1 KiB do not fit the 32 KiB stage, so two passes of 32 rows (pass h:
    // rows 16 wq + g + 8h, staging row lr = 8 wq + g, 1 KiB each); the 16-byte chunk c (dims
    // 4c .. 4c + 3) of staging row lr at chunk c ^ 2 (lr & 7). The thread's fragment element j
    // (dims 8j + 2 t4, + 1) is the (t4 & 1) half of chunk 2j + (t4 >> 1).
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      if (h == 1) named_barrier_sync(bar_id, 128);  // every thread has read the first pass
      const int lr = 8 * wq + g;
#pragma unroll
      for (int j = 0; j < 32; ++j) {
        const int c = 2 * j + (t4 >> 1);
        *reinterpret_cast<float2*>(stage + lr * 1024 + ((c ^ (2 * (lr & 7))) << 4) + 8 * (t4 & 1)) =
            make_float2(o[4 * j + 2 * h] * factor[h], o[4 * j + 2 * h + 1] * factor[h]);
      }
      named_barrier_sync(bar_id, 128);
      // A warp writes one 512-byte segment (half of this warpgroup's 1 KiB of a row) per instruction.
#pragma unroll 4
      for (int i = 0; i < 16; ++i) {
        const int idx = 128 * i + tw;
        const int rr = idx >> 6;  // staging row
        const int c = idx & 63;
        const float4 v = *reinterpret_cast<const float4*>(stage + rr * 1024 + ((c ^ (2 * (rr & 7))) << 4));
        const int hd = head0 + 16 * (rr >> 3) + (rr & 7) + 8 * h;
        const std::int64_t arow = (static_cast<std::int64_t>(split_idx) * p.s_q + s) * p.h_q + hd;
        *reinterpret_cast<float4*>(p.o_accum + arow * 512 + 256 * wg + 4 * c) = v;
      }
    }
  }
}

#if MLAPLAN_SM90A_WGMMA
/// cluster_split's epilogue (docs/perf-history.md "v9"): the C CTAs of a cluster have each attended a
/// contiguous part of the same request's blocks for the same 64 heads; they merge their partial
/// rows through distributed shared memory instead of partials in global memory and a combine
/// kernel. CTA k owns heads k x R .. k x R + R - 1 (R = 64 / C). After a cluster barrier (every CTA
/// is done with its K buffers and P slots), each CTA pushes its unnormalised O rows (fp32) with
/// their maxima and sums into the owner's K buffers and P slots (slot = the sender's rank; 16-byte
/// chunk c of staged row x at chunk c ^ (x & 7)); after a second barrier each CTA merges its R
/// rows from its own shared memory (each row at the largest of the C maxima, exactly as one CTA
/// over all the blocks would have finished it: finish_row) and writes their out rows and lse.
/// Stores to the other CTAs carry no latency chain, and nothing remote is read, so no CTA waits
/// for another to finish reading it. Called by the 256 math threads after both warpgroups' last
/// wgmma has retired; the producers take part in both cluster barriers.
__device__ __forceinline__ void ws_cluster_combine(const DecodeParams& p, const float (&o)[128],
                                                   const float (&l_row)[2], const float (&m_run)[2], std::int64_t bs,
                                                   int head0, int wg, std::uint8_t* smem, WsTrace& tr) {
  const int tid = static_cast<int>(threadIdx.x);  // 0 .. 255
  const int tw = tid & 127;
  const int wq = tw >> 5;
  const int g = (tw & 31) >> 2;
  const int t4 = tw & 3;
  const int n = static_cast<int>(cluster_num_ctas());
  const int rank = static_cast<int>(cluster_cta_rank());
  const int rows = W9::kHeads / n;
  const std::uint32_t base = smem_addr(smem);
  static_assert(W9::kHeads * W9::kDim * 4 <= 2 * W9::kTileBytes, "the C partials of R rows fit in the K buffers");
  static_assert(2 * W9::kHeads * 4 <= 2 * W9::kChunkBytes, "their maxima and sums fit in the P slots");
  cluster_arrive();  // every CTA of the cluster is done with its K buffers and P slots
  cluster_wait();
  tr(19);
  const bool odd = (t4 & 1) != 0;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int r = 16 * wq + g + 8 * h;
    const int owner = r / rows;
    const int x = rank * rows + (r - owner * rows);  // staged row in the owner (x & 7 == r & 7)
    const std::uint32_t dst = map_shared_to_cta(base + static_cast<std::uint32_t>(W9::k) + x * 2048, owner);
    // 16-byte stores: lanes t4 and t4 ^ 1 hold dims 8j + 2 (t4 & 2) .. + 3 of O; of each pair of
    // fragments j = 2jj, 2jj + 1 the even lane stores the first, the odd lane the second.
#pragma unroll
    for (int jj = 0; jj < 16; ++jj) {
      const float2 e0 = make_float2(o[8 * jj + 2 * h], o[8 * jj + 2 * h + 1]);          // j = 2 jj
      const float2 e1 = make_float2(o[8 * jj + 4 + 2 * h], o[8 * jj + 4 + 2 * h + 1]);  // j = 2 jj + 1
      const float2 give = odd ? e0 : e1;
      float2 got;
      got.x = __shfl_xor_sync(0xFFFFFFFFu, give.x, 1);
      got.y = __shfl_xor_sync(0xFFFFFFFFu, give.y, 1);
      const float4 v = odd ? make_float4(got.x, got.y, e1.x, e1.y) : make_float4(e0.x, e0.y, got.x, got.y);
      const int c = 64 * wg + 2 * (2 * jj + (odd ? 1 : 0)) + (t4 >> 1);  // dims 4c .. 4c + 3
      // (As .f32 operands: the same store through st_shared_cluster_v4's .b32 ones made ptxas spill
      // 92 bytes instead of 12.)
      st_shared_cluster_f32x4(dst + ((c ^ (r & 7)) << 4), v);
    }
    if (wg == 0 && t4 == 0) {
      const std::uint32_t ml = map_shared_to_cta(base + static_cast<std::uint32_t>(W9::p_slot) + 4 * x, owner);
      st_shared_cluster_f32(ml, m_run[h]);
      st_shared_cluster_f32(ml + 4 * W9::kHeads, l_row[h]);
    }
  }
  tr(20);
  cluster_arrive();  // every row has reached its owner
  cluster_wait();
  tr(21);
  // Per row (thread i of the first R): the merged maximum, sum, lse and finish factor; each part's
  // weight (its share at the merged maximum, times the factor) replaces its maximum in place.
  float* st_m = reinterpret_cast<float*>(smem + W9::p_slot);
  const float* st_l = st_m + W9::kHeads;
  if (tid < rows) {
    const float kNegInf = -__int_as_float(0x7F800000);
    float mx = kNegInf;
    for (int c = 0; c < n; ++c) mx = fmaxf(mx, st_m[c * rows + tid]);
    const float mu = mx == kNegInf ? 0.0f : mx;
    float lsum = 0.0f;
    for (int c = 0; c < n; ++c) {
      const float w = exp2f(st_m[c * rows + tid] - mu);  // 0 for a part without a valid key (m -inf)
      st_m[c * rows + tid] = w;
      lsum += st_l[c * rows + tid] * w;
    }
    const int hd = head0 + rank * rows + tid;
    const RowFinish f = finish_row(p, lsum, mx, hd);
    p.lse[bs * p.h_q + hd] = f.lse;
    for (int c = 0; c < n; ++c) st_m[c * rows + tid] *= f.factor;
  }
  named_barrier_sync(7, 256);
  tr(22);
  const int u = tid & 127;  // dims 4u .. 4u + 3
#pragma unroll 2
  for (int i = tid >> 7; i < rows; i += 2) {
    float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll 2
    for (int c = 0; c < n; ++c) {
      const int x = c * rows + i;
      const float wc = st_m[x];
      const float4 v = *reinterpret_cast<const float4*>(smem + W9::k + x * 2048 + ((u ^ (x & 7)) << 4));
      acc.x += wc * v.x;
      acc.y += wc * v.y;
      acc.z += wc * v.z;
      acc.w += wc * v.w;
    }
    const std::int64_t orow = bs * p.h_q + head0 + rank * rows + i;
    *reinterpret_cast<uint2*>(p.out + orow * 512 + 4 * u) =
        make_uint2(pack_bf16x2(acc.x, acc.y), pack_bf16x2(acc.z, acc.w));
  }
}
#endif  // MLAPLAN_SM90A_WGMMA

/// What the math warpgroups of a CTA need to know about its work (both math variants).
struct WsWork {
  int begin_req, end_req, begin_block, end_block, begin_split;
  bool first_split, last_split;
  int s, head0;
  std::uint32_t bar_full, bar_empty;  ///< the producers' mbarriers ([2] each, 8 bytes apart)
};

#if MLAPLAN_SM90A_WGMMA
/// The seesaw math (the default; docs/perf-history.md "v7"). Block g of the CTA's sequence (the same global
/// count as the producers') is owned by math warpgroup g & 1 and sits in K buffer g & 1. The owner
/// computes S = Q K^T over all 512 dims (32 wgmma m64n64k16), the online softmax against the row
/// maxima after block g - 1, and writes P (bf16, the 128-byte swizzled K-major chunk wgmma reads)
/// and the new maxima to its P slot; both warpgroups then add P V for their 256 dims of O, the
/// owner with P from registers, the other warpgroup with P from the slot. Warpgroup w's step for
/// its block g: retire its P V of g - 2; add the other's block g - 1 (wait for its P, P V, retire
/// it: its buffer goes back to the producers before w waits for them); then Q K^T and softmax of
/// g, P to the slot, P V of g left in flight. Each warpgroup keeps the row sums of the blocks it
/// owns (both at the same maxima: every warpgroup rescales at every block); the epilogue adds the
/// two.
template <bool kHasExtra, bool kPair, bool kCSplit>
__device__ __forceinline__ void ws_math_seesaw(const DecodeParams& p, std::uint8_t* smem, const WsWork& w) {
  const int tid = static_cast<int>(threadIdx.x);
  const int wg = tid >> 7;
  const int wq = (tid >> 5) & 3;
  const int lane = tid & 31;
  const int g = lane >> 2;
  const int t4 = lane & 3;
  const int og = 1 - wg;  // the other math warpgroup
  const float scale_log2 = p.softmax_scale * 1.4426950408889634f;
  const float kNegInf = -__int_as_float(0x7F800000);
  std::uint8_t* sQ = smem + W9::q;
  const std::uint8_t* masks = smem + W9::mask;
  float* row_max = reinterpret_cast<float*>(smem + W9::row_max);  // [warpgroup][64 rows]
  float* row_sum = reinterpret_cast<float*>(smem + W9::row_sum);
  std::uint8_t* my_slot = smem + W9::p_slot + wg * W9::kChunkBytes;
  const std::uint32_t bar_pfull = smem_addr(smem + W9::bars) + 32;  // + 8 warpgroup: P of the owner written
  const std::uint32_t bar_pempty = bar_pfull + 16;                  // + 8 warpgroup: its P read by the other
  constexpr int kMathBar = 7;                                       // the 256 math threads
  const int pair_bar = 3 + wq;                                      // warp wq of both math warpgroups
  const int row0 = 16 * wq + g;                                     // this thread's rows row0, row0 + 8
  // Descriptors: Q and the K buffers over all 8 chunks (K-major, Q K^T); V = this warpgroup's dims
  // of the K buffers (MN-major); the P slots (K-major, one chunk).
  const std::uint64_t q_desc = sw128_desc(smem_addr(sQ), 16, 1024);
  const std::uint64_t k_desc = sw128_desc(smem_addr(smem + W9::k), 16, 1024);
  const std::uint64_t v_desc = sw128_desc(smem_addr(smem + W9::k) + 4 * wg * W9::kChunkBytes, W9::kChunkBytes, 1024);
  const std::uint64_t p_desc_other = sw128_desc(smem_addr(smem + W9::p_slot + og * W9::kChunkBytes), 16, 1024);
  std::uint32_t it = 0;  // blocks of the CTA's sequence before the current request
  // K buffer `buf` is full (kPair: written by both CTAs' producers) / released by this thread (kPair:
  // to both CTAs' producers, which both write into it).
  const std::uint32_t peer_empty = kPair ? map_shared_to_cta(w.bar_empty, cluster_cta_rank() ^ 1u) : 0u;
  // (kPair: the peer's half arrives by cp.async.bulk, complete_tx on this CTA's `full`.)
  auto wait_full = [&](int buf, std::uint32_t parity) { mbar_wait(w.bar_full + 8 * buf, parity); };
  auto release = [&](int buf) {
    mbar_arrive(w.bar_empty + 8 * buf);
    if constexpr (kPair) {
      __syncwarp();  // the warp's reads are done; one remote arrival counts for its 32 threads
      if ((tid & 31) == 0) mbar_arrive_remote(peer_empty + 8 * buf, 32u);
    }
  };

  WsTrace tr;
  tr.init(1 + wg, p.mode != DecodeMode::split_kv);
  for (int r = w.begin_req; r <= w.end_req && r < p.b; ++r) {
    const WsRequest q = ws_request<kHasExtra>(p, r, w.s, w.begin_req, w.end_req, w.begin_block, w.end_block);
    const bool split = (r == w.begin_req && w.first_split) || (r == w.end_req && w.last_split);

    // Both warpgroups are done with the previous request's Q and row sums.
    named_barrier_sync(kMathBar, 256);
    ws_load_q_half(p, sQ, q.bs, w.head0, wg, tid & 127);
    named_barrier_sync(kMathBar, 256);  // all of Q is in shared memory (each warpgroup reads both halves)
    tr(10);

    float o[128];
#pragma unroll
    for (int i = 0; i < 128; ++i) o[i] = 0.0f;
    float m_run[2] = {kNegInf, kNegInf};  // row maxima after the last block seen (either owner)
    float l_run[2] = {0.0f, 0.0f};        // this thread's part of the row sums of the blocks it owns
    const int nblk = max(q.blk1 - q.blk0, 0);
    bool own_pending = false;  // P V of this warpgroup's last block in flight (buffer wg)

    // The other warpgroup's block `go` (nothing of this warpgroup in flight): its maxima, O and the
    // row sums rescaled, P V issued and retired, its buffer and P slot released.
    auto other_block = [&](std::uint32_t go) {
      mbar_wait(bar_pfull + 8 * og, (go >> 1) & 1u);
      tr(12);
      wait_full(og, (go >> 1) & 1u);  // completed already (the owner waited on it)
      float alpha[2];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const float m_new = row_max[og * 64 + row0 + 8 * h];
        alpha[h] = fast_exp2(m_run[h] - (m_new == kNegInf ? 0.0f : m_new));
        l_run[h] *= alpha[h];
        m_run[h] = m_new;
      }
      rescale_o_rows(o, alpha);
      const std::uint64_t vd = desc_add(v_desc, static_cast<std::uint32_t>(og) * (W9::kTileBytes >> 4));
      reg_fence(o);
      wgmma_fence();
#pragma unroll
      for (int ks = 0; ks < 4; ++ks) {
        wgmma_m64n128k16_ss_tb(o, desc_add(p_desc_other, 2 * ks), desc_add(vd, (ks * 2048) >> 4));
        wgmma_m64n128k16_ss_tb(o + 64, desc_add(p_desc_other, 2 * ks),
                               desc_add(vd, (2 * W9::kChunkBytes + ks * 2048) >> 4));
      }
      wgmma_commit();
      wgmma_wait<0>();
      reg_fence(o);
      release(og);
      mbar_arrive(bar_pempty + 8 * og);
      tr(13);
    };

    for (int i = ((it & 1u) == static_cast<std::uint32_t>(wg)) ? 0 : 1; i < nblk; i += 2) {
      const std::uint32_t gb = it + static_cast<std::uint32_t>(i);  // gb & 1 == wg
      // This warpgroup's previous P V (block gb - 2) retires; its buffer goes back to the producers.
      wgmma_wait<0>();
      reg_fence(o);
      if (own_pending) release(wg);
      own_pending = false;
      tr(11);
      // The other's block gb - 1 first (its maxima are this block's starting point), retired
      // before this block's Q K^T: both halves of its buffer go back to the producers before this
      // warpgroup waits for them.
      if (i >= 1) other_block(gb - 1u);
      wait_full(wg, (gb >> 1) & 1u);
      tr(14);
      float sacc[32];
      ws_issue_qk<32>(sacc, q_desc, desc_add(k_desc, static_cast<std::uint32_t>(wg) * (W9::kTileBytes >> 4)));
      wgmma_wait<0>();
      reg_fence(sacc);
      tr(15);

      // Online softmax of block gb. Element 4j + 2h + e of sacc: head row row0 + 8h, key 8j + 2 t4 + e.
      std::uint64_t kmask;  // bit j: key j valid
      if constexpr (kPair) {
        // byte 8c + w: the nibble of rows 32c + 4w .. 32c + 4w + 3
        const std::uint64_t n0 = *reinterpret_cast<const std::uint64_t*>(masks + wg * 16);
        const std::uint64_t n1 = *reinterpret_cast<const std::uint64_t*>(masks + wg * 16 + 8);
        kmask = ~0ull;
        if (n0 != 0x0F0F0F0F0F0F0F0Full || n1 != 0x0F0F0F0F0F0F0F0Full) {
          kmask = 0ull;
#pragma unroll
          for (int b = 0; b < 8; ++b)
            kmask |= (((n0 >> (8 * b)) & 0xFull) << (4 * b)) | (((n1 >> (8 * b)) & 0xFull) << (32 + 4 * b));
        }
      } else {
        kmask = *reinterpret_cast<const std::uint64_t*>(masks + wg * 16);
      }
      float alpha[2];
      std::uint32_t pa[4][4];
      ws_softmax_block(sacc, kmask, t4, scale_log2, m_run, l_run, alpha, pa);
      // P and the maxima into this warpgroup's slot, once the other has finished reading the
      // slot's previous contents (block gb - 2: the other's P V of it has retired).
      if (gb >= 2u) mbar_wait(bar_pempty + 8 * wg, ((gb >> 1) + 1u) & 1u);
      {
        // pa[ks][2 jj + h] holds keys 8 (2 ks + jj) + 2 t4 (+1) of row row0 + 8h: 16-byte unit
        // 2 ks + jj of the row, XOR the row's index within its 8-row group (g).
#pragma unroll
        for (int ks = 0; ks < 4; ++ks) {
#pragma unroll
          for (int jj = 0; jj < 2; ++jj) {
#pragma unroll
            for (int h = 0; h < 2; ++h) {
              const int row = row0 + 8 * h;
              *reinterpret_cast<std::uint32_t*>(my_slot + row * 128 + (((2 * ks + jj) ^ g) << 4) + 4 * t4) =
                  pa[ks][2 * jj + h];
            }
          }
        }
        if (t4 == 0) {
          row_max[wg * 64 + row0] = m_run[0];
          row_max[wg * 64 + row0 + 8] = m_run[1];
        }
      }
      fence_proxy_async();  // P (generic writes) -> the other warpgroup's wgmma
      mbar_arrive(bar_pfull + 8 * wg);
      tr(16);

      // O of this warpgroup's dims at the new maxima, and its P V of block gb.
      rescale_o_rows(o, alpha);
      const std::uint64_t vd = desc_add(v_desc, static_cast<std::uint32_t>(wg) * (W9::kTileBytes >> 4));
      ws_issue_pv(o, pa, vd);
      own_pending = true;
    }
    // The request's last block, when the other warpgroup owns it.
    if (nblk > 0 && ((it + static_cast<std::uint32_t>(nblk) - 1u) & 1u) != static_cast<std::uint32_t>(wg)) {
      wgmma_wait<0>();
      reg_fence(o);
      if (own_pending) release(wg);
      own_pending = false;
      other_block(it + static_cast<std::uint32_t>(nblk) - 1u);
    }
    wgmma_wait<0>();
    reg_fence(o);
    if (own_pending) release(wg);
    it += static_cast<std::uint32_t>(nblk);
    tr(17);

    // Row sums: this warpgroup's blocks plus the other's, both at the final maxima.
    float l_row[2];
    quad_row_sums(l_run, l_row);
    if (t4 == 0) {
      row_sum[wg * 64 + row0] = l_row[0];
      row_sum[wg * 64 + row0 + 8] = l_row[1];
    }
    named_barrier_sync(pair_bar, 64);
#pragma unroll
    for (int h = 0; h < 2; ++h) l_row[h] += row_sum[og * 64 + row0 + 8 * h];
    if constexpr (kCSplit) {
      ws_cluster_combine(p, o, l_row, m_run, q.bs, w.head0, wg, smem, tr);
    } else {
      const int split_idx = split ? p.num_splits[r] + (r == w.begin_req ? w.begin_split : 0) : 0;
      ws_store_o_staged(p, o, l_row, m_run, q.bs, q.s, split, split_idx, w.head0, wg, sQ + wg * (W9::kTileBytes / 2),
                        1 + wg);
    }
    tr(18);
  }
  if constexpr (kPair) {
    cluster_arrive();  // the peer's producers may still write this CTA's buffers and barriers
    cluster_wait();
  }
}

#endif  // MLAPLAN_SM90A_WGMMA

/// Whether this thread's fp8 units k0 .. k1 - 1 of a row (units sub + kT k, those below 28) hold an
/// e4m3 NaN code. A NaN anywhere in a row makes its score NaN, whichever dims carry it, so the
/// small-head producers turn those units NaN (ws_dequant_unit) rather than find the byte.
template <int kT, int kU>
__device__ __forceinline__ bool ws_part_has_nan(const uint4 (&cur)[kU + 1], int sub, int k0, int k1) {
  std::uint32_t acc = 0;
#pragma unroll
  for (int k = 0; k < kU; ++k) {
    if (k >= k0 && k < k1 && (k < kU - 1 || sub + kT * k < 28)) {
      acc |= e4m3_nan_bits(cur[k].x) | e4m3_nan_bits(cur[k].y) | e4m3_nan_bits(cur[k].z) | e4m3_nan_bits(cur[k].w);
    }
  }
  return e4m3_nan_found(acc);
}

/// fp8 unit gu (0..27) of a row into 16 bf16: its codes times the row's scale byte gu / 4 (sc: the
/// row's 8 scale bytes, the first four in sc.x). kBits: the integer path (e4m3x16_ue8m0_to_bf16;
/// nan from ws_part_has_nan), else the float path (e4m3x16_to_bf16; nan unused). Both give the
/// same bits; the small-head producers take the integer path, the 64-head kernel the float path
/// (measured faster there: docs/perf-history.md "v20").
template <bool kBits>
__device__ __forceinline__ void ws_dequant_unit(const uint4& raw, uint2 sc, int gu, bool nan, uint4& o0, uint4& o1) {
  const int sidx = gu >> 2;
  const std::uint32_t sbyte = ((sidx < 4 ? sc.x : sc.y) >> (8 * (sidx & 3))) & 0xFFu;
  if constexpr (kBits) {
    e4m3x16_ue8m0_to_bf16(raw, sbyte, nan, o0, o1);
  } else {
    (void)nan;
    e4m3x16_to_bf16(raw, ue8m0_to_float(sbyte), o0, o1);
  }
}

#if MLAPLAN_SM90A_WGMMA
/// The producer warpgroups (2 and 3) of the warp-specialised small-head kernel
/// (sm90/decode_small_ws.cuh), for the CTA's work w, over layout L's K buffers: the steps of the
/// producer inside sparse_decode_sm90ws_kernel below, with two differences measured faster for the
/// small-head kernel (docs/perf-history.md "v20"): each thread's part of a row is loaded in two
/// halves, the next block's first half issued before this block's second half is dequantised, and
/// the e4m3 codes become bf16 by integer moves and a bf16 multiply (e4m3x16_ue8m0_to_bf16, the same
/// bits as the float path). (The 64-head kernel keeps its producer inline: calling this function
/// from it made ptxas spill 4 bytes in sparse_decode_sm90ws_kernel<true, false, false>, and that
/// build measured 1-2 us slower at b 1 and 8 on an H100; docs/perf-history.md "v15".) For every
/// 64-row block, in order, each thread loads a quarter of one row (kPair: an eighth of one of this
/// CTA's 32 rows) into registers, waits until K buffer (block & 1) is free (`empty`), dequantises
/// into it in layout L's tile (128-byte swizzled), writes the block's valid-row bits and arrives on
/// `full` (kPair: also copies its rows into the peer's buffer). Called after setmaxnreg_dec.
/// q_heads: the rows of Q per CTA (from w.head0), prefetched into L2 for each next request.
template <bool kHasExtra, bool kPair, class L>
__device__ __forceinline__ void ws_producer(const DecodeParams& p, std::uint8_t* smem, const WsWork& w, int q_heads,
                                            bool one_pass) {
  const int tid = static_cast<int>(threadIdx.x);
  const int lane = tid & 31;
  const std::uint32_t peer = kPair ? cluster_cta_rank() ^ 1u : 0u;
  std::uint8_t* masks = smem + L::mask;
  // One CTA: 4 threads per row, rows 8 pw + (lane & 7), units qtr + 4k (k 0..7) of the row.
  // A 2-CTA pair: this CTA's 32 rows, 8 threads per row, rows 32 rank + 4 pw + (lane >> 3), units
  // sub + 8k (k 0..3). A unit is 16 dims: units 0..27 fp8 (16 bytes, scale byte unit / 4), 28..31
  // the bf16 RoPE dims (32 bytes).
  constexpr int kT = kPair ? 8 : 4;  // threads per row
  constexpr int kU = 32 / kT;        // units per thread
  const int pw = (tid - 256) >> 5;   // producer warp 0..7
  const int rank = static_cast<int>(peer ^ 1u);
  const int row = kPair ? 32 * rank + 4 * pw + (lane >> 3) : 8 * pw + (lane & 7);
  const int sub = kPair ? lane & 7 : lane >> 3;
  const int sw = row & 7;
  // The peer's shared memory (kPair): the same offsets, through the cluster window.
  const std::uint32_t peer_smem = kPair ? map_shared_to_cta(smem_addr(smem), peer) : 0u;
  const std::uint32_t peer_full = kPair ? map_shared_to_cta(w.bar_full, peer) : 0u;
  std::uint32_t it = 0;  // blocks produced so far (buffer it & 1)
  WsTrace tr;
  tr.init(0, one_pass);
  tr(0);
  // Row id -> page: a shift where the page size is a power of two (every layout mla-plan plans),
  // a division otherwise.
  const int sh_main =
      (p.main.page_block_size & (p.main.page_block_size - 1)) == 0 ? __ffs(p.main.page_block_size) - 1 : -1;
  const int sh_extra = kHasExtra && (p.extra.page_block_size & (p.extra.page_block_size - 1)) == 0
                           ? __ffs(p.extra.page_block_size) - 1
                           : -1;
  // Valid ids: 0 <= id < rows, i.e. unsigned(id) < min(rows, 2^31) (a 32-bit compare).
  const std::uint32_t rows_main =
      static_cast<std::uint32_t>(min(p.main.num_pages * p.main.page_block_size, std::int64_t{1} << 31));
  const std::uint32_t rows_extra =
      kHasExtra ? static_cast<std::uint32_t>(min(p.extra.num_pages * p.extra.page_block_size, std::int64_t{1} << 31))
                : 0u;
  for (int r = w.begin_req; r <= w.end_req && r < p.b; ++r) {
    const WsRequest q = ws_request<kHasExtra>(p, r, w.s, w.begin_req, w.end_req, w.begin_block, w.end_block);
    const std::int32_t* idx_main = p.indices + q.bs * p.topk;
    const std::int32_t* idx_extra = kHasExtra ? p.extra_indices + q.bs * p.extra_topk : nullptr;
    auto id_of = [&](int blk, int rw) -> std::int32_t {
      const bool ex = kHasExtra && blk >= q.n_main;
      const std::int32_t pos = (ex ? blk - q.n_main : blk) * L::kRows + rw;
      if (pos >= (ex ? q.extra_limit : q.main_limit)) return -1;
      return __ldg((ex ? idx_extra : idx_main) + pos);
    };
    // Where row `id` of block `blk` lives: its 576 data bytes and its 8 scale bytes (null: no valid id).
    struct RowAt {
      const std::uint8_t* data;
      const std::uint8_t* scale;
    };
    auto locate = [&](int blk, std::int32_t id) -> RowAt {
      const bool ex = kHasExtra && blk >= q.n_main;
      const std::uint8_t* cdata = ex ? p.extra.data : p.main.data;
      const int pbs = ex ? p.extra.page_block_size : p.main.page_block_size;
      const std::int64_t stride = ex ? p.extra.page_stride_bytes : p.main.page_stride_bytes;
      if (static_cast<std::uint32_t>(id) >= (ex ? rows_extra : rows_main)) return {nullptr, nullptr};
      const int sh = ex ? sh_extra : sh_main;
      const std::int32_t page = sh >= 0 ? id >> sh : id / pbs;
      const std::int32_t t = id - page * pbs;
      const std::uint8_t* base = cdata + page * stride;
      return {base + t * 576, base + static_cast<std::int64_t>(pbs) * 576 + t * 8};
    };
    // kPair: whether the peer's row `row ^ 32` of block blk has a valid id (the peer's `ok`): this
    // CTA writes the validity of all 64 rows of the block (the peer's rows arrive by bulk copy).
    auto valid = [&](int blk, std::int32_t id) -> bool {
      const bool ex = kHasExtra && blk >= q.n_main;
      return static_cast<std::uint32_t>(id) < (ex ? rows_extra : rows_main);
    };
    // This thread's part of row `a` into registers (unit k in raw[k]; the RoPE unit's second 16
    // bytes in raw[kU]). Rows without a valid id load nothing and dequantise zeros (0 x scale = 0).
    // This thread's units k0 .. k1 - 1 of row `a` into raw[k] (the RoPE unit's second 16 bytes in
    // raw[kU], with unit kU - 1). Rows without a valid id load nothing and dequantise zeros
    // (0 x scale = 0).
    auto load_units = [&](const RowAt& a, uint4(&raw)[kU + 1], int k0, int k1) {
      const uint4* src = reinterpret_cast<const uint4*>(a.data);
#pragma unroll
      for (int k = 0; k < kU; ++k) {
        if (k < k0 || k >= k1) continue;
        const int gu = sub + kT * k;
        raw[k] = make_uint4(0u, 0u, 0u, 0u);
        if (k < kU - 1 || gu < 28) {
          if (a.data != nullptr) raw[k] = __ldg(src + gu);
        } else {
          raw[kU] = make_uint4(0u, 0u, 0u, 0u);
          if (a.data != nullptr) {
            raw[k] = __ldg(src + 28 + 2 * (gu - 28));
            raw[kU] = __ldg(src + 29 + 2 * (gu - 28));
          }
        }
      }
    };
    auto load_scales = [&](const RowAt& a) -> uint2 {
      return a.data != nullptr ? __ldg(reinterpret_cast<const uint2*>(a.scale)) : make_uint2(0u, 0u);
    };
    // Row `a` into L2 (the threads of a row touch every 128-byte line of its data and its scale line).
    auto prefetch_row = [&](const RowAt& a) {
      if (a.data == nullptr) return;
      if constexpr (kPair) {
        // sub 0..5: data offsets 0, 128, 256, 384, 512, 575; sub 6: the scales
        if (sub <= 6) {
          const std::uint8_t* x = sub == 6 ? a.scale : a.data + (sub == 5 ? 575 : 128 * sub);
          asm volatile("prefetch.global.L2 [%0];\n" ::"l"(x));
        }
      } else {
        // quarters 0..2: data offsets 0, 128 / 256, 384 / 512, 575; quarter 3: the scales
        const std::uint8_t* x = sub == 3 ? a.scale : a.data + 256 * sub;
        asm volatile("prefetch.global.L2 [%0];\n" ::"l"(x));
        if (sub < 3) asm volatile("prefetch.global.L2 [%0];\n" ::"l"(sub == 2 ? x + 63 : x + 128));
      }
    };
    RowAt at = q.blk0 < q.blk1 ? locate(q.blk0, id_of(q.blk0, row)) : RowAt{nullptr, nullptr};
    std::int32_t id_next = q.blk0 + 1 < q.blk1 ? id_of(q.blk0 + 1, row) : -1;
    bool pok = kPair && q.blk0 < q.blk1 && valid(q.blk0, id_of(q.blk0, row ^ 32));
    if (r > w.begin_req) {
      // This request's Q slice (64 heads x 1 KiB, contiguous) into L2: the math loads it after
      // the previous request's last blocks and epilogue.
      // (kQHeads rows of 1 KiB from head w.head0: two 128-byte lines per producer thread at 64
      // heads, fewer threads below.)
      const int pt = static_cast<int>(threadIdx.x) - 256;
      const std::uint8_t* qn = reinterpret_cast<const std::uint8_t*>(p.q + (q.bs * p.h_q + w.head0) * 512) + 128 * pt;
      if (pt < 8 * q_heads) asm volatile("prefetch.global.L2 [%0];\n" ::"l"(qn));
      if (pt + 256 < 8 * q_heads) asm volatile("prefetch.global.L2 [%0];\n" ::"l"(qn + 32768));
    }
    // Each thread's part of a row goes in two halves (units 0 .. kA - 1, then kA .. kU - 1 with the
    // RoPE tail), one load ahead: the first half of block blk + 1 is issued once the first half of
    // block blk is dequantised and stored, so row loads are in flight while the second half is
    // dequantised, with the registers of one whole part (docs/perf-history.md "v20").
    constexpr int kA = kU / 2;
    uint4 cur[kU + 1];
    uint2 sc = load_scales(at);
    load_units(at, cur, 0, kA);
    for (int blk = q.blk0; blk < q.blk1; ++blk, ++it) {
      // This block's row (located in the previous iteration, its first half already issued); the
      // next blocks' ids, location and L2 prefetch are computed while its loads are in flight.
      const bool ok = at.data != nullptr;
      load_units(at, cur, kA, kU);  // the second half, while the first (issued earlier) lands
      tr(1);
      const std::int32_t pid_next = kPair && blk + 1 < q.blk1 ? id_of(blk + 1, row ^ 32) : -1;
      // The next block's row into L2 while this one is loaded and dequantised: its loads, issued at
      // the top of the next iteration, then wait for L2 instead of DRAM. (Its location is kept for
      // the next iteration.)
      const RowAt nxt = blk + 1 < q.blk1 ? locate(blk + 1, id_next) : RowAt{nullptr, nullptr};
      const std::int32_t id_next2 = blk + 2 < q.blk1 ? id_of(blk + 2, row) : -1;
      prefetch_row(nxt);
      const std::uint32_t bits = __ballot_sync(0xFFFFFFFFu, ok);
      const std::uint32_t pbits = kPair ? __ballot_sync(0xFFFFFFFFu, pok) : 0u;
      const int buf = static_cast<int>(it & 1u);
      tr(2);
      if (it >= 2) {  // block it - 2 is done with the buffer (in both CTAs of a pair)
        mbar_wait(w.bar_empty + 8 * buf, ((it >> 1) + 1u) & 1u);
      }
      if (lane == 0) {
        if constexpr (kPair) {
          // lanes 0, 8, 16, 24 hold rows 4 pw .. 4 pw + 3 (pbits: the peer's rows 4 pw .. of its 32)
          auto nib = [](std::uint32_t b) { return (b & 1u) | ((b >> 7) & 2u) | ((b >> 14) & 4u) | ((b >> 21) & 8u); };
          smem[L::mask + buf * 16 + 8 * rank + pw] = static_cast<std::uint8_t>(nib(bits));
          smem[L::mask + buf * 16 + 8 * (rank ^ 1) + pw] = static_cast<std::uint8_t>(nib(pbits));
        } else {
          masks[buf * 16 + pw] = static_cast<std::uint8_t>(bits & 0xFFu);
        }
      }
      tr(3);
      const std::uint32_t row_off = static_cast<std::uint32_t>(L::k + buf * L::kTileBytes + row * 128);
      // Units k0 .. k1 - 1 of the part in cur, dequantised with the scales s, into the tile.
      auto store_units = [&](const uint2 s, int k0, int k1) {
        const bool nan = ws_part_has_nan<kT, kU>(cur, sub, k0, k1);
#pragma unroll
        for (int k = 0; k < kU; ++k) {
          if (k < k0 || k >= k1) continue;
          const int gu = sub + kT * k;
          uint4 o0, o1;
          if (k < kU - 1 || gu < 28) {
            ws_dequant_unit<true>(cur[k], s, gu, nan, o0, o1);
          } else {
            o0 = cur[k];
            o1 = cur[kU];
          }
          // 16-dim unit gu of the row: chunk gu / 4, 16-byte units 2 (gu % 4) (+1), XOR the row's
          // index within its 8-row group
          const int u = 2 * (gu & 3);
          const std::uint32_t off0 = row_off + (gu >> 2) * L::kChunkBytes + ((u ^ sw) << 4);
          const std::uint32_t off1 = row_off + (gu >> 2) * L::kChunkBytes + (((u + 1) ^ sw) << 4);
          *reinterpret_cast<uint4*>(smem + off0) = o0;
          *reinterpret_cast<uint4*>(smem + off1) = o1;
        }
      };
      store_units(sc, 0, kA);
      const uint2 sc_next = load_scales(nxt);
      load_units(nxt, cur, 0, kA);  // block blk + 1's first half (nothing for a null location)
      store_units(sc, kA, kU);
      sc = sc_next;
      if constexpr (kPair) {
        // The warp's 4 rows (512 contiguous bytes in each of the 8 chunks) also go to the peer's
        // buffer: 8 cp.async.bulk (one per chunk) completing on the peer's `full`; this CTA's
        // `full` expects the peer's 4096 bytes of the same warp. (The peer's buffer is free:
        // `empty` counted its math too. The source is not rewritten before the peer has consumed
        // the copy: the same `empty`, two blocks later.)
        fence_proxy_async();  // the tile (generic writes) -> this CTA's wgmma and the bulk copies
        __syncwarp();
        if (lane == 0) {
          mbar_arrive_expect_tx(w.bar_full + 8 * buf, 4096u);
          const std::uint32_t off = static_cast<std::uint32_t>(L::k + buf * L::kTileBytes + (32 * rank + 4 * pw) * 128);
#pragma unroll
          for (int c = 0; c < 8; ++c)
            bulk_copy_to_cluster(peer_smem + off + c * L::kChunkBytes, smem_addr(smem) + off + c * L::kChunkBytes, 512u,
                                 peer_full + 8 * buf);
        }
      } else {
        fence_proxy_async();  // the tile (generic writes) -> the math warpgroups' wgmma
        mbar_arrive(w.bar_full + 8 * buf);
      }
      tr(4);
      at = nxt;
      id_next = id_next2;
      if constexpr (kPair) pok = blk + 1 < q.blk1 && valid(blk + 1, pid_next);
    }
  }
}

#endif  // MLAPLAN_SM90A_WGMMA

template <bool kHasExtra, bool kPair, bool kCSplit = false>
__global__ void __launch_bounds__(W9::kThreads, 1) sparse_decode_sm90ws_kernel(const DecodeParams p) {
  static_assert(!(kCSplit && kPair), "cluster_split runs one CTA per 64 heads");
#if MLAPLAN_SM90A_WGMMA
  extern __shared__ __align__(1024) std::uint8_t smem_raw[];
  std::uint8_t* smem = smem_raw + ((1024u - (smem_addr(smem_raw) & 1023u)) & 1023u);
  const int tid = static_cast<int>(threadIdx.x);
  const int wg = tid >> 7;  // 0, 1: math (head dims 256 wg ..); 2: producer
  const int lane = tid & 31;
  const int part = static_cast<int>(blockIdx.x);
  const int s = static_cast<int>(blockIdx.y);
  const int head0 = static_cast<int>(blockIdx.z) * W9::kHeads;
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");

  std::uint8_t* masks = smem + W9::mask;                      // [buffer][16]: row validity (DecodeSm90WsSmem::mask)
  const std::uint32_t bar_full = smem_addr(smem + W9::bars);  // + 8 buf
  const std::uint32_t bar_empty = bar_full + 16;              // + 8 buf
  // kPair (h_q 128): the two CTAs of a cluster (grid z 0 and 1: the two 64-head halves of the same
  // records) each gather and dequantise half of every block's rows, into both CTAs' K buffers:
  // `full` then counts both CTAs' producers, `empty` both CTAs' math threads.
  const std::uint32_t peer = kPair ? cluster_cta_rank() ^ 1u : 0u;
  if (tid == 0) {
    mbar_init(bar_full, kPair ? 8 : 256);  // every producer thread (kPair: each producer warp of this CTA)
    mbar_init(bar_full + 8, kPair ? 8 : 256);
    mbar_init(bar_empty, kPair ? 512 : 256);  // every math thread (each after its own last read of the buffer)
    mbar_init(bar_empty + 8, kPair ? 512 : 256);
    mbar_init(bar_full + 32, 128);  // seesaw: P slot of math warpgroup 0 written (its 128 threads)
    mbar_init(bar_full + 40, 128);  // ... of warpgroup 1
    mbar_init(bar_full + 48, 128);  // ... slot 0 read by warpgroup 1 (its P V retired)
    mbar_init(bar_full + 56, 128);  // ... slot 1 read by warpgroup 0
    if (kPair) fence_mbarrier_init_cluster();
  }
  if constexpr (kPair) {
    cluster_arrive();  // both CTAs' barriers are initialised before either arrives remotely
    cluster_wait();
  } else {
    __syncthreads();
  }

  const bool one_pass = p.mode != DecodeMode::split_kv;
  int begin_req = part, end_req = part, begin_block = 0, end_block = 0x7FFFFFFF, begin_split = 0;
  bool first_split = false, last_split = false;
  grid_dependency_wait();  // split_kv: the scheduler's records (launch_decode_grid, decode_kernel.cuh)
  if (one_pass && static_cast<int>(gridDim.x) < p.b) {
    // Fewer CTAs than requests (decode_launch_dims): a contiguous range of whole requests each.
    begin_req = static_cast<int>(static_cast<std::int64_t>(part) * p.b / gridDim.x);
    end_req = static_cast<int>(static_cast<std::int64_t>(part + 1) * p.b / gridDim.x) - 1;
  }
  if constexpr (kCSplit) {
    // cluster_split: the cluster's CTAs share request part / C, CTA `rank` its blocks
    // rank x n / C .. (rank + 1) x n / C - 1 (none when the request has fewer blocks than CTAs).
    const int n = static_cast<int>(cluster_num_ctas());
    const int rank = static_cast<int>(cluster_cta_rank());
    begin_req = end_req = part / n;
    const int n_blocks = ws_request<kHasExtra>(p, begin_req, s, begin_req, begin_req, 0, 0x7FFFFFFF).blk1;
    begin_block = rank * n_blocks / n;
    end_block = (rank + 1) * n_blocks / n;
  } else if (!one_pass) {
    const std::int32_t* rec = p.sched_records + part * 8;
    begin_req = rec[0];
    end_req = rec[1];
    begin_block = rec[2];
    end_block = rec[3];
    begin_split = rec[4];
    first_split = rec[5] != 0;
    last_split = rec[6] != 0;
  }

  if (wg >= 2) {
    // ---------------------------------------------------------------- producer
    // ws_producer (above) repeats these steps for the small-head kernel; it is kept inline here
    // on purpose (its comment says why): a change to either belongs in both.
    setmaxnreg_dec<W9::kProducerRegs>();
    // One CTA: 4 threads per row, rows 8 pw + (lane & 7), units qtr + 4k (k 0..7) of the row.
    // A 2-CTA pair: this CTA's 32 rows, 8 threads per row, rows 32 rank + 4 pw + (lane >> 3), units
    // sub + 8k (k 0..3). A unit is 16 dims: units 0..27 fp8 (16 bytes, scale byte unit / 4), 28..31
    // the bf16 RoPE dims (32 bytes).
    constexpr int kT = kPair ? 8 : 4;  // threads per row
    constexpr int kU = 32 / kT;        // units per thread
    const int pw = (tid - 256) >> 5;   // producer warp 0..7
    const int rank = static_cast<int>(peer ^ 1u);
    const int row = kPair ? 32 * rank + 4 * pw + (lane >> 3) : 8 * pw + (lane & 7);
    const int sub = kPair ? lane & 7 : lane >> 3;
    const int sw = row & 7;
    // The peer's shared memory (kPair): the same offsets, through the cluster window.
    const std::uint32_t peer_smem = kPair ? map_shared_to_cta(smem_addr(smem), peer) : 0u;
    const std::uint32_t peer_full = kPair ? map_shared_to_cta(bar_full, peer) : 0u;
    std::uint32_t it = 0;  // blocks produced so far (buffer it & 1)
    WsTrace tr;
    tr.init(0, one_pass);
    tr(0);
    // Row id -> page: a shift where the page size is a power of two (every layout mla-plan plans),
    // a division otherwise.
    const int sh_main =
        (p.main.page_block_size & (p.main.page_block_size - 1)) == 0 ? __ffs(p.main.page_block_size) - 1 : -1;
    const int sh_extra = kHasExtra && (p.extra.page_block_size & (p.extra.page_block_size - 1)) == 0
                             ? __ffs(p.extra.page_block_size) - 1
                             : -1;
    // Valid ids: 0 <= id < rows, i.e. unsigned(id) < min(rows, 2^31) (a 32-bit compare).
    const std::uint32_t rows_main =
        static_cast<std::uint32_t>(min(p.main.num_pages * p.main.page_block_size, std::int64_t{1} << 31));
    const std::uint32_t rows_extra =
        kHasExtra ? static_cast<std::uint32_t>(min(p.extra.num_pages * p.extra.page_block_size, std::int64_t{1} << 31))
                  : 0u;
    for (int r = begin_req; r <= end_req && r < p.b; ++r) {
      const WsRequest q = ws_request<kHasExtra>(p, r, s, begin_req, end_req, begin_block, end_block);
      const std::int32_t* idx_main = p.indices + q.bs * p.topk;
      const std::int32_t* idx_extra = kHasExtra ? p.extra_indices + q.bs * p.extra_topk : nullptr;
      auto id_of = [&](int blk, int rw) -> std::int32_t {
        const bool ex = kHasExtra && blk >= q.n_main;
        const std::int32_t pos = (ex ? blk - q.n_main : blk) * W9::kRows + rw;
        if (pos >= (ex ? q.extra_limit : q.main_limit)) return -1;
        return __ldg((ex ? idx_extra : idx_main) + pos);
      };
      // Where row `id` of block `blk` lives: its 576 data bytes and its 8 scale bytes (null: no valid id).
      struct RowAt {
        const std::uint8_t* data;
        const std::uint8_t* scale;
      };
      auto locate = [&](int blk, std::int32_t id) -> RowAt {
        const bool ex = kHasExtra && blk >= q.n_main;
        const std::uint8_t* cdata = ex ? p.extra.data : p.main.data;
        const int pbs = ex ? p.extra.page_block_size : p.main.page_block_size;
        const std::int64_t stride = ex ? p.extra.page_stride_bytes : p.main.page_stride_bytes;
        if (static_cast<std::uint32_t>(id) >= (ex ? rows_extra : rows_main)) return {nullptr, nullptr};
        const int sh = ex ? sh_extra : sh_main;
        const std::int32_t page = sh >= 0 ? id >> sh : id / pbs;
        const std::int32_t t = id - page * pbs;
        const std::uint8_t* base = cdata + page * stride;
        return {base + t * 576, base + static_cast<std::int64_t>(pbs) * 576 + t * 8};
      };
      // kPair: whether the peer's row `row ^ 32` of block blk has a valid id (the peer's `ok`): this
      // CTA writes the validity of all 64 rows of the block (the peer's rows arrive by bulk copy).
      auto valid = [&](int blk, std::int32_t id) -> bool {
        const bool ex = kHasExtra && blk >= q.n_main;
        return static_cast<std::uint32_t>(id) < (ex ? rows_extra : rows_main);
      };
      // This thread's part of row `a` into registers (unit k in raw[k]; the RoPE unit's second 16
      // bytes in raw[kU]). Rows without a valid id load nothing and dequantise zeros (0 x scale = 0).
      auto load_row = [&](const RowAt& a, uint4(&raw)[kU + 1], uint2& sc) {
        sc = make_uint2(0u, 0u);
#pragma unroll
        for (int k = 0; k <= kU; ++k) raw[k] = make_uint4(0u, 0u, 0u, 0u);
        if (a.data != nullptr) {
          const uint4* src = reinterpret_cast<const uint4*>(a.data);
#pragma unroll
          for (int k = 0; k < kU; ++k) {
            const int gu = sub + kT * k;
            if (k < kU - 1 || gu < 28) {
              raw[k] = __ldg(src + gu);
            } else {
              raw[k] = __ldg(src + 28 + 2 * (gu - 28));
              raw[kU] = __ldg(src + 29 + 2 * (gu - 28));
            }
          }
          sc = __ldg(reinterpret_cast<const uint2*>(a.scale));
        }
      };
      // Row `a` into L2 (the threads of a row touch every 128-byte line of its data and its scale line).
      auto prefetch_row = [&](const RowAt& a) {
        if (a.data == nullptr) return;
        if constexpr (kPair) {
          // sub 0..5: data offsets 0, 128, 256, 384, 512, 575; sub 6: the scales
          if (sub <= 6) {
            const std::uint8_t* x = sub == 6 ? a.scale : a.data + (sub == 5 ? 575 : 128 * sub);
            asm volatile("prefetch.global.L2 [%0];\n" ::"l"(x));
          }
        } else {
          // quarters 0..2: data offsets 0, 128 / 256, 384 / 512, 575; quarter 3: the scales
          const std::uint8_t* x = sub == 3 ? a.scale : a.data + 256 * sub;
          asm volatile("prefetch.global.L2 [%0];\n" ::"l"(x));
          if (sub < 3) asm volatile("prefetch.global.L2 [%0];\n" ::"l"(sub == 2 ? x + 63 : x + 128));
        }
      };
      RowAt at = q.blk0 < q.blk1 ? locate(q.blk0, id_of(q.blk0, row)) : RowAt{nullptr, nullptr};
      std::int32_t id_next = q.blk0 + 1 < q.blk1 ? id_of(q.blk0 + 1, row) : -1;
      bool pok = kPair && q.blk0 < q.blk1 && valid(q.blk0, id_of(q.blk0, row ^ 32));
      if (r > begin_req) {
        // This request's Q slice (64 heads x 1 KiB, contiguous) into L2: the math loads it after
        // the previous request's last blocks and epilogue.
        const std::uint8_t* qn =
            reinterpret_cast<const std::uint8_t*>(p.q + (q.bs * p.h_q + blockIdx.z * W9::kHeads) * 512) +
            128 * (threadIdx.x - 256);
        asm volatile("prefetch.global.L2 [%0];\n" ::"l"(qn));
        asm volatile("prefetch.global.L2 [%0];\n" ::"l"(qn + 32768));
      }
      for (int blk = q.blk0; blk < q.blk1; ++blk, ++it) {
        // This block's row first (located in the previous iteration); the next blocks' ids, location
        // and L2 prefetch are computed while its loads are in flight.
        const bool ok = at.data != nullptr;
        uint4 cur[kU + 1];
        uint2 sc;
        load_row(at, cur, sc);
        tr(1);
        const std::int32_t pid_next = kPair && blk + 1 < q.blk1 ? id_of(blk + 1, row ^ 32) : -1;
        // The next block's row into L2 while this one is loaded and dequantised: its loads, issued at
        // the top of the next iteration, then wait for L2 instead of DRAM. (Its location is kept for
        // the next iteration.)
        const RowAt nxt = blk + 1 < q.blk1 ? locate(blk + 1, id_next) : RowAt{nullptr, nullptr};
        const std::int32_t id_next2 = blk + 2 < q.blk1 ? id_of(blk + 2, row) : -1;
        prefetch_row(nxt);
        const std::uint32_t bits = __ballot_sync(0xFFFFFFFFu, ok);
        const std::uint32_t pbits = kPair ? __ballot_sync(0xFFFFFFFFu, pok) : 0u;
        const int buf = static_cast<int>(it & 1u);
        tr(2);
        if (it >= 2) {  // block it - 2 is done with the buffer (in both CTAs of a pair)
          mbar_wait(bar_empty + 8 * buf, ((it >> 1) + 1u) & 1u);
        }
        if (lane == 0) {
          if constexpr (kPair) {
            // lanes 0, 8, 16, 24 hold rows 4 pw .. 4 pw + 3 (pbits: the peer's rows 4 pw .. of its 32)
            auto nib = [](std::uint32_t b) { return (b & 1u) | ((b >> 7) & 2u) | ((b >> 14) & 4u) | ((b >> 21) & 8u); };
            smem[W9::mask + buf * 16 + 8 * rank + pw] = static_cast<std::uint8_t>(nib(bits));
            smem[W9::mask + buf * 16 + 8 * (rank ^ 1) + pw] = static_cast<std::uint8_t>(nib(pbits));
          } else {
            masks[buf * 16 + pw] = static_cast<std::uint8_t>(bits & 0xFFu);
          }
        }
        tr(3);
        const std::uint32_t row_off = static_cast<std::uint32_t>(W9::k + buf * W9::kTileBytes + row * 128);
#pragma unroll
        for (int k = 0; k < kU; ++k) {
          const int gu = sub + kT * k;
          uint4 o0, o1;
          if (k < kU - 1 || gu < 28) {
            ws_dequant_unit<false>(cur[k], sc, gu, false, o0, o1);
          } else {
            o0 = cur[k];
            o1 = cur[kU];
          }
          // 16-dim unit gu of the row: chunk gu / 4, 16-byte units 2 (gu % 4) (+1), XOR the row's
          // index within its 8-row group
          const int u = 2 * (gu & 3);
          const std::uint32_t off0 = row_off + (gu >> 2) * W9::kChunkBytes + ((u ^ sw) << 4);
          const std::uint32_t off1 = row_off + (gu >> 2) * W9::kChunkBytes + (((u + 1) ^ sw) << 4);
          *reinterpret_cast<uint4*>(smem + off0) = o0;
          *reinterpret_cast<uint4*>(smem + off1) = o1;
        }
        if constexpr (kPair) {
          // The warp's 4 rows (512 contiguous bytes in each of the 8 chunks) also go to the peer's
          // buffer: 8 cp.async.bulk (one per chunk) completing on the peer's `full`; this CTA's
          // `full` expects the peer's 4096 bytes of the same warp. (The peer's buffer is free:
          // `empty` counted its math too. The source is not rewritten before the peer has consumed
          // the copy: the same `empty`, two blocks later.)
          fence_proxy_async();  // the tile (generic writes) -> this CTA's wgmma and the bulk copies
          __syncwarp();
          if (lane == 0) {
            mbar_arrive_expect_tx(bar_full + 8 * buf, 4096u);
            const std::uint32_t off =
                static_cast<std::uint32_t>(W9::k + buf * W9::kTileBytes + (32 * rank + 4 * pw) * 128);
#pragma unroll
            for (int c = 0; c < 8; ++c)
              bulk_copy_to_cluster(peer_smem + off + c * W9::kChunkBytes, smem_addr(smem) + off + c * W9::kChunkBytes,
                                   512u, peer_full + 8 * buf);
          }
        } else {
          fence_proxy_async();  // the tile (generic writes) -> the math warpgroups' wgmma
          mbar_arrive(bar_full + 8 * buf);
        }
        tr(4);
        at = nxt;
        id_next = id_next2;
        if constexpr (kPair) pok = blk + 1 < q.blk1 && valid(blk + 1, pid_next);
      }
    }
    if constexpr (kPair) {
      cluster_arrive();  // the peer may still read this CTA's barriers or write its buffers
      cluster_wait();
    }
    if constexpr (kCSplit) {
      cluster_arrive();  // the two barriers of ws_cluster_combine
      cluster_wait();
      cluster_arrive();
      cluster_wait();
    }
    return;
  }

  // ------------------------------------------------------------------ math
  setmaxnreg_inc<W9::kMathRegs>();
  const WsWork work{begin_req,  end_req, begin_block, end_block, begin_split, first_split,
                    last_split, s,       head0,       bar_full,  bar_empty};
  ws_math_seesaw<kHasExtra, kPair, kCSplit>(p, smem, work);
#elif defined(__CUDA_ARCH__)
  // Compiled for sm_100a too; the host launches this kernel on compute capability 9.0 only.
  (void)p;
  __trap();
#endif
}

/// Launch of the warp-specialised kernel as plan_decode_launch decided it: cluster_split clusters
/// along x (launch.dims.cluster_x > 1), the 2-CTA pair along z (launch.pair), else one CTA per
/// 64 heads.
template <bool kHasExtra>
void launch_decode_sm90ws(const DecodeParams& p, const DecodeLaunch& launch) {
  if (launch.dims.cluster_x > 1) {
    launch_decode_grid(&sparse_decode_sm90ws_kernel<kHasExtra, false, true>, p, launch,
                       "sparse_decode_sm90ws_kernel (cluster_split)");
  } else if (launch.pair) {
    launch_decode_grid(&sparse_decode_sm90ws_kernel<kHasExtra, true, false>, p, launch,
                       "sparse_decode_sm90ws_kernel (2-CTA clusters)");
  } else {
    launch_decode_grid(&sparse_decode_sm90ws_kernel<kHasExtra, false, false>, p, launch,
                       "sparse_decode_sm90ws_kernel<<<...>>>");
  }
}

/// Whether the clusters a grid of `d` needs are resident at once, for the kernel that grid runs.
template <bool kHasExtra>
bool sm90ws_clusters_fit_of(const LaunchDims& d) {
  if (d.cluster_x > 1) return clusters_fit(&sparse_decode_sm90ws_kernel<kHasExtra, false, true>, d, d.cluster_x);
  if (d.cluster_z > 1) return pair_clusters_fit(&sparse_decode_sm90ws_kernel<kHasExtra, true, false>, d);
  return true;
}

}  // namespace mlaplan::kernels::detail
