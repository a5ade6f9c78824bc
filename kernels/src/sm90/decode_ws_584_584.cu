// One instantiation of the warp-specialised sm_90a kernel (sm90/decode_ws.cuh): main fp8_ds_mla_584, extra fp8_ds_mla_584.
#include "sm90/decode_ws.cuh"

#include <cstdio>

namespace mlaplan::kernels::detail {

void launch_decode_sm90ws_584_584(const DecodeParams& p, const DecodeLaunch& launch) {
  launch_decode_sm90ws<true>(p, launch);
}

bool sm90ws_clusters_fit_584_584(const LaunchDims& d) { return sm90ws_clusters_fit_of<true>(d); }

#if defined(MLAPLAN_WS_TRACE)
/// Prints the per-block timelines of the last traced launch (sm90/decode_ws.cuh, WsTrace).
void ws_trace_dump() {
  static unsigned long long h[2][3][512];
  if (cudaMemcpyFromSymbol(h, g_ws_trace, sizeof(h)) != cudaSuccess) return;
  for (int c = 0; c < 2; ++c)
    for (int r = 0; r < 3; ++r) {
      std::printf("trace cta %d role %d:", c, r);
      for (int i = 0; i < 512 && h[c][r][i] != 0; ++i) std::printf(" %llu:%llu", h[c][r][i] >> 8, h[c][r][i] & 255);
      std::printf("\n");
    }
}
#endif

}  // namespace mlaplan::kernels::detail
