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
//   nvcc -O2 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -lineinfo -o rc kernels/bench/racecheck/named_barrier_probe.cu
//   timeout 60 ./rc && timeout 120 compute-sanitizer --tool racecheck --racecheck-report all ./rc
// (setmaxnreg: the kernels' budget, 2 x 192 + 2 x 64 = 4 x 128 registers per thread. A first
// version asked 232 and 40, 544 in all, and its first run printed nothing in 600 s, the device
// call's limit: most likely variant 3's inc waiting for registers that never come. Each variant
// now prints before and after its launch, unbuffered; docs/perf-history.md "v18".)
#include <cstdio>

#include <cuda_runtime.h>

// The kernels' own helpers: the same PTX for the named barrier, the mbarriers and setmaxnreg.
#include "../../src/sm90/wgmma.cuh"

using namespace mlaplan::kernels::detail;

template <int V>
__global__ void __launch_bounds__(512, 1) k(float* out, int rounds) {
#if MLAPLAN_SM90A_WGMMA  // the helpers exist for sm_90a only
  extern __shared__ float s[];
  __shared__ unsigned long long mb[2];
  const std::uint32_t mb0 = smem_addr(&mb[0]);
  const int tid = threadIdx.x, wg = tid / 128;
  if (V == 5) {
    if (tid == 0) {
      mbar_init(mb0, 128);
      mbar_init(mb0 + 8, 128);
      fence_mbarrier_init_cluster();
    }
    __syncthreads();
  }
  if (V >= 1 && wg >= 2) {
    if (V >= 3) setmaxnreg_dec<64>();
    if (V == 2) __syncthreads();
    return;
  }
  if (V >= 3) setmaxnreg_inc<192>();
  float acc = 0.f;
  for (int r = 0; r < rounds; ++r) {
    named_barrier_sync(3, 256);
    float* mine = s + wg * 2048;
    for (int i = 0; i < 16; ++i) mine[(tid & 127) + 128 * i] = float(tid + r + i);
    if (V == 5) {
      mbar_arrive(mb0 + 8 * wg);
      mbar_wait(mb0 + 8 * (wg ^ 1), r & 1);
    } else named_barrier_sync(3, 256);
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
#else
  (void)out;
  (void)rounds;
#endif
}
template <int V>
void run(float* d) {
  printf("variant %d: launching\n", V);
  fflush(stdout);
  cudaFuncSetAttribute(k<V>, cudaFuncAttributeMaxDynamicSharedMemorySize, 65536);
  k<V><<<4, V == 0 ? 256 : 512, 65536>>>(d, 3);
  printf("variant %d: %s\n", V, cudaGetErrorString(cudaDeviceSynchronize()));
  fflush(stdout);
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
