// Timing helpers of the sparse decode (mlaplan_kernels/bench.hpp). The measurement follows
// docs/perf.md: CUDA graph of one call, events around each replay, a memset before each replay
// that flushes the L2, median of the replays.

#include "mlaplan_kernels/bench.hpp"

#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "common/cuda_check.hpp"
#include "mlaplan/base/error.hpp"

namespace mlaplan::kernels {
namespace {

std::uint16_t to_bf16(float x) {
  std::uint32_t u = 0;
  std::memcpy(&u, &x, 4);
  u += 0x7FFFu + ((u >> 16) & 1u);
  return static_cast<std::uint16_t>(u >> 16);
}

struct BenchCache {
  DeviceBuffer data;
  CacheView view;
};

/// A cache of at least `rows` rows filled with quantised N(0, 1) latents.
BenchCache make_cache(std::mt19937_64& rng, RowFormat format, int page, std::int64_t rows) {
  BenchCache c;
  const std::int64_t pages = std::max<std::int64_t>(1, (rows + page - 1) / page);
  const std::int64_t stride = padded_page_stride(format, page);
  c.data = DeviceBuffer(static_cast<std::size_t>(pages * stride));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const std::int64_t chunk = 65536;
  for (std::int64_t r0 = 0; r0 < pages * page; r0 += chunk) {
    const std::int64_t n = std::min(chunk, pages * page - r0);
    std::vector<std::uint16_t> lat(static_cast<std::size_t>(n) * static_cast<std::size_t>(row_dims(format)));
    for (auto& x : lat) x = to_bf16(normal(rng));
    std::vector<std::int64_t> slots(static_cast<std::size_t>(n));
    std::iota(slots.begin(), slots.end(), r0);
    DeviceBuffer d_lat = to_device(lat);
    DeviceBuffer d_slots = to_device(slots);
    QuantizeParams qp;
    qp.format = format;
    qp.latent = d_lat.as<std::uint16_t>();
    qp.slots = d_slots.as<std::int64_t>();
    qp.n = n;
    qp.cache = c.data.as<std::uint8_t>();
    qp.page_block_size = page;
    qp.page_stride_bytes = stride;
    qp.num_pages = pages;
    quantize(qp);
    synchronize();
  }
  c.view.format = format;
  c.view.data = c.data.as<std::uint8_t>();
  c.view.page_block_size = page;
  c.view.page_stride_bytes = stride;
  c.view.num_pages = pages;
  return c;
}

/// [n, width] indices: a random permutation of rows 0 .. n*width-1 (every row read once).
std::vector<std::int32_t> permuted_indices(std::mt19937_64& rng, std::int64_t n, int width) {
  std::vector<std::int32_t> v(static_cast<std::size_t>(n * width));
  std::iota(v.begin(), v.end(), 0);
  std::shuffle(v.begin(), v.end(), rng);
  return v;
}

struct Timing {
  double median_us = 0, min_us = 0;
};

template <class Launch>
Timing time_graph(const Launch& launch, const DecodeBenchOptions& opt, cudaStream_t stream, void* flush) {
  launch();  // outside the graph: sets the kernel attributes
  MLAPLAN_CUDA_CHECK(cudaStreamSynchronize(stream));
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  cudaEvent_t ev0 = nullptr, ev1 = nullptr;
  MLAPLAN_CUDA_CHECK(cudaEventCreate(&ev0));
  MLAPLAN_CUDA_CHECK(cudaEventCreate(&ev1));
  MLAPLAN_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed));
  launch();
  MLAPLAN_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  MLAPLAN_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  std::vector<float> ms;
  for (int it = 0; it < opt.warmup + opt.replays; ++it) {
    if (flush != nullptr) MLAPLAN_CUDA_CHECK(cudaMemsetAsync(flush, it & 0xFF, opt.flush_bytes, stream));
    MLAPLAN_CUDA_CHECK(cudaEventRecord(ev0, stream));
    MLAPLAN_CUDA_CHECK(cudaGraphLaunch(exec, stream));
    MLAPLAN_CUDA_CHECK(cudaEventRecord(ev1, stream));
    MLAPLAN_CUDA_CHECK(cudaEventSynchronize(ev1));
    float t = 0;
    MLAPLAN_CUDA_CHECK(cudaEventElapsedTime(&t, ev0, ev1));
    if (it >= opt.warmup) ms.push_back(t);
  }
  MLAPLAN_CUDA_CHECK(cudaGraphExecDestroy(exec));
  MLAPLAN_CUDA_CHECK(cudaGraphDestroy(graph));
  MLAPLAN_CUDA_CHECK(cudaEventDestroy(ev0));
  MLAPLAN_CUDA_CHECK(cudaEventDestroy(ev1));
  std::sort(ms.begin(), ms.end());
  return {1e3 * ms[ms.size() / 2], 1e3 * ms.front()};
}

}  // namespace

