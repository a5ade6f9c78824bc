// GPU tile scheduler (docs/scheduler.md, "The algorithm"): one warp. The lanes count the blocks
// of every request and sum them; lane 0 then sweeps the partitions exactly as the host planner
// (src/scheduler.cpp) does, so records and num_splits agree bit for bit.

#include <cuda_runtime.h>

#include <cstdint>

#include "cuda_check.hpp"
#include "mlaplan_kernels/kernels.hpp"

namespace mlaplan::kernels::detail {
namespace {

__device__ __forceinline__ std::int32_t request_blocks(const ScheduleParams& p, std::int32_t i) {
  std::int32_t len = p.topk_length != nullptr ? p.topk_length[i] : p.topk;
  if (len == 0) len = 1;
  if (p.has_extra) {
    const std::int32_t ext = p.extra_topk_length != nullptr ? p.extra_topk_length[i] : p.extra_topk;
    len = (len + p.block - 1) / p.block * p.block + ext;
  }
  return (len - 1) / p.block + 1;
}

__global__ void schedule_kernel(const ScheduleParams p) {
  const int lane = static_cast<int>(threadIdx.x);
  std::int64_t total = 0;
  for (std::int32_t i = lane; i < p.b; i += 32) total += request_blocks(p, i) + p.fixed_overhead;
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) total += __shfl_xor_sync(0xFFFFFFFFu, total, off);
  if (lane != 0) return;

  const std::int32_t payload =
      static_cast<std::int32_t>((total + p.num_sm_parts - 1) / p.num_sm_parts) + p.fixed_overhead;
  std::int32_t r = 0, blk = 0, sidx = 0, cum = 0;
  std::int32_t n_r = p.b > 0 ? request_blocks(p, 0) : 0;  // blocks of request r
  std::int32_t n_prev = 0;                               // blocks of request r - 1
  // Idle partitions (begin_req == b) carry begin_block = n_0 - 1, as FlashMLA's scheduler writes
  // it (it reads one element past its per-request array); kernels skip them either way.
  const std::int32_t idle_begin_block = n_r - 1;
  p.num_splits[0] = 0;
  for (std::int32_t part = 0; part < p.num_sm_parts; ++part) {
    const std::int32_t begin_req = r, begin_block = blk, begin_split = sidx;
    std::int32_t first_split = blk != 0 ? 1 : 0;
    std::int32_t rem = payload;
    while (r < p.b) {
      const std::int32_t need = n_r - blk;
      if (rem >= need + p.fixed_overhead) {
        cum += sidx + 1;
        p.num_splits[r + 1] = cum;
        rem -= need + p.fixed_overhead;
        ++r;
        blk = 0;
        sidx = 0;
        n_prev = n_r;
        n_r = r < p.b ? request_blocks(p, r) : 0;
        continue;
      }
      if (rem - p.fixed_overhead > 0) {
        blk += rem - p.fixed_overhead;
        ++sidx;
      }
      break;
    }
    const std::int32_t end_req = blk > 0 ? r : r - 1;
    const std::int32_t end_block = blk > 0 ? blk : n_prev;
    const std::int32_t n_end = blk > 0 ? n_r : n_prev;
    std::int32_t last_split = end_block != n_end ? 1 : 0;
    if (begin_req == end_req) first_split = last_split = (first_split || last_split) ? 1 : 0;
    std::int32_t* rec = p.records + static_cast<std::int64_t>(part) * 8;
    rec[0] = begin_req;
    rec[1] = end_req;
    rec[2] = begin_req >= p.b ? idle_begin_block : begin_block;
    rec[3] = end_block;
    rec[4] = begin_split;
    rec[5] = first_split;
    rec[6] = last_split;
    rec[7] = 0;
  }
}

}  // namespace
}  // namespace mlaplan::kernels::detail

namespace mlaplan::kernels {

void schedule(const ScheduleParams& p) {
  if (p.b < 0 || p.num_sm_parts < 1 || p.block < 1 || p.fixed_overhead < 0) {
    throw_usage("schedule: b >= 0, num_sm_parts >= 1, block >= 1 and fixed_overhead >= 0 required");
  }
  if (p.records == nullptr || p.num_splits == nullptr) throw_usage("schedule: records and num_splits must be set");
  if (p.topk_length == nullptr && p.topk < 0) throw_usage("schedule: topk must be >= 0");
  detail::schedule_kernel<<<1, 32, 0, static_cast<cudaStream_t>(p.stream)>>>(p);
  MLAPLAN_CUDA_CHECK_LAUNCH("schedule_kernel<<<1, 32>>>");
}

}  // namespace mlaplan::kernels
