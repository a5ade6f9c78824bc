#pragma once
// Warp-specialised small-head sparse-MLA decode on sm_90a: h_q 8 or 16 per CTA, unpadded, for the
// fp8_ds_mla 584 rows (main cache alone or main + extra 584 cache) on compute capability 9.0, the
// default there for those shapes (DecodeForce::kernel = small_heads runs the portable kernel instead;
// docs/kernels.md "Small heads"; docs/perf-history.md "v15" to "v19").
//
// Same contract as the other decode kernels (DecodeParams, split_kv records or one_pass over
// request ranges, fp32 partials for combine.cu). Grid (P or CTAs, s_q, 1), 512 threads, one CTA
// per SM (DecodeSm90SmallSmem):
// - warpgroups 2 and 3, the producers: ws_producer (sm90/decode_ws.cuh; the 64-head kernel's
//   steps with each row part loaded in two halves, one half ahead, and the integer e4m3 -> bf16):
//   every 64-row block gathered, dequantised into K buffer (block & 1) and handed over on mbarrier
//   `full`.
// - warpgroups 0 and 1, the math: warpgroup w owns buffer w, i.e. every other block of the CTA's
//   sequence, with its own running maxima, sums and output. Per block: S^T = K Q^T (32 wgmma
//   m64n16k16: the 64 keys are M, the 16 heads N; both operands from shared memory), the online
//   softmax over the keys (one named barrier to share the four warps' maxima), P^T into the
//   warpgroup's P slot, O^T += V^T P^T (32 wgmma m64n16k16, V^T read MN-major from the same K
//   buffer), then the buffer goes back to the producers. At the end of a request the two
//   warpgroups' partial results are merged through shared memory (each at the common maxima) and
//   written with 16-byte stores.
// At h_q 8 the MMAs still run N = 16 (rows 8..15 of Q stay zero, their outputs are never stored):
// the math is not what bounds this kernel, the row reads and their dequantisation are.

#include "common/decode_layout.hpp"
#include "sm90/decode_ws.cuh"

namespace mlaplan::kernels::detail {

using S9 = DecodeSm90SmallSmem;

#if MLAPLAN_SM90A_WGMMA
/// The math of one warpgroup (wg 0 or 1) over the CTA's work w (see the file comment).
template <bool kHasExtra>
__device__ __forceinline__ void small_ws_math(const DecodeParams& p, std::uint8_t* smem, const WsWork& w) {
  const int tid = static_cast<int>(threadIdx.x);  // 0 .. 255
  const int wg = tid >> 7;
  const int wq = (tid >> 5) & 3;
  const int lane = tid & 31;
  const int g = lane >> 2;
  const int t4 = lane & 3;
  const float scale_log2 = p.softmax_scale * 1.4426950408889634f;
  const float kNegInf = -__int_as_float(0x7F800000);
  constexpr int kMathBar = 3;  // the 256 math threads (ids 1, 2: warpgroup 0, 1)
  const int wg_bar = 1 + wg;
  float* xmax = reinterpret_cast<float*>(smem + S9::xmax);  // [wg][parity][warp][16]
  float* xsum = reinterpret_cast<float*>(smem + S9::xsum);  // [wg][warp][16]
  float* xrun = reinterpret_cast<float*>(smem + S9::xrun);  // [wg][16]
  float* so = reinterpret_cast<float*>(smem + S9::o);       // [2 wg][16][kOStride]
  std::uint8_t* my_p = smem + S9::p + wg * S9::kQChunkBytes;
  const std::uint8_t* masks = smem + S9::mask;
  // Descriptors: K buffer wg (K-major: A of S^T), Q (K-major: B of S^T), V^T = the same buffer read
  // MN-major (A of O^T, one 64-dim chunk per instruction), P^T (K-major: B of O^T).
  const std::uint32_t kbuf = smem_addr(smem + S9::k) + static_cast<std::uint32_t>(wg) * S9::kTileBytes;
  const std::uint64_t k_desc = sw128_desc(kbuf, 16, 1024);
  const std::uint64_t q_desc = sw128_desc(smem_addr(smem + S9::q), 16, 1024);
  const std::uint64_t v_desc = sw128_desc(kbuf, S9::kChunkBytes, 1024);
  const std::uint64_t p_desc = sw128_desc(smem_addr(my_p), 16, 1024);
  const std::uint32_t bar_staged = smem_addr(smem + S9::bars) + 32;  // staged + 8 wg, sums + 16 + 8 wg
  std::uint32_t it = 0;            // blocks of the CTA's sequence before the current request
  std::uint32_t staged_phase = 0;  // parity of the `staged` barriers' current phase (one per request)
  // Per-block timelines in a -DMLAPLAN_WS_TRACE build (decode_ws.cuh's WsTrace, the 64-head kernel's
  // event numbers): 10 Q ready, 14 `full` arrived, 15 S^T done, 16 P^T in the slot, 11 P V done and
  // the buffer released, 17 / 18 epilogue start / end; inside the epilogue 20 / 21 around the sums'
  // handoff, 22 the lse written, 23 / 24 around the staging handoff.
  WsTrace tr;
  tr.init(1 + wg, p.mode != DecodeMode::split_kv);

  // The attention sinks of this thread's four head columns (8 j + 2 t4 + e), loaded once: read at
  // the end of each request they were a global load on the epilogue's critical path (~1,000 of its
  // cycles in a one_pass trace, docs/perf-history.md "v20").
  const bool has_sink = p.attn_sink != nullptr;
  float sink[4];
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const int hd = 8 * (k >> 1) + 2 * t4 + (k & 1);
    sink[k] = has_sink && hd < p.h_q ? p.attn_sink[hd] : 0.0f;
  }

