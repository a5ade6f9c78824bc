// --context-lens @FILE: the lengths one per line, comma-separated or both, with the inline list's
// limits; every error one line naming the file, the line and the value; a file that cannot be
// read is exit 2 as every input file (docs/cli.md, "--context-lens @FILE"). Standard input (@-)
// is tested end to end (tests/test_e2e_files.cpp).

#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli_run.hpp"
#include "flags/flag_values.hpp"
#include "mlaplan/base/error.hpp"
#include "mlaplan/base/limits.hpp"
#include "special_files.hpp"
#include "temp_dir.hpp"

using testing_cli::Run;
using testing_cli::run;
using testing_files::TempDir;

namespace {

const std::string kV41 = testing_cli::config_file("deepseek-v4.1-flash.json");
const std::string kAllowed = "allowed 1..max_model_len minus --spec-tokens";

std::string error_line(const std::string& message) { return "mla-plan: error: " + message + "\n"; }

/// A run that fails with `code` and exactly `message` on stderr, nothing on stdout.
void require_failure(const std::vector<std::string>& args, int code, const std::string& message) {
  const Run r = run(args);
  CHECK(r.code == code);
  CHECK(r.out.empty());
  CHECK(r.err == error_line(message));
}

/// The context lengths of the plan of `args` (--json added).
std::vector<std::int64_t> planned_lens(std::vector<std::string> args) {
  args.push_back("--json");
  const Run r = run(args);
  INFO(r.err);
  REQUIRE(r.code == 0);
  return nlohmann::json::parse(r.out).at("batch").at("context_lens").get<std::vector<std::int64_t>>();
}

}  // namespace

TEST_CASE("context-lens file: one per line, comma-separated or both, blanks ignored", "[cli][context-lens-file]") {
  TempDir dir;
  const std::string lines = dir.write("lines.txt", "100\n200\n300\n");
  const std::string mixed = dir.write("mixed.txt", "\n  100 ,200\r\n\n\t300\n4096,7 , 8\n\n");
  const std::string no_end = dir.write("no-end.txt", "100,200");
  const std::vector<std::int64_t> inline_lens = planned_lens({kV41, "--tp", "8", "--context-lens", "100,200,300"});
  CHECK(inline_lens == std::vector<std::int64_t>{100, 200, 300});
  CHECK(planned_lens({kV41, "--tp", "8", "--context-lens", "@" + lines}) == inline_lens);
  CHECK(planned_lens({kV41, "--tp", "8", "--context-lens=@" + lines}) == inline_lens);
  CHECK(planned_lens({kV41, "--tp", "8", "--context-lens", "@" + mixed}) ==
        std::vector<std::int64_t>{100, 200, 300, 4096, 7, 8});
  CHECK(planned_lens({kV41, "--tp", "8", "--context-lens", "@" + no_end}) == std::vector<std::int64_t>{100, 200});
  // The whole plan is the inline list's: only where the lengths came from differs.
  const Run a = run({kV41, "--tp", "8", "--context-lens", "100,200,300"});
  const Run b = run({kV41, "--tp", "8", "--context-lens", "@" + lines});
  CHECK(a.code == 0);
  CHECK(b.out == a.out);
}

TEST_CASE("context-lens file: 65,536 lines plan, one more is refused", "[cli][context-lens-file]") {
  TempDir dir;
  std::string text;
  for (std::int64_t i = 0; i < mlaplan::BatchLimits::max_requests; ++i) text += std::to_string(1 + i % 4096) + "\n";
  const std::string full = dir.write("full.txt", text);
  const std::vector<std::int64_t> lens = planned_lens({kV41, "--tp", "8", "--context-lens", "@" + full});
  REQUIRE(lens.size() == 65536);
  CHECK(lens.front() == 1);
  CHECK(lens.back() == 4096);
  const std::string over = dir.write("over.txt", text + "5\n");
  require_failure({kV41, "--context-lens", "@" + over}, 1,
                  "--context-lens @" + over + ": more than 65536 items (the next on line 65537); allowed 1..65536");
  // The decode-token limit of the inline list holds too.
  require_failure({kV41, "--context-lens", "@" + full, "--spec-tokens", "1"}, 1,
                  "the batch has 131072 decode tokens (65536 requests x (1 + --spec-tokens 1)); allowed 1..65536");
}