DecodeBenchResult bench_decode(const DecodeBenchShape& sh, const DecodeBenchOptions& opt) {
  if (sh.b < 1 || sh.s_q < 1 || sh.topk < 1 || (sh.has_extra && sh.extra_topk < 1) || opt.replays < 1 ||
      opt.warmup < 0) {
    throw_usage("bench_decode: b, s_q, topk (and extra_topk with an extra cache) and replays must be >= 1");
  }
  require_supported_device(0);
  const DeviceInfo dev = device_info(0);
  std::mt19937_64 rng(opt.seed);
  const std::int64_t bs = static_cast<std::int64_t>(sh.b) * sh.s_q;

  BenchCache main = make_cache(rng, sh.main_format, sh.main_page, bs * sh.topk);
  BenchCache extra;
  if (sh.has_extra) extra = make_cache(rng, sh.extra_format, sh.extra_page, bs * sh.extra_topk);
  const int dqk = row_dims(main.view.format);
  std::vector<std::uint16_t> q(static_cast<std::size_t>(bs * sh.h_q) * static_cast<std::size_t>(dqk));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (auto& x : q) x = to_bf16(normal(rng));
  DeviceBuffer d_q = to_device(q);
  std::vector<std::int32_t> len(static_cast<std::size_t>(sh.b), sh.topk);
  std::vector<std::int32_t> elen(static_cast<std::size_t>(sh.b), sh.has_extra ? sh.extra_topk : 0);
  std::vector<std::int32_t> idx = permuted_indices(rng, bs, sh.topk);
  std::vector<std::int32_t> eidx =
      sh.has_extra ? permuted_indices(rng, bs, sh.extra_topk) : std::vector<std::int32_t>{0};
  if (sh.variable_lengths) {
    std::uniform_int_distribution<std::int32_t> main_len(0, sh.topk), extra_len(0, std::max(sh.extra_topk, 0));
    std::uniform_int_distribution<int> seventeenth(0, 16);
    for (std::size_t r = 0; r < len.size(); ++r) {
      const bool empty = r % 9 == 4;
      len[r] = empty ? 0 : main_len(rng);
      if (sh.has_extra) elen[r] = empty ? 0 : extra_len(rng);
    }
    for (auto& x : idx) x = seventeenth(rng) == 0 ? -1 : x;
    if (sh.has_extra) {
      for (auto& x : eidx) x = seventeenth(rng) == 0 ? -1 : x;
    }
  }
  DeviceBuffer d_idx = to_device(idx);
  DeviceBuffer d_eidx = to_device(eidx);
  DeviceBuffer d_len = to_device(len);
  DeviceBuffer d_elen = to_device(elen);

  // The split_kv plan exists for every shape (it is the "other" plan of one_pass shapes).
  if (opt.num_sm_parts < 0 || opt.num_sm_parts > kMaxSmParts) {
    throw_usage("bench_decode: num_sm_parts " + std::to_string(opt.num_sm_parts) + " is outside 0.." +
                std::to_string(kMaxSmParts));
  }
  const std::int32_t parts =
      opt.num_sm_parts > 0 ? opt.num_sm_parts : decode_num_sm_parts(dev.sm_count, sh.s_q, sh.h_q);
  DeviceBuffer d_rec(static_cast<std::size_t>(parts) * 32), d_splits(static_cast<std::size_t>(sh.b + 1) * 4);
  ScheduleParams sp;
  sp.b = sh.b;
  sp.topk = sh.topk;
  sp.topk_length = d_len.as<std::int32_t>();
  sp.has_extra = sh.has_extra;
  sp.extra_topk = sh.extra_topk;
  sp.extra_topk_length = sh.has_extra ? d_elen.as<std::int32_t>() : nullptr;
  sp.num_sm_parts = parts;
  sp.fixed_overhead = opt.fixed_overhead >= 0 ? opt.fixed_overhead : kSplitKvFixedOverhead;
  sp.records = d_rec.as<std::int32_t>();
  sp.num_splits = d_splits.as<std::int32_t>();
  schedule(sp);
  const auto splits = to_host<std::int32_t>(d_splits, static_cast<std::size_t>(sh.b + 1));

  DeviceBuffer d_out(static_cast<std::size_t>(bs * sh.h_q) * 512 * 2), d_lse(static_cast<std::size_t>(bs * sh.h_q) * 4);
  DeviceBuffer d_oacc(static_cast<std::size_t>(o_accum_elems(sh.b, sh.s_q, sh.h_q, parts)) * sizeof(float));
  DeviceBuffer d_lacc(static_cast<std::size_t>(lse_accum_elems(sh.b, sh.s_q, sh.h_q, parts)) * 4);
  DecodeParams p;
  p.b = sh.b;
  p.s_q = sh.s_q;
  p.h_q = sh.h_q;
  p.d_qk = dqk;
  p.q = d_q.as<std::uint16_t>();
  p.main = main.view;
  p.indices = d_idx.as<std::int32_t>();
  p.topk = sh.topk;
  p.topk_length = d_len.as<std::int32_t>();
  p.has_extra = sh.has_extra;
  if (sh.has_extra) {
    p.extra = extra.view;
    p.extra_indices = d_eidx.as<std::int32_t>();
    p.extra_topk = sh.extra_topk;
    p.extra_topk_length = d_elen.as<std::int32_t>();
  }
  p.sched_records = d_rec.as<std::int32_t>();
  p.num_splits = d_splits.as<std::int32_t>();
  p.num_sm_parts = parts;
  p.out = d_out.as<std::uint16_t>();
  p.lse = d_lse.as<float>();
  p.o_accum = d_oacc.as<float>();
  p.lse_accum = d_lacc.as<float>();
  auto set_mode = [&](DecodeMode m) {
    p.mode = m;
    p.force.kernel = forced_kernel_for_mode(opt.kernel, m);
  };

  DecodeBenchResult r;
  r.num_sm_parts = parts;
  for (int i = 0; i < sh.b; ++i) {
    r.split_requests += splits[static_cast<std::size_t>(i + 1)] - splits[static_cast<std::size_t>(i)] > 1;
  }
  r.mode =
      choose_decode_mode(sh.b, sh.s_q, sh.h_q, sh.topk, sh.has_extra, sh.extra_topk, dev.sm_count,
                         decode_work(len.data(), sh.b, sh.topk, sh.has_extra ? elen.data() : nullptr, sh.extra_topk))
          .mode;
  double main_rows = 0, extra_rows = 0;
  for (std::size_t i = 0; i < len.size(); ++i) {
    main_rows += std::min(len[i], sh.topk);
    if (sh.has_extra) extra_rows += std::min(elen[i], sh.extra_topk);
  }
  main_rows *= sh.s_q;
  extra_rows *= sh.s_q;
  const double dqk_v = static_cast<double>(dqk) + 512.0;
  r.flops = 2.0 * sh.h_q * (main_rows + extra_rows) * dqk_v;
  r.bytes = main_rows * static_cast<double>(row_bytes(sh.main_format)) +
            extra_rows * static_cast<double>(row_bytes(sh.extra_format)) +
            static_cast<double>(bs * sh.h_q) * dqk_v * 2.0;

  cudaStream_t stream = nullptr;
  MLAPLAN_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  p.stream = stream;
  DeviceBuffer flush(opt.flush_bytes > 0 ? opt.flush_bytes : 1);
  void* flush_ptr = opt.flush_bytes > 0 ? flush.get() : nullptr;
  try {
    set_mode(r.mode);
    const Timing t = time_graph([&] { sparse_decode(p); }, opt, stream, flush_ptr);
    r.median_us = t.median_us;
    r.min_us = t.min_us;
    r.mode_median_us[static_cast<int>(r.mode)] = r.median_us;
    if (opt.time_with_scheduler) {
      if (r.mode == DecodeMode::split_kv) {
        sp.stream = stream;
        r.with_scheduler_median_us = time_graph(
                                         [&] {
                                           schedule(sp);
                                           sparse_decode(p);
                                         },
                                         opt, stream, flush_ptr)
                                         .median_us;
      } else {
        r.with_scheduler_median_us = r.median_us;
      }
    }
    if (opt.time_other_mode) {
      for (const DecodeMode m : {DecodeMode::split_kv, DecodeMode::one_pass, DecodeMode::cluster_split}) {
        if (m == r.mode) continue;
        set_mode(m);
        r.mode_median_us[static_cast<int>(m)] = time_graph([&] { sparse_decode(p); }, opt, stream, flush_ptr).median_us;
      }
    }
  } catch (...) {
    (void)cudaStreamDestroy(stream);
    throw;
  }
  MLAPLAN_CUDA_CHECK(cudaStreamDestroy(stream));
  return r;
}

