// How fast can this GPU gather the rows the sparse decode reads? The small-head sm_90a decode
// kernel reads 44-51% of the sequential copy rate at b 128 / 256 (docs/perf-history.md "v20"),
// bound by its producer warps, and more row loads in flight made it slower, not faster. This probe
// takes the kernel out: the same random 584-byte rows of a paged cache (V4.1-Flash's decode shape,
// 640 rows per request: 128 + 512, 64-row pages), read with the producers' thread mapping (4
// threads per row, 64 rows per 256 threads; per thread nine 16-byte loads and the row's 8 scale
// bytes) and only folded into a checksum: no dequantisation, no shared memory. Variants:
//   copy          a sequential read of the same number of bytes (the rate the tables quote)
//   whole         each block's part loaded, then consumed (the producers before "v20")
//   whole+pf      the same, the next block's row prefetched into L2 meanwhile (as in "v19")
//   halves        the part in two halves, the next block's first half issued before this block's
//                 second half is consumed (the producers since "v20")
//   ahead         the next block's whole part issued before this block's is consumed
//   async2/3/4    the rows copied by cp.async into 2, 3 or 4 shared-memory stages (36.5 KiB each),
//                 block i + stages - 1 issued before block i is read back: loads in flight not
//                 bounded by registers
// each with 1, 2 and 4 CTAs of 256 threads per SM (the decode kernel has one CTA of 256 producer
// threads per SM). It prints us per pass (median of 20, L2 flushed before each) and GB/s of row
// bytes, and the fraction of the copy rate.
// Build and run on the GPU machine (scripts/gpu-check.sh build puts it in the carry):
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -o gp kernels/bench/gather/gather_probe.cu
//   timeout 120 ./gp [b]        (b: requests, default 256)
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

