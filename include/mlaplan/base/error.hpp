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
  usage = 1,           ///< unknown flag, bad flag value
  invalid_config = 2,  ///< unreadable file, not JSON, wrong types, violates the model's rules
  unsupported = 3,     ///< valid config the sparse-MLA backend cannot run on the chosen target
  does_not_fit = 4,    ///< KV cache needed exceeds the memory budget
  verify_failed = 5,   ///< GPU verification ran and failed
  no_gpu = 6,          ///< built without CUDA, no device, driver too old
  output = 7,          ///< stdout or an output file could not be written (full disk, closed pipe)
  internal = 70,       ///< a bug in mla-plan
};

/// Exit code of an error kind.
constexpr int exit_code(ErrorKind k) { return static_cast<int>(k); }

/// How severe an exit code is, for combining: a bug (70), output that could not be written (7),
/// an invalid config or file (2), a bad flag value (1), a verification that failed (5), no GPU to
/// check on (6), a backend that cannot run it (3), a plan that does not fit (4), success (0).
/// The input's own faults rank above what a valid input's plan says of it, so that over many
/// files an invalid config is never hidden behind another file's unsupported or does-not-fit.
constexpr int exit_code_severity(int code) {
  switch (code) {
    case 0: return 0;
    case 4: return 1;
    case 3: return 2;
    case 6: return 3;
    case 5: return 4;
    case 1: return 5;
    case 2: return 6;
    case 7: return 7;
    case 70: return 9;
    default: return 8;  // not a code of mla-plan's: above all but a bug
  }
}

/// Combines exit codes the way `check` does over many files (and a command with a failed
/// output): the more severe wins (exit_code_severity), e.g. 2 over 3 and 4, 3 over 4.
constexpr int combine_exit_codes(int a, int b) { return exit_code_severity(b) > exit_code_severity(a) ? b : a; }

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
