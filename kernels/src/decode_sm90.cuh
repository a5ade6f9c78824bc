#pragma once
// SM90 (sm_90a) sparse-MLA decode for the fp8_ds_mla 584 row format (main cache alone or main +
// extra 584 cache), with warpgroup MMA (docs/kernels.md, "Decode on sm_90a").
//
// Same contract as decode_kernel.cuh (DecodeParams, split_kv records or one_pass, the partial
// outputs combine.cu merges). Grid (P or b, s_q, h_q / 64), 256 threads = two warpgroups, one CTA
// per SM (DecodeSm90Smem). Warpgroup w owns head dims 256w .. 256w + 255: its half of Q and of the
// dequantised K tile (128-byte swizzled, the layout wgmma reads), and O[:, its dims] in registers.
// The two warpgroups meet only to add their partial scores. Per 64-row block, in each warpgroup:
//   1. each warp owns 16 rows of the block: their raw bytes (this warpgroup's part of the data row
//      and the 8 scale bytes) were copied into the warp's staging rows with cp.async while the
//      previous block computed; the warp dequantises them into the K tile (invalid rows -> 0);
//   2. S_w = Q[:, dims of w] K[:, dims of w]^T with 16 wgmma m64n64k16 (A and B from shared memory);
//   3. the two warpgroups exchange S_w through shared memory, warp by warp (the same thread of the
//      other warpgroup holds the same elements): both hold S = S_0 + S_1, bit for bit;
//   4. online softmax in registers (a head row spread over the 4 threads of a quad), invalid keys
//      -> -inf, P rounded to bf16 straight into the A fragments of the next MMA;
//   5. O = alpha O + P V with 4 wgmma m64n256k16 (A = P from registers, B = V = the same K tile
//      read MN-major); its completion is awaited at the top of the next block.
// kPair (h_q 128, MLAPLAN_DECODE_KERNEL=sm90_pair only): the two 64-head CTAs of a (request, query
// token) form a cluster of 2 along grid z; each gathers and dequantises 8 of every warp's 16 rows
// into both CTAs' K tiles (st.shared::cluster), and the two warpgroup barriers of step 1 become
// cluster barriers. Correct, but slower than the one-CTA kernel (docs/perf.md, "v5").

#include <algorithm>

#include "decode_kernel.cuh"
#include "wgmma.cuh"

