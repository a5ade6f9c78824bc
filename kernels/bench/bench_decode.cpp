// Timing of one sparse decode call (decode kernel, + combine kernel in split_kv) for the V4.1-Flash decode
// shapes (docs/kernels.md, "H200 results"): s_q 1, window topk 128 with page 64 plus extra topk
// 512 with page 64, fp8_ds_mla 584, full lengths, random valid indices (every attended row
// distinct). The call is captured in a CUDA graph; each replay is timed with CUDA events after a
// 256 MiB memset that flushes the L2; the median of the replays is reported. Each shape runs in
// the mode decode_plan_mode() picks ("us/call"), and in the other mode for comparison ("other us").
//
// Usage: mlaplan_kernel_bench [replays [h_q [b]]]   (default 60 replays, every h_q and b)

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "mlaplan/error.hpp"
#include "mlaplan_kernels/kernels.hpp"

namespace mk = mlaplan::kernels;

namespace {

// The benchmark's CUDA calls (events, graphs, streams) are checked like the library's: call text,
// CUDA error name and text, file:line.
void check(cudaError_t e, const char* what, const char* file, int line) {
  if (e != cudaSuccess) {
    throw mlaplan::Error(mlaplan::ErrorKind::verify_failed,
                         std::string("cuda call failed: ") + what + ": " + cudaGetErrorName(e) + " (" +
                             cudaGetErrorString(e) + ") at " + file + ":" + std::to_string(line));
  }
}
#define BENCH_CHECK(call) check((call), #call, __FILE__, __LINE__)

std::uint16_t bf16(float x) {
  std::uint32_t u = 0;
  static_assert(sizeof(u) == sizeof(x));
  std::memcpy(&u, &x, 4);
  u += 0x7FFFu + ((u >> 16) & 1u);
  return static_cast<std::uint16_t>(u >> 16);
}

struct Cache {
  mk::DeviceBuffer data;
  mk::CacheView view;
};

/// A cache of `rows` rows (page 64) filled with quantised random latents.
Cache make_cache(std::mt19937_64& rng, std::int64_t rows) {
  const int pbs = 64;
  Cache c;
  const std::int64_t pages = (rows + pbs - 1) / pbs;
  const std::int64_t stride = mk::padded_page_stride(mk::RowFormat::fp8_ds_mla_584, pbs);
  c.data = mk::DeviceBuffer(static_cast<std::size_t>(pages * stride));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const std::int64_t chunk = 65536;
  for (std::int64_t r0 = 0; r0 < pages * pbs; r0 += chunk) {
    const std::int64_t n = std::min(chunk, pages * pbs - r0);
    std::vector<std::uint16_t> lat(static_cast<std::size_t>(n) * 512);
    for (auto& x : lat) x = bf16(normal(rng));
    std::vector<std::int64_t> slots(static_cast<std::size_t>(n));
    std::iota(slots.begin(), slots.end(), r0);
    mk::DeviceBuffer d_lat = mk::to_device(lat);
    mk::DeviceBuffer d_slots = mk::to_device(slots);
    mk::QuantizeParams qp;
    qp.latent = d_lat.as<std::uint16_t>();
    qp.slots = d_slots.as<std::int64_t>();
    qp.n = n;
    qp.cache = c.data.as<std::uint8_t>();
    qp.page_block_size = pbs;
    qp.page_stride_bytes = stride;
    qp.num_pages = pages;
    mk::quantize(qp);
    mk::synchronize();
  }
  c.view.format = mk::RowFormat::fp8_ds_mla_584;
  c.view.data = c.data.as<std::uint8_t>();
  c.view.page_block_size = pbs;
  c.view.page_stride_bytes = stride;
  c.view.num_pages = pages;
  return c;
}

/// Indices [b, width]: a random permutation of rows 0 .. b*width-1, so every row is read once.
std::vector<std::int32_t> permuted_indices(std::mt19937_64& rng, int b, int width) {
  std::vector<std::int32_t> v(static_cast<std::size_t>(b) * width);
  std::iota(v.begin(), v.end(), 0);
  std::shuffle(v.begin(), v.end(), rng);
  return v;
}

/// Median and minimum microseconds of one decode call (graph replays, L2 flushed before each).
struct Timing {
  double med_us = 0, min_us = 0;
};

Timing time_call(const mk::DecodeParams& p, cudaStream_t stream, const mk::DeviceBuffer& flush, cudaEvent_t ev0,
                 cudaEvent_t ev1, int replays) {
  mk::sparse_decode(p);  // warm-up outside the graph (sets the kernel attributes)
  BENCH_CHECK(cudaStreamSynchronize(stream));
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  BENCH_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed));
  mk::sparse_decode(p);
  BENCH_CHECK(cudaStreamEndCapture(stream, &graph));
  BENCH_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  std::vector<float> ms;
  for (int it = 0; it < replays + 5; ++it) {
    BENCH_CHECK(cudaMemsetAsync(flush.get(), it & 0xFF, flush.size(), stream));
    BENCH_CHECK(cudaEventRecord(ev0, stream));
    BENCH_CHECK(cudaGraphLaunch(exec, stream));
    BENCH_CHECK(cudaEventRecord(ev1, stream));
    BENCH_CHECK(cudaEventSynchronize(ev1));
    float t = 0;
    BENCH_CHECK(cudaEventElapsedTime(&t, ev0, ev1));
    if (it >= 5) ms.push_back(t);
  }
  BENCH_CHECK(cudaGraphExecDestroy(exec));
  BENCH_CHECK(cudaGraphDestroy(graph));
  std::sort(ms.begin(), ms.end());
  return {1e3 * ms[ms.size() / 2], 1e3 * ms.front()};
}

}  // namespace

