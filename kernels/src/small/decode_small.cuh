#pragma once
// Small-head sparse-MLA decode: h_q 8 or 16 per CTA, unpadded (docs/kernels.md "Small heads").
//
// At 8 or 16 query heads per GPU (V4 / V4.1 at TP 8 or TP 4) a decode step reads far more bytes
// than it computes: 640 rows x 584 B per request against 2 x 16 x 512 multiply-adds per row. The
// 64-head kernels pad the heads to 64 and compute 7/8 (or 3/4) of their MMAs for nothing; this
// kernel runs one 16-row MMA tile of heads (rows 8..15 idle at h_q 8) and is built around keeping
// the loads in flight:
//   - 256 threads (8 warps), one CTA per SM (~213 KiB of shared memory, SmallSmemT);
//   - the raw rows of the next kStages - 1 blocks are in flight with cp.async while a block
//     computes, and the CTA's blocks are walked as one list across its requests (the loads of a
//     partition's next request start before the current one's epilogue);
//   - Q lives in registers: warp w holds the mma A fragments of head dims 64w .. 64w + 63 (and one
//     16-dim step of the RoPE for V3.2's 576-dim rows), loaded once per request;
//   - per 64-row block: dequantise the staged rows into sK (bf16), each warp's Q K^T over its dims
//     into its own S slice, the online softmax sums the eight slices (fp32, log2 domain), then
//     O += P V with warp w owning output dims 64w .. 64w + 63 (V = the first 512 dims of K).
// Work: one whole request per CTA (one_pass), or the requests and blocks of a tile-scheduler record
// (split_kv), whose split requests write fp32 partials normalised by their own sums and a log2 lse
// for combine.cu, as the 64-head kernels do.

#include "common/decode_device.cuh"
#include "common/decode_layout.hpp"
#include "portable/decode_kernel.cuh"

