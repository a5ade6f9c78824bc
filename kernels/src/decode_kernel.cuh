#pragma once
// Sparse-MLA decode kernel, head dim 512, split-KV driven by the tile-scheduler records
// (docs/kernels.md; docs/scheduler.md).
//
// Grid (num_sm_parts or b, s_q, h_q / 64), 512 threads (16 warps), one CTA per SM (~194 KiB of
// shared memory). A CTA owns 64 query heads of one query token and walks the requests and 64-row blocks
// its record names. Per block:
//   1. the raw rows of the block were copied into a staging area with cp.async while the previous
//      block computed; they are dequantised to bf16 into sK (invalid rows -> zeros);
//   2. S = Q K^T with bf16 mma.sync m16n8k16, fp32 accumulation, scaled into the log2 domain and
//      masked (-inf) for invalid rows -> sS;
//   3. online softmax per head row in fp32 (running max and sum), P as bf16 -> sP;
//   4. O = O * alpha + P V (V = K, the same 512 values) with mma.sync; O lives in registers.
// At the end of a request the CTA writes bf16 out + natural-log lse (request not split), or an
// fp32 partial normalised by its own sum + its lse in log2 (split); combine.cu merges partials.
//
// Template parameters: the main cache format and the extra cache format (kHasExtra false: none).

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <map>
#include <mutex>
#include <tuple>

#include "cuda_check.hpp"
#include "decode_layout.hpp"
#include "formats.cuh"
#include "launchers.hpp"
#include "mlaplan_kernels/kernels.hpp"

namespace mlaplan::kernels::detail {

using L = DecodeSmem;

__device__ __forceinline__ void mma_bf16_16816(float (&c)[4], const std::uint32_t (&a)[4], std::uint32_t b0,
                                               std::uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ void ldmatrix_x4_trans(std::uint32_t (&r)[4], const void* smem) {
  const auto addr = static_cast<std::uint32_t>(__cvta_generic_to_shared(smem));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

__device__ __forceinline__ void ldmatrix_x4(std::uint32_t (&r)[4], const void* smem) {
  const auto addr = static_cast<std::uint32_t>(__cvta_generic_to_shared(smem));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

__device__ __forceinline__ void cp_async_16(void* smem, const void* gmem) {
  const auto addr = static_cast<std::uint32_t>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(addr), "l"(gmem));
}

__device__ __forceinline__ void cp_async_8(void* smem, const void* gmem) {
  const auto addr = static_cast<std::uint32_t>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8;\n" ::"r"(addr), "l"(gmem));
}

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_group 0;\n" ::: "memory"); }

/// griddepcontrol.wait: returns once every prerequisite grid of a programmatic dependent launch
/// has completed and its memory operations are visible; at once when there is none.
__device__ __forceinline__ void grid_dependency_wait() { asm volatile("griddepcontrol.wait;\n" ::: "memory"); }

__device__ __forceinline__ std::uint32_t pack_bf16x2(float lo, float hi) {
  const __nv_bfloat162 b = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const std::uint32_t*>(&b);
}

/// Head dims 256 wg .. 256 wg + 255 of the 64 query rows of (request x s_q + token) bs, heads
/// head0 .., copied (cp.async, not yet committed) into the sm_90a kernels' Q tile: 8 chunks of 64
/// dims x 64 rows, 128-byte rows swizzled (16-byte unit u of row r at u ^ (r & 7)), the layout
/// wgmma reads. By the 128 threads of warpgroup wg (wt = thread in the warpgroup).
__device__ __forceinline__ void issue_q_half_sw128(const DecodeParams& p, std::uint8_t* sQ, std::int64_t bs,
                                                   int head0, int wg, int wt) {
  constexpr int kChunk = 64 * 128;
  const std::uint16_t* qsrc = p.q + (bs * p.h_q + head0) * 512 + 256 * wg;
#pragma unroll
  for (int k = 0; k < 16; ++k) {
    const int i = wt + 128 * k;
    const int row = i >> 5;
    const int unit = i & 31;
    const int u = unit & 7;
    cp_async_16(sQ + (4 * wg + (unit >> 3)) * kChunk + row * 128 + ((u ^ (row & 7)) << 4), qsrc + row * 512 + unit * 8);
  }
}

/// The full row sums of the sm_90a kernels' two rows per thread: each of a quad's 4 threads holds
/// its 16 keys' part of a row (wgmma accumulator layout), added across the quad.
__device__ __forceinline__ void quad_row_sums(const float (&l_run)[2], float (&l_row)[2]) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float l = l_run[h];
    l += __shfl_xor_sync(0xFFFFFFFFu, l, 1);
    l += __shfl_xor_sync(0xFFFFFFFFu, l, 2);
    l_row[h] = l;
  }
}

/// A finished row (a request in one piece; l: its sum over every key at its maximum m, log2
/// domain): lse (natural log; +inf when no key was valid) and the factor that turns its O into out
/// (1 / l, times 1 / (1 + exp(sink - lse)) with an attention sink; 0 when no key was valid).
struct RowFinish {
  float factor;
  float lse;
};
__device__ __forceinline__ RowFinish finish_row(const DecodeParams& p, float l, float m, int head) {
  RowFinish f{0.0f, __int_as_float(0x7F800000)};
  if (l > 0.0f) {
    f.lse = (log2f(l) + m) * 0.6931471805599453f;
    f.factor = 1.0f / l;
    if (p.attn_sink != nullptr) f.factor /= 1.0f + expf(p.attn_sink[head] - f.lse);
  }
  return f;
}

/// A partial row's lse_accum (log2 domain; -inf when it saw no valid key).
__device__ __forceinline__ float partial_lse(float l, float m) {
  return l > 0.0f ? log2f(l) + m : -__int_as_float(0x7F800000);
}

/// Invalid keys -> -inf in this thread's S fragment of a 64-key block (element 4j + 2h + e: key
/// 8j + 2 t4 + e; bit k of kmask: key k valid); nothing to do when every key is valid.
__device__ __forceinline__ void mask_invalid_keys(float (&sacc)[32], std::uint64_t kmask, int t4) {
  if (kmask == ~0ull) return;
  const float kNegInf = -__int_as_float(0x7F800000);
  const std::uint64_t mine = kmask >> (2 * t4);  // bit 8j + e: key 8j + 2 t4 + e
#pragma unroll
  for (int j = 0; j < 8; ++j) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      float& v = sacc[4 * j + i];
      v = ((mine >> (8 * j + (i & 1))) & 1u) != 0 ? v : kNegInf;
    }
  }
}

