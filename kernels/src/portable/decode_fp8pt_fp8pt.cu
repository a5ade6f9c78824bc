// One instantiation of the portable sparse decode kernel (decode_kernel.cuh): main fp8_pt_512, extra fp8_pt_512.
#include "portable/decode_kernel.cuh"

namespace mlaplan::kernels::detail {

void launch_decode_fp8pt_fp8pt(const DecodeParams& p, const DecodeLaunch& launch) {
  launch_decode<RowFormat::fp8_pt_512, true, RowFormat::fp8_pt_512>(p, launch);
}

}  // namespace mlaplan::kernels::detail
