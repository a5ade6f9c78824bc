// What does a decode call cost before it does any work? At b <= 8 the split_kv call (scheduler,
// decode, combine: three kernels chained by programmatic dependent launch) takes 14-16 us on an
// H100 while it reads under 3 MB (docs/perf.md "What limits each regime"). This probe times, with
// the benchmark's method (one call captured in a CUDA graph, events around each replay, a 256 MiB
// memset before it that flushes the L2, median), kernels that do nothing but the call's fixed
// chain:
//   empty x1 / x2 / x3   one, two, three empty kernels (grid = SMs, 512 threads, 160 KiB of dynamic
//                        shared memory: one CTA per SM, as the decode kernels), the later ones
//                        launched with programmatic stream serialisation and waiting on
//                        griddepcontrol.wait as the decode and the combine do
//   chain x1             one kernel whose CTAs (S per request) each read an index (cold), then the
//                        584-byte row it names, write a 2 KiB fp32 partial, and count themselves in
//                        on the request's counter; the last CTA of a request reads the S partials
//                        back and writes the 1 KiB output (and resets the counter): a split decode
//                        with the merge inside it, minus the arithmetic
//   chain x2             the same partials, merged by a second kernel launched as the combine is
// for b 1 and 8 with 16 CTAs per request (b 8: 128 CTAs) and with S (the command line's, if not 16).
// Build and run on the GPU machine (scripts/gpu-check.sh build puts it in the carry):
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -o lp kernels/bench/launch/launch_probe.cu
//   timeout 120 ./lp [S]
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

namespace {

#define CHECK(x)                                                                                      \
  do {                                                                                                \
    cudaError_t e_ = (x);                                                                             \
    if (e_ != cudaSuccess) {                                                                          \
      std::fprintf(stderr, "launch_probe: %s: %s (line %d)\n", #x, cudaGetErrorString(e_), __LINE__); \
      std::exit(1);                                                                                   \
    }                                                                                                 \
  } while (0)

constexpr int kThreads = 512;
constexpr int kSmem = 160 * 1024;
constexpr int kRowBytes = 584;
constexpr int kPartialFloats = 512;  // 2 KiB per CTA
constexpr int kOutHalves = 512;      // 1 KiB per request

__device__ __forceinline__ void pdl_launch_dependents() {
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
}
__device__ __forceinline__ void pdl_wait() { asm volatile("griddepcontrol.wait;\n" ::: "memory"); }

__global__ void __launch_bounds__(kThreads, 1) empty_kernel(int* sink, int wait) {
  pdl_launch_dependents();
  if (wait != 0) pdl_wait();
  if (threadIdx.x == 0 && blockIdx.x == 0x7FFFFFFF) sink[0] = 1;
}

struct Chain {
  const std::int32_t* ids;   // [b * S]: the row each CTA reads
  const std::uint8_t* rows;  // the cache
  float* partial;            // [b * S][512]
  std::uint16_t* out;        // [b][512]
  unsigned* counters;        // [b], zero between calls
  int splits;
};

/// One CTA of a split request: index -> row -> partial (-> the merge, when `merge` and last).
__global__ void __launch_bounds__(kThreads, 1) chain_kernel(Chain c, int merge) {
  pdl_launch_dependents();
  extern __shared__ float smem[];
  __shared__ int last;
  const int cta = static_cast<int>(blockIdx.x);
  const int req = cta / c.splits;
  const int tid = static_cast<int>(threadIdx.x);
  const std::int32_t id = __ldg(c.ids + cta);
  float v = 0.0f;
  if (tid < kRowBytes / 8) {
    const uint2 u = __ldg(reinterpret_cast<const uint2*>(c.rows + static_cast<std::int64_t>(id) * kRowBytes) + tid);
    v = __uint_as_float((u.x ^ u.y) & 0x3FFFFFFFu);
  }
  smem[tid] = v;
  __syncthreads();
  c.partial[static_cast<std::int64_t>(cta) * kPartialFloats + tid] = smem[tid] + smem[(tid + 1) % kThreads];
  if (merge == 0) return;
  __threadfence();
  __syncthreads();
  if (tid == 0) last = atomicAdd(c.counters + req, 1u) == static_cast<unsigned>(c.splits - 1);
  __syncthreads();
  if (!last) return;
  __threadfence();
  float s = 0.0f;
  for (int k = 0; k < c.splits; ++k) {
    s += __ldcg(c.partial + (static_cast<std::int64_t>(req) * c.splits + k) * kPartialFloats + tid);
  }
  c.out[req * kOutHalves + tid] = static_cast<std::uint16_t>(__float_as_uint(s) >> 16);
  if (tid == 0) c.counters[req] = 0u;
}

/// The merge as a second kernel: one CTA per request.
__global__ void __launch_bounds__(kThreads) merge_kernel(Chain c) {
  pdl_wait();
  const int req = static_cast<int>(blockIdx.x);
  const int tid = static_cast<int>(threadIdx.x);
  float s = 0.0f;
  for (int k = 0; k < c.splits; ++k) {
    s += c.partial[(static_cast<std::int64_t>(req) * c.splits + k) * kPartialFloats + tid];
  }
  c.out[req * kOutHalves + tid] = static_cast<std::uint16_t>(__float_as_uint(s) >> 16);
}

template <typename... Args>
void launch(void (*k)(Args...), unsigned grid, unsigned threads, int smem, bool pdl, cudaStream_t st, Args... a) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(grid);
  cfg.blockDim = dim3(threads);
  cfg.dynamicSmemBytes = static_cast<std::size_t>(smem);
  cfg.stream = st;
  cudaLaunchAttribute attr{};
  attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr.val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = &attr;
  cfg.numAttrs = pdl ? 1 : 0;
  CHECK(cudaLaunchKernelEx(&cfg, k, a...));
}

}  // namespace