namespace {

constexpr int kRowsPerRequest = 640;
constexpr int kPage = 64;
constexpr int kRowBytes = 584;
constexpr std::int64_t kPageStride = std::int64_t{kPage} * kRowBytes;  // 37,376: a multiple of 16

#define CHECK(x)                                                                                      \
  do {                                                                                                \
    cudaError_t e_ = (x);                                                                             \
    if (e_ != cudaSuccess) {                                                                          \
      std::fprintf(stderr, "gather_probe: %s: %s (line %d)\n", #x, cudaGetErrorString(e_), __LINE__); \
      std::exit(1);                                                                                   \
    }                                                                                                 \
  } while (0)

enum Mode { kWhole = 0, kWholePf = 1, kHalves = 2, kAhead = 3 };

struct Part {
  uint4 u[9];
  uint2 s;
};

struct Gather {
  const std::uint8_t* cache;
  const std::int32_t* ids;  // [blocks * 64]
  std::int64_t blocks;
  unsigned long long* out;
};

__device__ __forceinline__ const std::uint8_t* row_data(const Gather& g, std::int32_t id) {
  return g.cache + static_cast<std::int64_t>(id >> 6) * kPageStride + (id & 63) * 576;
}
__device__ __forceinline__ const std::uint8_t* row_scale(const Gather& g, std::int32_t id) {
  return g.cache + static_cast<std::int64_t>(id >> 6) * kPageStride + 64 * 576 + (id & 63) * 8;
}

// Units sub + 4k (k 0..6) are the fp8 units, unit 7 the RoPE unit's 32 bytes (u[7], u[8]), as the
// producers read a row's quarter.
__device__ __forceinline__ void load_units(const Gather& g, std::int32_t id, int sub, Part& p, int k0, int k1) {
  const uint4* src = reinterpret_cast<const uint4*>(row_data(g, id));
#pragma unroll
  for (int k = 0; k < 8; ++k) {
    if (k < k0 || k >= k1) continue;
    if (k < 7) {
      p.u[k] = __ldg(src + sub + 4 * k);
    } else {
      p.u[7] = __ldg(src + 28 + 2 * sub);
      p.u[8] = __ldg(src + 29 + 2 * sub);
    }
  }
}

__device__ __forceinline__ unsigned fold(const Part& p, int k0, int k1) {
  unsigned a = 0;
#pragma unroll
  for (int k = 0; k < 9; ++k) {
    if (k < k0 || k >= (k1 == 8 ? 9 : k1)) continue;
    a ^= p.u[k].x ^ p.u[k].y ^ p.u[k].z ^ p.u[k].w;
  }
  return a;
}

/// A thread's place, as the producers map it (4 threads per row, 64 rows per 256 threads), and its
/// CTA's contiguous share [b0, b1) of the blocks.
struct Slot {
  int tid, row, sub;
  std::int64_t b0, b1;
};
__device__ __forceinline__ Slot slot_of(const Gather& g) {
  const int tid = static_cast<int>(threadIdx.x);
  return {tid, tid >> 2, tid & 3, static_cast<std::int64_t>(blockIdx.x) * g.blocks / gridDim.x,
          static_cast<std::int64_t>(blockIdx.x + 1) * g.blocks / gridDim.x};
}

template <int M>
__global__ void __launch_bounds__(256) gather_kernel(Gather g) {
  const Slot t = slot_of(g);
  const int tid = t.tid, row = t.row, sub = t.sub;
  const std::int64_t b0 = t.b0, b1 = t.b1;
  unsigned acc = 0;
  if (b0 >= b1) return;
  std::int32_t id = __ldg(g.ids + b0 * 64 + row);
  Part cur;
  if (M == kHalves) {
    load_units(g, id, sub, cur, 0, 4);
    cur.s = __ldg(reinterpret_cast<const uint2*>(row_scale(g, id)));
  } else if (M == kAhead) {
    load_units(g, id, sub, cur, 0, 8);
    cur.s = __ldg(reinterpret_cast<const uint2*>(row_scale(g, id)));
  }
  for (std::int64_t blk = b0; blk < b1; ++blk) {
    const std::int32_t nid = blk + 1 < b1 ? __ldg(g.ids + (blk + 1) * 64 + row) : -1;
    if (M == kWhole || M == kWholePf) {
      load_units(g, id, sub, cur, 0, 8);
      cur.s = __ldg(reinterpret_cast<const uint2*>(row_scale(g, id)));
      if (M == kWholePf && nid >= 0) {
        const std::uint8_t* x = sub == 3 ? row_scale(g, nid) : row_data(g, nid) + 256 * sub;
        asm volatile("prefetch.global.L2 [%0];\n" ::"l"(x));
        if (sub < 3) asm volatile("prefetch.global.L2 [%0];\n" ::"l"(sub == 2 ? x + 63 : x + 128));
      }
      acc ^= fold(cur, 0, 8) ^ cur.s.x ^ cur.s.y;
    } else if (M == kHalves) {
      load_units(g, id, sub, cur, 4, 8);
      acc ^= fold(cur, 0, 4) ^ cur.s.x ^ cur.s.y;
      if (nid >= 0) {
        load_units(g, nid, sub, cur, 0, 4);
        cur.s = __ldg(reinterpret_cast<const uint2*>(row_scale(g, nid)));
      }
      acc ^= fold(cur, 4, 8);
    } else {
      Part nx = cur;
      if (nid >= 0) {
        load_units(g, nid, sub, nx, 0, 8);
        nx.s = __ldg(reinterpret_cast<const uint2*>(row_scale(g, nid)));
      }
      acc ^= fold(cur, 0, 8) ^ cur.s.x ^ cur.s.y;
      cur = nx;
    }
    id = nid;
  }
  g.out[static_cast<std::int64_t>(blockIdx.x) * 256 + tid] ^= acc;
}

constexpr int kStageBytes = 64 * kRowBytes;  // a block's rows, data then scales: 37,376

__device__ __forceinline__ void cp_async16(void* dst, const void* src) {
  const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(d), "l"(src) : "memory");
}
__device__ __forceinline__ void cp_async8(void* dst, const void* src) {
  const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8;\n" ::"r"(d), "l"(src) : "memory");
}

/// Block blk's rows into stage buffer st: thread (row, sub) copies the same units as load_units.
__device__ __forceinline__ void stage_block(const Gather& g, std::int64_t blk, std::uint8_t* st, int row, int sub) {
  const std::int32_t id = __ldg(g.ids + blk * 64 + row);
  const uint4* src = reinterpret_cast<const uint4*>(row_data(g, id));
  uint4* dst = reinterpret_cast<uint4*>(st + row * 576);
#pragma unroll
  for (int k = 0; k < 7; ++k) cp_async16(dst + sub + 4 * k, src + sub + 4 * k);
  cp_async16(dst + 28 + 2 * sub, src + 28 + 2 * sub);
  cp_async16(dst + 29 + 2 * sub, src + 29 + 2 * sub);
  if (sub == 0) cp_async8(st + 64 * 576 + row * 8, row_scale(g, id));
}

template <int kStages>
__global__ void __launch_bounds__(256) gather_async_kernel(Gather g) {
  extern __shared__ __align__(16) std::uint8_t stages[];
  const Slot t = slot_of(g);
  const int tid = t.tid, row = t.row, sub = t.sub;
  const std::int64_t b0 = t.b0, b1 = t.b1;
  unsigned acc = 0;
#pragma unroll
  for (int k = 0; k < kStages - 1; ++k) {
    if (b0 + k < b1) stage_block(g, b0 + k, stages + k * kStageBytes, row, sub);
    asm volatile("cp.async.commit_group;\n" ::: "memory");
  }
  for (std::int64_t blk = b0; blk < b1; ++blk) {
    const std::int64_t nb = blk + kStages - 1;
    if (nb < b1) stage_block(g, nb, stages + static_cast<int>((nb - b0) % kStages) * kStageBytes, row, sub);
    asm volatile("cp.async.commit_group;\n" ::: "memory");
    asm volatile("cp.async.wait_group %0;\n" ::"n"(kStages - 1) : "memory");
    __syncthreads();
    const std::uint8_t* st = stages + static_cast<int>((blk - b0) % kStages) * kStageBytes;
    const uint4* d = reinterpret_cast<const uint4*>(st + row * 576);
    // Read back a different thread's units than it copied (row + 1): the CTA's, not the thread's.
    const uint4* e = reinterpret_cast<const uint4*>(st + ((row + 1) & 63) * 576);
#pragma unroll
    for (int k = 0; k < 7; ++k) {
      const uint4 v = (k & 1) ? e[sub + 4 * k] : d[sub + 4 * k];
      acc ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    const uint4 r0 = d[28 + 2 * sub], r1 = d[29 + 2 * sub];
    acc ^= r0.x ^ r1.w ^ *reinterpret_cast<const unsigned*>(st + 64 * 576 + row * 8);
    __syncthreads();  // stage (blk - b0) % kStages is refilled next iteration
  }
  asm volatile("cp.async.wait_all;\n" ::: "memory");
  g.out[static_cast<std::int64_t>(blockIdx.x) * 256 + tid] ^= acc;
}

__global__ void copy_kernel(const uint4* src, std::int64_t n, unsigned long long* out) {
  unsigned acc = 0;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const uint4 v = __ldg(src + i);
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  out[blockIdx.x * blockDim.x + threadIdx.x] ^= acc;
}

}  // namespace

int main(int argc, char** argv) {
  const int b = argc > 1 ? std::atoi(argv[1]) : 256;
  if (b < 1 || b > 4096) {
    std::fprintf(stderr, "gather_probe: b must be 1..4096 (got %s)\n", argc > 1 ? argv[1] : "");
    return 2;
  }
  cudaDeviceProp prop{};
  CHECK(cudaGetDeviceProperties(&prop, 0));
  const std::int64_t blocks = std::int64_t{b} * kRowsPerRequest / 64;
  const std::int64_t used = blocks * 64;
  // Rows are drawn from a cache twice the rows read (no row read twice), as the GPU tests do.
  const std::int64_t pages = (2 * used + kPage - 1) / kPage;
  const std::int64_t cache_bytes = pages * kPageStride;
  std::vector<std::int32_t> ids(static_cast<std::size_t>(pages * kPage));
  for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<std::int32_t>(i);
  std::mt19937_64 rng(20261207);
  std::shuffle(ids.begin(), ids.end(), rng);
  ids.resize(static_cast<std::size_t>(used));

  std::uint8_t* cache = nullptr;
  std::int32_t* d_ids = nullptr;
  unsigned long long* out = nullptr;
  std::uint8_t* flush = nullptr;
  const std::size_t flush_bytes = std::size_t{256} << 20;
  const std::size_t out_elems = std::size_t(prop.multiProcessorCount) * 4 * 256 + 4096 * 256;
  CHECK(cudaMalloc(&cache, static_cast<std::size_t>(cache_bytes)));
  CHECK(cudaMemset(cache, 0x5A, static_cast<std::size_t>(cache_bytes)));
  CHECK(cudaMalloc(&d_ids, ids.size() * 4));
  CHECK(cudaMemcpy(d_ids, ids.data(), ids.size() * 4, cudaMemcpyHostToDevice));
  CHECK(cudaMalloc(&out, out_elems * 8));
  CHECK(cudaMemset(out, 0, out_elems * 8));
  CHECK(cudaMalloc(&flush, flush_bytes));
  CHECK(cudaFuncSetAttribute(gather_async_kernel<2>, cudaFuncAttributeMaxDynamicSharedMemorySize, 2 * kStageBytes));
  CHECK(cudaFuncSetAttribute(gather_async_kernel<3>, cudaFuncAttributeMaxDynamicSharedMemorySize, 3 * kStageBytes));
  CHECK(cudaFuncSetAttribute(gather_async_kernel<4>, cudaFuncAttributeMaxDynamicSharedMemorySize, 4 * kStageBytes));
  cudaEvent_t e0, e1;
  CHECK(cudaEventCreate(&e0));
  CHECK(cudaEventCreate(&e1));

  const double row_bytes = static_cast<double>(used) * kRowBytes;
  auto time_us = [&](auto&& launch) {
    std::vector<float> t;
    for (int rep = 0; rep < 22; ++rep) {
      CHECK(cudaMemsetAsync(flush, rep & 0xFF, flush_bytes));
      CHECK(cudaEventRecord(e0));
      launch();
      CHECK(cudaEventRecord(e1));
      CHECK(cudaEventSynchronize(e1));
      CHECK(cudaGetLastError());
      float ms = 0.0f;
      CHECK(cudaEventElapsedTime(&ms, e0, e1));
      if (rep >= 2) t.push_back(ms * 1000.0f);
    }
    std::sort(t.begin(), t.end());
    return static_cast<double>(t[t.size() / 2]);
  };

  std::printf("gather_probe: %s, %d SMs; b %d: %lld rows of %d B (%.1f MB) from a %.1f MB paged cache\n", prop.name,
              prop.multiProcessorCount, b, static_cast<long long>(used), kRowBytes, row_bytes / 1e6,
              static_cast<double>(cache_bytes) / 1e6);
  const std::int64_t n16 = static_cast<std::int64_t>(row_bytes) / 16;
  const double copy_us = time_us(
      [&] { copy_kernel<<<prop.multiProcessorCount * 4, 256>>>(reinterpret_cast<const uint4*>(cache), n16, out); });
  const double copy_gbps = row_bytes / copy_us / 1e3;
  std::printf("%-10s %5s %10s %10s %8s\n", "variant", "CTA/SM", "us", "GB/s", "of copy");
  std::printf("%-10s %5s %10.1f %10.0f %8s\n", "copy", "4", copy_us, copy_gbps, "1.00");
  const char* names[] = {"whole", "whole+pf", "halves", "ahead"};
  for (int m = 0; m < 4; ++m) {
    for (int per_sm : {1, 2, 4}) {
      const unsigned grid = static_cast<unsigned>(std::min<std::int64_t>(blocks, prop.multiProcessorCount * per_sm));
      const Gather g{cache, d_ids, blocks, out};
      const double us = time_us([&] {
        switch (m) {
          case kWhole: gather_kernel<kWhole><<<grid, 256>>>(g); break;
          case kWholePf: gather_kernel<kWholePf><<<grid, 256>>>(g); break;
          case kHalves: gather_kernel<kHalves><<<grid, 256>>>(g); break;
          default: gather_kernel<kAhead><<<grid, 256>>>(g); break;
        }
      });
      const double gbps = row_bytes / us / 1e3;
      std::printf("%-10s %5d %10.1f %10.0f %8.2f\n", names[m], per_sm, us, gbps, gbps / copy_gbps);
    }
  }
  const char* anames[] = {"async2", "async3", "async4"};
  for (int m = 0; m < 3; ++m) {
    const int smem = (m + 2) * kStageBytes;
    for (int per_sm : {1, 2, 4}) {
      if (per_sm * smem > 200 * 1024) continue;
      const unsigned grid = static_cast<unsigned>(std::min<std::int64_t>(blocks, prop.multiProcessorCount * per_sm));
      const Gather g{cache, d_ids, blocks, out};
      const double us = time_us([&] {
        switch (m) {
          case 0: gather_async_kernel<2><<<grid, 256, smem>>>(g); break;
          case 1: gather_async_kernel<3><<<grid, 256, smem>>>(g); break;
          default: gather_async_kernel<4><<<grid, 256, smem>>>(g); break;
        }
      });
      const double gbps = row_bytes / us / 1e3;
      std::printf("%-10s %5d %10.1f %10.0f %8.2f\n", anames[m], per_sm, us, gbps, gbps / copy_gbps);
    }
  }
  CHECK(cudaFree(flush));
  CHECK(cudaFree(out));
  CHECK(cudaFree(d_ids));
  CHECK(cudaFree(cache));
  return 0;
}