  for (int r = w.begin_req; r <= w.end_req && r < p.b; ++r) {
    const WsRequest q = ws_request<kHasExtra>(p, r, w.s, w.begin_req, w.end_req, w.begin_block, w.end_block);
    const bool split = (r == w.begin_req && w.first_split) || (r == w.end_req && w.last_split);
    // Where this CTA's partial goes (split): loaded here, not in the epilogue that stores it.
    const int split_idx = split ? p.num_splits[r] + (r == w.begin_req ? w.begin_split : 0) : 0;

    // Q: h_q rows x 512 dims into the 8 chunks (16 rows of 128 bytes each, 128-byte swizzled).
    // Both warpgroups are done with the previous request's Q, staging and exchange areas.
    named_barrier_sync(kMathBar, 256);
    {
      const std::uint16_t* q0 = p.q + q.bs * p.h_q * 512;
      for (int i = tid; i < p.h_q * 64; i += 256) {
        const int n = i >> 6;
        const int u = i & 63;
        cp_async_16(smem + S9::q + (u >> 3) * S9::kQChunkBytes + n * 128 + (((u & 7) ^ (n & 7)) << 4),
                    q0 + n * 512 + 8 * u);
      }
      cp_async_commit();
      cp_async_wait_all();
      fence_proxy_async();
    }
    named_barrier_sync(kMathBar, 256);
    tr(10);

    // o[c][4j + 2h + e]: dim 64c + 16wq + g + 8h, head 8j + 2t4 + e. Per head column i = 2j + e:
    // the running maximum (log2 domain; the same in every thread of the warpgroup) and this
    // thread's part of the running sum (its two keys of every block).
    float o[8][8];
#pragma unroll
    for (int c = 0; c < 8; ++c) {
#pragma unroll
      for (int k = 0; k < 8; ++k) o[c][k] = 0.0f;
    }
    float m_run[4] = {kNegInf, kNegInf, kNegInf, kNegInf};
    float l_run[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    const int nblk = max(q.blk1 - q.blk0, 0);

    for (int i = ((it & 1u) == static_cast<std::uint32_t>(wg)) ? 0 : 1; i < nblk; i += 2) {
      const std::uint32_t gb = it + static_cast<std::uint32_t>(i);  // gb & 1 == wg
      mbar_wait(w.bar_full + 8 * wg, (gb >> 1) & 1u);
      tr(14);

      // S^T = K Q^T: 32 k steps of 16 dims.
      float sacc[8];
      wgmma_fence();
#pragma unroll
      for (int ks = 0; ks < 32; ++ks) {
        const std::uint32_t koff = ((ks >> 2) * S9::kChunkBytes + (ks & 3) * 32) >> 4;
        const std::uint32_t qoff = ((ks >> 2) * S9::kQChunkBytes + (ks & 3) * 32) >> 4;
        wgmma_m64n16k16_ss(sacc, desc_add(k_desc, koff), desc_add(q_desc, qoff), ks > 0 ? 1 : 0);
      }
      wgmma_commit();
      wgmma_wait<0>();
      reg_fence(sacc);
      tr(15);

      // Keys without a valid row -> -inf; this warp's maxima per head, then the warpgroup's.
      const std::uint64_t kmask = *reinterpret_cast<const std::uint64_t*>(masks + wg * 16);
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        if (((kmask >> (16 * wq + g + 8 * h)) & 1ull) == 0ull) {
          sacc[2 * h] = sacc[2 * h + 1] = sacc[4 + 2 * h] = sacc[4 + 2 * h + 1] = kNegInf;
        }
      }
      float bm[4];
#pragma unroll
      for (int j = 0; j < 2; ++j) {
#pragma unroll
        for (int e = 0; e < 2; ++e) bm[2 * j + e] = fmaxf(sacc[4 * j + e], sacc[4 * j + 2 + e]);
      }
#pragma unroll
      for (int off = 4; off < 32; off <<= 1) {
#pragma unroll
        for (int k = 0; k < 4; ++k) bm[k] = fmaxf(bm[k], __shfl_xor_sync(0xFFFFFFFFu, bm[k], off));
      }
      float* xm = xmax + (wg * 2 + static_cast<int>((gb >> 1) & 1u)) * 4 * 16;
      if (g == 0) {
#pragma unroll
        for (int j = 0; j < 2; ++j) {
#pragma unroll
          for (int e = 0; e < 2; ++e) xm[wq * 16 + 8 * j + 2 * t4 + e] = bm[2 * j + e];
        }
      }
      named_barrier_sync(wg_bar, 128);
      float alpha[4];
      float m_use[4];
#pragma unroll
      for (int j = 0; j < 2; ++j) {
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int hd = 8 * j + 2 * t4 + e;
          const int k = 2 * j + e;
          const float b = fmaxf(fmaxf(xm[hd], xm[16 + hd]), fmaxf(xm[32 + hd], xm[48 + hd]));
          const float m_new = fmaxf(m_run[k], b * scale_log2);
          // No valid key in this column so far: exponents relative to 0 give P = 0 and alpha 0.
          m_use[k] = m_new == kNegInf ? 0.0f : m_new;
          alpha[k] = fast_exp2(m_run[k] - m_use[k]);
          m_run[k] = m_new;
          l_run[k] *= alpha[k];
        }
      }
      // P^T into this warpgroup's slot: row = head, 128 bytes = 64 keys, 16-byte unit key / 8 XOR
      // (head & 7). (The previous block's P V has retired: its wait came before the release.)
#pragma unroll
      for (int j = 0; j < 2; ++j) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
#pragma unroll
          for (int e = 0; e < 2; ++e) {
            const int k = 2 * j + e;
            const float v = fast_exp2(fmaf(sacc[4 * j + 2 * h + e], scale_log2, -m_use[k]));
            l_run[k] += v;
            const int key = 16 * wq + g + 8 * h;
            const int hd = 8 * j + 2 * t4 + e;
            *reinterpret_cast<__nv_bfloat16*>(my_p + hd * 128 + (((key >> 3) ^ (hd & 7)) << 4) + 2 * (key & 7)) =
                __float2bfloat16_rn(v);
          }
        }
      }
      fence_proxy_async();  // P^T (generic writes) -> this warpgroup's wgmma
      named_barrier_sync(wg_bar, 128);
      tr(16);

      // O^T at the new maxima, then O^T += V^T P^T: 4 k steps of 16 keys x 8 chunks of 64 dims.
