#include "output/output.hpp"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "mlaplan/base/error.hpp"
#include "mlaplan/base/input_file.hpp"
#include "mlaplan/base/text.hpp"

namespace mlaplan::cli {

FdOutputBuf::FdOutputBuf(int fd) : fd_(fd) { setp(buf_.data(), buf_.data() + buf_.size()); }

FdOutputBuf::~FdOutputBuf() { (void)flush_buffer(); }

bool FdOutputBuf::write_all(const char* p, std::size_t n) {
  if (errno_ != 0) return false;
  while (n > 0) {
    const ssize_t w = ::write(fd_, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      errno_ = errno != 0 ? errno : EIO;
      return false;
    }
    if (w == 0) {
      errno_ = EIO;
      return false;
    }
    p += w;
    n -= static_cast<std::size_t>(w);
  }
  return true;
}

bool FdOutputBuf::flush_buffer() {
  const auto n = static_cast<std::size_t>(pptr() - pbase());
  setp(buf_.data(), buf_.data() + buf_.size());
  return n == 0 ? errno_ == 0 : write_all(buf_.data(), n);
}

FdOutputBuf::int_type FdOutputBuf::overflow(int_type ch) {
  if (!flush_buffer()) return traits_type::eof();
  if (traits_type::eq_int_type(ch, traits_type::eof())) return traits_type::not_eof(ch);
  *pptr() = traits_type::to_char_type(ch);
  pbump(1);
  return ch;
}

std::streamsize FdOutputBuf::xsputn(const char* s, std::streamsize n) {
  if (errno_ != 0 || n <= 0) return 0;
  const auto room = static_cast<std::streamsize>(epptr() - pptr());
  if (n <= room) {
    std::memcpy(pptr(), s, static_cast<std::size_t>(n));
    pbump(static_cast<int>(n));
    return n;
  }
  if (!flush_buffer()) return 0;
  if (n < static_cast<std::streamsize>(buf_.size())) {
    std::memcpy(pptr(), s, static_cast<std::size_t>(n));
    pbump(static_cast<int>(n));
    return n;
  }
  return write_all(s, static_cast<std::size_t>(n)) ? n : 0;
}

int FdOutputBuf::sync() { return flush_buffer() ? 0 : -1; }

namespace {

[[noreturn]] void fail_write(const std::string& flag, const std::string& path, int cause, const char* detail = "") {
  throw_output(flag + ": cannot write " + mlaplan::quoted(path, kQuotedPathMaxBytes) + ": " + std::strerror(cause) +
               detail);
}

/// The temporary file of write_file_whole(): removed on destruction unless released.
class TempFile {
 public:
  TempFile(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  ~TempFile() {
    if (fd_ >= 0) ::close(fd_);
    if (!path_.empty()) ::unlink(path_.c_str());
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  int fd() const { return fd_; }
  const std::string& path() const { return path_; }
  /// Closes the descriptor; false (errno set) when close reports a deferred write error.
  bool close() {
    const int fd = fd_;
    fd_ = -1;
    return ::close(fd) == 0;
  }
  void release() { path_.clear(); }

 private:
  std::string path_;
  int fd_;
};

/// The path a write to `path` ends up at: `path` itself, or, when it is a symbolic link, what the
/// link names, followed link after link (a relative link from the link's directory) as open()
/// would, also when the last one names nothing yet (a dangling link: the file it names is
/// created, the link stays). Only the last component is resolved: rename() follows the links in
/// the directories above it. ELOOP after 40 links, as the kernel's limit.
std::string final_target(const std::string& path, const std::string& flag) {
  namespace fs = std::filesystem;
  std::string p = path;
  for (int hops = 0; hops <= 40; ++hops) {
    struct stat st {};
    if (::lstat(p.c_str(), &st) != 0) {
      if (errno == ENOENT) return p;  // nothing there (yet): the file is created at p
      fail_write(flag, path, errno);
    }
    if (!S_ISLNK(st.st_mode)) return p;
    std::vector<char> buf(static_cast<std::size_t>(st.st_size > 0 ? st.st_size : 255) + 1);
    const ssize_t n = ::readlink(p.c_str(), buf.data(), buf.size());
    if (n < 0) fail_write(flag, path, errno);
    if (static_cast<std::size_t>(n) >= buf.size()) fail_write(flag, path, ENAMETOOLONG);  // changed under us
    const fs::path link(std::string(buf.data(), static_cast<std::size_t>(n)));
    const fs::path here(p);
    p = link.is_absolute() || !here.has_parent_path() ? link.string() : (here.parent_path() / link).string();
  }
  fail_write(flag, path, ELOOP);
}

/// The name of the temporary file next to `target`: ".NAME.tmp-XXXXXX", NAME cut short where the
/// whole would pass the directory's longest name (NAME_MAX, 255 on Linux file systems), so that
/// any name that can be the target's can have its temporary file.
std::string temporary_pattern(const std::filesystem::path& dir, const std::string& name) {
  constexpr std::size_t kAround = 1 + 11;  // "." before, ".tmp-XXXXXX" after
  long name_max = ::pathconf(dir.c_str(), _PC_NAME_MAX);
  if (name_max <= 0) name_max = 255;
  const std::size_t room =
      static_cast<std::size_t>(name_max) > kAround ? static_cast<std::size_t>(name_max) - kAround : 0;
  return (dir / ("." + name.substr(0, std::min(name.size(), room)) + ".tmp-XXXXXX")).string();
}

}  // namespace

void write_file_whole(const std::string& path, std::string_view bytes, const std::string& flag) {
  namespace fs = std::filesystem;
  if (path.empty()) throw_usage(flag + ": the file name is empty");
  // The file the bytes end up in: a symbolic link is followed, as opening the path would, a
  // dangling one too (the link stays; the file it names is written).
  const std::string target = final_target(path, flag);
  mode_t mode = 0;
  struct stat st {};
  if (::stat(target.c_str(), &st) == 0) {
    if (!S_ISREG(st.st_mode)) {
      throw_output(flag + ": cannot write " + mlaplan::quoted(path, kQuotedPathMaxBytes) + ": it is " +
                   std::string(file_type_name(st.st_mode)) + "; give the path of a file");
    }
    mode = st.st_mode & 07777;
  } else if (errno != ENOENT) {
    fail_write(flag, path, errno);
  } else {
    const mode_t mask = ::umask(0);
    ::umask(mask);
    mode = 0666 & ~mask;
  }
  const fs::path target_path(target);
  const fs::path dir = target_path.has_parent_path() ? target_path.parent_path() : fs::path(".");
  const std::string pattern = temporary_pattern(dir, target_path.filename().string());
  std::vector<char> name(pattern.begin(), pattern.end());
  name.push_back('\0');
  const int fd = ::mkstemp(name.data());
  if (fd < 0) fail_write(flag, path, errno);
  TempFile tmp(std::string(name.data()), fd);
  const char* p = bytes.data();
  std::size_t left = bytes.size();
  while (left > 0) {
    const ssize_t w = ::write(tmp.fd(), p, left);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) fail_write(flag, path, w < 0 ? errno : EIO, " (the earlier file, if any, is untouched)");
    p += w;
    left -= static_cast<std::size_t>(w);
  }
  if (::fchmod(tmp.fd(), mode) != 0 || ::fsync(tmp.fd()) != 0 || !tmp.close()) {
    fail_write(flag, path, errno, " (the earlier file, if any, is untouched)");
  }
  if (::rename(tmp.path().c_str(), target.c_str()) != 0) {
    fail_write(flag, path, errno, " (the earlier file, if any, is untouched)");
  }
  tmp.release();
}

}  // namespace mlaplan::cli
