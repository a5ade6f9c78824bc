// One instantiation of the portable sparse decode kernel (decode_kernel.cuh): main bf16_1024 (plain bf16 rows), no extra cache.
#include "portable/decode_kernel.cuh"

namespace mlaplan::kernels::detail {

void launch_decode_bf16(const DecodeParams& p, const DecodeLaunch& launch) {
  launch_decode<RowFormat::bf16_1024, false, RowFormat::bf16_1024>(p, launch);
}

}  // namespace mlaplan::kernels::detail
