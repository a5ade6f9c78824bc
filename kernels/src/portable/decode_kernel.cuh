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
// fp32 partial normalised by its own sum + its fp32 lse in log2 (split); combine.cu merges partials.
//
// Template parameters: the main cache format and the extra cache format (kHasExtra false: none).
// The main format decides the geometry (DecodeSmemT): head dim 576 for V3.2's 656-byte rows (Q K^T
// over 576 dims, P V over the first 512), and for plain bf16 rows no staging: a block's rows are
// copied straight into sK after the previous block's P V.

#include "common/decode_device.cuh"
#include "common/decode_layout.hpp"

#include <type_traits>

namespace mlaplan::kernels::detail {

/// Per-format device traits: how many 16-byte chunks a row's data part has, where its scale part
/// is, and how one lane dequantises its 16 dims (16*lane .. 16*lane+15) from a staged row
/// ([data part ; scale part], contiguous, at `row`).
template <RowFormat F>
struct FormatTraits;

template <>
struct FormatTraits<RowFormat::fp8_ds_mla_584> {
  static constexpr int kDims = 512;
  static constexpr int kDataChunks = 36;  // 576 bytes
  static constexpr int kScaleBytes = 8;   // separate scale part (page-striped)
  __device__ static std::int64_t data_offset(int page_block_size, std::int64_t t) {
    (void)page_block_size;
    return t * 576;
  }
  __device__ static std::int64_t scale_offset(int page_block_size, std::int64_t t) {
    return static_cast<std::int64_t>(page_block_size) * 576 + t * 8;
  }
  __device__ static void dequant16(const std::uint8_t* row, int lane, uint4 (&out)[2], float) {
    if (lane < 28) {
      const uint4 raw = *reinterpret_cast<const uint4*>(row + 16 * lane);
      e4m3x16_to_bf16(raw, ue8m0_to_float(row[576 + lane / 4]), out[0], out[1]);
    } else {
      const uint4* rope = reinterpret_cast<const uint4*>(row + 448 + 32 * (lane - 28));
      out[0] = rope[0];
      out[1] = rope[1];
    }
  }
};

template <>
struct FormatTraits<RowFormat::v41_fp8_528> {
  static constexpr int kDims = 512;
  static constexpr int kDataChunks = 33;  // the whole 528-byte row
  static constexpr int kScaleBytes = 0;
  __device__ static std::int64_t data_offset(int, std::int64_t t) { return t * 528; }
  __device__ static std::int64_t scale_offset(int, std::int64_t t) { return t * 528; }
  __device__ static void dequant16(const std::uint8_t* row, int lane, uint4 (&out)[2], float) {
    const uint4 raw = *reinterpret_cast<const uint4*>(row + 16 * lane);
    e4m3x16_to_bf16(raw, ue8m0_to_float(row[512 + lane / 2]), out[0], out[1]);
  }
};

template <>
struct FormatTraits<RowFormat::v41_fp4_288> {
  static constexpr int kDims = 512;
  static constexpr int kDataChunks = 18;  // the whole 288-byte row
  static constexpr int kScaleBytes = 0;
  __device__ static std::int64_t data_offset(int, std::int64_t t) { return t * 288; }
  __device__ static std::int64_t scale_offset(int, std::int64_t t) { return t * 288; }
  __device__ static void dequant16(const std::uint8_t* row, int lane, uint4 (&out)[2], float) {
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

/// V3.2's 656-byte row: 512 e4m3 (4 tiles of 128 dims), 4 fp32 scales, 64 bf16 RoPE (dims
/// 512..575). dequant16 gives NoPE dims 16 lane ..; the RoPE is copied by rope_unit.
template <>
struct FormatTraits<RowFormat::fp8_ds_mla_656> {
  static constexpr int kDims = 576;
  static constexpr int kDataChunks = 41;  // the whole 656-byte row
  static constexpr int kScaleBytes = 0;
  __device__ static std::int64_t data_offset(int, std::int64_t t) { return t * 656; }
  __device__ static std::int64_t scale_offset(int, std::int64_t t) { return t * 656; }
  __device__ static void dequant16(const std::uint8_t* row, int lane, uint4 (&out)[2], float) {
    const uint4 raw = *reinterpret_cast<const uint4*>(row + 16 * lane);
    const float scale = *reinterpret_cast<const float*>(row + 512 + 4 * (lane >> 3));
    e4m3x16_to_bf16(raw, scale, out[0], out[1]);
  }
  /// 16-byte unit u (0..7) of the RoPE: dims 512 + 8u .. 512 + 8u + 7.
  __device__ static uint4 rope_unit(const std::uint8_t* row, int u) {
    return *reinterpret_cast<const uint4*>(row + 528 + 16 * u);
  }
};

/// Plain e4m3 rows (FlashInfer's fp8 cache): 512 codes, one per-tensor scale (CacheView::scale).
template <>
struct FormatTraits<RowFormat::fp8_pt_512> {
  static constexpr int kDims = 512;
  static constexpr int kDataChunks = 32;
  static constexpr int kScaleBytes = 0;
  __device__ static std::int64_t data_offset(int, std::int64_t t) { return t * 512; }
  __device__ static std::int64_t scale_offset(int, std::int64_t t) { return t * 512; }
  __device__ static void dequant16(const std::uint8_t* row, int lane, uint4 (&out)[2], float tensor_scale) {
    e4m3x16_to_bf16(*reinterpret_cast<const uint4*>(row + 16 * lane), tensor_scale, out[0], out[1]);
  }
};

/// Plain bf16 rows (FlashInfer's bf16 cache): copied into sK as they are (DecodeSmemDirect).
template <>
struct FormatTraits<RowFormat::bf16_1024> {
  static constexpr int kDims = 512;
  static constexpr int kDataChunks = 64;
  static constexpr int kScaleBytes = 0;
  __device__ static std::int64_t data_offset(int, std::int64_t t) { return t * 1024; }
  __device__ static std::int64_t scale_offset(int, std::int64_t t) { return t * 1024; }
};

/// The shared-memory geometry of a kernel whose main cache has format F.
template <RowFormat F>
using DecodeGeometry = std::conditional_t<F == RowFormat::fp8_ds_mla_656, DecodeSmem656,
                                          std::conditional_t<F == RowFormat::bf16_1024, DecodeSmemDirect, DecodeSmem>>;

/// The geometry-independent constants (rows per block, warps) for the helpers below.
using L = DecodeSmem;

/// Where block `blk` of a request reads its rows from.
struct BlockSource {
  bool extra;          // false: main cache / indices, true: extra
  std::int32_t first;  // first index position of the block
  std::int32_t limit;  // positions >= limit are invalid
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

/// Issues the cp.async copies of the valid rows of one block and records which rows are valid;
/// `my_id` comes from load_block_ids. Every thread calls it. The rows go to the staging area
/// (`dst` = stage, kStageStride bytes apart) or, with a direct geometry (plain bf16 rows), straight
/// into sK (`dst` = sK, kQKStride bf16 apart), where a row without a valid id is zeroed instead.
template <RowFormat F, class G>
__device__ __forceinline__ void issue_block_rows(const CacheView& cache, std::int32_t my_id, std::uint8_t* dst,
                                                 int* valid, int warp, int lane) {
  using T = FormatTraits<F>;
  constexpr int kRowsPerWarp = G::kRows / G::kDecodeWarps;
  constexpr int kRowBytes = G::kDirect ? 2 * G::kQKStride : G::kStageStride;
  const std::int64_t num_rows = cache.num_pages * cache.page_block_size;
#pragma unroll
  for (int i = 0; i < kRowsPerWarp; ++i) {
    const int r = warp + i * G::kDecodeWarps;
    const std::int64_t id = __shfl_sync(0xFFFFFFFFu, my_id, i);
    const bool ok = id >= 0 && id < num_rows;
    if (lane == 0) valid[r] = ok ? 1 : 0;
    std::uint8_t* row_dst = dst + r * kRowBytes;
    if (!ok) {
      if constexpr (G::kDirect) {
        for (int c = lane; c < T::kDataChunks; c += 32)
          *reinterpret_cast<uint4*>(row_dst + 16 * c) = make_uint4(0, 0, 0, 0);
      }
      continue;
    }
    const std::int64_t page = id / cache.page_block_size;
    const std::int64_t t = id - page * cache.page_block_size;
    const std::uint8_t* base = cache.data + page * cache.page_stride_bytes;
    const std::uint8_t* data = base + T::data_offset(cache.page_block_size, t);
    for (int c = lane; c < T::kDataChunks; c += 32) cp_async_16(row_dst + 16 * c, data + 16 * c);
    if constexpr (T::kScaleBytes == 8) {
      if (lane == 31) cp_async_8(row_dst + 16 * T::kDataChunks, base + T::scale_offset(cache.page_block_size, t));
    }
  }
}

/// Dequantises the staged rows into sK (bf16 [64][kQKStride]); invalid rows become zeros. Not
/// called for a direct geometry.
template <RowFormat F, class G>
__device__ __forceinline__ void dequant_block(const std::uint8_t* stage, const int* valid, __nv_bfloat16* sK, int warp,
                                              int lane, float tensor_scale) {
  using T = FormatTraits<F>;
#pragma unroll
  for (int r = warp; r < G::kRows; r += G::kDecodeWarps) {
    const std::uint8_t* row = stage + r * G::kStageStride;
    uint4 o[2];
    if (valid[r]) {
      T::dequant16(row, lane, o, tensor_scale);
    } else {
      o[0] = make_uint4(0, 0, 0, 0);
      o[1] = o[0];
    }
    uint4* dst = reinterpret_cast<uint4*>(sK + r * G::kQKStride + 16 * lane);
    dst[0] = o[0];
    dst[1] = o[1];
    if constexpr (T::kDims == 576) {
      if (lane < 8) {
        *reinterpret_cast<uint4*>(sK + r * G::kQKStride + 512 + 8 * lane) =
            valid[r] ? T::rope_unit(row, lane) : make_uint4(0, 0, 0, 0);
      }
    }
  }
}

template <RowFormat kMain, bool kHasExtra, RowFormat kExtra>
__global__ void __launch_bounds__(DecodeSmem::kDecodeThreads, 1) sparse_decode_kernel(const DecodeParams p) {
  using G = DecodeGeometry<kMain>;
  static_assert(!G::kDirect || !kHasExtra || kExtra == kMain, "a direct (bf16) main cache takes a bf16 extra cache");
  static_assert(FormatTraits<kMain>::kDims == G::kQK && (!kHasExtra || FormatTraits<kExtra>::kDims == G::kQK),
                "main and extra rows hold the kernel's head dim");
  constexpr int kHalf = G::kQK / 2;  // Q K^T: dims kh * kHalf .. of the two warp halves
  extern __shared__ __align__(16) std::uint8_t smem[];
  auto* sQ = reinterpret_cast<__nv_bfloat16*>(smem + G::q);
  auto* sK = reinterpret_cast<__nv_bfloat16*>(smem + G::k);
  auto* sS = reinterpret_cast<float*>(smem + G::s);
  auto* sP = reinterpret_cast<__nv_bfloat16*>(smem + G::p);  // in the second S half when G::kPInS
  auto* stage = smem + G::stage;
  auto* sMax = reinterpret_cast<float*>(smem + G::row_max);
  auto* sSum = reinterpret_cast<float*>(smem + G::row_sum);
  auto* sAlpha = reinterpret_cast<float*>(smem + G::row_alpha);
  auto* sValid = reinterpret_cast<int*>(smem + G::valid);

  const int tid = static_cast<int>(threadIdx.x);
  const int warp = tid >> 5;
  const int lane = tid & 31;
  const int g = lane >> 2;  // fragment row group
  const int t4 = lane & 3;  // fragment column pair
  const int part = static_cast<int>(blockIdx.x);
  const int s = static_cast<int>(blockIdx.y);
  const int head0 = static_cast<int>(blockIdx.z) * G::kHeads;
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
  // kh*kHalf .. (kHalf = d_qk / 2: the two halves of the head dim go to two S buffers, summed by the
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
    const int n_main = (max(len, 1) + G::kRows - 1) / G::kRows;
    const int n_blocks = n_main + (kHasExtra ? (max(elen, 0) + G::kRows - 1) / G::kRows : 0);
    const int blk0 = r == begin_req ? begin_block : 0;
    const int blk1 = r == end_req ? min(end_block, n_blocks) : n_blocks;
    const bool split = (r == begin_req && first_split) || (r == end_req && last_split);
    const std::int64_t bs = static_cast<std::int64_t>(r) * p.s_q + s;
    const std::int32_t* idx_main = p.indices + bs * p.topk;
    const std::int32_t* idx_extra = kHasExtra ? p.extra_indices + bs * p.extra_topk : nullptr;
    const std::int32_t main_limit = min(len, p.topk);
    const std::int32_t extra_limit = kHasExtra ? min(elen, p.extra_topk) : 0;

    auto ids_of = [&](int blk) -> std::int32_t {
      if (!kHasExtra || blk < n_main)
        return load_block_ids(idx_main, BlockSource{false, blk * G::kRows, main_limit}, warp, lane);
      return load_block_ids(idx_extra, BlockSource{true, (blk - n_main) * G::kRows, extra_limit}, warp, lane);
    };
    auto issue = [&](int blk, std::int32_t ids) {
      int* valid = sValid + (blk & 1) * G::kRows;
      if (!kHasExtra || blk < n_main) {
        issue_block_rows<kMain, G>(p.main, ids, G::kDirect ? reinterpret_cast<std::uint8_t*>(sK) : stage, valid, warp,
                                   lane);
      } else if constexpr (kHasExtra) {
        issue_block_rows<kExtra, G>(p.extra, ids, G::kDirect ? reinterpret_cast<std::uint8_t*>(sK) : stage, valid, warp,
                                    lane);
      }
    };

    __syncthreads();  // the previous request's epilogue is done with the row statistics and sQ
    if (blk0 < blk1) issue(blk0, ids_of(blk0));
    // Q of this (request, query token, 64 heads) -> sQ, asynchronously, in the same group as the
    // first block's rows.
    {
      const std::uint16_t* qsrc = p.q + (bs * p.h_q + head0) * G::kQK;
      static_assert(G::kHeads * G::kQK / 8 % G::kDecodeThreads == 0, "Q copies: whole rounds of the block");
#pragma unroll
      for (int k = 0; k < G::kHeads * G::kQK / 8 / G::kDecodeThreads; ++k) {
        const int i = tid + k * G::kDecodeThreads;
        const int row = i / (G::kQK / 8);
        const int col = (i % (G::kQK / 8)) * 8;
        cp_async_16(sQ + row * G::kQKStride + col, qsrc + 8 * i);
      }
    }
    cp_async_commit();
    if (tid < G::kHeads) {
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
      const int* valid = sValid + (blk & 1) * G::kRows;
      const bool has_next = blk + 1 < blk1;
      const std::int32_t next_ids = ids_next;
      ids_next = blk + 2 < blk1 ? ids_of(blk + 2) : -1;
      cp_async_wait_all();
      __syncthreads();
      if constexpr (!G::kDirect) {
        if (!kHasExtra || blk < n_main) {
          dequant_block<kMain, G>(stage, valid, sK, warp, lane, p.main.scale);
        } else if constexpr (kHasExtra) {
          dequant_block<kExtra, G>(stage, valid, sK, warp, lane, p.extra.scale);
        }
        __syncthreads();
        if (has_next) issue(blk + 1, next_ids);  // staging is free again: overlap the next block's loads
        cp_async_commit();
      }

      // S (half kh) = Q K^T over dims kh*kHalf.. for this warp's 16 x 32 tile.
      {
        float sacc[4][4];
#pragma unroll
        for (int j = 0; j < 4; ++j) sacc[j][0] = sacc[j][1] = sacc[j][2] = sacc[j][3] = 0.0f;
        // ldmatrix addresses. A (Q, 16 x 16): matrices (rows +0/+8) x (cols +0/+8) in the order
        // a0..a3. B (K rows n, dims k): matrices (n +0, k +0), (n +0, k +8), (n +8, k +0),
        // (n +8, k +8) -> b0/b1 of n-tile n0 and of n-tile n0 + 8.
        const __nv_bfloat16* qa =
            sQ + (mw + (lane & 7) + ((lane >> 3) & 1) * 8) * G::kQKStride + (lane >> 4) * 8 + kh * kHalf;
        const __nv_bfloat16* kb =
            sK + (nw + (lane & 7) + (lane >> 4) * 8) * G::kQKStride + ((lane >> 3) & 1) * 8 + kh * kHalf;
#pragma unroll 4
        for (int kk = 0; kk < kHalf; kk += 16) {
          std::uint32_t a[4], b01[4], b23[4];
          ldmatrix_x4(a, qa + kk);
          ldmatrix_x4(b01, kb + kk);
          ldmatrix_x4(b23, kb + 16 * G::kQKStride + kk);
          mma_bf16_16816(sacc[0], a, b01[0], b01[1]);
          mma_bf16_16816(sacc[1], a, b01[2], b01[3]);
          mma_bf16_16816(sacc[2], a, b23[0], b23[1]);
          mma_bf16_16816(sacc[3], a, b23[2], b23[3]);
        }
        float* sSh = sS + kh * G::s_half;
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const int col = nw + j * 8 + 2 * t4;
          float* s0 = sSh + (mw + g) * G::kSStride + col;
          float* s1 = s0 + 8 * G::kSStride;
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
          const float* r0 = sS + row * G::kSStride + c0;
          const float* r1 = r0 + G::s_half;
          const float4 a0 = *reinterpret_cast<const float4*>(r0);
          const float4 a1 = *reinterpret_cast<const float4*>(r0 + 4);
          const float4 b0 = *reinterpret_cast<const float4*>(r1);
          const float4 b1 = *reinterpret_cast<const float4*>(r1 + 4);
          v[0] = a0.x + b0.x;
          v[1] = a0.y + b0.y;
          v[2] = a0.z + b0.z;
          v[3] = a0.w + b0.w;
          v[4] = a1.x + b1.x;
          v[5] = a1.y + b1.y;
          v[6] = a1.z + b1.z;
          v[7] = a1.w + b1.w;
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
        // With G::kPInS, P overwrites the second S half's row `row`, which only this row's 8
        // threads (of this warp) read, above.
        if constexpr (G::kPInS) __syncwarp();
        *reinterpret_cast<uint4*>(sP + row * G::kPStride + c0) = make_uint4(packed[0], packed[1], packed[2], packed[3]);
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
        const __nv_bfloat16* pa = sP + (pm + g) * G::kPStride + 2 * t4;
        const int lrow = (lane & 7) + ((lane >> 3) & 1) * 8;
        const int lcol = (lane >> 4) * 8;
#pragma unroll
        for (int kk = 0; kk < G::kRows; kk += 16) {
          std::uint32_t a[2][4];
#pragma unroll
          for (int t = 0; t < 2; ++t) {
            const __nv_bfloat16* pt = pa + 16 * t * G::kPStride + kk;
            a[t][0] = *reinterpret_cast<const std::uint32_t*>(pt);
            a[t][1] = *reinterpret_cast<const std::uint32_t*>(pt + 8 * G::kPStride);
            a[t][2] = *reinterpret_cast<const std::uint32_t*>(pt + 8);
            a[t][3] = *reinterpret_cast<const std::uint32_t*>(pt + 8 * G::kPStride + 8);
          }
          const __nv_bfloat16* vb = sK + (kk + lrow) * G::kQKStride + dw + lcol;
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
      // next writes; with a direct geometry the next block's rows go into sK only after every
      // warp's P V is done with it.
      if constexpr (G::kDirect) {
        __syncthreads();
        if (has_next) issue(blk + 1, next_ids);
        cp_async_commit();
      }
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
          std::uint32_t* dst = reinterpret_cast<std::uint32_t*>(p.out + orow * G::kDim + dw + 2 * t4);
#pragma unroll
          for (int j = 0; j < 8; ++j) {
            dst[j * 4] = pack_bf16x2(acc[t][j][2 * half] * f.factor, acc[t][j][2 * half + 1] * f.factor);
          }
          if (dw == 0 && t4 == 0) p.lse[orow] = f.lse;
        } else {
          const int split_idx = p.num_splits[r] + (r == begin_req ? begin_split : 0);
          const std::int64_t arow = (static_cast<std::int64_t>(split_idx) * p.s_q + s) * p.h_q + head;
          const float factor = l > 0.0f ? 1.0f / l : 0.0f;
          float2* dst = reinterpret_cast<float2*>(p.o_accum + arow * G::kDim + dw + 2 * t4);
#pragma unroll
          for (int j = 0; j < 8; ++j)
            dst[j * 4] = make_float2(acc[t][j][2 * half] * factor, acc[t][j][2 * half + 1] * factor);
          if (dw == 0 && t4 == 0) p.lse_accum[arow] = partial_lse(l, m);
        }
      }
    }
  }
}

/// Body of the launch functions of decode_*.cu.
template <RowFormat kMain, bool kHasExtra, RowFormat kExtra>
void launch_decode(const DecodeParams& p, const DecodeLaunch& launch) {
  launch_decode_grid(&sparse_decode_kernel<kMain, kHasExtra, kExtra>, p, launch, "sparse_decode_kernel<<<...>>>");
}

}  // namespace mlaplan::kernels::detail
