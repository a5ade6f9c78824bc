// One instantiation of the portable sparse decode kernel (decode_kernel.cuh): main fp8_ds_mla_584
// with an extra fp8_ds_mla_584 cache.
#include "portable/decode_kernel.cuh"

namespace mlaplan::kernels::detail {

void launch_decode_584_584(const DecodeParams& p, const DecodeLaunch& launch) {
  launch_decode<RowFormat::fp8_ds_mla_584, true, RowFormat::fp8_ds_mla_584>(p, launch);
}

}  // namespace mlaplan::kernels::detail
