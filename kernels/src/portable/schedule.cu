// GPU tile scheduler (docs/scheduler.md, "The algorithm"): records and num_splits equal the host
// planner's (src/cache/scheduler.cpp) bit for bit, idle partitions included.
//
// The host planner sweeps the partitions one after another; on a GPU one thread doing that costs
// ~100-250 cycles per partition (a dependent chain of branches and stores), tens of microseconds
// at b 64. Here the sweep is recast so that all but one table walk runs in parallel (one CTA of
// 256 threads):
//   cost position: request i spans [F_i, F_i + n_i) with F_i = sum_{j<i} (n_j + O); a cursor at
//   request r, block blk is the position c = F_r + blk. A partition starting at c with payload P
//   finishes every request whose end boundary F_j lies within c + P; if the largest such F_j is
//   at least c + P - O it stops there (too little left to pay another overhead), otherwise it
//   takes the blocks that remain after the overhead and stops inside the next request at
//   c + P - O. So the next start is f(c) = F_j* if F_j* >= c + P - O, else c + P - O, with
//   j* = max{j : F_j <= c + P} (F_b when the batch ends).
//   1. all threads: blocks per request n_i, the prefix F (block scan), payload;
//   2. all threads: the table f(c) for every position c < F_b (binary search in F);
//   3. one thread: the partition starts C_0 = 0, C_{p+1} = f(C_p): one shared-memory load each;
//   4. all threads: each partition's record from (C_p, C_{p+1}); the pieces per request (1 + the
//      partition starts strictly inside it) and their prefix sum num_splits; idle records.
// Batches whose tables do not fit 48 KiB of shared memory run the plain sweep (one thread).

#include <cuda_runtime.h>

#include <cstdint>

#include "common/cuda_check.hpp"
#include "mlaplan_kernels/kernels.hpp"

