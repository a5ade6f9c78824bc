#pragma once
// Permission cases that run as root too. Mode 000 denies nothing to root (CAP_DAC_OVERRIDE), and
// CI runs as root: there, the step that must meet "permission denied" runs as the user nobody
// (uid and gid 65534, no supplementary groups). As any other user it runs as it is.
// - in-process (unit tests): call() runs a function in a child process that has dropped to nobody;
// - a spawned mla-plan (end-to-end tests): command_prefix() is setpriv's argument list.

#include <grp.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <optional>
#include <string>
#include <vector>

namespace unprivileged {

inline constexpr unsigned kNobody = 65534;
inline constexpr const char* kSetpriv = "/usr/bin/setpriv";

/// Whether this process must drop its privileges for a permission check to apply.
inline bool needed() { return ::geteuid() == 0; }

/// fn() (returning a std::string, never throwing) as nobody: in a child process when this one is
/// root, here otherwise. nullopt when the child could not drop its privileges or run.
template <class F>
std::optional<std::string> call(F&& fn) {
  if (!needed()) return fn();
  int fds[2] = {-1, -1};
  if (::pipe(fds) != 0) return std::nullopt;
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    return std::nullopt;
  }
  if (pid == 0) {
    ::close(fds[0]);
    if (::setgroups(0, nullptr) != 0 || ::setresgid(kNobody, kNobody, kNobody) != 0 ||
        ::setresuid(kNobody, kNobody, kNobody) != 0) {
      ::_exit(3);
    }
    const std::string s = fn();
    std::size_t done = 0;
    while (done < s.size()) {
      const ssize_t n = ::write(fds[1], s.data() + done, s.size() - done);
      if (n <= 0) ::_exit(4);
      done += static_cast<std::size_t>(n);
    }
    ::_exit(0);
  }
  ::close(fds[1]);
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) out.append(buf, static_cast<std::size_t>(n));
  ::close(fds[0]);
  int status = 0;
  if (::waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) return std::nullopt;
  return out;
}

/// The arguments that run a program as nobody when this process is root (setpriv, util-linux):
/// empty otherwise.
inline std::vector<std::string> command_prefix() {
  if (!needed()) return {};
  return {kSetpriv, "--reuid=65534", "--regid=65534", "--clear-groups", "--"};
}

}  // namespace unprivileged
