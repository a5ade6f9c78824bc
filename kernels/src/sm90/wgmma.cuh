#pragma once
// sm_90a warpgroup MMA (wgmma) helpers for the SM90 decode kernel (sm90/decode_ws.cuh). Only the
// sm_90a compilation pass may emit these instructions: callers guard them with
// MLAPLAN_SM90A_WGMMA (true in the sm_90a device pass only).
//
// Facts used (PTX ISA, "Asynchronous Warpgroup Level Matrix Multiply-Accumulate"):
// - shared-memory matrix descriptor: bits 0-13 start address >> 4, 16-29 leading-dimension byte
//   offset >> 4, 32-45 stride-dimension byte offset >> 4, 62-63 swizzle mode (1 = 128-byte);
// - 128-byte swizzle: within each 1024-byte atom (8 rows of 128 bytes) the 16-byte unit u of row
//   r sits at unit u ^ (r % 8); the atom must start on a 1024-byte boundary;
// - K-major operand, 128-byte swizzle: 8-row groups SBO bytes apart; a k step of 16 bf16 inside
//   the 128-byte row advances the start address by 32 bytes (the swizzle is applied by the unit);
// - MN-major operand, 128-byte swizzle: 64-element (128-byte) column blocks LBO bytes apart,
//   8-row groups of K SBO bytes apart;
// - register fragments: thread (warp w of the warpgroup, lane l) owns rows 16w + l/4 and
//   16w + l/4 + 8, columns 8j + 2(l%4) + {0, 1} of every 8-column block j of D; A from registers
//   (bf16, m64k16) uses the same row/column pattern over k columns {0..7}, {8..15}.

#include <cstdint>

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ == 900 && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define MLAPLAN_SM90A_WGMMA 1
#else
#define MLAPLAN_SM90A_WGMMA 0
#endif

namespace mlaplan::kernels::detail {

__device__ __forceinline__ std::uint32_t smem_addr(const void* p) {
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
}

/// Descriptor of a 128-byte-swizzled operand at shared address `addr` (byte offsets lbo / sbo).
__device__ __forceinline__ std::uint64_t sw128_desc(std::uint32_t addr, std::uint32_t lbo, std::uint32_t sbo) {
  return static_cast<std::uint64_t>((addr & 0x3FFFFu) >> 4) | (static_cast<std::uint64_t>(lbo >> 4) << 16) |
         (static_cast<std::uint64_t>(sbo >> 4) << 32) | (1ull << 62);
}

/// desc with `units` (16-byte units) added to its start-address field. The field is the low 14 bits
/// and shared addresses stay below 2^18, so the sum never carries out of the low word: a 32-bit add
/// (a 64-bit add costs an extra instruction and a register pair per descriptor).
__device__ __forceinline__ std::uint64_t desc_add(std::uint64_t desc, std::uint32_t units) {
  std::uint64_t r;
  asm("{\n.reg .b32 lo, hi;\nmov.b64 {lo, hi}, %1;\nadd.u32 lo, lo, %2;\nmov.b64 %0, {lo, hi};\n}\n"
      : "=l"(r)
      : "l"(desc), "r"(units));
  return r;
}

#if MLAPLAN_SM90A_WGMMA

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
/// Orders this thread's generic-proxy shared-memory writes before later async-proxy reads (wgmma).
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

/// Keeps the compiler from moving accumulator reads/writes across a wgmma wait.
template <int N>
__device__ __forceinline__ void reg_fence(float (&d)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

/// Makes the values in r (the A fragments of the next wgmma) complete before the next volatile asm,
/// so the compiler does not interleave their computation with the wgmmas that read them.
template <int N, int M>
__device__ __forceinline__ void reg_fence(std::uint32_t (&r)[N][M]) {
#pragma unroll
  for (int i = 0; i < N; ++i) {
#pragma unroll
    for (int j = 0; j < M; ++j) asm volatile("" : "+r"(r[i][j])::"memory");
  }
}

/// D[64 x 64] (+)= A[64 x 16] B[16 x 64]: A and B from shared memory (descriptors), both K-major;
/// scale_d 0 overwrites D.
__device__ __forceinline__ void wgmma_m64n64k16_ss(float (&d)[32], std::uint64_t desc_a, std::uint64_t desc_b,
                                                   int scale_d) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
      "}, %32, %33, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]),
        "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]),
        "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]),
        "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "l"(desc_a), "l"(desc_b), "r"(scale_d));
}

/// D[64 x 256] += A[64 x 16] B[16 x 256]: A (bf16) from registers (a[0..3] as in the PTX ISA's
/// register fragment of A), B from shared memory (descriptor), MN-major (transpose bit set).
__device__ __forceinline__ void wgmma_m64n256k16_rs_tb(float (&d)[128], const std::uint32_t (&a)[4],
                                                       std::uint64_t desc_b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %133, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "
      "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "
      "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "
      "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, "
      "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
      "}, {%128, %129, %130, %131}, %132, p, 1, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]),
        "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]),
        "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]),
        "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]),
        "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]),
        "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]),
        "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]),
        "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]),
        "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]),
        "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]),
        "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]),
        "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]),
        "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]),
        "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), "+f"(d[112]),
        "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]),
        "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "n"(1));
}

/// D[64 x 128] += A[64 x 16] B[16 x 128]: as wgmma_m64n256k16_rs_tb over 128 columns (half the
/// accumulator registers: kernels whose launch allows fewer than the 158 registers a 256-column
/// instruction needs, sm90/decode_ws.cuh).
__device__ __forceinline__ void wgmma_m64n128k16_rs_tb(float* d, const std::uint32_t (&a)[4], std::uint64_t desc_b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, "
      "%24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, "
      "%46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
      "}, {%64, %65, %66, %67}, %68, p, 1, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]),
        "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]),
        "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]),
        "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]),
        "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]),
        "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]),
        "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]),
        "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "n"(1));
}

/// D[64 x 128] += A[64 x 16] B[16 x 128]: A (bf16) from shared memory, K-major (descriptor), B from
/// shared memory, MN-major (transpose bit set). The seesaw decode's P V on the other warpgroup's P
/// (sm90/decode_ws.cuh).
__device__ __forceinline__ void wgmma_m64n128k16_ss_tb(float* d, std::uint64_t desc_a, std::uint64_t desc_b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, "
      "%24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, "
      "%46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
      "}, %64, %65, p, 1, 1, 0, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]),
        "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]),
        "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]),
        "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]),
        "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]),
        "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]),
        "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]),
        "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "l"(desc_a), "l"(desc_b), "n"(1));
}

/// D[64 x 16] (+)= A[64 x 16] B[16 x 16]: A and B from shared memory (descriptors), both K-major;
/// scale_d 0 overwrites D. The small-head kernel's S^T = K Q^T (sm90/decode_small_ws.cuh).
__device__ __forceinline__ void wgmma_m64n16k16_ss(float (&d)[8], std::uint64_t desc_a, std::uint64_t desc_b,
                                                   int scale_d) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %10, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7}, %8, %9, p, 1, 1, 0, 0;\n"
      "}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
      : "l"(desc_a), "l"(desc_b), "r"(scale_d));
}

