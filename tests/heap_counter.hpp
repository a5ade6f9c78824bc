#pragma once
// The heap work of a piece of code, for tests that bound work instead of wall-clock time: a bound
// on allocations and bytes holds on a loaded machine and catches the same explosions (a limit that
// lets the work grow with the product of two sizes). Counted by the unit tests' replacement of
// operator new (heap_counter.cpp); in sanitizer builds the sanitizer's allocator stays in place and
// nothing is counted (counting() is false).

#include <cstdint>

namespace heap_counter {

struct Totals {
  std::uint64_t allocations = 0;  ///< operator new calls
  std::uint64_t bytes = 0;        ///< bytes requested, in all
  std::uint64_t peak_bytes = 0;   ///< most bytes live at once above what was live at the start
};

/// Whether this build counts (false under a sanitizer).
bool counting();

/// Counts from its construction; totals() is what the code since then did.
class Scope {
 public:
  Scope();
  Totals totals() const;

 private:
  std::uint64_t allocations_ = 0;
  std::uint64_t bytes_ = 0;
  std::uint64_t live_at_start_ = 0;
};

}  // namespace heap_counter
