// Timing of one sparse decode call (decode kernel, + combine kernel in split_kv) for the V4.1-Flash
// decode shapes (docs/perf.md): s_q 1, window topk 128 with page 64 plus extra topk 512 with page
// 64, fp8_ds_mla 584, full lengths, random valid indices (every attended row distinct). The
// measurement is mlaplan::kernels::bench_decode (mlaplan_kernels/bench.hpp): the call captured in
// a CUDA graph, each replay timed with CUDA events after a 256 MiB memset that flushes the L2,
// the median of the replays. Each shape runs in the plan decode_plan_mode() picks ("us/call") and
// in the other plans for comparison (the last three columns: split_kv, one_pass, cluster_split,
// the picked one included). The first line also reports the device copy
// bandwidth (bytes read + written per second), the bandwidth ceiling of the floor.
//
// Without a b argument, a variable-length batch of 37 follows the full-length ones (lengths uniform
// below the widths, every 9th request empty, 1/17 of the indices -1: DecodeBenchShape).
//
// Usage: mlaplan_kernel_bench [replays [h_q [b[v] [P [O [seed]]]]]]   (default 60 replays, every h_q
//        and b; for experiments: P, split_kv's partition count instead of the device's (0: the
//        device's); O, split_kv's per-request overhead in blocks (-1: the project's); seed, the
//        inputs' random seed instead of the row's (0: the row's))
//        replays 5..100000 (mlaplan::KernelBenchLimits); h_q 0 (all), 8, 16 (the small-head kernel), 64 or 128; b 0 (the list: 1, 8, 32,
//        64, 128, 256) or any batch size up to 1024; "37v": the variable-length batch alone. Each row's
//        random inputs depend only on its place in the full list (h_q, then b), so a row run alone
//        measures the same bytes as in the full run.
//        Environment: MLAPLAN_BENCH_KERNEL=generic|sm90_ws|small_heads|small_heads_sm90|small_heads_lean
//        forces that decode kernel for every call (a shape it cannot run is an error; small_heads_lean
//        for the split_kv timings only); unset: the dispatch's.

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <optional>
#include <utility>
#include <string>
#include <vector>

#include "mlaplan/base/error.hpp"
#include "mlaplan/base/limits.hpp"
#include "mlaplan/base/text.hpp"
#include "mlaplan_kernels/bench.hpp"
#include "mlaplan_kernels/kernels.hpp"

namespace mk = mlaplan::kernels;

#if defined(MLAPLAN_WS_TRACE)
namespace mlaplan::kernels::detail {
void ws_trace_dump();
void small_ws_trace_dump();
}  // namespace mlaplan::kernels::detail
#endif

namespace {

constexpr int kBatches[] = {1, 8, 32, 64, 128, 256};

/// A whole decimal argument in [lo, hi], or Error(usage) naming it.
int int_arg(const char* text, const char* name, int lo, int hi) {
  int v = 0;
  const char* end = text + std::strlen(text);
  const auto [ptr, ec] = std::from_chars(text, end, v);
  if (ec != std::errc{} || ptr != end || v < lo || v > hi) {
    mlaplan::throw_usage(std::string(name) + " '" + text + "' is out of range; allowed " + std::to_string(lo) + ".." +
                         std::to_string(hi));
  }
  return v;
}

}  // namespace