TEST_CASE("context-lens file: a bad length names the file, the line and the value", "[cli][context-lens-file]") {
  TempDir dir;
  const std::string at = "@" + (dir / "lens.txt");
  const std::string where = "--context-lens " + at;
  dir.write("lens.txt", "100\n\n abc \n");
  require_failure({kV41, "--context-lens", at}, 1, where + ": line 3: 'abc' is not a decimal integer; " + kAllowed);
  dir.write("lens.txt", "100,200\n300, x7\n");
  require_failure({kV41, "--context-lens", at}, 1, where + ": line 2: 'x7' is not a decimal integer; " + kAllowed);
  dir.write("lens.txt", "1\n2\n0\n");
  require_failure({kV41, "--context-lens", at}, 1, where + ": line 3: '0' is out of range; " + kAllowed);
  dir.write("lens.txt", "1\n-5\n");
  require_failure({kV41, "--context-lens", at}, 1, where + ": line 2: '-5' is out of range; " + kAllowed);
  dir.write("lens.txt", "1\n1 2\n");
  require_failure({kV41, "--context-lens", at}, 1, where + ": line 2: '1 2' is not a decimal integer; " + kAllowed);
  dir.write("lens.txt", "1\n99999999999999999999\n");
  require_failure({kV41, "--context-lens", at}, 1,
                  where + ": line 2: '99999999999999999999' is out of range; " + kAllowed);
  dir.write("lens.txt", "1\n2,,3\n");
  require_failure({kV41, "--context-lens", at}, 1,
                  where + ": line 2: empty item in '2,,3'; every item is a decimal integer, " + kAllowed);
  dir.write("lens.txt", "1,\n2\n");
  require_failure({kV41, "--context-lens", at}, 1,
                  where + ": line 1: empty item in '1,'; every item is a decimal integer, " + kAllowed);
  dir.write("lens.txt", std::string("1\n2\x00\n", 5));
  require_failure({kV41, "--context-lens", at}, 1, where + ": line 2: '2\\x00' is not a decimal integer; " + kAllowed);
  // The bound from the config: the line of the length past max_model_len.
  dir.write("lens.txt", "4096\n\n2000000\n");
  require_failure({kV41, "--context-lens", at}, 1,
                  where +
                      ": line 3: '2000000' is out of range; allowed 1..1048576 (the default max_model_len "
                      "1048576, the config's max_position_embeddings)");
  require_failure({kV41, "--context-lens", at, "--max-model-len", "4096", "--spec-tokens", "1"}, 1,
                  where +
                      ": line 1: '4096' is out of range; allowed 1..4095 (--max-model-len 4096, minus "
                      "--spec-tokens 1)");
  // No length at all.
  for (const std::string text : {"", "\n\n", "  \n\t\r\n"}) {
    dir.write("lens.txt", text);
    require_failure({kV41, "--context-lens", at}, 1,
                    where +
                        ": no items (it is empty or only blank lines); give one per line or separated by commas, "
                        "each a decimal integer, " +
                        kAllowed);
  }
}