double measure_copy_gbps(std::size_t bytes, int replays) {
  if (bytes == 0 || replays < 1) throw_usage("measure_copy_gbps: bytes and replays must be >= 1");
  require_supported_device(0);
  DeviceBuffer src(bytes), dst(bytes);
  src.fill_bytes(0x5A);
  cudaEvent_t ev0 = nullptr, ev1 = nullptr;
  MLAPLAN_CUDA_CHECK(cudaEventCreate(&ev0));
  MLAPLAN_CUDA_CHECK(cudaEventCreate(&ev1));
  std::vector<float> ms;
  for (int it = 0; it < replays + 2; ++it) {
    MLAPLAN_CUDA_CHECK(cudaEventRecord(ev0, nullptr));
    MLAPLAN_CUDA_CHECK(cudaMemcpyAsync(dst.get(), src.get(), bytes, cudaMemcpyDeviceToDevice, nullptr));
    MLAPLAN_CUDA_CHECK(cudaEventRecord(ev1, nullptr));
    MLAPLAN_CUDA_CHECK(cudaEventSynchronize(ev1));
    float t = 0;
    MLAPLAN_CUDA_CHECK(cudaEventElapsedTime(&t, ev0, ev1));
    if (it >= 2) ms.push_back(t);
  }
  MLAPLAN_CUDA_CHECK(cudaEventDestroy(ev0));
  MLAPLAN_CUDA_CHECK(cudaEventDestroy(ev1));
  std::sort(ms.begin(), ms.end());
  return 2.0 * static_cast<double>(bytes) / (1e-3 * ms[ms.size() / 2]) / 1e9;
}

