// Replays fuzz inputs without libFuzzer: every file named on the command line, and every file under
// every directory named there (recursively, in sorted order), goes once through the target's
// LLVMFuzzerTestOneInput. A bug in the target traps (fuzz/fuzz_check.hpp), failing the test.
// Usage: fuzz_<target>_replay [--max-allocations=N] PATH...
//
// --max-allocations=N: an input whose run makes more than N heap allocations (operator new) is a
// failure too, naming the input and the count; the most any input made is printed. A fuzz target
// runs millions of inputs under AddressSanitizer, whose allocator is most of its cost: a change
// that multiplies the allocations of one input divides the target's executions per second (the
// budgets in fuzz/CMakeLists.txt, docs/fuzzing.md). Counted by the unit tests' operator new
// (tests/heap_counter.hpp), in builds without a sanitizer only (where the sanitizer's own
// operator new stays in place, the budget is not checked).

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <system_error>
#include <vector>

#include "heap_counter.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  std::uint64_t max_allocations = 0;  // 0: no budget
  int first = 1;
  const std::string budget_flag = "--max-allocations=";
  if (argc > 1 && std::string(argv[1]).rfind(budget_flag, 0) == 0) {
    max_allocations = std::strtoull(argv[1] + budget_flag.size(), nullptr, 10);
    first = 2;
  }
  if (argc <= first) {
    std::fprintf(stderr, "usage: %s [--max-allocations=N] FILE_OR_DIR...\n", argv[0]);
    return 2;
  }
  std::vector<fs::path> files;
  for (int i = first; i < argc; ++i) {
    const fs::path p = argv[i];
    std::error_code ec;
    if (fs::is_directory(p, ec)) {
      for (const auto& e : fs::recursive_directory_iterator(p)) {
        if (e.is_regular_file()) files.push_back(e.path());
      }
    } else if (fs::is_regular_file(p, ec)) {
      files.push_back(p);
    } else {
      std::fprintf(stderr, "replay: '%s' is neither a file nor a directory\n", p.c_str());
      return 2;
    }
  }
  std::sort(files.begin(), files.end());
  if (files.empty()) {
    std::fprintf(stderr, "replay: no inputs found\n");
    return 2;
  }
  std::uint64_t most = 0;
  std::string most_file;
  for (const auto& f : files) {
    std::ifstream in(f, std::ios::binary);
    if (!in) {
      std::fprintf(stderr, "replay: cannot read '%s'\n", f.c_str());
      return 2;
    }
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::fprintf(stderr, "replay: %s (%zu bytes)\n", f.c_str(), bytes.size());
    const heap_counter::Scope scope;
    (void)LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
    const std::uint64_t made = scope.totals().allocations;
    if (made > most) {
      most = made;
      most_file = f.string();
    }
  }
  if (heap_counter::counting()) {
    std::printf("replay: at most %llu heap allocations for one input (%s)\n", static_cast<unsigned long long>(most),
                most_file.c_str());
    if (max_allocations > 0 && most > max_allocations) {
      std::fprintf(stderr,
                   "replay: %s made %llu heap allocations, more than the budget of %llu (--max-allocations): a "
                   "fuzz run would slow down as much\n",
                   most_file.c_str(), static_cast<unsigned long long>(most),
                   static_cast<unsigned long long>(max_allocations));
      return 1;
    }
  }
  std::printf("replay: %zu inputs, no bug\n", files.size());
  return 0;
}
