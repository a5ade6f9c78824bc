// One instantiation of the small-head sparse decode kernel (decode_small.cuh): h_q 16,
// fp8_ds_mla_584 alone.
#include "small/decode_small.cuh"

namespace mlaplan::kernels::detail {

void launch_small_decode_584_h16(const DecodeParams& p, const DecodeLaunch& launch) {
  launch_small_decode<RowFormat::fp8_ds_mla_584, false, RowFormat::fp8_ds_mla_584, 16>(p, launch);
}

}  // namespace mlaplan::kernels::detail