#pragma unroll
      for (int c = 0; c < 8; ++c) {
#pragma unroll
        for (int j = 0; j < 2; ++j) {
#pragma unroll
          for (int h = 0; h < 2; ++h) {
#pragma unroll
            for (int e = 0; e < 2; ++e) o[c][4 * j + 2 * h + e] *= alpha[2 * j + e];
          }
        }
      }
#pragma unroll
      for (int c = 0; c < 8; ++c) reg_fence(o[c]);
      wgmma_fence();
#pragma unroll
      for (int ks = 0; ks < 4; ++ks) {
#pragma unroll
        for (int c = 0; c < 8; ++c) {
          wgmma_m64n16k16_ss_ta(o[c], desc_add(v_desc, (c * S9::kChunkBytes + ks * 2048) >> 4),
                                desc_add(p_desc, 2 * ks));
        }
      }
      wgmma_commit();
      wgmma_wait<0>();
#pragma unroll
      for (int c = 0; c < 8; ++c) reg_fence(o[c]);
      mbar_arrive(w.bar_empty + 8 * wg);  // K buffer wg back to the producers
      tr(11);
    }
    it += static_cast<std::uint32_t>(nblk);
    tr(17);

    // Merge the two warpgroups: per head, each warpgroup's maximum and sum (over its four warps).
