#include "mlaplan/base/number_format.hpp"

#include <array>
#include <charconv>
#include <system_error>

#include "mlaplan/base/error.hpp"

namespace mlaplan {

namespace {

// std::to_chars never reads a locale; with a format and a precision it writes what printf does in
// the "C" locale. 400 characters hold any double in fixed notation with 17 digits.
template <class... Args>
std::string chars(double v, Args... args) {
  std::array<char, 400> buf{};
  const auto [end, ec] = std::to_chars(buf.data(), buf.data() + buf.size(), v, args...);
  if (ec != std::errc{}) throw_internal("number formatting: buffer too small");
  return std::string(buf.data(), end);
}

}  // namespace

std::string format_fixed(double v, int digits) {
  if (digits < 0 || digits > 17) throw_internal("format_fixed: digits " + std::to_string(digits));
  return chars(v, std::chars_format::fixed, digits);
}

std::string format_general(double v) { return chars(v, std::chars_format::general, 6); }

std::string format_shortest(double v) { return chars(v); }

std::string format_scientific(double v, int digits) {
  if (digits < 0 || digits > 17) throw_internal("format_scientific: digits " + std::to_string(digits));
  return chars(v, std::chars_format::scientific, digits);
}

std::string format_grouped(std::int64_t v) {
  // The magnitude as unsigned: -INT64_MIN does not fit an int64.
  const std::uint64_t mag = v < 0 ? 0 - static_cast<std::uint64_t>(v) : static_cast<std::uint64_t>(v);
  const std::string digits = std::to_string(mag);
  std::string o;
  o.reserve(digits.size() + digits.size() / 3 + 1);
  if (v < 0) o += '-';
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) o += ',';
    o += digits[i];
  }
  return o;
}

std::string format_gib(std::int64_t bytes, int digits) {
  return format_fixed(static_cast<double>(bytes) / 1073741824.0, digits) + " GiB";
}

}  // namespace mlaplan