namespace mlaplan::kernels::detail {
namespace {

constexpr int kThreads = 256;
constexpr std::int64_t kSmemBytes = 48 * 1024 - 256;  // dynamic part; the static part is < 256 B

__device__ __forceinline__ std::int32_t request_blocks(const ScheduleParams& p, std::int32_t i) {
  std::int32_t len = p.topk_length != nullptr ? p.topk_length[i] : p.topk;
  if (len == 0) len = 1;
  if (p.has_extra) {
    const std::int32_t ext = p.extra_topk_length != nullptr ? p.extra_topk_length[i] : p.extra_topk;
    len = (len + p.block - 1) / p.block * p.block + ext;
  }
  return (len - 1) / p.block + 1;
}

/// Largest j in [0, n) with a[j] <= x (a increasing, a[0] <= x).
__device__ __forceinline__ std::int32_t last_at_most(const std::int32_t* a, std::int32_t n, std::int32_t x) {
  std::int32_t lo = 0, hi = n - 1;
  while (lo < hi) {
    const std::int32_t mid = (lo + hi + 1) >> 1;
    if (a[mid] <= x) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo;
}

/// Exclusive prefix sum over v[0, n) in place, returns the total. All threads of the CTA call it.
__device__ std::int32_t block_exclusive_scan(std::int32_t* v, std::int32_t n, std::int32_t* s_warp) {
  const int tid = static_cast<int>(threadIdx.x);
  const std::int32_t per = (n + kThreads - 1) / kThreads;
  const std::int32_t lo = tid * per < n ? tid * per : n;
  const std::int32_t hi = lo + per < n ? lo + per : n;
  std::int32_t sum = 0;
  for (std::int32_t i = lo; i < hi; ++i) sum += v[i];
  // inclusive scan of the per-thread sums
  std::int32_t x = sum;
#pragma unroll
  for (int off = 1; off < 32; off <<= 1) {
    const std::int32_t y = __shfl_up_sync(0xFFFFFFFFu, x, off);
    if ((tid & 31) >= off) x += y;
  }
  if ((tid & 31) == 31) s_warp[tid >> 5] = x;
  __syncthreads();
  if (tid < 32) {
    std::int32_t w = tid < kThreads / 32 ? s_warp[tid] : 0;
#pragma unroll
    for (int off = 1; off < 32; off <<= 1) {
      const std::int32_t y = __shfl_up_sync(0xFFFFFFFFu, w, off);
      if (tid >= off) w += y;
    }
    if (tid < kThreads / 32) s_warp[tid] = w;  // inclusive warp totals
  }
  __syncthreads();
  std::int32_t run = x - sum + ((tid >> 5) > 0 ? s_warp[(tid >> 5) - 1] : 0);
  for (std::int32_t i = lo; i < hi; ++i) {
    const std::int32_t e = v[i];
    v[i] = run;
    run += e;
  }
  const std::int32_t total = s_warp[kThreads / 32 - 1];
  __syncthreads();
  return total;
}

/// The host planner's sweep by one thread over staged (or global) block counts.
template <class BlocksOf>
__device__ std::int32_t sequential_sweep(const ScheduleParams& p, std::int32_t payload, const BlocksOf& blocks_of) {
  std::int32_t r = 0, blk = 0, sidx = 0, cum = 0;
  std::int32_t n_r = p.b > 0 ? blocks_of(0) : 0;
  std::int32_t n_prev = 0;
  p.num_splits[0] = 0;
  std::int32_t part = 0;
  for (; part < p.num_sm_parts && r < p.b; ++part) {
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
        n_r = r < p.b ? blocks_of(r) : 0;
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
    rec[2] = begin_block;
    rec[3] = end_block;
    rec[4] = begin_split;
    rec[5] = first_split;
    rec[6] = last_split;
    rec[7] = 0;
  }
  return part;
}

/// Idle partitions from `first` on: [b, b - 1, n_0 - 1, n_(b-1), 0, 0, 0, 0]; begin_block = n_0 - 1
/// as FlashMLA's scheduler writes it (it reads one element past its per-request array). With
/// b == 0 every partition is idle.
__device__ void write_idle(const ScheduleParams& p, std::int32_t first, std::int32_t n_first, std::int32_t n_last) {
  for (std::int32_t part = first + static_cast<std::int32_t>(threadIdx.x); part < p.num_sm_parts; part += kThreads) {
    std::int32_t* rec = p.records + static_cast<std::int64_t>(part) * 8;
    rec[0] = p.b;
    rec[1] = p.b - 1;
    rec[2] = p.b > 0 ? n_first - 1 : -1;
    rec[3] = n_last;
    rec[4] = rec[5] = rec[6] = rec[7] = 0;
  }
}

/// The parallel plan (file comment). Dynamic shared memory: n[b], F[b + 1], C[P + 1], then the
/// table f over [0, F_b) (or, once the starts are known, the split counts per request).
__global__ void __launch_bounds__(kThreads) schedule_parallel_kernel(const ScheduleParams p, std::int32_t smem_ints) {
  extern __shared__ std::int32_t sm[];
  __shared__ std::int32_t s_warp[kThreads / 32];
  __shared__ std::int32_t s_used;
  // The decode kernel that follows is a programmatic dependent launch: let it be launched now (its
  // CTAs wait in griddepcontrol.wait until this grid has finished and its writes are visible).
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
  const int tid = static_cast<int>(threadIdx.x);
  const std::int32_t b = p.b, P = p.num_sm_parts, O = p.fixed_overhead;
  std::int32_t* n = sm;
  std::int32_t* F = n + b;
  std::int32_t* C = F + b + 1;
  std::int32_t* T = C + P + 1;
  const std::int32_t t_cap = smem_ints - (2 * b + P + 2);

  for (std::int32_t i = tid; i < b; i += kThreads) {
    const std::int32_t k = request_blocks(p, i);
    n[i] = k;
    F[i] = k + O;
  }
  __syncthreads();
  const std::int32_t total = block_exclusive_scan(F, b, s_warp);
  if (tid == 0) F[b] = total;
  const std::int32_t payload = (total + P - 1) / P + O;
  __syncthreads();

  if (total > t_cap) {  // lengths wider than the host sized the table for: the plain sweep
    if (tid == 0) s_used = sequential_sweep(p, payload, [&](std::int32_t i) { return n[i]; });
    __syncthreads();
    write_idle(p, s_used, b > 0 ? n[0] : 0, b > 0 ? n[b - 1] : 0);
    return;
  }
  // 2. f(c) for every cursor position c < F_b
  for (std::int32_t c = tid; c < total; c += kThreads) {
    const std::int32_t x = c + payload;
    const std::int32_t j = last_at_most(F, b + 1, x);
    T[c] = (j == b || F[j] >= x - O) ? F[j] : x - O;
  }
  __syncthreads();
  // 3. the partition starts: one dependent shared-memory load per used partition
  if (tid == 0) {
    std::int32_t c = 0, used = 0;
    C[0] = 0;
    while (used < P && c < total) {
      c = T[c];
      C[++used] = c;
    }
    s_used = used;
  }
  __syncthreads();
  const std::int32_t used = s_used;
  // 4a. records of the used partitions
  for (std::int32_t part = tid; part < used; part += kThreads) {
    const std::int32_t c0 = C[part], c1 = C[part + 1];
    const std::int32_t r = last_at_most(F, b, c0);
    const std::int32_t blk = c0 - F[r];
    const std::int32_t j = last_at_most(F, b + 1, c1);
    std::int32_t end_req, end_block;
    if (F[j] == c1) {  // stops at the end of request j - 1
      end_req = j - 1;
      end_block = n[j - 1];
    } else {  // stops inside request j
      end_req = j;
      end_block = c1 - F[j];
    }
    std::int32_t first_split = blk != 0 ? 1 : 0;
    std::int32_t last_split = end_block != n[end_req] ? 1 : 0;
    if (r == end_req) first_split = last_split = (first_split || last_split) ? 1 : 0;
    // pieces of r before this one: the partitions since the one in which r began
    const std::int32_t begin_split = blk == 0 ? 0 : part - last_at_most(C, used + 1, F[r]);
    std::int32_t* rec = p.records + static_cast<std::int64_t>(part) * 8;
    rec[0] = r;
    rec[1] = end_req;
    rec[2] = blk;
    rec[3] = end_block;
    rec[4] = begin_split;
    rec[5] = first_split;
    rec[6] = last_split;
    rec[7] = 0;
  }
  // 4b. pieces per request = 1 + partition starts strictly inside it; num_splits = their prefix
  std::int32_t* pieces = T;  // the table is no longer needed
  __syncthreads();
  for (std::int32_t i = tid; i < b; i += kThreads) pieces[i] = 1;
  __syncthreads();
  for (std::int32_t q = 1 + tid; q < used; q += kThreads) {
    const std::int32_t j = last_at_most(F, b + 1, C[q]);
    if (F[j] != C[q]) atomicAdd(&pieces[j], 1);
  }
  __syncthreads();
  const std::int32_t all = block_exclusive_scan(pieces, b, s_warp);
  for (std::int32_t i = tid; i < b; i += kThreads) p.num_splits[i] = pieces[i];
  if (tid == 0) p.num_splits[b] = all;
  write_idle(p, used, b > 0 ? n[0] : 0, b > 0 ? n[b - 1] : 0);
}

/// Batches too large for the tables: one warp counts and sums, one thread sweeps (global reads).
__global__ void __launch_bounds__(32) schedule_sweep_kernel(const ScheduleParams p) {
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");  // as schedule_parallel_kernel
  const int lane = static_cast<int>(threadIdx.x);
  long long total = 0;
  for (std::int32_t i = lane; i < p.b; i += 32) total += request_blocks(p, i) + p.fixed_overhead;
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) total += __shfl_xor_sync(0xFFFFFFFFu, total, off);
  __shared__ std::int32_t s_used;
  if (lane == 0) {
    const auto payload = static_cast<std::int32_t>((total + p.num_sm_parts - 1) / p.num_sm_parts) + p.fixed_overhead;
    s_used = sequential_sweep(p, payload, [&](std::int32_t i) { return request_blocks(p, i); });
  }
  __syncwarp();
  const std::int32_t n_first = p.b > 0 ? request_blocks(p, 0) : 0;
  const std::int32_t n_last = p.b > 0 ? request_blocks(p, p.b - 1) : 0;
  for (std::int32_t part = s_used + lane; part < p.num_sm_parts; part += 32) {
    std::int32_t* rec = p.records + static_cast<std::int64_t>(part) * 8;
    rec[0] = p.b;
    rec[1] = p.b - 1;
    rec[2] = p.b > 0 ? n_first - 1 : -1;
    rec[3] = n_last;
    rec[4] = rec[5] = rec[6] = rec[7] = 0;
  }
}

}  // namespace

/// Shared-memory ints the parallel plan needs when every request is at most its widths long, or
/// -1 when that exceeds the 48 KiB a CTA gets without opting in.
std::int64_t schedule_parallel_smem_ints(const ScheduleParams& p) {
  const std::int64_t main_blocks = (static_cast<std::int64_t>(p.topk > 1 ? p.topk : 1) + p.block - 1) / p.block;
  const std::int64_t extra_blocks = p.has_extra ? (static_cast<std::int64_t>(p.extra_topk) + p.block - 1) / p.block : 0;
  const std::int64_t table = static_cast<std::int64_t>(p.b) * (main_blocks + extra_blocks + p.fixed_overhead);
  const std::int64_t ints =
      2 * static_cast<std::int64_t>(p.b) + p.num_sm_parts + 2 + (table > p.b ? table : static_cast<std::int64_t>(p.b));
  return ints * 4 <= kSmemBytes ? ints : -1;
}

}  // namespace mlaplan::kernels::detail