/// The maximum raw score of row row0 + 8h of a 64-key block over the quad that holds it (this
/// thread's S fragment: element 4j + 2h + e is key 8j + 2 t4 + e; -inf when every key is masked).
__device__ __forceinline__ float block_row_max(const float (&sacc)[32], int h) {
  float mx = -__int_as_float(0x7F800000);
#pragma unroll
  for (int j = 0; j < 8; ++j) mx = fmaxf(mx, fmaxf(sacc[4 * j + 2 * h], sacc[4 * j + 2 * h + 1]));
  mx = fmaxf(mx, __shfl_xor_sync(0xFFFFFFFFu, mx, 1));
  mx = fmaxf(mx, __shfl_xor_sync(0xFFFFFFFFu, mx, 2));
  return mx;
}

/// O (this thread's 64 x 256 fragment of the sm_90a kernels: rows row0 and row0 + 8 alternate in
/// pairs) times the rows' rescale factors.
__device__ __forceinline__ void rescale_o_rows(float (&o)[128], const float (&alpha)[2]) {
#pragma unroll
  for (int j = 0; j < 32; ++j) {
    o[4 * j] *= alpha[0];
    o[4 * j + 1] *= alpha[0];
    o[4 * j + 2] *= alpha[1];
    o[4 * j + 3] *= alpha[1];
  }
}

/// P (bf16) as the A fragments of the 4 k steps of P V (keys 16 ks ..): the S accumulator elements
/// of 8-column blocks 2 ks and 2 ks + 1.
__device__ __forceinline__ void pack_p_fragments(const float (&sacc)[32], std::uint32_t (&pa)[4][4]) {
#pragma unroll
  for (int ks = 0; ks < 4; ++ks) {
    pa[ks][0] = pack_bf16x2(sacc[8 * ks], sacc[8 * ks + 1]);
    pa[ks][1] = pack_bf16x2(sacc[8 * ks + 2], sacc[8 * ks + 3]);
    pa[ks][2] = pack_bf16x2(sacc[8 * ks + 4], sacc[8 * ks + 5]);
    pa[ks][3] = pack_bf16x2(sacc[8 * ks + 6], sacc[8 * ks + 7]);
  }
}

/// The epilogue of the sm_90a kernels (decode_sm90.cuh, decode_sm90_ws.cuh): this thread's O
/// elements (head rows head + 8h, dims 256 wg + 8j + 2 t4 (+1) of 512), normalised by the rows'
/// sums l_row (over every key) at the rows' maxima m_run (log2 domain), into out / lse (a request
/// in one piece: bf16, lse +inf and zeros where no key was valid, the attention sink applied) or
/// into o_accum / lse_accum at partial `split_idx` (fp32, lse -inf where empty). bs = request x s_q
/// + query token s.
__device__ __forceinline__ void store_o_rows_512(const DecodeParams& p, const float (&o)[128],
                                                 const float (&l_row)[2], const float (&m_run)[2], std::int64_t bs,
                                                 int s, bool split, int split_idx, int head, int wg, int t4) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const float l = l_row[h];
    const float m = m_run[h];
    const int hd = head + 8 * h;
    if (!split) {
      const std::int64_t orow = bs * p.h_q + hd;
      const RowFinish f = finish_row(p, l, m, hd);
      std::uint32_t* dst = reinterpret_cast<std::uint32_t*>(p.out + orow * 512 + 256 * wg + 2 * t4);
#pragma unroll
      for (int j = 0; j < 32; ++j) dst[4 * j] = pack_bf16x2(o[4 * j + 2 * h] * f.factor, o[4 * j + 2 * h + 1] * f.factor);
      if (wg == 0 && t4 == 0) p.lse[orow] = f.lse;
    } else {
      const std::int64_t arow = (static_cast<std::int64_t>(split_idx) * p.s_q + s) * p.h_q + hd;
      const float factor = l > 0.0f ? 1.0f / l : 0.0f;
      float2* dst = reinterpret_cast<float2*>(p.o_accum + arow * 512 + 256 * wg + 2 * t4);
#pragma unroll
      for (int j = 0; j < 32; ++j) dst[4 * j] = make_float2(o[4 * j + 2 * h] * factor, o[4 * j + 2 * h + 1] * factor);
      if (wg == 0 && t4 == 0) p.lse_accum[arow] = partial_lse(l, m);
    }
  }
}