int main(int argc, char** argv) try {
  const int replays = argc > 1 ? std::max(5, std::atoi(argv[1])) : 60;
  const int only_h_q = argc > 2 ? std::atoi(argv[2]) : 0;
  const int only_b = argc > 3 ? std::atoi(argv[3]) : 0;
  mk::require_supported_device(0);
  const mk::DeviceInfo dev = mk::device_info(0);
  std::printf("device: %s, %d SMs; decode + combine, V4.1-Flash shape (window 128 p64 + extra 512 p64, "
              "fp8_ds_mla 584, s_q 1); graph replays with L2 flush, median of %d\n",
              dev.name.c_str(), dev.sm_count, replays);
  std::printf("%5s %5s %5s %7s %9s %10s %10s %8s %9s %10s\n", "h_q", "b", "P", "split", "mode", "us/call", "min us",
              "TFLOPS", "GB/s", "other us");

  mk::DeviceBuffer flush(256u << 20);
  cudaStream_t stream = nullptr;
  BENCH_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cudaEvent_t ev0 = nullptr, ev1 = nullptr;
  BENCH_CHECK(cudaEventCreate(&ev0));
  BENCH_CHECK(cudaEventCreate(&ev1));
  std::mt19937_64 rng(2026);
  const int topk = 128, extra_topk = 512, s_q = 1;

  for (int h_q : {64, 128}) {
    if (only_h_q != 0 && h_q != only_h_q) continue;
    for (int b : {1, 8, 32, 64, 128, 256}) {
      if (only_b != 0 && b != only_b) continue;
      Cache main = make_cache(rng, static_cast<std::int64_t>(b) * topk);
      Cache extra = make_cache(rng, static_cast<std::int64_t>(b) * extra_topk);
      mk::DeviceBuffer d_idx = mk::to_device(permuted_indices(rng, b, topk));
      mk::DeviceBuffer d_eidx = mk::to_device(permuted_indices(rng, b, extra_topk));
      std::vector<std::uint16_t> q(static_cast<std::size_t>(b) * s_q * h_q * 512);
      std::normal_distribution<float> normal(0.0f, 1.0f);
      for (auto& x : q) x = bf16(normal(rng));
      mk::DeviceBuffer d_q = mk::to_device(q);
      const std::vector<std::int32_t> lens(static_cast<std::size_t>(b), topk), elens(static_cast<std::size_t>(b), extra_topk);
      mk::DeviceBuffer d_len = mk::to_device(lens), d_elen = mk::to_device(elens);
      const std::int32_t parts = mk::sm90_num_sm_parts(dev.sm_count, s_q, h_q);
      mk::DeviceBuffer d_rec(static_cast<std::size_t>(parts) * 32), d_splits(static_cast<std::size_t>(b + 1) * 4);
      mk::ScheduleParams sp;
      sp.b = b;
      sp.topk = topk;
      sp.topk_length = d_len.as<std::int32_t>();
      sp.has_extra = true;
      sp.extra_topk = extra_topk;
      sp.extra_topk_length = d_elen.as<std::int32_t>();
      sp.num_sm_parts = parts;
      sp.records = d_rec.as<std::int32_t>();
      sp.num_splits = d_splits.as<std::int32_t>();
      mk::schedule(sp);
      const auto splits = mk::to_host<std::int32_t>(d_splits, static_cast<std::size_t>(b + 1));
      int split_requests = 0;
      for (int i = 0; i < b; ++i) split_requests += splits[static_cast<std::size_t>(i + 1)] - splits[static_cast<std::size_t>(i)] > 1;

      mk::DeviceBuffer d_out(q.size() * 2), d_lse(static_cast<std::size_t>(b) * s_q * h_q * 4);
      mk::DeviceBuffer d_oacc(static_cast<std::size_t>(mk::o_accum_elems(b, s_q, h_q, parts)) * 4);
      mk::DeviceBuffer d_lacc(static_cast<std::size_t>(mk::lse_accum_elems(b, s_q, h_q, parts)) * 4);
      mk::DecodeParams p;
      p.b = b;
      p.s_q = s_q;
      p.h_q = h_q;
      p.q = d_q.as<std::uint16_t>();
      p.main = main.view;
      p.indices = d_idx.as<std::int32_t>();
      p.topk = topk;
      p.topk_length = d_len.as<std::int32_t>();
      p.has_extra = true;
      p.extra = extra.view;
      p.extra_indices = d_eidx.as<std::int32_t>();
      p.extra_topk = extra_topk;
      p.extra_topk_length = d_elen.as<std::int32_t>();
      p.sched_records = d_rec.as<std::int32_t>();
      p.num_splits = d_splits.as<std::int32_t>();
      p.num_sm_parts = parts;
      p.out = d_out.as<std::uint16_t>();
      p.lse = d_lse.as<float>();
      p.o_accum = d_oacc.as<float>();
      p.lse_accum = d_lacc.as<float>();
      p.stream = stream;
      // The plan the heuristic picks, and the other one for comparison.
      const mk::DecodeMode mode = mk::decode_plan_mode(b, s_q, h_q, topk, true, extra_topk, dev.sm_count);
      p.mode = mode;
      const Timing t = time_call(p, stream, flush, ev0, ev1, replays);
      p.mode = mode == mk::DecodeMode::one_pass ? mk::DecodeMode::split_kv : mk::DecodeMode::one_pass;
      const Timing alt = time_call(p, stream, flush, ev0, ev1, replays);
      const double med_us = t.med_us;
      const double min_us = t.min_us;
      const double flops = 2.0 * h_q * b * s_q * 640.0 * 1024.0;
      const double bytes = 640.0 * 584.0 * b + 2.0 * static_cast<double>(q.size()) * 2.0;
      std::printf("%5d %5d %5d %7d %9s %10.1f %10.1f %8.1f %9.0f %10.1f\n", h_q, b, parts, split_requests,
                  std::string(mk::to_string(mode)).c_str(), med_us, min_us, flops / (med_us * 1e-6) / 1e12,
                  bytes / (med_us * 1e-6) / 1e9, alt.med_us);
      std::fflush(stdout);
    }
  }
  BENCH_CHECK(cudaEventDestroy(ev0));
  BENCH_CHECK(cudaEventDestroy(ev1));
  BENCH_CHECK(cudaStreamDestroy(stream));
  return 0;
} catch (const mlaplan::Error& e) {
  std::fprintf(stderr, "mlaplan_kernel_bench: %s\n", e.what());
  return mlaplan::exit_code(e.kind());
}