#pragma unroll
    for (int k = 0; k < 4; ++k) {
#pragma unroll
      for (int off = 4; off < 32; off <<= 1) l_run[k] += __shfl_xor_sync(0xFFFFFFFFu, l_run[k], off);
    }
    if (g == 0) {
#pragma unroll
      for (int j = 0; j < 2; ++j) {
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int hd = 8 * j + 2 * t4 + e;
          xsum[(wg * 4 + wq) * 16 + hd] = l_run[2 * j + e];
          if (wq == 0) xrun[wg * 16 + hd] = m_run[2 * j + e];
        }
      }
    }
    // Both warpgroups' maxima and sums, handed over by mbarriers as the staging below is (the `sums`
    // barriers, one phase per request): with bar.sync 3, 256 here racecheck reported these pairs
    // once the staging went through mbarriers (docs/perf-history.md "v18").
    tr(20);
    mbar_arrive(bar_staged + 16 + 8 * wg);
    mbar_wait(bar_staged + 16, staged_phase);
    mbar_wait(bar_staged + 24, staged_phase);
    tr(21);
    // Head hd: the merged maximum m and sum l; factor = this warpgroup's weight times the finish
    // factor (split: 1 / l, the partial normalised by its own sum).
    auto merged = [&](int hd, float& m, float& l, float(&wgt)[2]) {
      const float m0 = xrun[hd];
      const float m1 = xrun[16 + hd];
      m = fmaxf(m0, m1);
      const float mu = m == kNegInf ? 0.0f : m;
      wgt[0] = fast_exp2(m0 - mu);
      wgt[1] = fast_exp2(m1 - mu);
      float l0 = 0.0f, l1 = 0.0f;
#pragma unroll
      for (int x = 0; x < 4; ++x) {
        l0 += xsum[x * 16 + hd];
        l1 += xsum[(4 + x) * 16 + hd];
      }
      l = l0 * wgt[0] + l1 * wgt[1];
    };
    const std::int64_t arow0 = (static_cast<std::int64_t>(split_idx) * p.s_q + q.s) * p.h_q;
    float factor[4];
