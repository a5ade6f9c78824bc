// Does compute-sanitizer's racecheck honour a counted named barrier between warpgroups? The
// small-head sm_90a decode kernel (kernels/src/sm90/decode_small_ws.cuh) has warpgroup 0 store its
// staged output, both math warpgroups meet at `bar.sync 3, 256`, and warpgroup 1 loads it;
// racecheck reports those pairs as RAW hazards (docs/perf-history.md "v16", "v17"). This probe has
// the same pattern in six variants, one kernel instantiation each, so a racecheck run names the
// variants it reports:
//   0: 256 threads, the two warpgroups alone
//   1: 512 threads, warpgroups 2 and 3 return at once (the kernel's exited producers)
//   2: 512 threads, warpgroups 2 and 3 wait at a final __syncthreads (resident producers)
//   3: as 1, with setmaxnreg (dec in the exiting warpgroups, inc in the two others)
//   4: as 3, 16-byte loads over both warpgroups' halves, as the kernel's stores read them
//   5: as 4, the handoff by two mbarriers (each warpgroup arrives on its own, waits on the other's)
//      instead of the named barrier
// Build and run on the GPU machine (not part of the CMake build):
//   nvcc -O2 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -lineinfo -o rc named_barrier_probe.cu
//   ./rc && compute-sanitizer --tool racecheck --racecheck-report all ./rc
#include <cstdio>
#include <cuda_runtime.h>
__device__ __forceinline__ void nbar(int id, int n) { asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(n) : "memory"); }
template <int R>
__device__ __forceinline__ void dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(R));
}
template <int R>
__device__ __forceinline__ void inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(R));
}
__device__ __forceinline__ unsigned sa(const void* p) { return static_cast<unsigned>(__cvta_generic_to_shared(p)); }
__device__ __forceinline__ void mb_init(unsigned long long* b, int n) {
  asm volatile("mbarrier.init.shared.b64 [%0], %1;" ::"r"(sa(b)), "r"(n));
}
__device__ __forceinline__ void mb_arrive(unsigned long long* b) {
  asm volatile("{ .reg .b64 st; mbarrier.arrive.shared.b64 st, [%0]; }" ::"r"(sa(b)) : "memory");
}
__device__ __forceinline__ void mb_wait(unsigned long long* b, unsigned ph) {
  asm volatile("{ .reg .pred p; W: mbarrier.try_wait.parity.shared.b64 p, [%0], %1; @!p bra W; }" ::"r"(sa(b)), "r"(ph)
               : "memory");
}
template <int V>
__global__ void __launch_bounds__(512, 1) k(float* out, int rounds) {
  extern __shared__ float s[];
  __shared__ unsigned long long mb[2];
  const int tid = threadIdx.x, wg = tid / 128;
  if (V == 5) {
    if (tid == 0) {
      mb_init(&mb[0], 128);
      mb_init(&mb[1], 128);
      asm volatile("fence.mbarrier_init.release.cluster;");
    }
    __syncthreads();
  }
  if (V >= 1 && wg >= 2) {
    if (V >= 3) dec<40>();
    if (V == 2) __syncthreads();
    return;
  }
  if (V >= 3) inc<232>();
  float acc = 0.f;
  for (int r = 0; r < rounds; ++r) {
    nbar(3, 256);
    float* mine = s + wg * 2048;
    for (int i = 0; i < 16; ++i) mine[(tid & 127) + 128 * i] = float(tid + r + i);
    if (V == 5) {
      mb_arrive(&mb[wg]);
      mb_wait(&mb[wg ^ 1], r & 1);
    } else nbar(3, 256);
    if (V >= 4) {
      for (int i = tid; i < 512; i += 256) {
        float4 a = reinterpret_cast<float4*>(s)[i];
        float4 b = reinterpret_cast<float4*>(s + 2048)[i];
        acc += a.x + b.y + a.z + b.w;
      }
    } else {
      acc += s[((tid + 128) & 255) * 8 % 4096];
    }
  }
  out[tid] = acc;
  if (V == 2) __syncthreads();
}
template <int V>
void run(float* d) {
  cudaFuncSetAttribute(k<V>, cudaFuncAttributeMaxDynamicSharedMemorySize, 65536);
  k<V><<<4, V == 0 ? 256 : 512, 65536>>>(d, 3);
  printf("variant %d: %s\n", V, cudaGetErrorString(cudaDeviceSynchronize()));
}
int main() {
  float* d;
  cudaMalloc(&d, 4096 * 4);
  run<0>(d);
  run<1>(d);
  run<2>(d);
  run<3>(d);
  run<4>(d);
  run<5>(d);
  return 0;
}