namespace mlaplan::kernels::detail {

using S9 = DecodeSm90Smem;

/// Issues the cp.async copies of this warp's 16 rows of one block (rows 16 * wq + i, the index of
/// row i in lane i and lane i + 16) into its staging rows; returns the valid-row bits (bit i: row
/// i has a valid id). Warpgroup W copies data bytes 256W .. and all 8 scale bytes. kPair (the
/// 2-CTA cluster): this CTA copies only rows 8 rank .. 8 rank + 7 of the 16, into staging rows 0..7.
template <int W, bool kPair>
__device__ __forceinline__ std::uint32_t stage_rows(const std::uint8_t* data, int page_block_size,
                                                    std::int64_t page_stride, std::int64_t num_pages, std::int32_t id,
                                                    std::uint8_t* stage, int lane, int rank) {
  constexpr int kChunks = W == 0 ? 16 : 20;  // 16-byte chunks of the 576-byte data row
  constexpr int kStride = W == 0 ? S9::kStage0Stride : S9::kStage1Stride;
  constexpr int kScaleAt = W == 0 ? S9::kStage0Scale : S9::kStage1Scale;
  const bool ok = id >= 0 && static_cast<std::int64_t>(id) < num_pages * page_block_size;
  const std::uint8_t* row_data = nullptr;
  const std::uint8_t* row_scale = nullptr;
  if (ok) {
    const std::int32_t page = id / page_block_size;
    const std::int32_t t = id - page * page_block_size;
    const std::uint8_t* base = data + page * page_stride;
    row_data = base + t * 576 + 256 * W;
    row_scale = base + static_cast<std::int64_t>(page_block_size) * 576 + t * 8;
  }
  const std::uint32_t ok_bits = __ballot_sync(0xFFFFFFFFu, ok) & 0xFFFFu;
  constexpr int kRowsCopied = kPair ? 8 : 16;
  const int first = kPair ? 8 * rank : 0;  // first of the 16 rows this CTA copies
#pragma unroll
  for (int k = 0; k < kRowsCopied * kChunks / 32; ++k) {
    const int it = lane + 32 * k;
    const int row = it / kChunks;
    const int c = it - row * kChunks;
    const auto src = reinterpret_cast<const std::uint8_t*>(
        __shfl_sync(0xFFFFFFFFu, reinterpret_cast<unsigned long long>(row_data), first + row));
    if ((ok_bits >> (first + row)) & 1u) cp_async_16(stage + row * kStride + 16 * c, src + 16 * c);
  }
  if (lane >= first && lane < first + kRowsCopied && ok) cp_async_8(stage + (lane - first) * kStride + kScaleAt, row_scale);
  return ok_bits;
}

/// Dequantises this warp's 16 staged rows into the K tile (dims 256W .. 256W + 255 of rows
/// 16 * wq ..): lane l handles row l % 16 and 16-dim units l / 16, + 2, + 4, ... Rows without a
/// valid id become zeros. kPair: the warp's 8 staged rows (rows 16 wq + 8 rank ..; lane l: row
/// l % 8, units l / 8, + 4, ...) are written into this CTA's tile and, at the same offsets, into
/// the peer CTA's tile (`peer_k`: its shared::cluster address).
template <int W, bool kPair>
__device__ __forceinline__ void dequant_rows(const std::uint8_t* stage, std::uint32_t ok_bits, std::uint8_t* sK,
                                             std::uint32_t peer_k, int wq, int lane, int rank) {
  constexpr int kStride = W == 0 ? S9::kStage0Stride : S9::kStage1Stride;
  constexpr int kScaleAt = W == 0 ? S9::kStage0Scale : S9::kStage1Scale;
  constexpr int kFp8Units = W == 0 ? 16 : 12;  // units 12..15 of warpgroup 1 are the bf16 RoPE dims
  constexpr int kRowsHere = kPair ? 8 : 16;    // staged rows of this warp
  constexpr int kGroups = 32 / kRowsHere;      // lanes per row
  const int rl = lane % kRowsHere;
  const int rb = kPair ? 8 * rank + rl : rl;   // row among the warp's 16
  const int row = 16 * wq + rb;
  const bool ok = (ok_bits >> rb) & 1u;
  const std::uint8_t* src = stage + rl * kStride;
  std::uint8_t* dst_row = sK + row * 128;
  const int sw = row & 7;
  (void)peer_k;
#pragma unroll
  for (int k = 0; k < 16 / kGroups; ++k) {
    const int du = lane / kRowsHere + kGroups * k;
    uint4 o0 = make_uint4(0u, 0u, 0u, 0u);
    uint4 o1 = o0;
    if (ok) {
      if (kGroups * k < kFp8Units) {
        const uint4 raw = *reinterpret_cast<const uint4*>(src + 16 * du);
        const float scale = ue8m0_to_float(src[kScaleAt + 4 * W + du / 4]);
        e4m3x16_to_bf16(raw, scale, o0, o1);
      } else {
        const uint4* rope = reinterpret_cast<const uint4*>(src + 192 + 32 * (du - 12));
        o0 = rope[0];
        o1 = rope[1];
      }
    }
    const int chunk = 4 * W + du / 4;
    const int u = 2 * (du & 3);
    std::uint8_t* d = dst_row + chunk * S9::kChunkBytes;
    *reinterpret_cast<uint4*>(d + ((u ^ sw) << 4)) = o0;
    *reinterpret_cast<uint4*>(d + (((u + 1) ^ sw) << 4)) = o1;
#if MLAPLAN_SM90A_WGMMA
    if constexpr (kPair) {
      const std::uint32_t off = static_cast<std::uint32_t>(d - sK);
      st_shared_cluster_v4(peer_k + off + ((u ^ sw) << 4), o0);
      st_shared_cluster_v4(peer_k + off + (((u + 1) ^ sw) << 4), o1);
    }
#endif
  }
}

template <bool kHasExtra, bool kPair>
__global__ void __launch_bounds__(S9::kThreads, 1) sparse_decode_sm90_kernel(const DecodeParams p) {
#if MLAPLAN_SM90A_WGMMA
  extern __shared__ __align__(1024) std::uint8_t smem_raw[];
  std::uint8_t* smem = smem_raw + ((1024u - (smem_addr(smem_raw) & 1023u)) & 1023u);
  const int tid = static_cast<int>(threadIdx.x);
  const int wg = tid >> 7;         // warpgroup: head dims 256 wg ..
  const int wq = (tid >> 5) & 3;   // warp in the warpgroup: rows 16 wq .. of S, O and of the staged block
  const int lane = tid & 31;
  const int g = lane >> 2;
  const int t4 = lane & 3;
  const int part = static_cast<int>(blockIdx.x);
  const int s = static_cast<int>(blockIdx.y);
  const int head0 = static_cast<int>(blockIdx.z) * S9::kHeads;
  const float scale_log2 = p.softmax_scale * 1.4426950408889634f;
  const float kNegInf = -__int_as_float(0x7F800000);
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");

  std::uint8_t* sQ = smem + S9::q;
  std::uint8_t* sK = smem + S9::k;
  std::uint8_t* stage = wg == 0 ? smem + S9::stage0 + 16 * wq * S9::kStage0Stride
                                : smem + S9::stage1 + 16 * wq * S9::kStage1Stride;
  float4* x_own = reinterpret_cast<float4*>(smem + S9::xchg + wg * S9::xchg_half) + wq * 256 + lane;
  const float4* x_peer = reinterpret_cast<const float4*>(smem + S9::xchg + (1 - wg) * S9::xchg_half) + wq * 256 + lane;
  std::uint32_t* masks = reinterpret_cast<std::uint32_t*>(smem + S9::mask) + wg * 8;  // [block parity][warp]
  const int wg_bar = 1 + wg;    // the 128 threads of this warpgroup
  const int pair_bar = 3 + wq;  // warp wq of both warpgroups (64 threads)
  const std::uint32_t q_base = smem_addr(sQ) + 4 * wg * S9::kChunkBytes;
  const std::uint32_t k_base = smem_addr(sK) + 4 * wg * S9::kChunkBytes;
  // kPair: the two CTAs of a cluster (the two 64-head groups of one (request, query token)) walk the
  // same blocks; each gathers and dequantises half of every block's rows into both K tiles.
  const int rank = kPair ? static_cast<int>(cluster_cta_rank()) : 0;
  const std::uint32_t peer_k = kPair ? map_shared_to_cta(smem_addr(sK), static_cast<std::uint32_t>(rank ^ 1)) : 0u;

  const bool one_pass = p.mode != DecodeMode::split_kv;
  int begin_req = part, end_req = part, begin_block = 0, end_block = 0x7FFFFFFF, begin_split = 0;
  bool first_split = false, last_split = false;
  grid_dependency_wait();  // split_kv: the scheduler's records (launch_decode_grid, decode_kernel.cuh)
  if (!one_pass) {
    const std::int32_t* rec = p.sched_records + part * 8;
    begin_req = rec[0];
    end_req = rec[1];
    begin_block = rec[2];
    end_block = rec[3];
    begin_split = rec[4];
    first_split = rec[5] != 0;
    last_split = rec[6] != 0;
  }

  for (int r = begin_req; r <= end_req && r < p.b; ++r) {
    const std::int32_t len = p.topk_length != nullptr ? p.topk_length[r] : p.topk;
    const std::int32_t elen = kHasExtra ? (p.extra_topk_length != nullptr ? p.extra_topk_length[r] : p.extra_topk) : 0;
    const int n_main = (max(len, 1) + S9::kRows - 1) / S9::kRows;
    const int n_blocks = n_main + (kHasExtra ? (max(elen, 0) + S9::kRows - 1) / S9::kRows : 0);
    const int blk0 = r == begin_req ? begin_block : 0;
    const int blk1 = r == end_req ? min(end_block, n_blocks) : n_blocks;
    const bool split = (r == begin_req && first_split) || (r == end_req && last_split);
    const std::int64_t bs = static_cast<std::int64_t>(r) * p.s_q + s;
    const std::int32_t* idx_main = p.indices + bs * p.topk;
    const std::int32_t* idx_extra = kHasExtra ? p.extra_indices + bs * p.extra_topk : nullptr;
    const std::int32_t main_limit = min(len, p.topk);
    const std::int32_t extra_limit = kHasExtra ? min(elen, p.extra_topk) : 0;

    // Index of row 16 wq + lane % 16 of block `blk` (-1 past the length).
    auto ids_of = [&](int blk) -> std::int32_t {
      const bool ex = kHasExtra && blk >= n_main;
      const std::int32_t pos = (ex ? blk - n_main : blk) * S9::kRows + 16 * wq + (lane & 15);
      if (pos >= (ex ? extra_limit : main_limit)) return -1;
      return __ldg((ex ? idx_extra : idx_main) + pos);
    };
    auto issue = [&](int blk, std::int32_t id) {
      const bool ex = kHasExtra && blk >= n_main;
      const std::uint8_t* data = ex ? p.extra.data : p.main.data;
      const int pbs = ex ? p.extra.page_block_size : p.main.page_block_size;
      const std::int64_t stride = ex ? p.extra.page_stride_bytes : p.main.page_stride_bytes;
      const std::int64_t pages = ex ? p.extra.num_pages : p.main.num_pages;
      const std::uint32_t bits = wg == 0 ? stage_rows<0, kPair>(data, pbs, stride, pages, id, stage, lane, rank)
                                         : stage_rows<1, kPair>(data, pbs, stride, pages, id, stage, lane, rank);
      if (lane == 0) masks[(blk & 1) * 4 + wq] = bits;
    };

    // Every warp of this warpgroup is done with the previous request's Q, K, staging and masks.
    named_barrier_sync(wg_bar, 128);
    if (blk0 < blk1) issue(blk0, ids_of(blk0));
    // Q[:, 256 wg ..] of this (request, query token, 64 heads), swizzled, in the same cp.async group
    // as the first block's rows.
    static_assert(S9::kDim == 512 && S9::kChunkBytes == 64 * 128, "the Q tile of issue_q_half_sw128");
    issue_q_half_sw128(p, sQ, bs, head0, wg, tid & 127);
    cp_async_commit();

    float o[128];
#pragma unroll
    for (int i = 0; i < 128; ++i) o[i] = 0.0f;
    float m_run[2] = {kNegInf, kNegInf};
    float l_run[2] = {0.0f, 0.0f};  // this thread's part of the row sums (its 16 columns per block)

    std::int32_t ids_next = blk0 + 1 < blk1 ? ids_of(blk0 + 1) : -1;
    for (int blk = blk0; blk < blk1; ++blk) {
      const int par = blk & 1;
      const bool has_next = blk + 1 < blk1;
      const std::int32_t next_ids = ids_next;
      ids_next = blk + 2 < blk1 ? ids_of(blk + 2) : -1;

      cp_async_wait_all();  // this thread's copies of the block (and of Q) have landed
      __syncwarp();
      wgmma_wait<0>();      // the previous block's P V (this thread) is complete
      reg_fence(o);
      if constexpr (kPair) {
        cluster_arrive();  // ... in every warp of both CTAs: both K tiles may be rewritten
        cluster_wait();
      } else {
        named_barrier_sync(wg_bar, 128);  // ... in every warp of the warpgroup: K may be rewritten
      }
      const std::uint32_t bits = masks[par * 4 + wq];
      if (wg == 0) {
        dequant_rows<0, kPair>(stage, bits, sK, peer_k, wq, lane, rank);
      } else {
        dequant_rows<1, kPair>(stage, bits, sK, peer_k, wq, lane, rank);
      }
      fence_proxy_async();              // the K tile and Q (generic writes) -> the tensor cores
      if constexpr (kPair) {
        fence_proxy_async_cluster();    // ... and the rows written into the peer's tile
        cluster_arrive();               // both tiles are written once every thread has arrived
        __syncwarp();                   // this warp's staging rows are read
        if (has_next) issue(blk + 1, next_ids);
        cp_async_commit();
        cluster_wait();
      } else {
        named_barrier_sync(wg_bar, 128);  // the whole tile is written; the staging rows are free
        if (has_next) issue(blk + 1, next_ids);
        cp_async_commit();
      }

      // S_w = Q[:, dims of w] K[:, dims of w]^T: 16 k steps of 16 dims (4 per 64-dim chunk).
      float sacc[32];
#pragma unroll
      for (int i = 0; i < 32; ++i) sacc[i] = 0.0f;
      wgmma_fence();
#pragma unroll
      for (int ks = 0; ks < 16; ++ks) {
        const std::uint32_t off = (ks >> 2) * S9::kChunkBytes + (ks & 3) * 32;
        wgmma_m64n64k16_ss(sacc, sw128_desc(q_base + off, 16, 1024), sw128_desc(k_base + off, 16, 1024), ks > 0 ? 1 : 0);
      }
      wgmma_commit();
      wgmma_wait<0>();
      reg_fence(sacc);

      // S = S_0 + S_1: the thread with the same warp and lane in the other warpgroup holds the
      // same 32 elements; a + b == b + a, so both warpgroups get the same S.
#pragma unroll
      for (int v = 0; v < 8; ++v) x_own[32 * v] = make_float4(sacc[4 * v], sacc[4 * v + 1], sacc[4 * v + 2], sacc[4 * v + 3]);
      named_barrier_sync(pair_bar, 64);
#pragma unroll
      for (int v = 0; v < 8; ++v) {
        const float4 t = x_peer[32 * v];
        sacc[4 * v] += t.x;
        sacc[4 * v + 1] += t.y;
        sacc[4 * v + 2] += t.z;
        sacc[4 * v + 3] += t.w;
      }
      named_barrier_sync(pair_bar, 64);  // the peer has read this warp's partial

      // Online softmax. Element 4j + 2h + e of sacc: head row 16 wq + g + 8h, key 8j + 2 t4 + e.
      const std::uint64_t kmask = static_cast<std::uint64_t>(masks[par * 4]) |
                                  (static_cast<std::uint64_t>(masks[par * 4 + 1]) << 16) |
                                  (static_cast<std::uint64_t>(masks[par * 4 + 2]) << 32) |
                                  (static_cast<std::uint64_t>(masks[par * 4 + 3]) << 48);
      // Invalid keys -> -inf (raw scores; skipped when the whole block is valid, the common case).
      // The scale goes into the max afterwards (round(max v * s) == max round(v * s) for s > 0) and
      // into one fma per exponent.
      mask_invalid_keys(sacc, kmask, t4);
      float alpha[2];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const float m_new = fmaxf(m_run[h], block_row_max(sacc, h) * scale_log2);
        const bool none = m_new == kNegInf;  // no valid key in this row so far
        alpha[h] = none ? 1.0f : exp2f(m_run[h] - m_new);
        float sum = 0.0f;
#pragma unroll
        for (int j = 0; j < 8; ++j) {
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            float& v = sacc[4 * j + 2 * h + e];
            v = none ? 0.0f : exp2f(fmaf(v, scale_log2, -m_new));
            sum += v;
          }
        }
        l_run[h] = l_run[h] * alpha[h] + sum;
        m_run[h] = m_new;
      }
      rescale_o_rows(o, alpha);
      std::uint32_t pa[4][4];
      pack_p_fragments(sacc, pa);
      // O[:, dims of w] += P V[:, dims of w]: V = the K tile read MN-major (4 chunks of 64 dims
      // 8 KiB apart, 8-row groups 1 KiB apart); k step ks = rows 16 ks .. 16 ks + 15.
      wgmma_fence();
#pragma unroll
      for (int ks = 0; ks < 4; ++ks) {
        wgmma_m64n256k16_rs_tb(o, pa[ks], sw128_desc(k_base + ks * 2048, S9::kChunkBytes, 1024));
      }
      wgmma_commit();
    }
    cp_async_wait_all();  // no copy may still target shared memory (Q when the range was empty)
    wgmma_wait<0>();
    reg_fence(o);

