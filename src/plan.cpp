#include "mlaplan/plan.hpp"

namespace mlaplan {}  // namespace mlaplan