#pragma unroll
    for (int j = 0; j < 2; ++j) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int hd = 8 * j + 2 * t4 + e;
        float m, l, wgt[2];
        merged(hd, m, l, wgt);
        const float f = split ? (l > 0.0f ? 1.0f / l : 0.0f)
                              : (hd < p.h_q ? finish_row_with(l, m, has_sink, sink[2 * j + e]).factor : 0.0f);
        factor[2 * j + e] = (wg == 0 ? wgt[0] : wgt[1]) * f;
      }
    }
    // Threads 0..3 (warpgroup 0, warp 0, g 0) hold the 16 head columns between them: they write the
    // rows' lse (bf16 out) or the partials' lse (split) before the staging handoff, so nothing
    // reads the exchanged sums after it. They merge their four heads again rather than keep m and l
    // from the loop above: done inside it, the lse writes cost 24 bytes of spills (ptxas, sm_90a).
    if (wg == 0 && wq == 0 && g == 0) {
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        const int hd = 8 * (k >> 1) + 2 * t4 + (k & 1);
        if (hd < p.h_q) {
          float m, l, wgt[2];
          merged(hd, m, l, wgt);
          if (split) {
            p.lse_accum[arow0 + hd] = partial_lse(l, m);
          } else {
            p.lse[q.bs * p.h_q + hd] = finish_row_with(l, m, has_sink, sink[k]).lse;
          }
        }
      }
    }
    tr(22);
    // Each warpgroup writes its scaled O into its own staging rows; the stores below add the two.
    {
      float* mine = so + wg * S9::o_half;
#pragma unroll
      for (int c = 0; c < 8; ++c) {
#pragma unroll
        for (int j = 0; j < 2; ++j) {
#pragma unroll
          for (int h = 0; h < 2; ++h) {
#pragma unroll
            for (int e = 0; e < 2; ++e) {
              mine[(8 * j + 2 * t4 + e) * S9::kOStride + 64 * c + 16 * wq + g + 8 * h] =
                  o[c][4 * j + 2 * h + e] * factor[2 * j + e];
            }
          }
        }
      }
    }
    // The handoff: each warpgroup's 128 threads arrive on its own `staged` barrier after their
    // stores (an mbarrier arrive releases the arriving thread's writes), and every thread waits for
    // both before the loads below. (A named barrier of the 256 threads orders the same pairs, but
    // compute-sanitizer's racecheck reported them as hazards; with this handoff none of the reports
    // it displayed was on the staging: docs/perf-history.md "v16" to "v18".) The next request's
    // first named barrier keeps the stores of request r + 1 after every load of request r.
    tr(23);
    mbar_arrive(bar_staged + 8 * wg);
    mbar_wait(bar_staged, staged_phase);
    mbar_wait(bar_staged + 8, staged_phase);
    staged_phase ^= 1u;
    tr(24);
    auto staged4 = [&](int n, int d) {  // dims d .. d + 3 of head n, both warpgroups' parts added
      const float4 a = *reinterpret_cast<const float4*>(so + n * S9::kOStride + d);
      const float4 b = *reinterpret_cast<const float4*>(so + S9::o_half + n * S9::kOStride + d);
      return make_float4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w);
    };
    // The rows out (their lse went out above): bf16 out, 8 dims per 16-byte store, or the fp32 partial.
    if (!split) {
      for (int i = tid; i < p.h_q * 64; i += 256) {
        const int n = i >> 6;
        const int u = i & 63;
        const float4 a = staged4(n, 8 * u);
        const float4 b = staged4(n, 8 * u + 4);
        *reinterpret_cast<uint4*>(p.out + (q.bs * p.h_q + n) * 512 + 8 * u) =
            make_uint4(pack_bf16x2(a.x, a.y), pack_bf16x2(a.z, a.w), pack_bf16x2(b.x, b.y), pack_bf16x2(b.z, b.w));
      }
    } else {
      for (int i = tid; i < p.h_q * 128; i += 256) {
        const int n = i >> 7;
        const int u = i & 127;
        *reinterpret_cast<float4*>(p.o_accum + (arow0 + n) * 512 + 4 * u) = staged4(n, 4 * u);
      }
    }
    tr(18);
  }
}
#endif  // MLAPLAN_SM90A_WGMMA