namespace mlaplan::kernels::detail {

template <RowFormat F>
using SmallGeometry = std::conditional_t<F == RowFormat::fp8_ds_mla_656, SmallSmem656, SmallSmem>;

/// Where a CTA is in its list of blocks: request r, block blk of it (r > last: done).
struct SmallCursor {
  int r;
  int blk;
};

template <RowFormat kMain, bool kHasExtra, RowFormat kExtra, int kHeadsQ>
__global__ void __launch_bounds__(SmallSmem::kDecodeThreads, 1) small_head_decode_kernel(const DecodeParams p) {
  using G = SmallGeometry<kMain>;
  static_assert(kHeadsQ == 8 || kHeadsQ == 16, "8 or 16 heads");
  static_assert(FormatTraits<kMain>::kDims == G::kQK && (!kHasExtra || FormatTraits<kExtra>::kDims == G::kQK),
                "main and extra rows hold the kernel's head dim");
  constexpr int kStages = G::kStages;
  constexpr int kRowsPerWarp = G::kRows / G::kDecodeWarps;  // rows a warp stages and dequantises
  constexpr bool kRope = G::kQK == 576;                     // warps 0..3 take one 16-dim RoPE step each
  constexpr int kQSteps = kRope ? 5 : 4;
  extern __shared__ __align__(16) std::uint8_t smem[];
  auto* stage = smem + G::stage;
  auto* sK = reinterpret_cast<__nv_bfloat16*>(smem + G::k);
  auto* sS = reinterpret_cast<float*>(smem + G::s);
  auto* sP = reinterpret_cast<__nv_bfloat16*>(smem + G::p);
  auto* sMax = reinterpret_cast<float*>(smem + G::row_max);
  auto* sSum = reinterpret_cast<float*>(smem + G::row_sum);
  auto* sAlpha = reinterpret_cast<float*>(smem + G::row_alpha);
  auto* sValid = reinterpret_cast<int*>(smem + G::valid);

  const int tid = static_cast<int>(threadIdx.x);
  const int warp = tid >> 5;
  const int lane = tid & 31;
  const int g = lane >> 2;
  const int t4 = lane & 3;
  const int part = static_cast<int>(blockIdx.x);
  const int s = static_cast<int>(blockIdx.y);
  const float scale_log2 = p.softmax_scale * 1.4426950408889634f;
  const float kNegInf = -__int_as_float(0x7F800000);
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");

  // P rows of heads that do not exist (h_q 8) stay zero: they only feed output rows nobody stores.
  if constexpr (kHeadsQ < G::kHeads) {
    for (int i = tid; i < (G::kHeads - kHeadsQ) * G::kPStride / 8; i += G::kDecodeThreads)
      reinterpret_cast<uint4*>(sP + kHeadsQ * G::kPStride)[i] = make_uint4(0, 0, 0, 0);
  }

  const bool one_pass = p.mode != DecodeMode::split_kv;
  int begin_req = part, end_req = part, begin_block = 0, end_block = 0x7FFFFFFF, begin_split = 0;
  bool first_split = false, last_split = false;
  grid_dependency_wait();
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
  const int last_req = min(end_req, p.b - 1);

  // Blocks of request r: ceil(max(len, 1) / 64) main ones, then ceil(elen / 64) extra ones.
  auto main_blocks = [&](int r) {
    const std::int32_t len = p.topk_length != nullptr ? p.topk_length[r] : p.topk;
    return (max(len, 1) + G::kRows - 1) / G::kRows;
  };
  auto extra_len = [&](int r) -> std::int32_t {
    if constexpr (!kHasExtra) return 0;
    return p.extra_topk_length != nullptr ? p.extra_topk_length[r] : p.extra_topk;
  };
  // The end (exclusive) of request r's blocks in this CTA.
  auto blocks_end = [&](int r) {
    const int n = main_blocks(r) + (kHasExtra ? (max(extra_len(r), 0) + G::kRows - 1) / G::kRows : 0);
    return r == end_req ? min(end_block, n) : n;
  };
  auto settle = [&](SmallCursor c) {  // moves past requests with nothing left here
    while (c.r <= last_req && c.blk >= blocks_end(c.r)) {
      ++c.r;
      c.blk = 0;
    }
    return c;
  };
  auto advance = [&](SmallCursor c) {
    ++c.blk;
    return settle(c);
  };

  // The index of one row of block c per lane (lanes < kRowsPerWarp; warp w owns rows w, w + 8, ..).
  auto load_ids = [&](SmallCursor c) -> std::int32_t {
    if (c.r > last_req || lane >= kRowsPerWarp) return -1;
    const std::int64_t bs = static_cast<std::int64_t>(c.r) * p.s_q + s;
    const int n_main = main_blocks(c.r);
    const std::int32_t* idx;
    std::int32_t first, limit;
    if (!kHasExtra || c.blk < n_main) {
      idx = p.indices + bs * p.topk;
      first = c.blk * G::kRows;
      const std::int32_t len = p.topk_length != nullptr ? p.topk_length[c.r] : p.topk;
      limit = min(len, p.topk);
    } else {
      idx = p.extra_indices + bs * p.extra_topk;
      first = (c.blk - n_main) * G::kRows;
      limit = min(extra_len(c.r), p.extra_topk);
    }
    const std::int32_t pos = first + warp + lane * G::kDecodeWarps;
    return pos < limit ? __ldg(idx + pos) : -1;
  };
  auto is_extra = [&](SmallCursor c) { return kHasExtra && c.blk >= main_blocks(c.r); };
  auto issue = [&](SmallCursor c, std::int32_t ids, int slot) {
    if (c.r > last_req) return;
    std::uint8_t* dst = stage + static_cast<std::size_t>(slot) * G::kRows * G::kStageStride;
    int* valid = sValid + slot * G::kRows;
    if (!is_extra(c)) {
      issue_block_rows<kMain, G>(p.main, ids, dst, valid, warp, lane);
    } else if constexpr (kHasExtra) {
      issue_block_rows<kExtra, G>(p.extra, ids, dst, valid, warp, lane);
    }
  };

  // Prologue: the first kStages - 1 blocks in flight, one commit group each. Their indices are
  // loaded first, all of them, so that their latencies overlap instead of adding up.
  SmallCursor cc = settle(SmallCursor{begin_req, begin_block});
  SmallCursor fc = cc;
  SmallCursor pro[kStages - 1];
  std::int32_t pro_ids[kStages - 1];
#pragma unroll
  for (int i = 0; i < kStages - 1; ++i) {
    pro[i] = fc;
    pro_ids[i] = load_ids(fc);
    fc = advance(fc);
  }
  std::int32_t fc_ids = load_ids(fc);  // the indices of the next block to issue, loaded one step early
#pragma unroll
  for (int i = 0; i < kStages - 1; ++i) {
    issue(pro[i], pro_ids[i], i);
    cp_async_commit();
  }

  const int dw = warp * 64;  // this warp's head dims of Q K^T and output dims of P V
  std::uint32_t qf[kQSteps][4];
  float acc[8][4];
  int cur_req = -1;
  for (int it = 0; cc.r <= last_req; ++it) {
    const int slot = it % kStages;
    // A new request: its Q (the A fragments of this warp's dims; loaded before the wait below, so
    // that their latency overlaps the rows'), and a zero output.
    const bool first = cc.r != cur_req;
    if (first) {
      cur_req = cc.r;
      const std::int64_t bs = static_cast<std::int64_t>(cc.r) * p.s_q + s;
      const std::uint16_t* q0 = p.q + bs * p.h_q * G::kQK;
#pragma unroll
      for (int k = 0; k < kQSteps; ++k) {
        const int d = k < 4 ? dw + 16 * k : 512 + 16 * warp;
        const bool has = k < 4 || warp < 4;
        const std::uint16_t* a = q0 + g * G::kQK + d + 2 * t4;
        qf[k][0] = has ? __ldg(reinterpret_cast<const unsigned int*>(a)) : 0u;
        qf[k][2] = has ? __ldg(reinterpret_cast<const unsigned int*>(a + 8)) : 0u;
        if constexpr (kHeadsQ == 16) {
          qf[k][1] = has ? __ldg(reinterpret_cast<const unsigned int*>(a + 8 * G::kQK)) : 0u;
          qf[k][3] = has ? __ldg(reinterpret_cast<const unsigned int*>(a + 8 * G::kQK + 8)) : 0u;
        } else {
          qf[k][1] = qf[k][3] = 0u;
        }
      }
#pragma unroll
      for (int j = 0; j < 8; ++j) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.0f;
    }

    asm volatile("cp.async.wait_group %0;\n" ::"n"(kStages - 2) : "memory");
    __syncthreads();  // block `it` staged; every warp is done with the previous block's sK, sS, sP
    issue(fc, fc_ids, (it + kStages - 1) % kStages);
    cp_async_commit();
    fc = advance(fc);
    fc_ids = load_ids(fc);

    // Dequantise the staged rows into sK.
    {
      const std::uint8_t* st = stage + static_cast<std::size_t>(slot) * G::kRows * G::kStageStride;
      const int* valid = sValid + slot * G::kRows;
      if (!is_extra(cc)) {
        dequant_block<kMain, G>(st, valid, sK, warp, lane, p.main.scale);
      } else if constexpr (kHasExtra) {
        dequant_block<kExtra, G>(st, valid, sK, warp, lane, p.extra.scale);
      }
    }
    __syncthreads();

    // This warp's part of S = Q K^T: all 64 keys over its dims, into its own S slice.
    {
      float sacc[8][4];
#pragma unroll
      for (int j = 0; j < 8; ++j) sacc[j][0] = sacc[j][1] = sacc[j][2] = sacc[j][3] = 0.0f;
#pragma unroll
      for (int k = 0; k < kQSteps; ++k) {
        if (k == 4 && warp >= 4) break;  // the RoPE steps (576-dim rows): warps 0..3
        const int d = k < 4 ? dw + 16 * k : 512 + 16 * warp;
        const __nv_bfloat16* kb = sK + ((lane & 7) + (lane >> 4) * 8) * G::kQKStride + ((lane >> 3) & 1) * 8 + d;
#pragma unroll
        for (int n = 0; n < 4; ++n) {
          std::uint32_t b[4];
          ldmatrix_x4(b, kb + 16 * n * G::kQKStride);
          mma_bf16_16816(sacc[2 * n], qf[k], b[0], b[1]);
          mma_bf16_16816(sacc[2 * n + 1], qf[k], b[2], b[3]);
        }
      }
      float* sw = sS + warp * G::s_warp;
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const int col = 8 * j + 2 * t4;
        *reinterpret_cast<float2*>(sw + g * G::kSStride + col) = make_float2(sacc[j][0], sacc[j][1]);
        if constexpr (kHeadsQ == 16)
          *reinterpret_cast<float2*>(sw + (g + 8) * G::kSStride + col) = make_float2(sacc[j][2], sacc[j][3]);
      }
    }
    __syncthreads();

    // Online softmax: 16 threads per head row, 4 keys each; S = the sum of the eight slices.
    if (tid < kHeadsQ * 16) {
      const int row = tid >> 4;
      const int c0 = (tid & 15) * 4;
      const int* valid = sValid + slot * G::kRows;
      float v[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
      for (int w = 0; w < G::kDecodeWarps; ++w) {
        const float4 x = *reinterpret_cast<const float4*>(sS + w * G::s_warp + row * G::kSStride + c0);
        v[0] += x.x;
        v[1] += x.y;
        v[2] += x.z;
        v[3] += x.w;
      }
      float mx = kNegInf;
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        v[i] = valid[c0 + i] != 0 ? v[i] * scale_log2 : kNegInf;
        mx = fmaxf(mx, v[i]);
      }
#pragma unroll
      for (int off = 1; off < 16; off <<= 1) mx = fmaxf(mx, __shfl_xor_sync(0xFFFFFFFFu, mx, off));
      const float m_old = first ? kNegInf : sMax[row];
      const float l_old = first ? 0.0f : sSum[row];
      const float m_new = fmaxf(m_old, mx);
      const bool none = m_new == kNegInf;
      const float alpha = none ? 1.0f : exp2f(m_old - m_new);
      float pv[4];
      float sum = 0.0f;
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        pv[i] = none ? 0.0f : exp2f(v[i] - m_new);
        sum += pv[i];
      }
#pragma unroll
      for (int off = 1; off < 16; off <<= 1) sum += __shfl_xor_sync(0xFFFFFFFFu, sum, off);
      *reinterpret_cast<uint2*>(sP + row * G::kPStride + c0) =
          make_uint2(pack_bf16x2(pv[0], pv[1]), pack_bf16x2(pv[2], pv[3]));
      __syncwarp();  // every thread of the row has read sMax / sSum (m_old, l_old) before they change
      if ((tid & 15) == 0) {
        sMax[row] = m_new;
        sSum[row] = l_old * alpha + sum;
        sAlpha[row] = alpha;
      }
    }
    __syncthreads();

