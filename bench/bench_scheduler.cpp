// Plan time of the host tile scheduler vs batch size, on DeepSeek V4.1-like decode lengths:
// window top-k 128 (valid entries min(pos + 1, 128)) plus a compressed extra cache of top-k 512
// (valid entries min(512, (pos + 1) / 4)), sm90-sparse, h_q 64, 132 SMs (H100/H200).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <random>

#include "mlaplan/cache/scheduler.hpp"

namespace {

mlaplan::SchedInput v41_batch(std::int64_t b, mlaplan::SchedKernel kernel, std::int32_t h_q, std::int32_t num_sms) {
  mlaplan::SchedInput in;
  in.kernel = kernel;
  in.num_sms = num_sms;
  in.s_q = 1;
  in.h_q = h_q;
  in.has_extra = true;
  std::mt19937 rng(static_cast<std::uint32_t>(b));
  // Token positions of a mixed batch: many short contexts, some long ones.
  std::uniform_int_distribution<std::int32_t> pos(0, 131'071);
  for (std::int64_t i = 0; i < b; ++i) {
    const std::int32_t p = (i % 8 == 0) ? pos(rng) % 256 : pos(rng);
    in.lengths.push_back(std::min(p + 1, 128));
    in.extra_lengths.push_back(std::min(512, (p + 1) / 4));
  }
  return in;
}

void run(benchmark::State& state, mlaplan::SchedKernel kernel, std::int32_t h_q, std::int32_t num_sms) {
  const mlaplan::SchedInput in = v41_batch(state.range(0), kernel, h_q, num_sms);
  for (auto _ : state) {
    mlaplan::SchedPlan plan = mlaplan::plan_schedule(in);
    benchmark::DoNotOptimize(plan.records.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
}

void BM_plan_sm90_sparse_h64(benchmark::State& state) { run(state, mlaplan::SchedKernel::sm90_sparse, 64, 132); }
void BM_plan_sm100_head128(benchmark::State& state) { run(state, mlaplan::SchedKernel::sm100_head128, 128, 148); }

}  // namespace

BENCHMARK(BM_plan_sm90_sparse_h64)
    ->Arg(1)
    ->Arg(8)
    ->Arg(64)
    ->Arg(512)
    ->Arg(4096)
    ->Arg(65536)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_plan_sm100_head128)
    ->Arg(1)
    ->Arg(8)
    ->Arg(64)
    ->Arg(512)
    ->Arg(4096)
    ->Arg(65536)
    ->Unit(benchmark::kMicrosecond);

BENCHMARK_MAIN();
