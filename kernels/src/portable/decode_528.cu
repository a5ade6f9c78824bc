// One instantiation of the sparse decode kernel (decode_kernel.cuh): main v41_fp8_528, no extra cache.
#include "portable/decode_kernel.cuh"

namespace mlaplan::kernels::detail {

void launch_decode_528(const DecodeParams& p, const DecodeLaunch& launch) {
  launch_decode<RowFormat::v41_fp8_528, false, RowFormat::v41_fp8_528>(p, launch);
}

}  // namespace mlaplan::kernels::detail
