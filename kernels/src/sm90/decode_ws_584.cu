// One instantiation of the warp-specialised sm_90a kernel (sm90/decode_ws.cuh): main fp8_ds_mla_584, no extra cache.
#include "sm90/decode_ws.cuh"

namespace mlaplan::kernels::detail {

void launch_decode_sm90ws_584(const DecodeParams& p, const DecodeLaunch& launch) {
  launch_decode_sm90ws<false>(p, launch);
}

bool sm90ws_clusters_fit_584(const LaunchDims& d) { return sm90ws_clusters_fit_of<false>(d); }

}  // namespace mlaplan::kernels::detail
