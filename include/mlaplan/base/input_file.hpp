#pragma once
// Input files: a config.json, report's --verify-json / --bench-json files and the file of
// --context-lens @FILE. Only a regular file is read (standard input, `@-`, only when named): a FIFO, a socket or a device is refused before it is opened (so nothing blocks or
// streams without end), and again after it is opened (a path swapped between the two calls). At
// most a limit of bytes is read. Every failure has its own cause in the message (a missing file,
// a symbolic-link loop, a path too long, a permission error, a component that is not a
// directory, a read error), and every failure is Error(invalid_config): exit 2.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace mlaplan {

/// How one kind of input file is named in its messages and how large it may be.
struct InputFileRules {
  std::string label;           ///< starts every message: "" (a config) or "--verify-json: "
  std::int64_t max_bytes = 0;  ///< ConfigLimits::max_file_bytes, ResultLimits::max_file_bytes
  std::string limit_name;      ///< in the size message: "ConfigLimits::max_file_bytes"
  std::string size_hint;       ///< ends the size message: "a model config.json is a few KiB"
};

/// The whole of the regular file `path`, at most rules.max_bytes bytes. The path is stat()ed
/// (following symbolic links) and refused unless it is a regular file; then it is opened with
/// O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY and read through read_input_fd(). Throws
/// Error(invalid_config): "LABEL cannot read 'PATH': it is a FIFO (named pipe); only a regular
/// file is read", "... too many levels of symbolic links (a symbolic-link loop)", "LABEL 'PATH' is
/// larger than 1 MiB (...)".
std::string read_input_file(const std::string& path, const InputFileRules& rules);

/// The whole of the open descriptor `fd` (not closed here), which must be a regular file by
/// fstat(), at most rules.max_bytes bytes; `path` names it in messages. Throws as
/// read_input_file().
std::string read_input_fd(int fd, const std::string& path, const InputFileRules& rules);

/// Everything readable from `fd` (not closed here) up to its end, whatever it is (a pipe, a
/// terminal, a file): standard input when the user names it (`@-`). At most rules.max_bytes
/// bytes; the read blocks as a read of standard input does. `name` names it unquoted in messages
/// ("standard input"). Throws Error(invalid_config): "LABEL cannot read standard input: read
/// failed: ...", "LABEL standard input is larger than 64 MiB (...)".
std::string read_input_stream(int fd, const std::string& name, const InputFileRules& rules);

/// What a file of this st_mode is, for messages: "a FIFO (named pipe)", "a socket", "a character
/// device", "a block device", "a directory", "a symbolic link", "a regular file", "not a regular
/// file" (anything else).
std::string_view file_type_name(unsigned mode);

/// The cause of a failed stat(), open() or read() with this errno, for messages: "no such file or
/// directory", "too many levels of symbolic links (a symbolic-link loop)", "permission denied",
/// "a component of the path is not a directory", ...; strerror() for the others.
std::string file_error_cause(int err, std::string_view path);

/// An open file descriptor, closed on every way out of the scope that holds it.
class FileDescriptor {
 public:
  explicit FileDescriptor(int fd) : fd_(fd) {}
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  ~FileDescriptor();
  int get() const { return fd_; }

 private:
  int fd_;
};

/// The first NUL byte of a text: its offset from the start (0-based) and its line (1-based).
struct NulByte {
  std::size_t offset = 0;
  std::size_t line = 1;
};
std::optional<NulByte> find_nul_byte(std::string_view text);

/// "NUL byte at byte offset 1234 (line 56)": the part of a message that locates it.
std::string describe_nul_byte(const NulByte& nul);

/// Where JSON text first nests deeper than `max_depth` (a '[' or '{' outside strings past that
/// many open ones): its byte offset (0-based) and line (1-based), or nothing. Scanned before a
/// recursive parser sees the text, so that a 100,000-deep file never reaches recursive code.
struct TextPosition {
  std::size_t offset = 0;
  std::size_t line = 1;
};
std::optional<TextPosition> find_nesting_past(std::string_view text, int max_depth);

}  // namespace mlaplan
