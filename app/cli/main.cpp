// main() of both executables (app/CMakeLists.txt):
// - mla-plan: the CLI without the CUDA kernels. A parsed `verify` or `bench` is handed over to
//   mla-plan-cuda in the same directory (execv, the same arguments), which has them; without it
//   they check their config and flags, then exit 6 saying what to build (gpu_runner.hpp).
// - mla-plan-cuda (MLAPLAN_WITH_KERNELS): the same CLI with the kernels' GpuRunner set.

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <ostream>
#include <string>
#include <vector>

#include <unistd.h>

#include "cli/cli.hpp"
#include "cli/gpu_runner.hpp"
#include "output/output.hpp"

namespace {

#ifndef MLAPLAN_WITH_KERNELS
/// Set in the environment of a handed-over command: an mla-plan-cuda that is in fact a plain
/// mla-plan (a copy, a link) does not hand it over again.
constexpr const char* kHandedOver = "MLAPLAN_HANDED_OVER";

/// The directory of this executable ("" when /proc/self/exe cannot be read; errno set).
std::string own_directory() {
  std::vector<char> buf(4096);
  const ssize_t n = ::readlink("/proc/self/exe", buf.data(), buf.size());
  if (n <= 0 || static_cast<std::size_t>(n) >= buf.size()) return {};
  const std::string self(buf.data(), static_cast<std::size_t>(n));
  const auto slash = self.rfind('/');
  return slash == std::string::npos ? std::string(".") : self.substr(0, slash == 0 ? 1 : slash);
}

/// Runs `verify` / `bench` in mla-plan-cuda next to this executable: returns only when it cannot,
/// having recorded why for the message of the command (no_gpu).
void hand_over_to_kernels(int argc, char** argv, std::ostream& out) {
  const std::string dir = own_directory();
  const std::string path = (dir.empty() ? std::string("<the directory of this mla-plan>") : dir) + "/mla-plan-cuda";
  std::string problem;
  if (dir.empty()) {
    problem = std::string("/proc/self/exe: ") + std::strerror(errno != 0 ? errno : ENOENT);
  } else if (std::getenv(kHandedOver) != nullptr) {
    problem = "it is not mla-plan-cuda: it handed the command back";
  } else {
    out.flush();  // nothing is written before a command runs; kept in order all the same
    std::vector<char*> child_argv;
    child_argv.push_back(const_cast<char*>(path.c_str()));
    for (int i = 1; i < argc; ++i) child_argv.push_back(argv[i]);
    child_argv.push_back(nullptr);
    ::setenv(kHandedOver, "1", 1);
    ::execv(path.c_str(), child_argv.data());
    problem = std::strerror(errno);
    ::unsetenv(kHandedOver);
#ifndef MLAPLAN_KERNELS_CONFIGURED
    // A build without CUDA has no mla-plan-cuda: its own message (built without CUDA).
    if (errno == ENOENT) return;
#endif
  }
  mlaplan::cli::set_kernels_executable(mlaplan::cli::KernelsExecutable{path, problem, MLAPLAN_BUILD_DIR});
}
#endif

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args;
  args.reserve(static_cast<std::size_t>(argc > 0 ? argc - 1 : 0));
  for (int i = 1; i < argc; ++i) args.emplace_back(argv[i]);
  // stdout through a buffer that keeps the errno of a failed write: execute_cli() flushes it and
  // turns a failure into exit 7 with the cause (docs/cli.md, "Exit codes").
  mlaplan::cli::FdOutputBuf stdout_buf(STDOUT_FILENO);
  std::ostream out(&stdout_buf);
#ifdef MLAPLAN_WITH_KERNELS
  mlaplan::cli::set_gpu_runner(&mlaplan::cli::cuda_gpu_runner());
#endif
  mlaplan::cli::CommandLine command_line;
  const mlaplan::cli::ParsedCli& parsed = command_line.parse(args, out, std::cerr);
#ifndef MLAPLAN_WITH_KERNELS
  // Parsed, so its flags were checked and nothing (not standard input) was read yet.
  if (parsed.command != nullptr && parsed.command->runs_kernels) {
    hand_over_to_kernels(argc, argv, out);
  }
#endif
  return mlaplan::cli::execute_cli(parsed, out, std::cerr);
}