/// Per-format device traits: how many 16-byte chunks a row's data part has, where its scale part
/// is, and how one lane dequantises its 16 dims (16*lane .. 16*lane+15) from a staged row
/// ([data part ; scale part], contiguous, at `row`).
template <RowFormat F>
struct FormatTraits;

template <>
struct FormatTraits<RowFormat::fp8_ds_mla_584> {
  static constexpr int kDataChunks = 36;  // 576 bytes
  static constexpr int kScaleBytes = 8;   // separate scale part (page-striped)
  __device__ static std::int64_t data_offset(int page_block_size, std::int64_t t) {
    (void)page_block_size;
    return t * 576;
  }
  __device__ static std::int64_t scale_offset(int page_block_size, std::int64_t t) {
    return static_cast<std::int64_t>(page_block_size) * 576 + t * 8;
  }
  __device__ static void dequant16(const std::uint8_t* row, int lane, uint4 (&out)[2]) {
    if (lane < 28) {
      const uint4 raw = *reinterpret_cast<const uint4*>(row + 16 * lane);
      const float scale = ue8m0_to_float(row[576 + lane / 4]);
      const std::uint32_t w[4] = {raw.x, raw.y, raw.z, raw.w};
      std::uint32_t o[8];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        o[2 * i] = e4m3x2_to_bf16x2(w[i] & 0xFFFFu, scale);
        o[2 * i + 1] = e4m3x2_to_bf16x2(w[i] >> 16, scale);
      }
      out[0] = make_uint4(o[0], o[1], o[2], o[3]);
      out[1] = make_uint4(o[4], o[5], o[6], o[7]);
    } else {
      const uint4* rope = reinterpret_cast<const uint4*>(row + 448 + 32 * (lane - 28));
      out[0] = rope[0];
      out[1] = rope[1];
    }
  }
};

template <>
struct FormatTraits<RowFormat::v41_fp8_528> {
  static constexpr int kDataChunks = 33;  // the whole 528-byte row
  static constexpr int kScaleBytes = 0;
  __device__ static std::int64_t data_offset(int, std::int64_t t) { return t * 528; }
  __device__ static std::int64_t scale_offset(int, std::int64_t t) { return t * 528; }
  __device__ static void dequant16(const std::uint8_t* row, int lane, uint4 (&out)[2]) {
    const uint4 raw = *reinterpret_cast<const uint4*>(row + 16 * lane);
    const float scale = ue8m0_to_float(row[512 + lane / 2]);
    const std::uint32_t w[4] = {raw.x, raw.y, raw.z, raw.w};
    std::uint32_t o[8];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      o[2 * i] = e4m3x2_to_bf16x2(w[i] & 0xFFFFu, scale);
      o[2 * i + 1] = e4m3x2_to_bf16x2(w[i] >> 16, scale);
    }
    out[0] = make_uint4(o[0], o[1], o[2], o[3]);
    out[1] = make_uint4(o[4], o[5], o[6], o[7]);
  }
};

template <>
struct FormatTraits<RowFormat::v41_fp4_288> {
  static constexpr int kDataChunks = 18;  // the whole 288-byte row
  static constexpr int kScaleBytes = 0;
  __device__ static std::int64_t data_offset(int, std::int64_t t) { return t * 288; }
  __device__ static std::int64_t scale_offset(int, std::int64_t t) { return t * 288; }
  __device__ static void dequant16(const std::uint8_t* row, int lane, uint4 (&out)[2]) {
    const uint2 raw = *reinterpret_cast<const uint2*>(row + 8 * lane);
    const float scale = e4m3_to_float(row[256 + lane]);
    const std::uint32_t w[2] = {raw.x, raw.y};
    std::uint32_t o[8];
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const std::uint32_t byte = (w[i / 4] >> (8 * (i % 4))) & 0xFFu;
      o[i] = pack_bf16x2(e2m1_to_float(byte & 0xFu) * scale, e2m1_to_float(byte >> 4) * scale);
    }
    out[0] = make_uint4(o[0], o[1], o[2], o[3]);
    out[1] = make_uint4(o[4], o[5], o[6], o[7]);
  }
};