TEST_CASE("context-lens file: a file that cannot be read is exit 2", "[cli][context-lens-file]") {
  TempDir dir;
  const std::string missing = dir / "missing.txt";
  require_failure({kV41, "--context-lens", "@" + missing}, 2,
                  "--context-lens: cannot read '" + missing + "': no such file or directory");
  require_failure({kV41, "--context-lens", "@" + dir.path.string()}, 2,
                  "--context-lens: cannot read '" + dir.path.string() + "': it is a directory");
  const std::string fifo = dir / "fifo";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  require_failure({kV41, "--context-lens", "@" + fifo}, 2,
                  "--context-lens: cannot read '" + fifo + "': it is a FIFO (named pipe); only a regular file is read");
  const std::string sock = dir / "sock";
  const testing_files::UnixSocket s(sock);
  require_failure({kV41, "--context-lens", "@" + sock}, 2,
                  "--context-lens: cannot read '" + sock + "': it is a socket; only a regular file is read");
  require_failure({kV41, "--context-lens", "@/dev/null"}, 2,
                  "--context-lens: cannot read '/dev/null': it is a character device; only a regular file is read");
  // Past the size limit: refused from its size, before a byte is read (a sparse file).
  const std::string huge = dir / "huge.txt";
  std::ofstream(huge) << "1\n";
  std::filesystem::resize_file(huge, mlaplan::BatchLimits::max_context_lens_file_bytes + 1);
  require_failure(
      {kV41, "--context-lens", "@" + huge}, 2,
      "--context-lens: '" + huge +
          "' is larger than 64 MiB (67108864 bytes, "
          "BatchLimits::max_context_lens_file_bytes); 65,536 lengths, the most a batch has, take under 1 MiB");
  // Flag values are checked while parsing, before the file is read.
  require_failure({kV41, "--context-lens", "@" + missing, "--batch", "0"}, 1,
                  "--batch: '0' is out of range; allowed 1..65536");
}

TEST_CASE("context-lens file: the flag's own rules", "[cli][context-lens-file]") {
  TempDir dir;
  const std::string lens = dir.write("lens.txt", "1\n2\n");
  require_failure({kV41, "--context-lens", "@"}, 1,
                  "--context-lens: '@' names no file; give @FILE, or @- for standard input");
  require_failure({kV41, "--context-lens", "@" + lens, "--batch", "2"}, 1,
                  "--context-lens lists every request; it cannot be combined with --batch or --context-len");
  require_failure({kV41, "--context-lens", "@" + lens, "--context-lens", "3"}, 1,
                  "--context-lens given twice ('@" + lens + "' and '3'); give it once");
  require_failure({kV41, "--context-lens"}, 1,
                  "plan: --context-lens needs a value (decimal integers separated by commas, or @FILE); run 'mla-plan "
                  "plan --help' for the flags");
  // report and verify take it too, read before anything else of the run is done.
  const std::string missing = dir / "missing.txt";
  require_failure({"report", kV41, "--context-lens", "@" + missing, "-o", dir / "r.svg"}, 2,
                  "--context-lens: cannot read '" + missing + "': no such file or directory");
  CHECK_FALSE(std::filesystem::exists(dir / "r.svg"));
  require_failure({"verify", kV41, "--context-lens", "@" + missing}, 2,
                  "--context-lens: cannot read '" + missing + "': no such file or directory");
  dir.write("bad.txt", "1\nx\n");
  require_failure({"verify", kV41, "--context-lens", "@" + (dir / "bad.txt")}, 1,
                  "--context-lens @" + (dir / "bad.txt") + ": line 2: 'x' is not a decimal integer; " + kAllowed);
}

TEST_CASE("context-lens file: parse_int_list_text", "[cli][context-lens-file]") {
  using mlaplan::cli::IntRange;
  using mlaplan::cli::parse_int_list_text;
  std::vector<std::int64_t> lines;
  const IntRange item{1, 100, {}};
  CHECK(parse_int_list_text("F", "1\n\n2, 3\n 4 ", item, 10, lines) == std::vector<std::int64_t>{1, 2, 3, 4});
  CHECK(lines == std::vector<std::int64_t>{1, 3, 3, 4});
  CHECK(parse_int_list_text("F", "5", item, 1, lines) == std::vector<std::int64_t>{5});
  CHECK(lines == std::vector<std::int64_t>{1});
  try {
    parse_int_list_text("F", "1,2\n3", item, 2, lines);
    FAIL("no error");
  } catch (const mlaplan::Error& e) {
    CHECK(e.kind() == mlaplan::ErrorKind::usage);
    CHECK(std::string(e.what()) == "F: more than 2 items (the next on line 2); allowed 1..2");
  }
  try {
    parse_int_list_text("F", "1\n101", item, 10, lines);
    FAIL("no error");
  } catch (const mlaplan::Error& e) {
    CHECK(std::string(e.what()) == "F: line 2: '101' is out of range; allowed 1..100");
  }
}