template <bool kHasExtra>
__global__ void __launch_bounds__(S9::kThreads, 1) small_decode_sm90ws_kernel(const DecodeParams p) {
#if MLAPLAN_SM90A_WGMMA
  extern __shared__ __align__(1024) std::uint8_t smem_raw[];
  std::uint8_t* smem = smem_raw + ((1024u - (smem_addr(smem_raw) & 1023u)) & 1023u);
  const int tid = static_cast<int>(threadIdx.x);
  const int wg = tid >> 7;  // 0, 1: math; 2, 3: producers
  const int part = static_cast<int>(blockIdx.x);
  const int s = static_cast<int>(blockIdx.y);
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");

  const std::uint32_t bar_full = smem_addr(smem + S9::bars);  // + 8 buf
  const std::uint32_t bar_empty = bar_full + 16;              // + 8 buf
  if (tid == 0) {
    mbar_init(bar_full, 256);  // every producer thread
    mbar_init(bar_full + 8, 256);
    mbar_init(bar_empty, 128);  // every thread of the math warpgroup that owns the buffer
    mbar_init(bar_empty + 8, 128);
    // staged[wg], then sums[wg]: every thread of math warpgroup wg arrives once per request.
    for (int i = 2; i < 6; ++i) mbar_init(bar_empty + 8 * i, 128);
  }
  // Rows h_q .. 15 of Q stay zero (h_q 8): their columns of S^T are 0, never stored.
  if (tid < 256) {
    for (int i = p.h_q * 64 + tid; i < S9::kHeads * 64; i += 256) {
      const int n = i >> 6;
      const int u = i & 63;
      *reinterpret_cast<uint4*>(smem + S9::q + (u >> 3) * S9::kQChunkBytes + n * 128 + (((u & 7) ^ (n & 7)) << 4)) =
          make_uint4(0u, 0u, 0u, 0u);
    }
    fence_proxy_async();
  }
  __syncthreads();

  const bool one_pass = p.mode != DecodeMode::split_kv;
  WsWork w{part, part, 0, 0x7FFFFFFF, 0, false, false, s, 0, bar_full, bar_empty};
  grid_dependency_wait();  // split_kv: the scheduler's records (launch_decode_grid)
  if (one_pass && static_cast<int>(gridDim.x) < p.b) {
    // Fewer CTAs than requests (plan_decode_launch): a contiguous range of whole requests each.
    w.begin_req = static_cast<int>(static_cast<std::int64_t>(part) * p.b / gridDim.x);
    w.end_req = static_cast<int>(static_cast<std::int64_t>(part + 1) * p.b / gridDim.x) - 1;
  } else if (!one_pass) {
    const std::int32_t* rec = p.sched_records + part * 8;
    w.begin_req = rec[0];
    w.end_req = rec[1];
    w.begin_block = rec[2];
    w.end_block = rec[3];
    w.begin_split = rec[4];
    w.first_split = rec[5] != 0;
    w.last_split = rec[6] != 0;
  }
  if (wg >= 2) {
    setmaxnreg_dec<S9::kProducerRegs>();
    ws_producer<kHasExtra, false, S9>(p, smem, w, p.h_q, one_pass);
    return;
  }
  setmaxnreg_inc<S9::kMathRegs>();
  small_ws_math<kHasExtra>(p, smem, w);
#elif defined(__CUDA_ARCH__)
  // Compiled for sm_100a too; the host launches this kernel on compute capability 9.0 only.
  (void)p;
  __trap();
#endif
}

/// Body of the launch functions of sm90/decode_small_ws_*.cu.
template <bool kHasExtra>
void launch_small_decode_sm90ws(const DecodeParams& p, const DecodeLaunch& launch) {
  launch_decode_grid(&small_decode_sm90ws_kernel<kHasExtra>, p, launch, "small_decode_sm90ws_kernel<<<...>>>");
}

}  // namespace mlaplan::kernels::detail
