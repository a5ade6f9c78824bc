// Input files: only regular files are read, never more than a limit, never by a call that can
// block (include/mlaplan/base/input_file.hpp).

#include "mlaplan/base/input_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <climits>
#include <cstring>

#include "mlaplan/base/error.hpp"
#include "mlaplan/base/text.hpp"

namespace mlaplan {

namespace {

/// A path in a message: quoted, cut only past kQuotedPathMaxBytes.
std::string qpath(const std::string& path) { return mlaplan::quoted(path, kQuotedPathMaxBytes); }

[[noreturn]] void fail(const InputFileRules& rules, const std::string& path, const std::string& what) {
  throw_config(rules.label + "cannot read " + qpath(path) + ": " + what);
}

/// A size limit for a message: "1 MiB (1048576 bytes" for whole MiB, else "256 bytes", so that a
/// small limit never reads as 0 MiB.
std::string limit_text(std::int64_t bytes) {
  constexpr std::int64_t kMiB = 1 << 20;
  if (bytes >= kMiB && bytes % kMiB == 0) {
    return std::to_string(bytes / kMiB) + " MiB (" + std::to_string(bytes) + " bytes, ";
  }
  return std::to_string(bytes) + " bytes (";
}

/// Refuses anything but a regular file, naming what it is.
void require_regular(unsigned mode, const InputFileRules& rules, const std::string& path) {
  if (S_ISREG(mode)) return;
  if (S_ISDIR(mode)) fail(rules, path, "it is a directory");
  fail(rules, path, "it is " + std::string(file_type_name(mode)) + "; only a regular file is read");
}

/// `shown`: the quoted path, or the name of a stream.
[[noreturn]] void too_large_shown(const InputFileRules& rules, const std::string& shown) {
  throw_config(rules.label + shown + " is larger than " + limit_text(rules.max_bytes) + rules.limit_name + "); " +
               rules.size_hint);
}

[[noreturn]] void too_large(const InputFileRules& rules, const std::string& path) {
  too_large_shown(rules, qpath(path));
}

/// Appends what `fd` holds to `text` until its end: `fail_read(errno)` for a failed read and
/// `too_big()` past rules.max_bytes, both of which throw.
template <typename Fail, typename TooLarge>
void read_all(int fd, std::string& text, const InputFileRules& rules, Fail fail_read, TooLarge too_big) {
  std::array<char, 65536> buf{};
  while (true) {
    const ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      fail_read(errno);  // throws
      return;
    }
    if (n == 0) break;
    text.append(buf.data(), static_cast<std::size_t>(n));
    // A file may grow after fstat(), and a file of /proc reports size 0: the limit is on what is read.
    if (static_cast<std::int64_t>(text.size()) > rules.max_bytes) too_big();
  }
}

/// The longest name (path component) of a path, in bytes.
std::size_t longest_name(std::string_view path) {
  std::size_t longest = 0, current = 0;
  for (char c : path) {
    current = c == '/' ? 0 : current + 1;
    if (current > longest) longest = current;
  }
  return longest;
}

}  // namespace

std::string_view file_type_name(unsigned mode) {
  if (S_ISREG(mode)) return "a regular file";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISLNK(mode)) return "a symbolic link";
  return "not a regular file";
}

std::string file_error_cause(int err, std::string_view path) {
  switch (err) {
    case ENOENT: return "no such file or directory";
    case ELOOP: return "too many levels of symbolic links (a symbolic-link loop)";
    case ENAMETOOLONG: {
      if (path.size() >= PATH_MAX) {
        return "the path is too long (" + std::to_string(path.size()) + " bytes; at most " +
               std::to_string(PATH_MAX - 1) + " are allowed)";
      }
      return "a name in the path is too long (" + std::to_string(longest_name(path)) + " bytes; at most " +
             std::to_string(NAME_MAX) + " are allowed)";
    }
    case EACCES: return "permission denied";
    case EPERM: return "operation not permitted";
    case ENOTDIR: return "a component of the path is not a directory";
    case EISDIR: return "it is a directory";
    case EIO: return "input/output error";
    case ENXIO: return "no such device or address";
    case ENODEV: return "no such device";
    case EMFILE:
    case ENFILE: return "too many open files";
    case ENOMEM: return "out of memory";
    case EOVERFLOW: return "the file is too large to be read";
    case EBADF: return "the file is not open for reading";
    default: return std::strerror(err);
  }
}

std::string read_input_fd(int fd, const std::string& path, const InputFileRules& rules) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) fail(rules, path, file_error_cause(errno, path));
  require_regular(st.st_mode, rules, path);
  if (st.st_size > rules.max_bytes) too_large(rules, path);
  std::string text;
  read_all(
      fd, text, rules, [&](int err) { fail(rules, path, "read failed: " + file_error_cause(err, path)); },
      [&] { too_large(rules, path); });
  return text;
}

std::string read_input_stream(int fd, const std::string& name, const InputFileRules& rules) {
  std::string text;
  read_all(
      fd, text, rules,
      [&](int err) {
        throw_config(rules.label + "cannot read " + name + ": read failed: " + file_error_cause(err, ""));
      },
      [&] { too_large_shown(rules, name); });
  return text;
}

std::string read_input_file(const std::string& path, const InputFileRules& rules) {
  // The system would read the path only up to its first NUL: another file.
  if (path.find('\0') != std::string::npos) fail(rules, path, "the path holds a NUL byte");
  if (path.empty()) fail(rules, path, "the path is empty");
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    const int err = errno;
    struct stat link {};
    if (err == ENOENT && ::lstat(path.c_str(), &link) == 0 && S_ISLNK(link.st_mode)) {
      fail(rules, path, "no such file or directory (a symbolic link to a missing file)");
    }
    fail(rules, path, file_error_cause(err, path));
  }
  // Before open(): opening a FIFO would wait for a writer, and opening a device can act on it.
  require_regular(st.st_mode, rules, path);
  const FileDescriptor fd(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY));
  if (fd.get() < 0) fail(rules, path, file_error_cause(errno, path));
  return read_input_fd(fd.get(), path, rules);
}

std::optional<NulByte> find_nul_byte(std::string_view text) {
  const auto offset = text.find('\0');
  if (offset == std::string_view::npos) return std::nullopt;
  NulByte nul;
  nul.offset = offset;
  for (std::size_t i = 0; i < offset; ++i) {
    if (text[i] == '\n') ++nul.line;
  }
  return nul;
}

std::string describe_nul_byte(const NulByte& nul) {
  return "NUL byte at byte offset " + std::to_string(nul.offset) + " (line " + std::to_string(nul.line) + ")";
}

FileDescriptor::~FileDescriptor() {
  if (fd_ >= 0) ::close(fd_);
}

std::optional<TextPosition> find_nesting_past(std::string_view text, int max_depth) {
  int depth = 0;
  bool in_string = false;
  bool escaped = false;
  std::size_t line = 1;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\n') ++line;
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) return TextPosition{i, line};
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return std::nullopt;
}

}  // namespace mlaplan
