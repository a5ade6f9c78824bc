#include "mlaplan/base/error.hpp"

#include <string>

namespace mlaplan {

void throw_usage(const std::string& message) { throw Error(ErrorKind::usage, message); }
void throw_config(const std::string& message) { throw Error(ErrorKind::invalid_config, message); }
void throw_unsupported(const std::string& message) { throw Error(ErrorKind::unsupported, message); }
void throw_internal(const std::string& message) { throw Error(ErrorKind::internal, message); }
void throw_output(const std::string& message) { throw Error(ErrorKind::output, message); }

std::int64_t checked_add(std::int64_t a, std::int64_t b, std::string_view what, ErrorKind kind) {
  std::int64_t r = 0;
  if (__builtin_add_overflow(a, b, &r)) {
    throw Error(kind, std::string(what) + " overflows 64-bit arithmetic (" + std::to_string(a) + " + " +
                          std::to_string(b) + ")");
  }
  return r;
}

std::int64_t checked_mul(std::int64_t a, std::int64_t b, std::string_view what, ErrorKind kind) {
  std::int64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r)) {
    throw Error(kind, std::string(what) + " overflows 64-bit arithmetic (" + std::to_string(a) + " x " +
                          std::to_string(b) + ")");
  }
  return r;
}

std::int64_t checked_round_up(std::int64_t a, std::int64_t b, std::string_view what, ErrorKind kind) {
  if (b <= 0 || a < 0) throw_internal("checked_round_up(" + std::to_string(a) + ", " + std::to_string(b) + ")");
  return checked_mul(ceil_div(a, b), b, what, kind);
}

}  // namespace mlaplan
