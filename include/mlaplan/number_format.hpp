#pragma once
// Numbers as text, the same whatever the process's C locale (setlocale) or C++ global locale
// (std::locale::global): every number mla-plan prints goes through these or through integer
// formatting that has no locale, so output is byte-identical everywhere (docs/robustness.md).

#include <string>

namespace mlaplan {

/// printf("%.*f", digits, v) as in the "C" locale: "0.90", "1024", "nan", "-inf". digits 0..17.
std::string format_fixed(double v, int digits);
/// printf("%g", v) as in the "C" locale: "0.9", "1e+30", "79.5".
std::string format_general(double v);
/// printf("%.*e", digits, v) as in the "C" locale: "1.20e-04". digits 0..17.
std::string format_scientific(double v, int digits);

}  // namespace mlaplan
