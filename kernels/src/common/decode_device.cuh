#pragma once
// Device building blocks every decode kernel uses (the portable one in portable/, the sm_90a one
// in sm90/): warp-level MMA and shared-memory copies, the programmatic-launch wait, the row
// finish shared by every epilogue, and the host launch helpers (cluster and programmatic-launch
// attributes, occupancy queries).

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <mutex>
#include <tuple>
#include <utility>

#include "common/cuda_check.hpp"
#include "common/formats.cuh"
#include "common/launchers.hpp"
#include "mlaplan_kernels/kernels.hpp"

namespace mlaplan::kernels::detail {

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

/// A finished row (a request in one piece; l: its sum over every key at its maximum m, log2
/// domain): lse (natural log; +inf when no key was valid) and the factor that turns its O into out
/// (1 / l, times 1 / (1 + exp(sink - lse)) with an attention sink; 0 when no key was valid).
struct RowFinish {
  float factor;
  float lse;
};
/// finish_row with the head's sink already loaded (has_sink: p.attn_sink != nullptr; sink: its value).
__device__ __forceinline__ RowFinish finish_row_with(float l, float m, bool has_sink, float sink) {
  RowFinish f{0.0f, __int_as_float(0x7F800000)};
  if (l > 0.0f) {
    f.lse = (log2f(l) + m) * 0.6931471805599453f;
    f.factor = 1.0f / l;
    if (has_sink) f.factor /= 1.0f + expf(sink - f.lse);
  }
  return f;
}
__device__ __forceinline__ RowFinish finish_row(const DecodeParams& p, float l, float m, int head) {
  const bool has_sink = p.attn_sink != nullptr;
  return finish_row_with(l, m, has_sink, has_sink ? p.attn_sink[head] : 0.0f);
}

/// A partial row's lse_accum (log2 domain; -inf when it saw no valid key).
__device__ __forceinline__ float partial_lse(float l, float m) {
  return l > 0.0f ? log2f(l) + m : -__int_as_float(0x7F800000);
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
  MLAPLAN_CUDA_CHECK(
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(d.smem_bytes)));
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

/// Launches a merge kernel (the combines) as a programmatic dependent of the decode kernel before
/// it in p.stream: its launch overlaps the decode's tail instead of following its completion, and
/// the kernel's griddepcontrol.wait keeps the data dependency. Grid, block and shared memory of d.
template <class... Params, class... Args>
void launch_programmatic(void (*kernel)(Params...), const LaunchDims& d, void* stream, const char* what,
                         Args&&... args) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(d.grid_x, d.grid_y, d.grid_z);
  cfg.blockDim = dim3(d.block);
  cfg.dynamicSmemBytes = d.smem_bytes;
  cfg.stream = static_cast<cudaStream_t>(stream);
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  MLAPLAN_CUDA_CHECK(cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...));
  MLAPLAN_CUDA_CHECK_LAUNCH(what);
}

/// How many clusters of cluster_x x 1 x cluster_z CTAs of `kernel` (block and shared memory of d) can
/// be resident at once on the current device (cudaOccupancyMaxActiveClusters; 0 when none or on error).
template <class Kernel>
int max_active_clusters(Kernel* kernel, const LaunchDims& d, unsigned cluster_x, unsigned cluster_z) {
  MLAPLAN_CUDA_CHECK(
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(d.smem_bytes)));
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

}  // namespace mlaplan::kernels::detail