int main(int argc, char** argv) try {
  if (argc > 7) mlaplan::throw_usage("usage: mlaplan_kernel_bench [replays [h_q [b[v] [P [O [seed]]]]]]");
  const int replays = argc > 1 ? int_arg(argv[1], "replays", mlaplan::KernelBenchLimits::min_replays,
                                         mlaplan::KernelBenchLimits::max_replays)
                               : 60;
  const int only_h_q = argc > 2 ? int_arg(argv[2], "h_q", 0, 128) : 0;
  if (only_h_q != 0 && only_h_q != 8 && only_h_q != 16 && only_h_q != 64 && only_h_q != 128)
    mlaplan::throw_usage("h_q must be 0 (all), 8, 16, 64 or 128");
  // "37v": b 37 with variable lengths only.
  std::string b_text = argc > 3 ? argv[3] : "0";
  const bool only_variable = !b_text.empty() && b_text.back() == 'v';
  if (only_variable) b_text.pop_back();
  const int only_b = int_arg(b_text.c_str(), "b", 0, 1024);
  const int parts = argc > 4 ? int_arg(argv[4], "P", 0, mk::kMaxSmParts) : 0;
  const int overhead = argc > 5 ? int_arg(argv[5], "O", -1, 64) : -1;
  const int seed_arg = argc > 6 ? int_arg(argv[6], "seed", 0, 1 << 30) : 0;
  // MLAPLAN_BENCH_KERNEL=NAME: the decode kernel forced for every call (DecodeForce::kernel), e.g.
  // small_heads_sm90 beside the default small-head kernel; unset or empty: the dispatch's choice.
  std::optional<mk::DecodeKernel> forced;
  if (const char* k = std::getenv("MLAPLAN_BENCH_KERNEL"); k != nullptr && *k != '\0') {
    forced = mk::decode_kernel_named(k);
    if (!forced.has_value()) {
      mlaplan::throw_usage("MLAPLAN_BENCH_KERNEL " + mlaplan::quoted(k) + " is not a decode kernel; allowed " +
                           std::string(mk::kDecodeKernelNames));
    }
  }
  mk::require_supported_device(0);
  const mk::DeviceInfo dev = mk::device_info(0);
  const double copy_gbps = mk::measure_copy_gbps();
  std::printf(
      "device: %s, %d SMs, copy %.0f GB/s; decode (+ combine), V4.1-Flash shape (window 128 p64 + extra "
      "512 p64, fp8_ds_mla 584, s_q 1); graph replays with L2 flush, median of %d; kernel %s\n",
      dev.name.c_str(), dev.sm_count, copy_gbps, replays,
      forced.has_value() ? std::string(mk::to_string(*forced)).c_str() : "as dispatched");
  std::printf("%5s %5s %9s %5s %7s %13s %10s %10s %8s %9s %6s %10s %10s %10s\n", "h_q", "b", "lengths", "P", "split",
              "mode", "us/call", "min us", "TFLOPS", "GB/s", "%copy", "split_kv", "one_pass", "cluster");
  constexpr int kRowsPerHq = static_cast<int>(std::size(kBatches)) + 1;
  // h_q 8 and 16: the small-head kernel (unpadded); 64 and 128: the 64-head kernels. Seeds by the
  // h_q's place in {64, 128, 8, 16}, so the 64 / 128 rows keep the bytes of earlier runs.
  for (int h_q : {8, 16, 64, 128}) {
    if (only_h_q != 0 && h_q != only_h_q) continue;
    // The full-length batches, then (without a b argument) the variable-length batch of 37.
    std::vector<std::pair<int, bool>> rows;
    if (only_b != 0) rows.push_back({only_b, only_variable});
    for (const int b : kBatches) {
      if (only_b == 0) rows.push_back({b, false});
    }
    if (only_b == 0) rows.push_back({37, true});
    for (const auto& [b, variable] : rows) {
      // The row's place in the full list: its seed.
      const auto* at = std::find(std::begin(kBatches), std::end(kBatches), b);
      const int place = variable ? kRowsPerHq - 1 : at != std::end(kBatches) ? static_cast<int>(at - kBatches) : 0;
      const std::uint64_t seed = seed_arg != 0 ? static_cast<std::uint64_t>(seed_arg)
                                               : 2026 + static_cast<std::uint64_t>((h_q == 128  ? 1
                                                                                    : h_q == 8  ? 2
                                                                                    : h_q == 16 ? 3
                                                                                                : 0) *
                                                                                       kRowsPerHq +
                                                                                   place);
      mk::DecodeBenchShape sh;
      sh.b = b;
      sh.h_q = h_q;
      sh.variable_lengths = variable;
      mk::DecodeBenchOptions opt;
      opt.replays = replays;
      opt.seed = seed;
      opt.time_other_mode = true;
      opt.num_sm_parts = parts;
      opt.fixed_overhead = overhead;
      opt.kernel = forced;
      const mk::DecodeBenchResult r = mk::bench_decode(sh, opt);
      const double gbps = r.bytes / (r.median_us * 1e-6) / 1e9;
      std::printf("%5d %5d %9s %5d %7d %13s %10.1f %10.1f %8.1f %9.0f %5.0f%% %10.1f %10.1f %10.1f\n", h_q, b,
                  variable ? "variable" : "full", r.num_sm_parts, r.split_requests,
                  std::string(mk::to_string(r.mode)).c_str(), r.median_us, r.min_us,
                  r.flops / (r.median_us * 1e-6) / 1e12, gbps, 100.0 * gbps / copy_gbps, r.mode_median_us[0],
                  r.mode_median_us[1], r.mode_median_us[2]);
      std::fflush(stdout);
    }
  }
#if defined(MLAPLAN_WS_TRACE)
  mk::detail::ws_trace_dump();
  mk::detail::small_ws_trace_dump();
#endif
  return 0;
} catch (const mlaplan::Error& e) {
  std::fprintf(stderr, "mlaplan_kernel_bench: %s\n", e.what());
  return mlaplan::exit_code(e.kind());
}