/// D[64 x 16] += A[64 x 16] B[16 x 16]: A from shared memory MN-major (transpose bit set), B from
/// shared memory K-major. The small-head kernel's O^T += V^T P^T (sm90/decode_small_ws.cuh).
__device__ __forceinline__ void wgmma_m64n16k16_ss_ta(float (&d)[8], std::uint64_t desc_a, std::uint64_t desc_b) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %10, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7}, %8, %9, p, 1, 1, 1, 0;\n"
      "}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7])
      : "l"(desc_a), "l"(desc_b), "n"(1));
}

// Thread-block clusters (the 2-CTA kernel of h_q 128, sm90/decode_ws.cuh). PTX ISA: %cluster_ctarank,
// mapa (the address of the same shared-memory location in another CTA of the cluster),
// st.shared::cluster, barrier.cluster (every thread of every CTA of the cluster; arrive.release /
// wait.acquire order the shared-memory accesses before the arrive, in any CTA of the cluster, before
// those after the wait).

__device__ __forceinline__ std::uint32_t cluster_cta_rank() {
  std::uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
  return r;
}
/// The shared::cluster address, in CTA `rank` of this cluster, of this CTA's shared address `addr`.
__device__ __forceinline__ std::uint32_t map_shared_to_cta(std::uint32_t addr, std::uint32_t rank) {
  std::uint32_t r;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(r) : "r"(addr), "r"(rank));
  return r;
}
/// The number of CTAs in this cluster (%cluster_nctarank).
__device__ __forceinline__ std::uint32_t cluster_num_ctas() {
  std::uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_nctarank;\n" : "=r"(r));
  return r;
}
/// 16 / 4 bytes into shared memory at shared::cluster address `addr` (any CTA of the cluster).
__device__ __forceinline__ void st_shared_cluster_f32x4(std::uint32_t addr, const float4& v) {
  asm volatile("st.shared::cluster.v4.f32 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "f"(v.x), "f"(v.y), "f"(v.z), "f"(v.w)
               : "memory");
}
__device__ __forceinline__ void st_shared_cluster_f32(std::uint32_t addr, float x) {
  asm volatile("st.shared::cluster.f32 [%0], %1;\n" ::"r"(addr), "f"(x) : "memory");
}
__device__ __forceinline__ void st_shared_cluster_v4(std::uint32_t addr, const uint4& v) {
  asm volatile("st.shared::cluster.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w)
               : "memory");
}
__device__ __forceinline__ void cluster_arrive() {
  asm volatile("barrier.cluster.arrive.release.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void cluster_wait() { asm volatile("barrier.cluster.wait.acquire.aligned;\n" ::: "memory"); }
/// fence.proxy.async for generic writes to shared memory of any CTA of the cluster (this one's
/// included) that the tensor cores of that CTA read next.
__device__ __forceinline__ void fence_proxy_async_cluster() {
  asm volatile("fence.proxy.async.shared::cluster;\n" ::: "memory");
}

// Shared-memory barriers (mbarrier) and register reallocation between warpgroups (PTX ISA:
// mbarrier.init / arrive / try_wait.parity; setmaxnreg, sm_90a). A phase of an mbarrier completes
// when `count` arrivals have been made; try_wait.parity P returns true once the phase with parity P
// has completed. arrive has release and try_wait acquire semantics at CTA scope.

__device__ __forceinline__ void mbar_init(std::uint32_t addr, std::uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(addr), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_arrive(std::uint32_t addr) {
  asm volatile("{\n.reg .b64 state;\nmbarrier.arrive.shared::cta.b64 state, [%0];\n}\n" ::"r"(addr) : "memory");
}
/// Arrives `count` times on the barrier at shared::cluster address `addr` (another CTA's) with the
/// default semantics (release at CTA scope), as CUTLASS's cluster pipelines release a consumer's
/// buffer to a remote producer: used where the only thing ordered before the arrival is this
/// warp's completed reads of a buffer the remote CTA then overwrites.
__device__ __forceinline__ void mbar_arrive_remote(std::uint32_t addr, std::uint32_t count) {
  asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0], %1;\n" ::"r"(addr), "r"(count) : "memory");
}
/// Arrives on this CTA's barrier at `addr` and raises the transaction bytes its current phase
/// waits for by `bytes` (data another CTA's cp.async.bulk delivers: bulk_copy_to_cluster).
__device__ __forceinline__ void mbar_arrive_expect_tx(std::uint32_t addr, std::uint32_t bytes) {
  asm volatile("{\n.reg .b64 state;\nmbarrier.arrive.expect_tx.shared::cta.b64 state, [%0], %1;\n}\n" ::"r"(addr),
               "r"(bytes)
               : "memory");
}
/// cp.async.bulk of `bytes` (a multiple of 16, both addresses 16-byte aligned) from this CTA's
/// shared memory at `src` to shared::cluster address `dst` (another CTA's), completing `bytes`
/// transactions on the barrier at shared::cluster address `mbar` (in the destination CTA). The
/// source is read through the async proxy: generic writes to it need fence_proxy_async first.
__device__ __forceinline__ void bulk_copy_to_cluster(std::uint32_t dst, std::uint32_t src, std::uint32_t bytes,
                                                     std::uint32_t mbar) {
  asm volatile(
      "cp.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(dst),
      "r"(src), "r"(bytes), "r"(mbar)
      : "memory");
}
/// Makes this thread's mbarrier.init visible to the other CTAs of the cluster (before their arrivals).
__device__ __forceinline__ void fence_mbarrier_init_cluster() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
/// Spins until the phase of parity `parity` of the barrier at `addr` has completed.
__device__ __forceinline__ void mbar_wait(std::uint32_t addr, std::uint32_t parity) {
  asm volatile(
      "{\n.reg .pred done;\nMBAR_WAIT:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra MBAR_WAIT;\n}\n" ::"r"(addr),
      "r"(parity)
      : "memory");
}
template <int N>
__device__ __forceinline__ void setmaxnreg_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N));
}
template <int N>
__device__ __forceinline__ void setmaxnreg_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N));
}

#endif  // MLAPLAN_SM90A_WGMMA

/// Named barrier over `count` threads (a multiple of 32); id 0 is __syncthreads'.
__device__ __forceinline__ void named_barrier_sync(int id, int count) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(count) : "memory");
}

}  // namespace mlaplan::kernels::detail
