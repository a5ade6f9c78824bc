#pragma once
// What the fuzz targets do on a bug: fail() prints why, then traps, so libFuzzer and the
// replay driver both stop there with the message on stderr.

#include <cstdio>
#include <string>

namespace mlaplan::fuzz {

[[noreturn]] inline void fail(const std::string& why) {
  std::fprintf(stderr, "fuzz: BUG: %s\n", why.c_str());
  std::fflush(stderr);
  __builtin_trap();
}

}  // namespace mlaplan::fuzz