/// Where block `blk` of a request reads its rows from.
struct BlockSource {
  bool extra;            // false: main cache / indices, true: extra
  std::int32_t first;    // first index position of the block
  std::int32_t limit;    // positions >= limit are invalid
};

/// Loads the index of one row of block `src` per lane (lanes < rows per warp; warp w owns rows
/// w, w + kDecodeWarps, ...). The load is issued here and consumed by issue_block_rows, so the
/// caller can put work between the two (the index of the next block is fetched while the current
/// block dequantises).
__device__ __forceinline__ std::int32_t load_block_ids(const std::int32_t* idx_row, const BlockSource& src, int warp,
                                                       int lane) {
  constexpr int kRowsPerWarp = L::kRows / L::kDecodeWarps;
  static_assert(kRowsPerWarp <= 32, "one index per lane");
  std::int32_t my_id = -1;
  if (lane < kRowsPerWarp) {
    const std::int32_t pos = src.first + warp + lane * L::kDecodeWarps;
    if (pos < src.limit) my_id = __ldg(idx_row + pos);
  }
  return my_id;
}

/// Issues the cp.async copies of the valid rows of one block into the staging area and records
/// which rows are valid; `my_id` comes from load_block_ids. Every thread calls it.
template <RowFormat F>
__device__ __forceinline__ void issue_block_rows(const CacheView& cache, std::int32_t my_id, std::uint8_t* stage,
                                                 int* valid, int warp, int lane) {
  using T = FormatTraits<F>;
  constexpr int kRowsPerWarp = L::kRows / L::kDecodeWarps;
  const std::int64_t num_rows = cache.num_pages * cache.page_block_size;
#pragma unroll
  for (int i = 0; i < kRowsPerWarp; ++i) {
    const int r = warp + i * L::kDecodeWarps;
    const std::int64_t id = __shfl_sync(0xFFFFFFFFu, my_id, i);
    const bool ok = id >= 0 && id < num_rows;
    if (lane == 0) valid[r] = ok ? 1 : 0;
    if (!ok) continue;
    const std::int64_t page = id / cache.page_block_size;
    const std::int64_t t = id - page * cache.page_block_size;
    const std::uint8_t* base = cache.data + page * cache.page_stride_bytes;
    const std::uint8_t* data = base + T::data_offset(cache.page_block_size, t);
    std::uint8_t* dst = stage + r * L::kStageStride;
    for (int c = lane; c < T::kDataChunks; c += 32) cp_async_16(dst + 16 * c, data + 16 * c);
    if constexpr (T::kScaleBytes == 8) {
      if (lane == 31) cp_async_8(dst + 16 * T::kDataChunks, base + T::scale_offset(cache.page_block_size, t));
    }
  }
}

/// Dequantises the staged rows into sK (bf16 [64][kQKStride]); invalid rows become zeros.
template <RowFormat F>
__device__ __forceinline__ void dequant_block(const std::uint8_t* stage, const int* valid, __nv_bfloat16* sK,
                                              int warp, int lane) {
#pragma unroll
  for (int r = warp; r < L::kRows; r += L::kDecodeWarps) {
    uint4 o[2];
    if (valid[r]) {
      FormatTraits<F>::dequant16(stage + r * L::kStageStride, lane, o);
    } else {
      o[0] = make_uint4(0, 0, 0, 0);
      o[1] = o[0];
    }
    uint4* dst = reinterpret_cast<uint4*>(sK + r * L::kQKStride + 16 * lane);
    dst[0] = o[0];
    dst[1] = o[1];
  }
}

