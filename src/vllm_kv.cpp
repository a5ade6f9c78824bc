#include "mlaplan/vllm_kv.hpp"

namespace mlaplan {}  // namespace mlaplan
