#pragma once
// Host reference of one sparse-MLA decode call (docs/kernels.md, "Semantics") and the pass
// criterion a kernel's output is judged by. Plain C++: no CUDA, usable without a GPU.
//
// The reference works on DEQUANTISED rows (floats), so the quantisation error of a KV format is
// not counted against a kernel; it accumulates in double precision.

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

namespace mlaplan {

/// Value head dimension of every sparse-MLA decode in this project (d_v = 512); the query/key head
/// dimension d_qk is 512 (V4, V4.1) or 576 (V3.2: 512 NoPE + 64 RoPE, V = the first 512 of a key).
inline constexpr int kRefHeadDim = 512;

/// The dequantised rows of one cache, indexed by global row id (page * page_block_size + offset).
/// Either `dense` (num_rows x d_qk floats, row-major) or `fetch` (writes the d_qk values of one row)
/// must be set. Ids >= num_rows (when num_rows > 0) are treated like -1, as the kernels do.
struct RefRows {
  const float* dense = nullptr;                             ///< [num_rows, 512] or null
  std::function<void(std::int64_t row, float* out)> fetch;  ///< used when dense is null
  std::int64_t num_rows = 0;                                ///< 0: no upper bound check
};

/// Inputs of one decode call. Pointers are host pointers; shapes in the comments.
struct RefDecodeInput {
  std::int32_t b = 0;
  std::int32_t s_q = 1;
  std::int32_t h_q = 64;
  std::int32_t d_qk = 512;   ///< 512 or 576
  const float* q = nullptr;  ///< [b, s_q, h_q, d_qk] (bf16 values as float)

  RefRows main;                           ///< main (window) cache rows
  const std::int32_t* indices = nullptr;  ///< [b, s_q, topk], global row ids or -1
  std::int32_t topk = 0;
  const std::int32_t* topk_length = nullptr;  ///< [b] or null (null: every position valid)

  bool has_extra = false;
  RefRows extra;                                ///< extra (compressed) cache rows
  const std::int32_t* extra_indices = nullptr;  ///< [b, s_q, extra_topk]
  std::int32_t extra_topk = 0;
  const std::int32_t* extra_topk_length = nullptr;  ///< [b] or null

  const float* attn_sink = nullptr;             ///< [h_q] or null
  double softmax_scale = 0.044194173824159216;  ///< 1/sqrt(512)
};

/// Output of the reference: out [b, s_q, h_q, 512], lse [b, s_q, h_q] (natural log).
struct RefDecodeOutput {
  std::vector<float> out;
  std::vector<float> lse;
};

/// Runs the reference over the whole batch. Throws mlaplan::Error (usage) for inconsistent
/// inputs (missing pointers, negative sizes, a row source with neither dense nor fetch).
RefDecodeOutput reference_decode(const RefDecodeInput& in);

/// Runs the reference for requests [b_begin, b_end) only, writing into `out` and `lse`, which
/// hold the whole batch (shapes as in RefDecodeOutput). Lets a caller split the work over threads.
void reference_decode_range(const RefDecodeInput& in, std::int32_t b_begin, std::int32_t b_end, float* out, float* lse);

/// Tolerances of the pass criterion (docs/kernels.md, "Reference and pass criterion").
struct DecodeTolerance {
  double abs = 1e-3;              ///< element: |a - r| <= abs ...
  double rel = 2.01 / 128;        ///< ... or |a - r| <= rel * |r|
  double cos_diff = 5e-6;         ///< 1 - 2 sum(ab) / sum(a^2 + b^2)
  double lse_abs = 1e-6;          ///< lse: |a - r| <= lse_abs ...
  double lse_rel = 8.01 / 65536;  ///< ... or |a - r| <= lse_rel * |r|
};

/// Result of comparing a kernel's output with the reference.
struct DecodeComparison {
  double max_abs = 0;        ///< largest |out - ref| over finite positions
  double max_rel = 0;        ///< largest |out - ref| / |ref| over finite positions whose abs error
                             ///< exceeds tol.abs (where the rel criterion decides); 0 if none
  double cos_diff = 0;       ///< 1 - 2 sum(ab) / sum(a^2 + b^2) over finite positions
  double lse_max_abs = 0;    ///< largest |lse - ref_lse| over finite positions
  std::int64_t bad_out = 0;  ///< elements outside both element tolerances or with inf/NaN mismatch
  std::int64_t bad_lse = 0;  ///< lse values likewise
  bool pass = false;
  std::string message;  ///< one line: "pass: ..." or "fail: ..." naming the first bad index
};

/// The pass criterion: inf/NaN positions (and signs of inf) equal; every finite element within
/// the abs or the rel tolerance; cosine difference <= tol.cos_diff; every lse within lse_abs or
/// lse_rel. Sizes of out/ref_out and lse/ref_lse must match (else Error usage).
DecodeComparison compare_decode(std::span<const float> out, std::span<const float> ref_out, std::span<const float> lse,
                                std::span<const float> ref_lse, const DecodeTolerance& tol = {});

}  // namespace mlaplan
