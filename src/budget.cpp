#include "mlaplan/budget.hpp"

namespace mlaplan {}  // namespace mlaplan
