#pragma once
// The one checking macro for CUDA runtime calls: on failure it throws
// mlaplan::Error naming the call text, the CUDA error name and text, and file:line.

#include <cuda_runtime_api.h>

#include "mlaplan/base/error.hpp"

namespace mlaplan::kernels::detail {

/// Throws for e != cudaSuccess: kind no_gpu when the failure means "no usable device or driver",
/// verify_failed otherwise.
void cuda_check(cudaError_t e, const char* call, const char* file, int line);

}  // namespace mlaplan::kernels::detail

#define MLAPLAN_CUDA_CHECK(call) ::mlaplan::kernels::detail::cuda_check((call), #call, __FILE__, __LINE__)

/// After a kernel launch: reports a bad launch configuration as the launch's failure.
#define MLAPLAN_CUDA_CHECK_LAUNCH(what) \
  ::mlaplan::kernels::detail::cuda_check(cudaGetLastError(), what, __FILE__, __LINE__)