    // Epilogue: this thread holds head rows 16 wq + g + 8h, dims 256 wg + 8j + 2 t4 (+1).
    float l_row[2];
    quad_row_sums(l_run, l_row);
    const int split_idx = split ? p.num_splits[r] + (r == begin_req ? begin_split : 0) : 0;
    store_o_rows_512(p, o, l_row, m_run, bs, s, split, split_idx, head0 + 16 * wq + g, wg, t4);
  }
#elif defined(__CUDA_ARCH__)
  // Compiled for sm_100a too; the host launches this kernel on compute capability 9.0 only.
  (void)p;
  __trap();
#endif
}

/// Body of the SM90 launch functions of decode_584.cu / decode_584_584.cu. With
/// MLAPLAN_DECODE_KERNEL=sm90_pair (sm90_pair_enabled, host.cpp), h_q 128 (grid z 2) runs the 2-CTA
/// cluster variant when every cluster of the grid, or one per two SMs, can be resident at once. It
/// is off by default: measured 1 us per block slower than the one-CTA kernel (docs/perf.md, "v5").
template <bool kHasExtra>
void launch_decode_sm90(const DecodeParams& p, const LaunchDims& d) {
  if (d.grid_z == 2 && sm90_pair_enabled()) {
    auto* pair = &sparse_decode_sm90_kernel<kHasExtra, true>;
    if (pair_clusters_fit(pair, d)) {
      launch_decode_grid(pair, p, d, "sparse_decode_sm90_kernel (2-CTA clusters)", 2);
      return;
    }
  }
  launch_decode_grid(&sparse_decode_sm90_kernel<kHasExtra, false>, p, d, "sparse_decode_sm90_kernel<<<...>>>");
}

}  // namespace mlaplan::kernels::detail
