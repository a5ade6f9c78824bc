// One instantiation of the small-head sparse decode kernel (decode_small.cuh): h_q 8,
// fp8_ds_mla_656 (V3.2) alone.
#include "small/decode_small.cuh"

namespace mlaplan::kernels::detail {

void launch_small_decode_656_h8(const DecodeParams& p, const DecodeLaunch& launch) {
  launch_small_decode<RowFormat::fp8_ds_mla_656, false, RowFormat::fp8_ds_mla_656, 8>(p, launch);
}

}  // namespace mlaplan::kernels::detail
