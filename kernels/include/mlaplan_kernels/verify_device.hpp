#pragma once
// The CUDA device behind `mla-plan verify`: runs the project's quantize, scheduler and decode
// kernels on a VerifyProblem (mlaplan/gpu_check/verify.hpp). No CUDA types here.

#include <memory>

#include "mlaplan/gpu_check/verify.hpp"

namespace mlaplan::kernels {

/// A verify device on CUDA device `index`. Throws Error(no_gpu) when it does not exist or is not
/// an architecture the kernels were built for.
std::unique_ptr<VerifyDevice> make_cuda_verify_device(int index);

}  // namespace mlaplan::kernels