namespace mlaplan::kernels {

void schedule(const ScheduleParams& p) {
  if (p.b < 0 || p.num_sm_parts < 1 || p.block < 1 || p.fixed_overhead < 0) {
    throw_usage("schedule: b >= 0, num_sm_parts >= 1, block >= 1 and fixed_overhead >= 0 required");
  }
  if (p.records == nullptr || p.num_splits == nullptr) throw_usage("schedule: records and num_splits must be set");
  if (p.topk_length == nullptr && p.topk < 0) throw_usage("schedule: topk must be >= 0");
  if (p.topk < 0 || p.extra_topk < 0) throw_usage("schedule: topk and extra_topk must be >= 0");
  const auto stream = static_cast<cudaStream_t>(p.stream);
  const std::int64_t ints = detail::schedule_parallel_smem_ints(p);
  if (ints > 0) {
    detail::schedule_parallel_kernel<<<1, detail::kThreads, static_cast<std::size_t>(ints) * 4, stream>>>(
        p, static_cast<std::int32_t>(ints));
    MLAPLAN_CUDA_CHECK_LAUNCH("schedule_parallel_kernel<<<1, 256>>>");
  } else {
    detail::schedule_sweep_kernel<<<1, 32, 0, stream>>>(p);
    MLAPLAN_CUDA_CHECK_LAUNCH("schedule_sweep_kernel<<<1, 32>>>");
  }
}

}  // namespace mlaplan::kernels
