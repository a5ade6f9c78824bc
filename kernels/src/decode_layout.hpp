#pragma once
// Shared-memory layout of the decode kernel, CUDA-free so the host heuristics size launches from
// the same numbers the kernel uses. Offsets in bytes; strides padded so that the mma fragment
// loads and ldmatrix rows hit distinct banks.

#include <cstddef>

namespace mlaplan::kernels::detail {

struct DecodeSmem {
  static constexpr int kRows = 64;            // K/V rows per block (tile-scheduler block B)
  static constexpr int kHeads = 64;           // query heads per CTA
  static constexpr int kDim = 512;            // head dim (QK and V)
  static constexpr int kQKStride = 520;       // bf16 per row of sQ and sK (512 + 8 pad)
  static constexpr int kSStride = 68;         // floats per row of sS (64 + 4 pad)
  static constexpr int kPStride = 72;         // bf16 per row of sP (64 + 8 pad)
  static constexpr int kStageStride = 592;    // bytes per staged raw row (>= 584, multiple of 16)
  static constexpr int kDecodeWarps = 16;
  static constexpr int kDecodeThreads = 32 * kDecodeWarps;

  static constexpr std::size_t q = 0;                                                      // bf16 [64][520]
  static constexpr std::size_t k = q + std::size_t(kHeads) * kQKStride * 2;                // bf16 [64][520]
  static constexpr std::size_t s = k + std::size_t(kRows) * kQKStride * 2;                 // f32  [2][64][68]
  static constexpr std::size_t s_half = std::size_t(kHeads) * kSStride;                     // floats per half
  static constexpr std::size_t p = s + 2 * s_half * 4;                                      // bf16 [64][72]
  static constexpr std::size_t stage = p + std::size_t(kHeads) * kPStride * 2;             // u8   [64][592]
  static constexpr std::size_t row_max = stage + std::size_t(kRows) * kStageStride;        // f32  [64]
  static constexpr std::size_t row_sum = row_max + kHeads * 4;                             // f32  [64]
  static constexpr std::size_t row_alpha = row_sum + kHeads * 4;                           // f32  [64]
  static constexpr std::size_t valid = row_alpha + kHeads * 4;                             // i32  [2][64]
  static constexpr std::size_t total = valid + 2 * kRows * 4;
};

static_assert(DecodeSmem::stage % 16 == 0, "staging rows need 16-byte alignment for cp.async");
static_assert(DecodeSmem::total <= 227 * 1024, "decode shared memory exceeds the sm_90 limit");

}  // namespace mlaplan::kernels::detail