template <RowFormat kMain, bool kHasExtra, RowFormat kExtra>
__global__ void __launch_bounds__(L::kDecodeThreads, 1) sparse_decode_kernel(const DecodeParams p) {
  extern __shared__ __align__(16) std::uint8_t smem[];
  auto* sQ = reinterpret_cast<__nv_bfloat16*>(smem + L::q);
  auto* sK = reinterpret_cast<__nv_bfloat16*>(smem + L::k);
  auto* sS = reinterpret_cast<float*>(smem + L::s);
  auto* sP = reinterpret_cast<__nv_bfloat16*>(smem + L::p);
  auto* stage = smem + L::stage;
  auto* sMax = reinterpret_cast<float*>(smem + L::row_max);
  auto* sSum = reinterpret_cast<float*>(smem + L::row_sum);
  auto* sAlpha = reinterpret_cast<float*>(smem + L::row_alpha);
  auto* sValid = reinterpret_cast<int*>(smem + L::valid);

  const int tid = static_cast<int>(threadIdx.x);
  const int warp = tid >> 5;
  const int lane = tid & 31;
  const int g = lane >> 2;   // fragment row group
  const int t4 = lane & 3;   // fragment column pair
  const int part = static_cast<int>(blockIdx.x);
  const int s = static_cast<int>(blockIdx.y);
  const int head0 = static_cast<int>(blockIdx.z) * L::kHeads;
  const float scale_log2 = p.softmax_scale * 1.4426950408889634f;
  const float kNegInf = -__int_as_float(0x7F800000);
  // Lets the combine kernel (a programmatic dependent launch) be scheduled now; it waits for this
  // grid's completion before it reads anything.
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");

  // The work of this CTA: one whole request (one_pass), or the requests and blocks of its
  // scheduler record (split_kv).
  const bool one_pass = p.mode != DecodeMode::split_kv;
  int begin_req = part, end_req = part, begin_block = 0, end_block = 0x7FFFFFFF, begin_split = 0;
  bool first_split = false, last_split = false;
  // In split_kv the kernel is a programmatic dependent of the previous kernel in the stream (the
  // GPU scheduler, launch_decode_grid): wait until that grid has finished and its records and
  // num_splits are visible. Nothing of global memory is read before this point; without a
  // programmatic launch (one_pass, or no kernel before) the wait returns at once.
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

  // Warp tiles (16 warps). Q K^T: head rows mw..mw+15 x key columns nw..nw+31 over head dims
  // kh*256 .. kh*256+255 (the two halves of the head dim go to two S buffers, summed by the
  // softmax). P V: head rows pm..pm+31 (two m16 tiles sharing every V fragment) x dims
  // dw..dw+63. The tiles are as large as the 128-register budget allows: shared-memory traffic
  // per MMA is what bounds the block loop (docs/perf.md).
  const int mw = (warp & 3) * 16;
  const int nw = ((warp >> 2) & 1) * 32;
  const int kh = warp >> 3;
  const int pm = (warp & 1) * 32;
  const int dw = (warp >> 1) * 64;

  for (int r = begin_req; r <= end_req && r < p.b; ++r) {
    const std::int32_t len = p.topk_length != nullptr ? p.topk_length[r] : p.topk;
    const std::int32_t elen = kHasExtra ? (p.extra_topk_length != nullptr ? p.extra_topk_length[r] : p.extra_topk) : 0;
    const int n_main = (max(len, 1) + L::kRows - 1) / L::kRows;
    const int n_blocks = n_main + (kHasExtra ? (max(elen, 0) + L::kRows - 1) / L::kRows : 0);
    const int blk0 = r == begin_req ? begin_block : 0;
    const int blk1 = r == end_req ? min(end_block, n_blocks) : n_blocks;
    const bool split = (r == begin_req && first_split) || (r == end_req && last_split);
    const std::int64_t bs = static_cast<std::int64_t>(r) * p.s_q + s;
    const std::int32_t* idx_main = p.indices + bs * p.topk;
    const std::int32_t* idx_extra = kHasExtra ? p.extra_indices + bs * p.extra_topk : nullptr;
    const std::int32_t main_limit = min(len, p.topk);
    const std::int32_t extra_limit = kHasExtra ? min(elen, p.extra_topk) : 0;

    auto ids_of = [&](int blk) -> std::int32_t {
      if (!kHasExtra || blk < n_main) return load_block_ids(idx_main, BlockSource{false, blk * L::kRows, main_limit}, warp, lane);
      return load_block_ids(idx_extra, BlockSource{true, (blk - n_main) * L::kRows, extra_limit}, warp, lane);
    };
    auto issue = [&](int blk, std::int32_t ids) {
      int* valid = sValid + (blk & 1) * L::kRows;
      if (!kHasExtra || blk < n_main) {
        issue_block_rows<kMain>(p.main, ids, stage, valid, warp, lane);
      } else if constexpr (kHasExtra) {
        issue_block_rows<kExtra>(p.extra, ids, stage, valid, warp, lane);
      }
    };

    __syncthreads();  // the previous request's epilogue is done with the row statistics and sQ
    if (blk0 < blk1) issue(blk0, ids_of(blk0));
    // Q of this (request, query token, 64 heads) -> sQ, asynchronously, in the same group as the
    // first block's rows.
    {
      const std::uint16_t* qsrc = p.q + (bs * p.h_q + head0) * L::kDim;
#pragma unroll
      for (int k = 0; k < L::kHeads * L::kDim / 8 / L::kDecodeThreads; ++k) {
        const int i = tid + k * L::kDecodeThreads;
        const int row = i / (L::kDim / 8);
        const int col = (i % (L::kDim / 8)) * 8;
        cp_async_16(sQ + row * L::kQKStride + col, qsrc + 8 * i);
      }
    }
    cp_async_commit();
    if (tid < L::kHeads) {
      sMax[tid] = kNegInf;
      sSum[tid] = 0.0f;
    }

    float acc[2][8][4];  // [m16 tile][n8 tile of dims][fragment]
#pragma unroll
    for (int t = 0; t < 2; ++t)
#pragma unroll
      for (int i = 0; i < 8; ++i) acc[t][i][0] = acc[t][i][1] = acc[t][i][2] = acc[t][i][3] = 0.0f;

    // Index prefetch two blocks ahead: `ids_next` holds the indices of block blk + 1 when the
    // iteration for blk starts; the load for blk + 2 is issued at its top.
    std::int32_t ids_next = blk0 + 1 < blk1 ? ids_of(blk0 + 1) : -1;
    for (int blk = blk0; blk < blk1; ++blk) {
      const int* valid = sValid + (blk & 1) * L::kRows;
      const bool has_next = blk + 1 < blk1;
      const std::int32_t next_ids = ids_next;
      ids_next = blk + 2 < blk1 ? ids_of(blk + 2) : -1;
      cp_async_wait_all();
      __syncthreads();
      if (!kHasExtra || blk < n_main) {
        dequant_block<kMain>(stage, valid, sK, warp, lane);
      } else if constexpr (kHasExtra) {
        dequant_block<kExtra>(stage, valid, sK, warp, lane);
      }
      __syncthreads();
      if (has_next) issue(blk + 1, next_ids);  // staging is free again: overlap the next block's loads
      cp_async_commit();

      // S (half kh) = Q K^T over dims kh*256.. for this warp's 16 x 32 tile.
      {
        float sacc[4][4];
#pragma unroll
        for (int j = 0; j < 4; ++j) sacc[j][0] = sacc[j][1] = sacc[j][2] = sacc[j][3] = 0.0f;
        // ldmatrix addresses. A (Q, 16 x 16): matrices (rows +0/+8) x (cols +0/+8) in the order
        // a0..a3. B (K rows n, dims k): matrices (n +0, k +0), (n +0, k +8), (n +8, k +0),
        // (n +8, k +8) -> b0/b1 of n-tile n0 and of n-tile n0 + 8.
        const __nv_bfloat16* qa =
            sQ + (mw + (lane & 7) + ((lane >> 3) & 1) * 8) * L::kQKStride + (lane >> 4) * 8 + kh * 256;
        const __nv_bfloat16* kb =
            sK + (nw + (lane & 7) + (lane >> 4) * 8) * L::kQKStride + ((lane >> 3) & 1) * 8 + kh * 256;
#pragma unroll 4
        for (int kk = 0; kk < 256; kk += 16) {
          std::uint32_t a[4], b01[4], b23[4];
          ldmatrix_x4(a, qa + kk);
          ldmatrix_x4(b01, kb + kk);
          ldmatrix_x4(b23, kb + 16 * L::kQKStride + kk);
          mma_bf16_16816(sacc[0], a, b01[0], b01[1]);
          mma_bf16_16816(sacc[1], a, b01[2], b01[3]);
          mma_bf16_16816(sacc[2], a, b23[0], b23[1]);
          mma_bf16_16816(sacc[3], a, b23[2], b23[3]);
        }
        float* sSh = sS + kh * L::s_half;
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const int col = nw + j * 8 + 2 * t4;
          float* s0 = sSh + (mw + g) * L::kSStride + col;
          float* s1 = s0 + 8 * L::kSStride;
          *reinterpret_cast<float2*>(s0) = make_float2(sacc[j][0], sacc[j][1]);
          *reinterpret_cast<float2*>(s1) = make_float2(sacc[j][2], sacc[j][3]);
        }
      }
      __syncthreads();

      // Online softmax: 8 threads per head row, 8 columns each; S = (half 0 + half 1) scaled into
      // the log2 domain, invalid rows -> -inf.
      {
        const int row = tid >> 3;
        const int c0 = (tid & 7) * 8;
        float v[8];
        {
          const float* r0 = sS + row * L::kSStride + c0;
          const float* r1 = r0 + L::s_half;
          const float4 a0 = *reinterpret_cast<const float4*>(r0);
          const float4 a1 = *reinterpret_cast<const float4*>(r0 + 4);
          const float4 b0 = *reinterpret_cast<const float4*>(r1);
          const float4 b1 = *reinterpret_cast<const float4*>(r1 + 4);
          v[0] = a0.x + b0.x; v[1] = a0.y + b0.y; v[2] = a0.z + b0.z; v[3] = a0.w + b0.w;
          v[4] = a1.x + b1.x; v[5] = a1.y + b1.y; v[6] = a1.z + b1.z; v[7] = a1.w + b1.w;
        }
        float mx = kNegInf;
#pragma unroll
        for (int i = 0; i < 8; ++i) {
          v[i] = valid[c0 + i] != 0 ? v[i] * scale_log2 : kNegInf;
          mx = fmaxf(mx, v[i]);
        }
        mx = fmaxf(mx, __shfl_xor_sync(0xFFFFFFFFu, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xFFFFFFFFu, mx, 2));
        mx = fmaxf(mx, __shfl_xor_sync(0xFFFFFFFFu, mx, 4));
        const float m_old = sMax[row];
        const float m_new = fmaxf(m_old, mx);
        const bool none = m_new == kNegInf;  // no valid key in this row so far
        const float alpha = none ? 1.0f : exp2f(m_old - m_new);
        float sum = 0.0f;
        std::uint32_t packed[4];
#pragma unroll
        for (int i = 0; i < 8; i += 2) {
          const float p0 = none ? 0.0f : exp2f(v[i] - m_new);
          const float p1 = none ? 0.0f : exp2f(v[i + 1] - m_new);
          sum += p0 + p1;
          packed[i / 2] = pack_bf16x2(p0, p1);
        }
        sum += __shfl_xor_sync(0xFFFFFFFFu, sum, 1);
        sum += __shfl_xor_sync(0xFFFFFFFFu, sum, 2);
        sum += __shfl_xor_sync(0xFFFFFFFFu, sum, 4);
        *reinterpret_cast<uint4*>(sP + row * L::kPStride + c0) = make_uint4(packed[0], packed[1], packed[2], packed[3]);
        __syncwarp();
        if ((tid & 7) == 0) {
          sMax[row] = m_new;
          sSum[row] = sSum[row] * alpha + sum;
          sAlpha[row] = alpha;
        }
      }
      __syncthreads();

      // O = O * alpha + P V for this warp's 32 x 64 tile: every V fragment (ldmatrix.trans) feeds
      // the MMAs of both m16 tiles.
      {
#pragma unroll
        for (int t = 0; t < 2; ++t) {
          const float a_lo = sAlpha[pm + 16 * t + g];
          const float a_hi = sAlpha[pm + 16 * t + g + 8];
#pragma unroll
          for (int j = 0; j < 8; ++j) {
            acc[t][j][0] *= a_lo;
            acc[t][j][1] *= a_lo;
            acc[t][j][2] *= a_hi;
            acc[t][j][3] *= a_hi;
          }
        }
        const __nv_bfloat16* pa = sP + (pm + g) * L::kPStride + 2 * t4;
        const int lrow = (lane & 7) + ((lane >> 3) & 1) * 8;
        const int lcol = (lane >> 4) * 8;
#pragma unroll
        for (int kk = 0; kk < L::kRows; kk += 16) {
          std::uint32_t a[2][4];
#pragma unroll
          for (int t = 0; t < 2; ++t) {
            const __nv_bfloat16* pt = pa + 16 * t * L::kPStride + kk;
            a[t][0] = *reinterpret_cast<const std::uint32_t*>(pt);
            a[t][1] = *reinterpret_cast<const std::uint32_t*>(pt + 8 * L::kPStride);
            a[t][2] = *reinterpret_cast<const std::uint32_t*>(pt + 8);
            a[t][3] = *reinterpret_cast<const std::uint32_t*>(pt + 8 * L::kPStride + 8);
          }
          const __nv_bfloat16* vb = sK + (kk + lrow) * L::kQKStride + dw + lcol;
#pragma unroll
          for (int j = 0; j < 4; ++j) {
            std::uint32_t b[4];
            ldmatrix_x4_trans(b, vb + j * 16);
#pragma unroll
            for (int t = 0; t < 2; ++t) {
              mma_bf16_16816(acc[t][2 * j], a[t], b[0], b[1]);
              mma_bf16_16816(acc[t][2 * j + 1], a[t], b[2], b[3]);
            }
          }
        }
      }
      // The next iteration's first barrier orders these reads of sK / sP / sAlpha before their
      // next writes.
    }
    cp_async_wait_all();  // no copy may still target shared memory when the CTA moves on
    __syncthreads();      // every thread's last softmax update of sMax / sSum is visible

    // Epilogue: this thread holds rows pm + 16t + g (+8), dims dw + 8j + 2*t4 (+1).
#pragma unroll
    for (int t = 0; t < 2; ++t) {
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int row = pm + 16 * t + g + 8 * half;
        const int head = head0 + row;
        const float l = sSum[row];
        const float m = sMax[row];
        const std::int64_t orow = bs * p.h_q + head;
        if (!split) {
          const RowFinish f = finish_row(p, l, m, head);
          std::uint32_t* dst = reinterpret_cast<std::uint32_t*>(p.out + orow * L::kDim + dw + 2 * t4);
#pragma unroll
          for (int j = 0; j < 8; ++j) {
            dst[j * 4] = pack_bf16x2(acc[t][j][2 * half] * f.factor, acc[t][j][2 * half + 1] * f.factor);
          }
          if (dw == 0 && t4 == 0) p.lse[orow] = f.lse;
        } else {
          const int split_idx = p.num_splits[r] + (r == begin_req ? begin_split : 0);
          const std::int64_t arow = (static_cast<std::int64_t>(split_idx) * p.s_q + s) * p.h_q + head;
          const float factor = l > 0.0f ? 1.0f / l : 0.0f;
          float2* dst = reinterpret_cast<float2*>(p.o_accum + arow * L::kDim + dw + 2 * t4);
#pragma unroll
          for (int j = 0; j < 8; ++j) dst[j * 4] = make_float2(acc[t][j][2 * half] * factor, acc[t][j][2 * half + 1] * factor);
          if (dw == 0 && t4 == 0) p.lse_accum[arow] = partial_lse(l, m);
        }
      }
    }
  }
}

