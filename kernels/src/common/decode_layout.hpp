#pragma once
// Shared-memory layout of the decode kernel, CUDA-free so the host heuristics size launches from
// the same numbers the kernel uses. Offsets in bytes; strides padded so that the mma fragment
// loads and ldmatrix rows hit distinct banks.

#include <cstddef>

namespace mlaplan::kernels::detail {

/// Shared memory of the portable decode kernel (portable/decode_kernel.cuh) for a head dim of kDqk
/// (512; 576 for V3.2's 656-byte rows) and raw rows staged kStage bytes apart (0: the rows are
/// plain bf16 and are copied straight into sK, nothing is staged). With kDqk 576 the P tile lives
/// in the second S half (its rows read into registers before P is written), which keeps the
/// larger Q and K tiles under the 227 KiB limit.
template <int kDqk, int kStage>
struct DecodeSmemT {
  static constexpr int kRows = 64;                            // K/V rows per block (tile-scheduler block B)
  static constexpr int kHeads = 64;                           // query heads per CTA
  static constexpr int kDim = 512;                            // d_v: the output dims (the first 512 of a K row)
  static constexpr int kQK = kDqk;                            // d_qk: 512, or 576 (512 NoPE + 64 RoPE)
  static constexpr int kQKStride = kDqk + 8;                  // bf16 per row of sQ and sK (+ 8 pad)
  static constexpr int kSStride = 68;                         // floats per row of sS (64 + 4 pad)
  static constexpr bool kPInS = kDqk != 512;                  // P in the second S half
  static constexpr int kPStride = kPInS ? 2 * kSStride : 72;  // bf16 per row of P
  static constexpr int kStageStride = kStage;                 // bytes per staged raw row (multiple of 16)
  static constexpr bool kDirect = kStage == 0;
  static constexpr int kDecodeWarps = 16;
  static constexpr int kDecodeThreads = 32 * kDecodeWarps;

  static constexpr std::size_t q = 0;                                            // bf16 [64][stride]
  static constexpr std::size_t k = q + std::size_t(kHeads) * kQKStride * 2;      // bf16 [64][stride]
  static constexpr std::size_t s = k + std::size_t(kRows) * kQKStride * 2;       // f32  [2][64][68]
  static constexpr std::size_t s_half = std::size_t(kHeads) * kSStride;          // floats per half
  static constexpr std::size_t p = kPInS ? s + s_half * 4 : s + 2 * s_half * 4;  // bf16 [64][kPStride]
  static constexpr std::size_t stage =
      kPInS ? s + 2 * s_half * 4 : p + std::size_t(kHeads) * kPStride * 2;     // u8 [64][kStage]
  static constexpr std::size_t row_max = stage + std::size_t(kRows) * kStage;  // f32  [64]
  static constexpr std::size_t row_sum = row_max + kHeads * 4;                 // f32  [64]
  static constexpr std::size_t row_alpha = row_sum + kHeads * 4;               // f32  [64]
  static constexpr std::size_t valid = row_alpha + kHeads * 4;                 // i32  [2][64]
  static constexpr std::size_t total = valid + 2 * kRows * 4;

  static_assert(kDqk == 512 || kDqk == 576, "head dim 512 or 576");
  static_assert(kStage % 16 == 0 && stage % 16 == 0, "staging rows need 16-byte alignment for cp.async");
  static_assert(total <= 227 * 1024, "decode shared memory exceeds the sm_90 limit");
};

/// The portable kernel's geometries: 584 / 528 / 288 / 512-byte rows staged 592 apart, V3.2's
/// 656-byte rows staged 672 apart, plain bf16 rows copied directly.
using DecodeSmem = DecodeSmemT<512, 592>;
using DecodeSmem656 = DecodeSmemT<576, 672>;
using DecodeSmemDirect = DecodeSmemT<512, 0>;

/// Shared memory of the small-head decode kernel (small/decode_small.cuh): h_q 8 or 16 unpadded,
/// one 16-row MMA tile of heads, 8 warps, raw rows staged kStages blocks deep (the kernel is bound
/// by reading the rows, so the stages keep several blocks of loads in flight per SM). Q lives in
/// registers (each warp holds the A fragments of its 64 head dims), so there is no sQ; each warp's
/// partial Q K^T over its dims goes to its own S slice, summed by the softmax.
template <int kDqk, int kStage, int kStagesT>
struct SmallSmemT {
  static constexpr int kRows = 64;   // K/V rows per block (tile-scheduler block B)
  static constexpr int kHeads = 16;  // MMA rows: h_q 16, or 8 with rows 8..15 idle
  static constexpr int kDim = 512;   // d_v
  static constexpr int kQK = kDqk;   // d_qk: 512, or 576 (512 NoPE + 64 RoPE)
  static constexpr int kQKStride = kDqk + 8;
  static constexpr int kSStride = 68;  // floats per row of a warp's S slice (64 + 4 pad)
  static constexpr int kPStride = 72;  // bf16 per row of P
  static constexpr int kStageStride = kStage;
  static constexpr int kStages = kStagesT;
  static constexpr bool kDirect = false;
  static constexpr int kDecodeWarps = 8;
  static constexpr int kDecodeThreads = 32 * kDecodeWarps;

