#pragma once
// Where mla-plan's output goes, and how a failure to write it becomes an error (exit 7):
// - standard output through a buffered std::streambuf over a file descriptor that remembers why a
//   write failed (errno), so that the error boundary can say "No space left on device" or "Broken
//   pipe" instead of guessing, and so that a failed write is never silent;
// - a file (report's -o) written whole or not at all.

#include <array>
#include <streambuf>
#include <string>
#include <string_view>

namespace mlaplan::cli {

/// A stream buffer that any output stream of run_cli() may use to report why it failed: the CLI's
/// output check asks the stream's buffer for it.
class WriteErrorSource {
 public:
  virtual ~WriteErrorSource() = default;
  /// errno of the first failed write, 0 when none failed.
  virtual int write_errno() const = 0;
};

/// Buffers writes to `fd` (64 KiB) and writes them with write(2), retrying short writes and EINTR.
/// After the first failure every further write fails too (the stream goes bad and stays bad).
class FdOutputBuf final : public std::streambuf, public WriteErrorSource {
 public:
  explicit FdOutputBuf(int fd);
  ~FdOutputBuf() override;
  FdOutputBuf(const FdOutputBuf&) = delete;
  FdOutputBuf& operator=(const FdOutputBuf&) = delete;
  int write_errno() const override { return errno_; }

 protected:
  int_type overflow(int_type ch) override;
  std::streamsize xsputn(const char* s, std::streamsize n) override;
  int sync() override;

 private:
  bool flush_buffer();
  bool write_all(const char* p, std::size_t n);
  int fd_;
  int errno_ = 0;
  std::array<char, 65536> buf_{};
};

/// Writes `bytes` to `path` whole or not at all: into a new temporary file in the target's
/// directory (".NAME.tmp-XXXXXX", NAME shortened where the whole would pass the directory's
/// NAME_MAX), flushed to disk, then renamed over the target. A symbolic link is followed, link
/// after link, also when the last names no file yet: the link stays and the file it names is
/// written (created, for a dangling link). On any failure the temporary file is removed, the
/// earlier file at `path` is untouched, and Error(output) names `flag`, the path and the cause. A
/// target that exists and is not a regular file (a directory, a FIFO, a device) is refused before
/// anything is written. The new file gets the mode of the file it replaces, or 0666 less the umask.
void write_file_whole(const std::string& path, std::string_view bytes, const std::string& flag);

}  // namespace mlaplan::cli
