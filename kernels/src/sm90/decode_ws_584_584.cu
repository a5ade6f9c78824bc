// One instantiation of the warp-specialised sm_90a kernel (sm90/decode_ws.cuh): main fp8_ds_mla_584, extra fp8_ds_mla_584.
#include "sm90/decode_ws.cuh"

namespace mlaplan::kernels::detail {

void launch_decode_sm90ws_584_584(const DecodeParams& p, const DecodeLaunch& launch) {
  launch_decode_sm90ws<true>(p, launch);
}

bool sm90ws_clusters_fit_584_584(const LaunchDims& d) { return sm90ws_clusters_fit_of<true>(d); }

#if defined(MLAPLAN_WS_TRACE)
/// Prints the per-block timelines of the last traced launch (sm90/decode_ws.cuh, WsTrace).
void ws_trace_dump() { ws_trace_print("trace"); }
#endif

}  // namespace mlaplan::kernels::detail