/// Launches a decode kernel (either kind) as `launch` says: its dims, clusters of
/// dims.cluster_x x 1 x dims.cluster_z CTAs, and with launch.pdl (split_kv) a programmatic
/// dependent launch (cudaLaunchAttributeProgrammaticStreamSerialization): when the previous kernel
/// in the stream is the GPU scheduler, which executes griddepcontrol.launch_dependents at its
/// start, the decode grid is launched while the scheduler runs and waits in grid_dependency_wait()
/// for its records. After any other kernel the launch behaves as an ordinary one.
template <class Kernel>
void launch_decode_grid(Kernel* kernel, const DecodeParams& p, const DecodeLaunch& launch, const char* what) {
  const LaunchDims& d = launch.dims;
  MLAPLAN_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          static_cast<int>(d.smem_bytes)));
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(d.grid_x, d.grid_y, d.grid_z);
  cfg.blockDim = dim3(d.block);
  cfg.dynamicSmemBytes = d.smem_bytes;
  cfg.stream = static_cast<cudaStream_t>(p.stream);
  cudaLaunchAttribute attr[2];
  unsigned n = 0;
  if (launch.pdl) {
    attr[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[n].val.programmaticStreamSerializationAllowed = 1;
    ++n;
  }
  if (d.cluster_z > 1 || d.cluster_x > 1) {
    attr[n].id = cudaLaunchAttributeClusterDimension;
    attr[n].val.clusterDim.x = d.cluster_x;
    attr[n].val.clusterDim.y = 1;
    attr[n].val.clusterDim.z = d.cluster_z;
    ++n;
  }
  cfg.attrs = attr;
  cfg.numAttrs = n;
  MLAPLAN_CUDA_CHECK(cudaLaunchKernelEx(&cfg, kernel, p));
  MLAPLAN_CUDA_CHECK_LAUNCH(what);
}

