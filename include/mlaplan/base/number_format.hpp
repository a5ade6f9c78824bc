#pragma once
// Numbers as text, the same whatever the process's C locale (setlocale) or C++ global locale
// (std::locale::global): every number mla-plan prints goes through these or through integer
// formatting that has no locale, so output is byte-identical everywhere (docs/robustness.md).

#include <cstdint>
#include <string>

namespace mlaplan {

/// printf("%.*f", digits, v) as in the "C" locale: "0.90", "1024", "nan", "-inf". digits 0..17.
std::string format_fixed(double v, int digits);
/// printf("%g", v) as in the "C" locale: "0.9", "1e+30", "79.5".
std::string format_general(double v);
/// The shortest text that reads back as exactly `v` (std::to_chars without a precision):
/// "0.9", "100", "1e+30". For values that go back on a command line.
std::string format_shortest(double v);
/// printf("%.*e", digits, v) as in the "C" locale: "1.20e-04". digits 0..17.
std::string format_scientific(double v, int digits);
/// An integer with thousands separators: "1,048,576", "-12,345" (Python's f"{n:,}").
std::string format_grouped(std::int64_t v);
/// Bytes in GiB (2^30) with `digits` decimals and the unit: "59.83 GiB".
std::string format_gib(std::int64_t bytes, int digits = 2);

}  // namespace mlaplan
