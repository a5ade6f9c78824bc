#include "cli.hpp"

#include <ostream>

namespace mlaplan::cli {
int run_cli(const std::vector<std::string>&, std::ostream&, std::ostream& err) {
  err << "mla-plan: error: not built yet\n";
  return 70;
}
}  // namespace mlaplan::cli