  static constexpr std::size_t stage = 0;                                          // u8 [kStages][64][kStage]
  static constexpr std::size_t k = stage + std::size_t(kStages) * kRows * kStage;  // bf16 [64][stride]
  static constexpr std::size_t s = k + std::size_t(kRows) * kQKStride * 2;         // f32 [8][16][68]
  static constexpr std::size_t s_warp = std::size_t(kHeads) * kSStride;            // floats per warp slice
  static constexpr std::size_t p = s + std::size_t(kDecodeWarps) * s_warp * 4;     // bf16 [16][72]
  static constexpr std::size_t row_max = p + std::size_t(kHeads) * kPStride * 2;   // f32 [16]
  static constexpr std::size_t row_sum = row_max + kHeads * 4;                     // f32 [16]
  static constexpr std::size_t row_alpha = row_sum + kHeads * 4;                   // f32 [16]
  static constexpr std::size_t valid = row_alpha + kHeads * 4;                     // i32 [kStages][64]
  static constexpr std::size_t total = valid + std::size_t(kStages) * kRows * 4;

  static_assert(kDqk == 512 || kDqk == 576, "head dim 512 or 576");
  static_assert(kStage % 16 == 0 && k % 16 == 0 && p % 16 == 0, "16-byte alignment for cp.async and ldmatrix");
  static_assert(kStages >= 2, "at least double buffering");
  static_assert(total <= 227 * 1024, "small-head decode shared memory exceeds the sm_90 limit");
};

/// 584-byte rows (and their 584 extra cache) three blocks deep; V3.2's 656-byte rows (576-dim
/// sK) two deep, which is what fits.
using SmallSmem = SmallSmemT<512, 592, 3>;
using SmallSmem656 = SmallSmemT<576, 672, 2>;

/// Shared memory of the warp-specialised SM90 decode kernel, sm90/decode_ws.cuh: 512 threads = two
/// math warpgroups (head dims 256w .. 256w + 255 of Q, K and O) and two
/// producer warpgroups that gather and dequantise rows into a double-buffered K tile. No staging
/// area: the producers hold a block's raw bytes in registers.
struct DecodeSm90WsSmem {
  static constexpr int kRows = 64;
  static constexpr int kHeads = 64;
  static constexpr int kDim = 512;
  static constexpr int kThreads = 512;
  static constexpr int kMathRegs = 192;         // setmaxnreg of the math warpgroups
  static constexpr int kProducerRegs = 64;      // ... of the producers (2 x 192 + 2 x 64 = 4 x 128)
  static constexpr int kChunkBytes = 64 * 128;  // one 64-dim chunk of 64 rows, 128-byte swizzled
  static constexpr std::size_t kTileBytes = 8 * std::size_t(kChunkBytes);

