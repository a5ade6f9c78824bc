// One instantiation of the warp-specialised small-head kernel (sm90/decode_small_ws.cuh): h_q 8 or
// 16, main fp8_ds_mla_584 with an extra fp8_ds_mla_584 cache.
#include "sm90/decode_small_ws.cuh"

namespace mlaplan::kernels::detail {

void launch_small_decode_sm90ws_584_584(const DecodeParams& p, const DecodeLaunch& launch) {
  launch_small_decode_sm90ws<true>(p, launch);
}

}  // namespace mlaplan::kernels::detail
