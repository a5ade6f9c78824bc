// Text from the input made inert: printable(), quoted(), is_printable_line() (include/mlaplan/base/text.hpp).

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <regex>
#include <string>
#include <cstdint>
#include <limits>
#include <string>

#include "mlaplan/base/number_format.hpp"
#include "mlaplan/base/text.hpp"

using namespace std::string_literals;
using mlaplan::is_printable_line;
using mlaplan::printable;
using mlaplan::quoted;

TEST_CASE("printable keeps text and escapes every control", "[text]") {
  CHECK(printable("bfloat16") == "bfloat16");
  CHECK(printable("caf\xc3\xa9 \xe2\x86\x92 \xf0\x9f\x98\x80") == "caf\xc3\xa9 \xe2\x86\x92 \xf0\x9f\x98\x80");
  CHECK(printable("a\nb\rc\td") == "a\\nb\\rc\\td");
  CHECK(printable("bf\0\x1b[31mRED\n::error::x"s) == "bf\\x00\\x1b[31mRED\\n::error::x");
  CHECK(printable("\x7f") == "\\x7f");
  // C1 control U+0085 (next line), line separator, right-to-left override, BOM
  CHECK(printable("\xc2\x85|\xe2\x80\xa8|\xe2\x80\xae|\xef\xbb\xbf") == "\\u{85}|\\u{2028}|\\u{202e}|\\u{feff}");
  // invalid UTF-8: stray continuation, overlong, surrogate, past U+10FFFF, cut short
  CHECK(printable("\x80") == "\\x80");
  CHECK(printable("\xc0\xaf") == "\\xc0\\xaf");
  CHECK(printable("\xed\xa0\x80") == "\\xed\\xa0\\x80");
  CHECK(printable("\xf4\x90\x80\x80") == "\\xf4\\x90\\x80\\x80");
  CHECK(printable("ab\xe2\x86") == "ab\\xe2\\x86");
}

TEST_CASE("quoted bounds the length and escapes its own quotes", "[text]") {
  CHECK(mlaplan::quoted("fp8") == "'fp8'");
  CHECK(mlaplan::quoted("it's a\\b") == "'it\\'s a\\\\b'");
  CHECK(mlaplan::quoted("") == "''");
  const std::string long_value(1000, 'x');
  const std::string q = mlaplan::quoted(long_value, 10);
  CHECK(q == "'xxxxxxxxxx'... (1000 bytes)");
  // cut only at a character boundary: 3 x U+00E9 (2 bytes each) in 5 bytes shows 2 of them
  CHECK(mlaplan::quoted("\xc3\xa9\xc3\xa9\xc3\xa9", 5) == "'\xc3\xa9\xc3\xa9'... (6 bytes)");
  CHECK(mlaplan::quoted(long_value).size() < 100);
}

TEST_CASE("is_printable_line is the oracle printable() satisfies", "[text]") {
  CHECK(is_printable_line("mla-plan: error: --batch: '010x' is not an integer"));
  CHECK(is_printable_line("caf\xc3\xa9"));
  CHECK_FALSE(is_printable_line("a\nb"));
  CHECK_FALSE(is_printable_line("a\0b"s));
  CHECK_FALSE(is_printable_line("\x1b[0m"));
  CHECK_FALSE(is_printable_line("\xff"));
  CHECK_FALSE(is_printable_line("\xe2\x80\xae"));
  std::string all_bytes;
  for (int b = 0; b < 256; ++b) all_bytes += static_cast<char>(b);
  for (const std::string& s : {all_bytes, all_bytes + all_bytes.substr(0, 130), "\xf0\x9f"s}) {
    CHECK(is_printable_line(printable(s)));
    CHECK(is_printable_line(mlaplan::quoted(s, 300)));
  }
}

TEST_CASE("printable_lines keeps the lines and escapes inside each", "[text]") {
  CHECK(mlaplan::printable_lines("a\nb\n") == "a\nb\n");
  CHECK(mlaplan::printable_lines("x\x1b[31m\ny\r\n") == "x\\x1b[31m\ny\\r\n");
  CHECK(mlaplan::printable_lines("") == "");
  CHECK(mlaplan::printable_lines("\n\n") == "\n\n");
}

