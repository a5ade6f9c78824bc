// One instantiation of the sparse decode kernel (decode_kernel.cuh) and of the sm_90a kernel
// (decode_sm90.cuh): main fp8_ds_mla_584, no extra cache.
#include "decode_kernel.cuh"
#include "decode_sm90.cuh"

namespace mlaplan::kernels::detail {

void launch_decode_584(const DecodeParams& p, const LaunchDims& dims) {
  launch_decode<RowFormat::fp8_ds_mla_584, false, RowFormat::fp8_ds_mla_584>(p, dims);
}

void launch_decode_sm90_584(const DecodeParams& p, const LaunchDims& dims) {
  launch_decode_sm90<false>(p, dims);
}

}  // namespace mlaplan::kernels::detail
