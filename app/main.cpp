#include <iostream>
#include <ostream>
#include <string>
#include <vector>

#include <unistd.h>

#include "cli.hpp"
#include "output.hpp"

int main(int argc, char** argv) {
  std::vector<std::string> args;
  args.reserve(static_cast<std::size_t>(argc > 0 ? argc - 1 : 0));
  for (int i = 1; i < argc; ++i) args.emplace_back(argv[i]);
  // stdout through a buffer that keeps the errno of a failed write: run_cli() flushes it and turns
  // a failure into exit 7 with the cause (docs/cli.md, "Exit codes").
  mlaplan::cli::FdOutputBuf stdout_buf(STDOUT_FILENO);
  std::ostream out(&stdout_buf);
  return mlaplan::cli::run_cli(args, out, std::cerr);
}
