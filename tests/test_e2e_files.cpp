// End-to-end tests of the binary: input files (only regular files, the cause of every failure to open, NUL bytes, two spellings that disagree), --context-lens @- from standard input.

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "e2e_run.hpp"
#include "mlaplan/base/limits.hpp"
#include "mlaplan/base/text.hpp"
#include "special_files.hpp"

using e2e::cfg;
using e2e::run;

using testing_files::UnixSocket;

namespace {

namespace fs = std::filesystem;

/// A directory of its own for each test case, removed after it.
struct Scratch {
  fs::path path;
  explicit Scratch(const std::string& name) {
    path = e2e::scratch() / name;
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~Scratch() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string file(const std::string& name, const std::string& text) const {
    const auto p = path / name;
    std::ofstream(p, std::ios::binary) << text;
    return p.string();
  }
  std::string fifo(const std::string& name) const {
    const auto p = (path / name).string();
    REQUIRE(::mkfifo(p.c_str(), 0600) == 0);
    return p;
  }
};

/// A run that fails with exit 2 within the time limit: nothing on stdout (with --json, the error
/// document of exit 2 carrying stderr's message), one printable line on stderr that says `what`.
void require_invalid_file(const std::vector<std::string>& args, const std::string& what, bool unprivileged = false) {
  e2e::RunOptions o;
  o.timeout_s = 20;
  o.unprivileged = unprivileged;
  const auto r = run(args, o);
  INFO(args.back() << "\n" << r.err);
  REQUIRE(!r.timed_out);
  CHECK(r.code == 2);
  if (std::find(args.begin(), args.end(), "--json") != args.end()) {
    const auto doc = nlohmann::json::parse(r.out, nullptr, false);
    REQUIRE(doc.is_object());
    CHECK(doc["exit_code"] == 2);
    CHECK(r.err == "mla-plan: error: " + doc["error"]["message"].get<std::string>() + "\n");
  } else {
    CHECK(r.out.empty());
  }
  REQUIRE(r.err.size() > 1);
  CHECK(r.err.find('\n') == r.err.size() - 1);
  CHECK_THAT(r.err, Catch::StartsWith("mla-plan: error: "));
  CHECK(mlaplan::is_printable_line(r.err.substr(0, r.err.size() - 1)));
  CHECK_THAT(r.err, Catch::Contains(what));
}

/// `check` reports each file on stdout: exit 2 within the time limit, the file's finding says `what`.
void require_check_fails(const std::vector<std::string>& args, const std::string& what) {
  e2e::RunOptions o;
  o.timeout_s = 20;
  const auto r = run(args, o);
  INFO(r.out << r.err);
  REQUIRE(!r.timed_out);
  CHECK(r.code == 2);
  CHECK_THAT(r.out, Catch::Contains("error [config.invalid]: ") && Catch::Contains(what));
}

}  // namespace

TEST_CASE("e2e: a FIFO, a socket or a device as an input file is refused, nothing blocks", "[e2e][files]") {
  Scratch dir("special");
  const auto fifo = dir.fifo("fifo.json");
  const std::string is_fifo = "cannot read '" + fifo + "': it is a FIFO (named pipe); only a regular file is read";
  require_invalid_file({fifo}, is_fifo);
  require_invalid_file({"plan", fifo, "--json"}, is_fifo);
  require_check_fails({"check", fifo}, "it is a FIFO (named pipe)");
  require_invalid_file({"report", fifo, "-o", (dir.path / "r.svg").string()}, is_fifo);

  fs::create_directories(dir.path / "model");
  const auto inner = dir.fifo("model/config.json");
  require_invalid_file({(dir.path / "model").string()},
                       "cannot read '" + inner + "': it is a FIFO (named pipe); only a regular file is read");

  const auto sock = (dir.path / "sock.json").string();
  const UnixSocket s(sock);
  require_invalid_file({sock}, "cannot read '" + sock + "': it is a socket; only a regular file is read");
  require_invalid_file({"/dev/zero"}, "cannot read '/dev/zero': it is a character device; only a regular file is read");
  require_invalid_file({"/dev/null"}, "it is a character device");

  // report's result files: exit 2 like a config, before anything is drawn.
  const auto config = cfg("deepseek-v4.1-flash.json");
  const auto out = (dir.path / "r.svg").string();
  require_invalid_file({"report", config, "-o", out, "--verify-json", fifo},
                       "--verify-json: cannot read '" + fifo + "': it is a FIFO (named pipe)");
  require_invalid_file({"report", config, "-o", out, "--bench-json", fifo},
                       "--bench-json: cannot read '" + fifo + "': it is a FIFO (named pipe)");
  require_invalid_file({"report", config, "-o", out, "--bench-json", sock},
                       "--bench-json: cannot read '" + sock + "': it is a socket");
  require_invalid_file({"report", config, "-o", out, "--verify-json", "/dev/zero"},
                       "--verify-json: cannot read '/dev/zero': it is a character device");
  CHECK(!fs::exists(out));
}

TEST_CASE("e2e: every failure to open an input file names its own cause", "[e2e][files]") {
  Scratch dir("causes");
  const auto a = (dir.path / "a.json").string(), b = (dir.path / "b.json").string();
  fs::create_symlink(b, a);
  fs::create_symlink(a, b);
  require_invalid_file({a}, "cannot read '" + a + "': too many levels of symbolic links (a symbolic-link loop)");
  const std::string long_path = "/" + std::string(4999, 'p');
  require_invalid_file({long_path}, "(5000 bytes): the path is too long (5000 bytes; at most 4095 are allowed)");
  const auto file = dir.file("c.json", "{}");
  require_invalid_file({file + "/x"}, "cannot read '" + file + "/x': a component of the path is not a directory");
  require_invalid_file({(dir.path / "missing.json").string()}, "': no such file or directory");
  const auto dangling = (dir.path / "dangling.json").string();
  fs::create_symlink(dir.path / "gone", dangling);
  require_invalid_file({dangling}, "': no such file or directory (a symbolic link to a missing file)");
  {
    // As root (CI), run as the user nobody: mode 000 denies nothing to root.
    const auto locked = dir.file("locked.json", "{}");
    fs::permissions(locked, fs::perms::none);
    require_invalid_file({locked}, "cannot read '" + locked + "': permission denied", true);
  }
  const auto config = cfg("deepseek-v4.1-flash.json");
  const auto out = (dir.path / "r.svg").string();
  require_invalid_file({"report", config, "-o", out, "--verify-json", a},
                       "--verify-json: cannot read '" + a + "': too many levels of symbolic links");
  require_invalid_file({"report", config, "-o", out, "--bench-json", long_path}, "the path is too long");
  require_invalid_file({"report", config, "-o", out, "--bench-json", (dir.path / "missing.json").string()},
                       "': no such file or directory");
}

TEST_CASE("e2e: a NUL byte in an input file is invalid input, not its end", "[e2e][files]") {
  Scratch dir("nul");
  const std::string config_text = e2e::slurp(cfg("small/v41-8layer-flat.json"));
  std::size_t lines = 1;
  for (char c : config_text) lines += c == '\n' ? 1 : 0;
  const auto tail = dir.file("tail.json", config_text + std::string("\0\x1b[31m garbage", 14));
  require_invalid_file({tail}, tail + ": NUL byte at byte offset " + std::to_string(config_text.size()) + " (line " +
                                   std::to_string(lines) + "); a config.json is JSON text");
  require_check_fails({"check", tail}, "NUL byte at byte offset");
  const auto result = dir.file("bench.json", std::string("[{\"us\": 1}]\0", 12));
  require_invalid_file(
      {"report", cfg("deepseek-v4.1-flash.json"), "-o", (dir.path / "r.svg").string(), "--bench-json", result},
      "--bench-json: '" + result + "' holds a NUL byte at byte offset 11 (line 1)");
  // Trailing bytes after the top value, without a NUL: not JSON either.
  const auto junk = dir.file("junk.json", config_text + " x");
  require_invalid_file({junk}, "not valid JSON");
}

TEST_CASE("e2e: layer_types that contradict compress_ratios exit 2", "[e2e][files]") {
  Scratch dir("layer-types");
  const std::string head = R"({"model_type": "deepseek_v4", "num_hidden_layers": 2, "num_nextn_predict_layers": 0, )";
  const auto agree = dir.file(
      "agree.json",
      head +
          R"("compress_ratios": [128, 4], "layer_types": ["heavily_compressed_attention", "compressed_sparse_attention"]})");
  const auto ok = run({agree});
  CHECK(ok.code == 0);
  CHECK_THAT(ok.out, Catch::Contains("c128a"));
  const auto disagree = dir.file(
      "disagree.json",
      head +
          R"("compress_ratios": [4, 128], "layer_types": ["heavily_compressed_attention", "compressed_sparse_attention"]})");
  require_invalid_file({disagree}, disagree +
                                       ": /layer_types/0: layer_types[0] = 'heavily_compressed_attention' (ratio 128) "
                                       "disagrees with compress_ratios[0] = 4 (/compress_ratios/0)");
  const auto unknown =
      dir.file("unknown.json", head + R"("compress_ratios": [4, 128], "layer_types": ["full_attention", "x"]})");
  require_invalid_file({unknown},
                       "allowed: sliding_attention, compressed_sparse_attention, heavily_compressed_attention");
}

TEST_CASE("e2e: control characters and bad UTF-8 in file names and values stay on one line", "[e2e][files]") {
  Scratch dir("text");
  const std::string name = "\x1b[31m\n::error::\xff.json";
  const auto f = dir.file(name, R"({"model_type": "\u001b[31m\n::error::\u2028"})");
  require_invalid_file({f}, "\\x1b[31m\\n::error::\\xff.json: /model_type: the string ");
  require_invalid_file({(dir.path / ("missing" + name)).string()},
                       "missing\\x1b[31m\\n::error::\\xff.json': no such file");
  const auto raw = dir.file("raw.json", std::string(R"({"model_type": "deepseek_v41"})") + "\xff\x1b[2J");
  require_invalid_file({raw}, "not valid JSON");
}

TEST_CASE("e2e: --context-lens @- reads the lengths from standard input", "[e2e][files]") {
  const Scratch dir("context-lens-stdin");
  // 65,536 lengths, two to a line: "100,101\n102,103\n..."
  std::string text;
  for (int i = 0; i < 65536; ++i) text += (i == 0 ? "" : i % 2 == 1 ? "," : "\n") + std::to_string(100 + i % 7);
  e2e::RunOptions o;
  o.stdin_path = dir.file("lens.txt", text + "\n\n");
  const auto r = run({cfg("deepseek-v4.1-flash.json"), "--tp", "8", "--context-lens", "@-", "--json"}, o);
  INFO(r.err);
  REQUIRE(r.code == 0);
  const auto lens = nlohmann::json::parse(r.out).at("batch").at("context_lens");
  REQUIRE(lens.size() == 65536);
  CHECK(lens.front() == 100);
  CHECK(lens.back() == 100 + 65535 % 7);
  // An empty standard input has no lengths (exit 1, as an empty list).
  const auto empty = run({cfg("deepseek-v4.1-flash.json"), "--context-lens", "@-"});
  CHECK(empty.code == 1);
  CHECK(empty.out.empty());
  CHECK(empty.err ==
        "mla-plan: error: --context-lens @-: no items (it is empty or only blank lines); give one per line or "
        "separated by commas, each a decimal integer, allowed 1..max_model_len minus --spec-tokens\n");
  // A bad length names standard input and its line.
  o.stdin_path = dir.file("bad.txt", "100\n200\n\nfoo\n");
  const auto bad = run({cfg("deepseek-v4.1-flash.json"), "--context-lens", "@-"}, o);
  CHECK(bad.code == 1);
  CHECK(bad.err ==
        "mla-plan: error: --context-lens @-: line 4: 'foo' is not a decimal integer; allowed "
        "1..max_model_len minus --spec-tokens\n");
  // Past the size limit: exit 2 after reading no more than the limit (a sparse file of zeros).
  const std::string huge = dir.file("huge.txt", "1\n");
  fs::resize_file(huge, mlaplan::BatchLimits::max_context_lens_file_bytes + 4096);
  o.stdin_path = huge;
  const auto big = run({cfg("deepseek-v4.1-flash.json"), "--context-lens", "@-"}, o);
  CHECK(big.code == 2);
  CHECK(big.err ==
        "mla-plan: error: --context-lens: standard input is larger than 64 MiB (67108864 bytes, "
        "BatchLimits::max_context_lens_file_bytes); 65,536 lengths, the most a batch has, take under 1 "
        "MiB\n");
}