/// How many clusters of cluster_x x 1 x cluster_z CTAs of `kernel` (block and shared memory of d) can
/// be resident at once on the current device (cudaOccupancyMaxActiveClusters; 0 when none or on error).
template <class Kernel>
int max_active_clusters(Kernel* kernel, const LaunchDims& d, unsigned cluster_x, unsigned cluster_z) {
  MLAPLAN_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          static_cast<int>(d.smem_bytes)));
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(cluster_x, 1, cluster_z);
  cfg.blockDim = dim3(d.block);
  cfg.dynamicSmemBytes = d.smem_bytes;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = cluster_x;
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = cluster_z;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  int n = 0;
  if (cudaOccupancyMaxActiveClusters(&n, kernel, &cfg) != cudaSuccess) {
    (void)cudaGetLastError();
    n = 0;
  }
  return n;
}

/// cudaOccupancyMaxActiveClusters of (current device, kernel, cluster shape), asked once each (the
/// answer depends on the kernel's resources and the device, not on the grid); thread-safe.
template <class Kernel>
int cached_max_active_clusters(Kernel* kernel, const LaunchDims& d, unsigned cluster_x, unsigned cluster_z) {
  static std::mutex mu;
  static std::map<std::tuple<int, const void*, unsigned, unsigned>, int> cache;
  int dev = 0;
  MLAPLAN_CUDA_CHECK(cudaGetDevice(&dev));
  const auto key = std::make_tuple(dev, reinterpret_cast<const void*>(kernel), cluster_x, cluster_z);
  {
    std::lock_guard<std::mutex> lock(mu);
    if (auto it = cache.find(key); it != cache.end()) return it->second;
  }
  const int n = max_active_clusters(kernel, d, cluster_x, cluster_z);
  std::lock_guard<std::mutex> lock(mu);
  cache[key] = n;
  return n;
}

