// One instantiation of the warp-specialised small-head kernel (sm90/decode_small_ws.cuh): h_q 8 or
// 16, main fp8_ds_mla_584 with an extra fp8_ds_mla_584 cache.
#include "sm90/decode_small_ws.cuh"

namespace mlaplan::kernels::detail {

void launch_small_decode_sm90ws_584_584(const DecodeParams& p, const DecodeLaunch& launch) {
  launch_small_decode_sm90ws<true>(p, launch);
}

#if defined(MLAPLAN_WS_TRACE)
/// The small-head kernel's per-block timelines of its last traced one_pass launch (this file's
/// g_ws_trace): producer warp 0 (role 0) and warp 0 of each math warpgroup (roles 1, 2).
void small_ws_trace_dump() { ws_trace_print("small trace"); }
#endif

}  // namespace mlaplan::kernels::detail
