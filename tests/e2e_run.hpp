#pragma once
// Runs the built mla-plan binary for the end-to-end tests: no shell, stdout and stderr captured
// through files (or stdout sent where the test says: /dev/full, a pipe closed early), stdin from
// /dev/null or a file the test names, an optional environment, SIGPIPE ignored on request, and a
// time limit after which the child is killed, so that a test of "nothing blocks" fails instead of
// hanging.

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "unprivileged.hpp"

extern char** environ;

namespace e2e {

namespace fs = std::filesystem;

struct Run {
  int code = -1;  ///< exit status, 128 + signal when killed by one, -1 when timed out
  bool timed_out = false;
  std::string out;
  std::string err;
};

struct RunOptions {
  std::vector<std::string> env_extra;    ///< "NAME=value": replaces or adds
  std::string stdout_path;               ///< where stdout goes instead of a captured file ("/dev/full")
  std::string stdin_path = "/dev/null";  ///< what the child reads as standard input
  bool stdout_closed_pipe = false;       ///< stdout is a pipe whose read end is closed
  bool ignore_sigpipe = false;           ///< the child starts with SIGPIPE ignored (writes get EPIPE)
  int timeout_s = 60;
  std::string binary = MLAPLAN_BINARY;  ///< the executable run: the built mla-plan, or a copy of it
  bool unprivileged = false;            ///< run as the user nobody when the tests run as root (unprivileged.hpp)
};

inline std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

inline fs::path scratch() {
  const auto dir = fs::temp_directory_path() / ("mlaplan-e2e-files-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  return dir;
}

inline fs::path write_file(const std::string& name, const std::string& text) {
  const auto p = scratch() / name;
  std::ofstream(p, std::ios::binary) << text;
  return p;
}

inline std::string cfg(const std::string& rel) { return std::string(MLAPLAN_SOURCE_DIR) + "/configs/" + rel; }

/// Runs the binary with `args`.
inline Run run(const std::vector<std::string>& args, const RunOptions& o = {}) {
  static int counter = 0;
  const auto dir = fs::temp_directory_path() / ("mlaplan-e2e-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const auto out_path = dir / ("out" + std::to_string(counter));
  const auto err_path = dir / ("err" + std::to_string(counter++));
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  int pipe_fds[2] = {-1, -1};
  if (o.stdout_closed_pipe) {
    REQUIRE(::pipe(pipe_fds) == 0);
    // The read end is closed before the child starts: its first write fails (EPIPE / SIGPIPE).
    ::close(pipe_fds[0]);
    pipe_fds[0] = -1;
    posix_spawn_file_actions_adddup2(&fa, pipe_fds[1], 1);
    posix_spawn_file_actions_addclose(&fa, pipe_fds[1]);
  } else {
    const std::string target = o.stdout_path.empty() ? out_path.string() : o.stdout_path;
    posix_spawn_file_actions_addopen(&fa, 1, target.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  }
  posix_spawn_file_actions_addopen(&fa, 2, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&fa, 0, o.stdin_path.c_str(), O_RDONLY, 0);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t def;
  sigemptyset(&def);
  if (o.ignore_sigpipe) {
    // Ignored dispositions survive exec: ignore it here around the spawn only.
  } else {
    sigaddset(&def, SIGPIPE);
    posix_spawnattr_setsigdefault(&attr, &def);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF);
  }
  std::vector<std::string> argv_s = o.unprivileged ? unprivileged::command_prefix() : std::vector<std::string>{};
  argv_s.push_back(o.binary);
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  const std::string program = argv_s.front();
  std::vector<char*> argv;
  for (auto& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_s;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string kv = *e;
    const bool replaced = std::any_of(o.env_extra.begin(), o.env_extra.end(), [&](const std::string& x) {
      return kv.compare(0, x.find('=') + 1, x, 0, x.find('=') + 1) == 0;
    });
    if (!replaced) env_s.push_back(kv);
  }
  env_s.insert(env_s.end(), o.env_extra.begin(), o.env_extra.end());
  std::vector<char*> envp;
  for (auto& e : env_s) envp.push_back(e.data());
  envp.push_back(nullptr);
  pid_t pid = 0;
  Run r;
  struct sigaction old_pipe {};
  if (o.ignore_sigpipe) {
    struct sigaction ign {};
    ign.sa_handler = SIG_IGN;
    sigaction(SIGPIPE, &ign, &old_pipe);
  }
  const int spawned = posix_spawn(&pid, program.c_str(), &fa, &attr, argv.data(), envp.data());
  if (o.ignore_sigpipe) sigaction(SIGPIPE, &old_pipe, nullptr);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  if (pipe_fds[1] >= 0) ::close(pipe_fds[1]);
  if (spawned != 0) FAIL("could not start " << program);
  int status = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(o.timeout_s);
  while (true) {
    const pid_t w = ::waitpid(pid, &status, WNOHANG);
    if (w == pid) break;
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &status, 0);
      r.timed_out = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  r.code = r.timed_out ? -1 : WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  if (!o.stdout_closed_pipe && o.stdout_path.empty()) r.out = slurp(out_path);
  r.err = slurp(err_path);
  return r;
}

inline Run run(const std::vector<std::string>& args, const std::vector<std::string>& env_extra) {
  RunOptions o;
  o.env_extra = env_extra;
  return run(args, o);
}

}  // namespace e2e
