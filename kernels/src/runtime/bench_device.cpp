// BenchDevice on CUDA: each shape through bench_decode() (random latents quantised into pages of
// the planned size, distinct rows, CUDA graph, L2 flushed before every replay, median), the
// ceilings through measure_copy_gbps() and measure_matmul_tflops().

#include "mlaplan_kernels/bench_device.hpp"

#include <cuda_runtime_api.h>

#include <string>

#include "common/cuda_check.hpp"
#include "common/format_support.hpp"
#include "mlaplan_kernels/bench.hpp"

namespace mlaplan::kernels {
namespace {

class CudaBenchDevice final : public BenchDevice {
 public:
  explicit CudaBenchDevice(int index) : index_(index) {
    require_supported_device(index);
    MLAPLAN_CUDA_CHECK(cudaSetDevice(index));
  }

  BenchCeilings ceilings() override {
    BenchCeilings c;
    constexpr std::size_t kCopyBytes = std::size_t(1) << 30;
    c.copy_gbps = measure_copy_gbps(kCopyBytes, 20);
    c.copy_how = "1 GiB device-to-device copy, bytes read + written, median of 20";
    const MatmulCeiling m = measure_matmul_tflops(8192, 10);
    c.matmul_tflops = m.tflops;
    c.matmul_how = m.how;
    return c;
  }

  std::string unsupported_reason(const BenchShape& s) const override {
    if (s.s_q != 1) return "bench times s_q 1";
    return detail::decode_support_reason(s.main_format, s.has_extra, s.extra_format, s.h_q);
  }

  BenchTiming time(const BenchShape& s, const BenchRunOptions& o) override {
    MLAPLAN_CUDA_CHECK(cudaSetDevice(index_));
    DecodeBenchShape sh;
    sh.b = s.b;
    sh.s_q = s.s_q;
    sh.h_q = s.h_q;
    sh.main_format = *detail::kernel_format(s.main_format);
    sh.main_page = s.main_page;
    sh.topk = s.topk;
    sh.has_extra = s.has_extra;
    if (s.has_extra) {
      sh.extra_format = *detail::kernel_format(s.extra_format);
      sh.extra_page = s.extra_page;
      sh.extra_topk = s.extra_topk;
    }
    DecodeBenchOptions opt;
    opt.replays = o.replays;
    opt.warmup = o.warmup;
    opt.seed = o.seed + static_cast<std::uint64_t>(s.b) * 1000003u + static_cast<std::uint64_t>(s.type) * 7919u;
    opt.time_with_scheduler = true;
    const DecodeBenchResult r = bench_decode(sh, opt);
    BenchTiming t;
    t.us_decode = r.median_us;
    t.us_per_call = r.with_scheduler_median_us > 0 ? r.with_scheduler_median_us : r.median_us;
    t.min_us = r.min_us;
    t.num_sm_parts = r.num_sm_parts;
    t.split_requests = r.split_requests;
    return t;
  }

 private:
  int index_;
};

}  // namespace

std::unique_ptr<BenchDevice> make_cuda_bench_device(int index) { return std::make_unique<CudaBenchDevice>(index); }

}  // namespace mlaplan::kernels
