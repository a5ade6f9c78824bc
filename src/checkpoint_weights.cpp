#include "mlaplan/checkpoint_weights.hpp"

namespace mlaplan {}  // namespace mlaplan