  static constexpr std::size_t q = 0;                      // bf16 8 chunks
  static constexpr std::size_t k = q + kTileBytes;         // bf16 [2 buffers] 8 chunks
  static constexpr std::size_t xchg = k + 2 * kTileBytes;  // f32 [2][64 x 64]
  static constexpr std::size_t xchg_half = std::size_t(kHeads) * kRows * 4;
  // The seesaw math (sm90/decode_ws.cuh) uses the exchange area instead for P [2 warpgroups] (one
  // 128-byte swizzled 64 x 64 bf16 chunk each), then the row maxima and row sums f32 [2][64] each.
  static constexpr std::size_t p_slot = xchg;
  static constexpr std::size_t row_max = p_slot + 2 * std::size_t(kChunkBytes);
  static constexpr std::size_t row_sum = row_max + 2 * std::size_t(kHeads) * 4;
  // Row validity per K buffer, 16 bytes each: one CTA, byte w = rows 8w .. 8w + 7 of producer warp
  // w (a bit per row); a 2-CTA pair, byte 8c + w = the 4 rows of producer warp w of CTA c (a nibble).
  static constexpr std::size_t mask = xchg + 2 * xchg_half;
  static constexpr std::size_t bars = mask + 2 * 16;  // u64 full[2], empty[2], p_full[2], p_empty[2]
  static constexpr std::size_t total = bars + 8 * 8;
  static constexpr std::size_t alloc = total + 1024;
};

/// Shared memory of the warp-specialised small-head kernel (sm90/decode_small_ws.cuh): h_q 8 or 16
/// unpadded on sm_90a, fp8_ds_mla_584 rows. The producer warpgroups of the 64-head kernel
/// (ws_producer) fill the two K buffers exactly as there (same tile layout, masks and barriers);
/// each of the two math warpgroups owns one buffer, i.e. every other block, and computes
/// S^T = K Q^T (wgmma M = 64 keys, N = 16 heads) and O^T += V^T P^T (M = 64 dims per chunk), so
/// the 16 heads fill the N side of the MMA instead of being padded to 64 rows.
struct DecodeSm90SmallSmem {
  static constexpr int kRows = 64;
  static constexpr int kHeads = 16;  // N of every wgmma: h_q 8 runs with rows 8..15 of Q zero
  static constexpr int kDim = 512;
  static constexpr int kThreads = 512;  // math warpgroups 0, 1; producer warpgroups 2, 3
  static constexpr int kMathRegs = DecodeSm90WsSmem::kMathRegs;
  static constexpr int kProducerRegs = DecodeSm90WsSmem::kProducerRegs;
  static constexpr int kChunkBytes = DecodeSm90WsSmem::kChunkBytes;  // one 64-dim chunk of a K buffer
  static constexpr std::size_t kTileBytes = DecodeSm90WsSmem::kTileBytes;
  static constexpr int kQChunkBytes = kHeads * 128;  // one 64-dim chunk of Q: 16 rows of 128 bytes
  static constexpr int kOStride = kDim + 4;          // floats per staged output row (bank spread)

  static constexpr std::size_t k = 0;                                    // bf16 [2 buffers] 8 chunks
  static constexpr std::size_t q = k + 2 * kTileBytes;                   // bf16 8 chunks of 16 rows
  static constexpr std::size_t p = q + 8 * std::size_t(kQChunkBytes);    // bf16 [2 warpgroups] P^T [16][64]
  static constexpr std::size_t o = p + 2 * std::size_t(kQChunkBytes);    // f32 [2 wg][16][kOStride]: their scaled O
  static constexpr std::size_t o_half = std::size_t(kHeads) * kOStride;  // floats per warpgroup
  static constexpr std::size_t xmax = o + 2 * o_half * 4;                // f32 [2 wg][2 parity][4 warps][16]
  static constexpr std::size_t xsum = xmax + 2 * 2 * 4 * kHeads * 4;     // f32 [2 wg][4 warps][16]
  static constexpr std::size_t xrun = xsum + 2 * 4 * kHeads * 4;         // f32 [2 wg][16]: row maxima
  static constexpr std::size_t mask = xrun + 2 * kHeads * 4;             // u8 [2 buffers][16]
  static constexpr std::size_t bars = mask + 2 * 16;                     // u64 full[2], empty[2], staged[2], sums[2]
  static constexpr std::size_t total = bars + 8 * 8;
  static constexpr std::size_t alloc = total + 1024;
};

static_assert(DecodeSm90SmallSmem::q % 1024 == 0 && DecodeSm90SmallSmem::p % 1024 == 0 &&
                  DecodeSm90SmallSmem::kQChunkBytes % 1024 == 0 && DecodeSm90SmallSmem::o % 16 == 0 &&
                  DecodeSm90SmallSmem::bars % 8 == 0,
              "SM90 small-head decode: swizzled tiles need 1024-byte alignment");
static_assert(DecodeSm90SmallSmem::alloc <= 227 * 1024, "SM90 small-head decode shared memory exceeds the sm_90 limit");

static_assert(DecodeSm90WsSmem::k % 1024 == 0 && DecodeSm90WsSmem::xchg % 1024 == 0 &&
                  DecodeSm90WsSmem::bars % 8 == 0 &&
                  DecodeSm90WsSmem::row_sum + 2 * DecodeSm90WsSmem::kHeads * 4 <= DecodeSm90WsSmem::mask,
              "SM90 warp-specialised decode: swizzled tiles need 1024-byte alignment");
static_assert(DecodeSm90WsSmem::alloc <= 227 * 1024,
              "SM90 warp-specialised decode shared memory exceeds the sm_90 limit");
static_assert(2 * DecodeSm90WsSmem::kMathRegs + 2 * DecodeSm90WsSmem::kProducerRegs <= 4 * 128,
              "setmaxnreg: the warpgroups' registers must fit the launch's 4 x 128");

}  // namespace mlaplan::kernels::detail
