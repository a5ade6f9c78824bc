// One instantiation of the sparse decode kernel (decode_kernel.cuh): main v41_fp8_528, extra v41_fp4_288.
#include "portable/decode_kernel.cuh"

namespace mlaplan::kernels::detail {

void launch_decode_528_288(const DecodeParams& p, const DecodeLaunch& launch) {
  launch_decode<RowFormat::v41_fp8_528, true, RowFormat::v41_fp4_288>(p, launch);
}

}  // namespace mlaplan::kernels::detail