int main(int argc, char** argv) {
  const int s_arg = argc > 1 ? std::atoi(argv[1]) : 16;
  if (s_arg < 1 || s_arg > 128) {
    std::fprintf(stderr, "launch_probe: S must be 1..128 (got %s)\n", argc > 1 ? argv[1] : "");
    return 2;
  }
  cudaDeviceProp prop{};
  CHECK(cudaGetDeviceProperties(&prop, 0));
  const int sms = prop.multiProcessorCount;
  CHECK(cudaFuncSetAttribute(empty_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
  CHECK(cudaFuncSetAttribute(chain_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
  cudaStream_t st;
  CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  const std::size_t flush_bytes = std::size_t{256} << 20;
  std::uint8_t* flush = nullptr;
  CHECK(cudaMalloc(&flush, flush_bytes));
  int* sink = nullptr;
  CHECK(cudaMalloc(&sink, 4));
  const int max_ctas = 8 * 128;
  const std::int64_t cache_rows = 1 << 20;  // 584 MB: every CTA's row a cold miss
  std::uint8_t* rows = nullptr;
  CHECK(cudaMalloc(&rows, static_cast<std::size_t>(cache_rows) * kRowBytes));
  CHECK(cudaMemset(rows, 0x3C, static_cast<std::size_t>(cache_rows) * kRowBytes));
  std::vector<std::int32_t> ids(max_ctas);
  std::mt19937 rng(20261207);
  for (auto& x : ids) x = static_cast<std::int32_t>(rng() % cache_rows);
  std::int32_t* d_ids = nullptr;
  float* partial = nullptr;
  std::uint16_t* out = nullptr;
  unsigned* counters = nullptr;
  CHECK(cudaMalloc(&d_ids, ids.size() * 4));
  CHECK(cudaMemcpy(d_ids, ids.data(), ids.size() * 4, cudaMemcpyHostToDevice));
  CHECK(cudaMalloc(&partial, std::size_t{max_ctas} * kPartialFloats * 4));
  CHECK(cudaMalloc(&out, std::size_t{8} * kOutHalves * 2));
  CHECK(cudaMalloc(&counters, 8 * 4));
  CHECK(cudaMemset(counters, 0, 8 * 4));
  cudaEvent_t e0, e1;
  CHECK(cudaEventCreate(&e0));
  CHECK(cudaEventCreate(&e1));

  auto time_us = [&](auto&& body) {
    cudaGraph_t g = nullptr;
    cudaGraphExec_t ex = nullptr;
    CHECK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
    body();
    CHECK(cudaStreamEndCapture(st, &g));
    CHECK(cudaGraphInstantiate(&ex, g, 0));
    std::vector<float> t;
    for (int rep = 0; rep < 320; ++rep) {
      CHECK(cudaMemsetAsync(flush, rep & 0xFF, flush_bytes, st));
      CHECK(cudaEventRecord(e0, st));
      CHECK(cudaGraphLaunch(ex, st));
      CHECK(cudaEventRecord(e1, st));
      CHECK(cudaEventSynchronize(e1));
      float ms = 0.0f;
      CHECK(cudaEventElapsedTime(&ms, e0, e1));
      if (rep >= 20) t.push_back(ms * 1000.0f);
    }
    CHECK(cudaGraphExecDestroy(ex));
    CHECK(cudaGraphDestroy(g));
    std::sort(t.begin(), t.end());
    return std::make_pair(static_cast<double>(t[t.size() / 2]), static_cast<double>(t.front()));
  };
  auto row = [](const char* name, int b, int s, std::pair<double, double> t) {
    std::printf("%-10s %3d %4d %9.2f %9.2f\n", name, b, s, t.first, t.second);
  };

  std::printf("launch_probe: %s, %d SMs; graph replays after a 256 MiB memset, median / min of 300\n", prop.name, sms);
  std::printf("%-10s %3s %4s %9s %9s\n", "variant", "b", "S", "median us", "min us");
  for (int n = 1; n <= 3; ++n) {
    const auto t = time_us([&] {
      for (int k = 0; k < n; ++k)
        launch(empty_kernel, static_cast<unsigned>(sms), kThreads, kSmem, k > 0, st, sink, k > 0 ? 1 : 0);
    });
    char name[16];
    std::snprintf(name, sizeof name, "empty x%d", n);
    row(name, 0, 0, t);
  }
  for (const int b : {1, 8}) {
    std::vector<int> per_request = {16};
    if (s_arg != 16) per_request.push_back(s_arg);
    for (const int s : per_request) {
      if (b * s > max_ctas) continue;
      const Chain c{d_ids, rows, partial, out, counters, s};
      const unsigned grid = static_cast<unsigned>(b * s);
      row("chain x1", b, s, time_us([&] { launch(chain_kernel, grid, kThreads, kSmem, false, st, c, 1); }));
      row("chain x2", b, s, time_us([&] {
            launch(chain_kernel, grid, kThreads, kSmem, false, st, c, 0);
            launch(merge_kernel, static_cast<unsigned>(b), kThreads, 0, true, st, c);
          }));
    }
  }
  CHECK(cudaGetLastError());
  CHECK(cudaStreamSynchronize(st));
  std::vector<unsigned> h(8);
  CHECK(cudaMemcpy(h.data(), counters, 32, cudaMemcpyDeviceToHost));
  for (const unsigned x : h) {
    if (x != 0u) {
      std::fprintf(stderr, "launch_probe: a request counter was left at %u (the in-kernel merge did not run)\n", x);
      return 1;
    }
  }
  return 0;
}