    // O = O * alpha + P V over this warp's 64 output dims.
    {
      const float a_lo = sAlpha[g];
      const float a_hi = kHeadsQ == 16 ? sAlpha[g + 8] : 1.0f;
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        acc[j][0] *= a_lo;
        acc[j][1] *= a_lo;
        acc[j][2] *= a_hi;
        acc[j][3] *= a_hi;
      }
      const __nv_bfloat16* pa = sP + (lane & 15) * G::kPStride + (lane >> 4) * 8;
      const int lrow = (lane & 7) + ((lane >> 3) & 1) * 8;
      const int lcol = (lane >> 4) * 8;
#pragma unroll
      for (int kk = 0; kk < G::kRows; kk += 16) {
        std::uint32_t a[4];
        ldmatrix_x4(a, pa + kk);
        const __nv_bfloat16* vb = sK + (kk + lrow) * G::kQKStride + dw + lcol;
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          std::uint32_t b[4];
          ldmatrix_x4_trans(b, vb + j * 16);
          mma_bf16_16816(acc[2 * j], a, b[0], b[1]);
          mma_bf16_16816(acc[2 * j + 1], a, b[2], b[3]);
        }
      }
    }

    const SmallCursor next = advance(cc);
    if (next.r != cc.r) {
      // Epilogue of request cc.r (sMax / sSum are final: written before the last barrier). This
      // thread holds heads g (and g + 8 at h_q 16), dims dw + 8j + 2 t4 (+1).
      const int r = cc.r;
      const bool split = (r == begin_req && first_split) || (r == end_req && last_split);
      const std::int64_t bs = static_cast<std::int64_t>(r) * p.s_q + s;
#pragma unroll
      for (int half = 0; half < kHeadsQ / 8; ++half) {
        const int head = g + 8 * half;
        const float l = sSum[head];
        const float m = sMax[head];
        if (!split) {
          const std::int64_t orow = bs * p.h_q + head;
          const RowFinish f = finish_row(p, l, m, head);
          std::uint32_t* dst = reinterpret_cast<std::uint32_t*>(p.out + orow * G::kDim + dw + 2 * t4);
#pragma unroll
          for (int j = 0; j < 8; ++j)
            dst[j * 4] = pack_bf16x2(acc[j][2 * half] * f.factor, acc[j][2 * half + 1] * f.factor);
          if (warp == 0 && t4 == 0) p.lse[orow] = f.lse;
        } else {
          const int split_idx = p.num_splits[r] + (r == begin_req ? begin_split : 0);
          const std::int64_t arow = (static_cast<std::int64_t>(split_idx) * p.s_q + s) * p.h_q + head;
          const float factor = l > 0.0f ? 1.0f / l : 0.0f;
          float* dst = p.o_accum + arow * G::kDim + dw + 2 * t4;
#pragma unroll
          for (int j = 0; j < 8; ++j)
            *reinterpret_cast<float2*>(dst + 8 * j) =
                make_float2(acc[j][2 * half] * factor, acc[j][2 * half + 1] * factor);
          if (warp == 0 && t4 == 0) p.lse_accum[arow] = partial_lse(l, m);
        }
      }
    }
    cc = next;
  }
  cp_async_wait_all();  // no copy may still target shared memory when the CTA exits
}

/// Body of the launch functions of small/decode_small_*.cu.
template <RowFormat kMain, bool kHasExtra, RowFormat kExtra, int kHeadsQ>
void launch_small_decode(const DecodeParams& p, const DecodeLaunch& launch) {
  launch_decode_grid(&small_head_decode_kernel<kMain, kHasExtra, kExtra, kHeadsQ>, p, launch,
                     "small_head_decode_kernel<<<...>>>");
}

}  // namespace mlaplan::kernels::detail
