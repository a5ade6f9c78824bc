#include "mlaplan/placement.hpp"

namespace mlaplan {}  // namespace mlaplan
