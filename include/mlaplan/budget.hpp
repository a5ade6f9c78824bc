#pragma once

namespace mlaplan {}  // namespace mlaplan
