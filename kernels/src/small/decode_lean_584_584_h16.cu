// One instantiation of the row-split small-head sparse decode kernel (decode_lean.cuh): h_q 16,
// fp8_ds_mla_584 + a 584 extra cache.
#include "small/decode_lean.cuh"

namespace mlaplan::kernels::detail {

void launch_small_decode_lean_584_584_h16(const DecodeParams& p, const DecodeLaunch& launch) {
  launch_small_decode_lean<true, 16>(p, launch);
}

}  // namespace mlaplan::kernels::detail
