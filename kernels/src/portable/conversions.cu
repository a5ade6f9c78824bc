// The device's check of the small-head sm_90a producers' e4m3 -> bf16 conversion (common/formats.cuh,
// e4m3x16_ue8m0_to_bf16) against the float path (e4m3x16_to_bf16 with ue8m0_to_float): every pair
// of e4m3 codes times every UE8M0 scale byte, bit for bit (NaN against NaN). The bit-level path
// leans on the GPU's bf16 multiply keeping subnormals and rounding to nearest even, which this
// check confirms on the device it runs on (mlaplan_gpu_tests).

#include <cuda_runtime.h>

#include <cstdint>

#include "common/cuda_check.hpp"
#include "common/formats.cuh"
#include "mlaplan_kernels/kernels.hpp"

namespace mlaplan::kernels::detail {
namespace {

struct CheckCounters {
  unsigned long long checked;
  unsigned long long mismatches;
  unsigned long long first;  // (scale << 16 | code pair) + 1 of the lowest mismatch, 0: none
};

__device__ __forceinline__ bool is_bf16_nan(std::uint32_t h) { return (h & 0x7F80u) == 0x7F80u && (h & 0x7Fu) != 0u; }

__device__ __forceinline__ bool e4m3_is_nan_code(std::uint32_t c) { return (c & 0x7Fu) == 0x7Fu; }

/// Block b checks scale byte b: thread t takes code pairs 8 (t + 256 j) .. + 7, eight pairs at a time
/// (one 16-byte unit).
__global__ void check_e4m3_kernel(CheckCounters* out) {
  const std::uint32_t b = blockIdx.x;
  const float scale = ue8m0_to_float(b);
  unsigned long long checked = 0, bad = 0, first = 0;
  auto fail = [&](std::uint32_t pair) {
    ++bad;
    const unsigned long long key = (static_cast<unsigned long long>(b) << 16 | pair) + 1ull;
    if (first == 0 || key < first) first = key;
  };
  for (std::uint32_t unit = threadIdx.x; unit < 65536u / 8u; unit += blockDim.x) {
    std::uint32_t w[4];
    for (int i = 0; i < 4; ++i) {
      const std::uint32_t p0 = 8u * unit + 2u * i, p1 = p0 + 1u;  // two pairs (c0, c1) per word
      w[i] = (p0 & 0xFFFFu) | (p1 << 16);
    }
    const uint4 raw = make_uint4(w[0], w[1], w[2], w[3]);
    uint4 lo, hi, nan_lo, nan_hi;
    e4m3x16_ue8m0_to_bf16(raw, b, false, lo, hi);
    e4m3x16_ue8m0_to_bf16(raw, b, true, nan_lo, nan_hi);
    const std::uint32_t got[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
    const std::uint32_t got_nan[8] = {nan_lo.x, nan_lo.y, nan_lo.z, nan_lo.w, nan_hi.x, nan_hi.y, nan_hi.z, nan_hi.w};
    for (int i = 0; i < 4; ++i) {
      // The NaN-code test of the word: set exactly where one of its four codes is 0x7F or 0xFF.
      bool any = false;
      for (int k = 0; k < 4; ++k) any = any || e4m3_is_nan_code((w[i] >> (8 * k)) & 0xFFu);
      if (e4m3_nan_found(e4m3_nan_bits(w[i])) != any) fail(8u * unit + 2u * i);
    }
    for (int j = 0; j < 8; ++j) {
      const std::uint32_t pair = 8u * unit + j;
      const std::uint32_t two = (j & 1) ? w[j >> 1] >> 16 : w[j >> 1] & 0xFFFFu;
      const std::uint32_t want = e4m3x2_to_bf16x2(two, scale);
      for (int h = 0; h < 2; ++h) {
        const std::uint32_t code = (two >> (8 * h)) & 0xFFu;
        const std::uint32_t g = (got[j] >> (16 * h)) & 0xFFFFu;
        const std::uint32_t n = (got_nan[j] >> (16 * h)) & 0xFFFFu;
        const std::uint32_t r = (want >> (16 * h)) & 0xFFFFu;
        ++checked;
        if (!is_bf16_nan(n)) fail(pair);       // nan = true: every output NaN
        if (e4m3_is_nan_code(code)) continue;  // the caller's NaN test covers these codes
        if (is_bf16_nan(r) ? !is_bf16_nan(g) : g != r) fail(pair);
      }
    }
  }
  atomicAdd(&out->checked, checked);
  if (bad != 0) {
    atomicAdd(&out->mismatches, bad);
    atomicMin(&out->first, first);
  }
}

}  // namespace
}  // namespace mlaplan::kernels::detail

namespace mlaplan::kernels {

ConversionCheck check_e4m3_conversion() {
  detail::CheckCounters init{0, 0, ~0ull};
  detail::CheckCounters* d = nullptr;
  MLAPLAN_CUDA_CHECK(cudaMalloc(&d, sizeof(init)));
  ConversionCheck r;
  try {
    MLAPLAN_CUDA_CHECK(cudaMemcpy(d, &init, sizeof(init), cudaMemcpyHostToDevice));
    detail::check_e4m3_kernel<<<256, 256>>>(d);
    MLAPLAN_CUDA_CHECK_LAUNCH("check_e4m3_kernel<<<...>>>");
    detail::CheckCounters h{};
    MLAPLAN_CUDA_CHECK(cudaMemcpy(&h, d, sizeof(h), cudaMemcpyDeviceToHost));
    r.checked = static_cast<std::int64_t>(h.checked);
    r.mismatches = static_cast<std::int64_t>(h.mismatches);
    if (h.first != ~0ull) {
      r.first_scale = static_cast<int>((h.first - 1) >> 16);
      r.first_codes = static_cast<int>((h.first - 1) & 0xFFFFu);
    }
  } catch (...) {
    cudaFree(d);
    throw;
  }
  MLAPLAN_CUDA_CHECK(cudaFree(d));
  return r;
}

}  // namespace mlaplan::kernels
