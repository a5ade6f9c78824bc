// One instantiation of the warp-specialised sm_90a kernel (decode_sm90_ws.cuh): main fp8_ds_mla_584, extra fp8_ds_mla_584.
#include "decode_sm90_ws.cuh"

namespace mlaplan::kernels::detail {

void launch_decode_sm90ws_584_584(const DecodeParams& p, const LaunchDims& dims) {
  launch_decode_sm90ws<true>(p, dims);
}

}  // namespace mlaplan::kernels::detail
