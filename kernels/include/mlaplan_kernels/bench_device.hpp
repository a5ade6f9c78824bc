#pragma once
// The CUDA device behind `mla-plan bench`: times the project's decode on a BenchShape
// (mlaplan/gpu_check/bench.hpp) with bench_decode() and measures the two ceilings. No CUDA types here.

#include <memory>

#include "mlaplan/gpu_check/bench.hpp"

namespace mlaplan::kernels {

/// A bench device on CUDA device `index`. Throws Error(no_gpu) when it does not exist or is not
/// an architecture the kernels were built for.
std::unique_ptr<BenchDevice> make_cuda_bench_device(int index);

}  // namespace mlaplan::kernels
