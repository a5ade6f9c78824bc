#pragma once
// The project's one error type. Library code throws mlaplan::Error; only the CLI's error
// boundary turns it into a message on stderr and an exit code (docs/cli.md, "Exit codes").

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

namespace mlaplan {

/// What went wrong, as the exit code a script sees. Values are the contract of docs/cli.md.
enum class ErrorKind : int {
  usage = 1,          ///< unknown flag, bad flag value
  invalid_config = 2, ///< unreadable file, not JSON, wrong types, violates the model's rules
  unsupported = 3,    ///< valid config the sparse-MLA backend cannot run on the chosen target
  does_not_fit = 4,   ///< KV cache needed exceeds the memory budget
  verify_failed = 5,  ///< GPU verification ran and failed
  no_gpu = 6,         ///< built without CUDA, no device, driver too old
  output = 7,         ///< stdout or an output file could not be written (full disk, closed pipe)
  internal = 70,      ///< a bug in mla-plan
};

/// Exit code of an error kind.
constexpr int exit_code(ErrorKind k) { return static_cast<int>(k); }

/// Combines exit codes the way `check` does over many files: 70 beats everything, otherwise the
/// highest code wins.
constexpr int combine_exit_codes(int a, int b) {
  if (a == 70 || b == 70) return 70;
  return a > b ? a : b;
}

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
  ErrorKind kind() const noexcept { return kind_; }

 private:
  ErrorKind kind_;
};

/// Shorthands for the common kinds.
[[noreturn]] void throw_usage(const std::string& message);
[[noreturn]] void throw_config(const std::string& message);
[[noreturn]] void throw_unsupported(const std::string& message);
[[noreturn]] void throw_internal(const std::string& message);
[[noreturn]] void throw_output(const std::string& message);

// ---- checked 64-bit arithmetic: every size derived from user input goes through these ----

/// a + b, or throws Error(kind) naming `what` when the result does not fit in int64.
std::int64_t checked_add(std::int64_t a, std::int64_t b, std::string_view what,
                         ErrorKind kind = ErrorKind::invalid_config);
/// a * b, or throws Error(kind) naming `what` when the result does not fit in int64.
std::int64_t checked_mul(std::int64_t a, std::int64_t b, std::string_view what,
                         ErrorKind kind = ErrorKind::invalid_config);
/// ceil(a / b) for a >= 0, b > 0.
constexpr std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return a / b + (a % b != 0 ? 1 : 0); }
/// round a up to a multiple of b (a >= 0, b > 0), overflow-checked.
std::int64_t checked_round_up(std::int64_t a, std::int64_t b, std::string_view what,
                              ErrorKind kind = ErrorKind::invalid_config);

}  // namespace mlaplan