TEST_CASE("json_printable escapes what JSON allows raw but a terminal acts on", "[text]") {
  CHECK(mlaplan::json_printable("{\"a\": \"x\"}") == "{\"a\": \"x\"}");
  CHECK(mlaplan::json_printable("\"@t4\\u0000\x7f"
                                "1\"") == "\"@t4\\u0000\\u007f1\"");
  CHECK(mlaplan::json_printable("\"\xc2\x9b|\xe2\x80\xae|\xe2\x80\xa8|caf\xc3\xa9\"") ==
        "\"\\u009b|\\u202e|\\u2028|caf\xc3\xa9\"");
  const std::string out = mlaplan::json_printable("\"\x7f\xc2\x85\xef\xbb\xbf\"");
  CHECK(mlaplan::is_printable_line(out));
}

TEST_CASE("format_grouped and format_gib", "[text]") {
  CHECK(mlaplan::format_grouped(0) == "0");
  CHECK(mlaplan::format_grouped(999) == "999");
  CHECK(mlaplan::format_grouped(1000) == "1,000");
  CHECK(mlaplan::format_grouped(1048576) == "1,048,576");
  CHECK(mlaplan::format_grouped(-12345) == "-12,345");
  CHECK(mlaplan::format_grouped(std::numeric_limits<std::int64_t>::min()) == "-9,223,372,036,854,775,808");
  CHECK(mlaplan::format_gib(64246411784) == "59.83 GiB");
  CHECK(mlaplan::format_gib(3LL << 29, 1) == "1.5 GiB");
}

TEST_CASE("replace_all: every occurrence, left to right, not overlapping", "[text]") {
  CHECK(mlaplan::replace_all("got {d}. Please set {d}", "{d}", "bfloat16") == "got bfloat16. Please set bfloat16");
  CHECK(mlaplan::replace_all("aaa", "aa", "b") == "ba");
  CHECK(mlaplan::replace_all("no token here", "{n}", "8") == "no token here");
  CHECK(mlaplan::replace_all("{n}", "{n}", "") == "");
  CHECK(mlaplan::replace_all("abc", "", "x") == "abc");
}

// CTest runs each Catch test case by name (catch_discover_tests): a name holding ';' (a CMake list
// separator) or starting with '-' (read as an option) selects no test and passes without running.
TEST_CASE("test case names are ones ctest can run", "[text][tests]") {
  const std::filesystem::path root = std::filesystem::path(MLAPLAN_SOURCE_DIR) / "tests";
  const std::regex name(R"re(TEST_CASE\("([^"]*)")re");
  std::size_t seen = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(root)) {
    if (e.path().extension() != ".cpp") continue;
    std::ifstream in(e.path());
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    for (std::sregex_iterator it(text.begin(), text.end(), name), end; it != end; ++it) {
      const std::string n = (*it)[1];
      if (n.find("name(") != std::string::npos) continue;  // this file's pattern
      INFO(e.path().filename().string() << ": " << n);
      CHECK(n.find(';') == std::string::npos);
      CHECK((n.empty() || n[0] != '-'));
      ++seen;
    }
  }
  CHECK(seen > 300);
}

TEST_CASE("join_bounded quotes at most kMessageMaxItems items and counts the rest", "[text]") {
  using mlaplan::join_bounded;
  using mlaplan::kMessageMaxItems;
  CHECK(kMessageMaxItems == 16);
  CHECK(join_bounded(std::vector<std::int64_t>{}) == "");
  CHECK(join_bounded(std::vector<std::int64_t>{}, ", ", kMessageMaxItems, "none") == "none");
  CHECK(join_bounded(std::vector<std::int64_t>{1, 2, 4}) == "1, 2, 4");
  std::vector<std::int64_t> many;
  for (std::int64_t i = 0; i < 4096; ++i) many.push_back(i);
  const std::string s = join_bounded(many);
  CHECK(s == "0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, ... (4080 more)");
  // Exactly at the bound: nothing left out.
  many.resize(kMessageMaxItems);
  CHECK(join_bounded(many).find("more") == std::string::npos);
  many.push_back(16);
  CHECK_THAT(join_bounded(many), Catch::EndsWith(", 15, ... (1 more)"));
  CHECK(join_bounded(std::vector<std::string>{"a", "b", "c"}, "; or ", 2) == "a; or b; or ... (1 more)");
  // Only the items shown are built.
  std::size_t built = 0;
  const std::string lazy = join_bounded(std::size_t{1} << 40, [&built](std::size_t i) {
    ++built;
    return std::to_string(i);
  });
  CHECK(built == kMessageMaxItems);
  CHECK_THAT(lazy, Catch::EndsWith("... (1099511627760 more)"));
}