namespace {

// The few cuBLAS entry points the ceiling needs, declared here (C ABI; enums passed as int) so
// that nothing links or includes cuBLAS: it is loaded at run time where the machine has it.
using CublasHandle = void*;
using CublasCreate = int (*)(CublasHandle*);
using CublasDestroy = int (*)(CublasHandle);
using CublasSetStream = int (*)(CublasHandle, cudaStream_t);
using CublasGemmEx = int (*)(CublasHandle, int, int, int, int, int, const void*, const void*, int, int, const void*,
                             int, int, const void*, void*, int, int, int, int);
constexpr int kCublasOpN = 0;
constexpr int kCudaR16BF = 14;          // CUDA_R_16BF
constexpr int kCublasCompute32F = 68;   // CUBLAS_COMPUTE_32F
constexpr int kCublasGemmDefault = -1;  // CUBLAS_GEMM_DEFAULT

struct Library {
  void* handle = nullptr;
  ~Library() {
    if (handle != nullptr) dlclose(handle);
  }
};

}  // namespace

MatmulCeiling measure_matmul_tflops(int n, int replays) {
  if (n < 256 || n > 32768 || replays < 1) throw_usage("measure_matmul_tflops: n in 256..32768 and replays >= 1");
  require_supported_device(0);
  MatmulCeiling c;
  Library lib;
  std::string tried;
  for (const char* name : {"libcublas.so.13", "libcublas.so.12", "libcublas.so"}) {
    lib.handle = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (lib.handle != nullptr) {
      tried = name;
      break;
    }
  }
  if (lib.handle == nullptr) {
    c.how = "not measured: cuBLAS (libcublas.so.13) could not be loaded";
    return c;
  }
  auto create = reinterpret_cast<CublasCreate>(dlsym(lib.handle, "cublasCreate_v2"));
  auto destroy = reinterpret_cast<CublasDestroy>(dlsym(lib.handle, "cublasDestroy_v2"));
  auto set_stream = reinterpret_cast<CublasSetStream>(dlsym(lib.handle, "cublasSetStream_v2"));
  auto gemm = reinterpret_cast<CublasGemmEx>(dlsym(lib.handle, "cublasGemmEx"));
  if (!create || !destroy || !set_stream || !gemm) {
    c.how = "not measured: " + tried + " lacks cublasCreate_v2 / cublasGemmEx";
    return c;
  }
  const std::size_t elems = static_cast<std::size_t>(n) * static_cast<std::size_t>(n);
  // Random bf16 operands (never zeros): a 1 Mi-element random pattern repeated over each matrix.
  std::mt19937_64 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<std::uint16_t> pattern(std::size_t(1) << 20);
  for (auto& x : pattern) x = to_bf16(normal(rng));
  DeviceBuffer a(elems * 2), b(elems * 2), out(elems * 2);
  for (DeviceBuffer* m : {&a, &b}) {
    for (std::size_t off = 0; off < elems; off += pattern.size()) {
      const std::size_t cnt = std::min(pattern.size(), elems - off);
      MLAPLAN_CUDA_CHECK(cudaMemcpy(m->as<std::uint16_t>() + off, pattern.data(), cnt * 2, cudaMemcpyHostToDevice));
    }
    std::shuffle(pattern.begin(), pattern.end(), rng);
  }
  CublasHandle h = nullptr;
  if (create(&h) != 0) {
    c.how = "not measured: cublasCreate failed";
    return c;
  }
  cudaEvent_t ev0 = nullptr, ev1 = nullptr;
  std::vector<float> ms;
  const float alpha = 1.0f, beta = 0.0f;
  int status = set_stream(h, nullptr);
  MLAPLAN_CUDA_CHECK(cudaEventCreate(&ev0));
  MLAPLAN_CUDA_CHECK(cudaEventCreate(&ev1));
  for (int it = 0; it < replays + 2 && status == 0; ++it) {
    MLAPLAN_CUDA_CHECK(cudaEventRecord(ev0, nullptr));
    status = gemm(h, kCublasOpN, kCublasOpN, n, n, n, &alpha, a.get(), kCudaR16BF, n, b.get(), kCudaR16BF, n, &beta,
                  out.get(), kCudaR16BF, n, kCublasCompute32F, kCublasGemmDefault);
    MLAPLAN_CUDA_CHECK(cudaEventRecord(ev1, nullptr));
    MLAPLAN_CUDA_CHECK(cudaEventSynchronize(ev1));
    float t = 0;
    MLAPLAN_CUDA_CHECK(cudaEventElapsedTime(&t, ev0, ev1));
    if (it >= 2) ms.push_back(t);
  }
  MLAPLAN_CUDA_CHECK(cudaEventDestroy(ev0));
  MLAPLAN_CUDA_CHECK(cudaEventDestroy(ev1));
  destroy(h);
  if (status != 0 || ms.empty()) {
    c.how = "not measured: cublasGemmEx returned status " + std::to_string(status);
    return c;
  }
  std::sort(ms.begin(), ms.end());
  const double flops = 2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n);
  c.tflops = flops / (1e-3 * ms[ms.size() / 2]) / 1e12;
  c.how = "bf16 " + std::to_string(n) + "^3 matmul, fp32 accumulation, cuBLAS (" + tried + "), median of " +
          std::to_string(replays);
  return c;
}

}  // namespace mlaplan::kernels