/// True when every cluster of cluster_x CTAs (along x) of a grid of d's shape is resident at once.
template <class Kernel>
bool clusters_fit(Kernel* kernel, const LaunchDims& d, unsigned cluster_x) {
  if (cluster_x != 2 && cluster_x != 4 && cluster_x != 8) return false;
  const long long ctas = static_cast<long long>(d.grid_x) * d.grid_y * d.grid_z;
  return static_cast<long long>(cached_max_active_clusters(kernel, d, cluster_x, 1)) * cluster_x >= ctas;
}

/// True when a grid of d's shape launched as 2-CTA clusters (along z) of `kernel` has every cluster,
/// or one per two SMs, resident at once.
template <class Kernel>
bool pair_clusters_fit(Kernel* kernel, const LaunchDims& d) {
  const int max_clusters = cached_max_active_clusters(kernel, d, 1, 2);
  int dev = 0, sms = 0;
  MLAPLAN_CUDA_CHECK(cudaGetDevice(&dev));
  MLAPLAN_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  const long long ctas = static_cast<long long>(d.grid_x) * d.grid_y * d.grid_z;
  return 2LL * max_clusters >= std::min<long long>(ctas, sms);
}

/// Body of the launch functions of decode_*.cu.
template <RowFormat kMain, bool kHasExtra, RowFormat kExtra>
void launch_decode(const DecodeParams& p, const DecodeLaunch& launch) {
  launch_decode_grid(&sparse_decode_kernel<kMain, kHasExtra, kExtra>, p, launch, "sparse_decode_kernel<<<...>>>");
}

}  // namespace mlaplan::kernels::detail
