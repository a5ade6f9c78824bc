// End-to-end tests of the binary: the output side (write errors, files written whole, text from the input made inert).

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "e2e_run.hpp"

using e2e::cfg;
using e2e::run;

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>

#include "mlaplan/base/text.hpp"

namespace {

namespace fs = std::filesystem;

/// The lines of `text` (a last line without '\n' counts).
std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  return lines;
}

/// Every line of `text` is printable UTF-8 without control characters, and none is a GitHub
/// Actions workflow command unless `annotations` allows real ones.
void check_inert(const std::string& text, bool annotations = false) {
  CHECK(text.find('\x1b') == std::string::npos);
  CHECK(text.find('\0') == std::string::npos);
  for (const auto& l : lines_of(text)) {
    INFO(l);
    CHECK(mlaplan::is_printable_line(l));
    if (!annotations) CHECK(l.rfind("::", 0) != 0);
    if (annotations && l.rfind("::", 0) == 0)
      CHECK((l.rfind("::error file=", 0) == 0 || l.rfind("::warning file=", 0) == 0));
  }
}

/// A fresh directory of its own for one test.
fs::path fresh_dir(const std::string& name) {
  const auto d = e2e::scratch() / name;
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

/// The files of `dir`, by name.
std::vector<std::string> names_in(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace

TEST_CASE("e2e: a failed write of stdout is exit 7 with one line, for every command and format", "[e2e][output]") {
  const std::string v41 = cfg("deepseek-v4.1-flash.json");
  const auto dir = fresh_dir("full");
  const std::vector<std::vector<std::string>> commands = {
      {"--help"},
      {"--version"},
      {"plan", "--help"},
      {v41, "--tp", "8"},
      {"plan", v41, "--tp", "8", "--json"},
      {"plan", v41, "--tp", "8", "--format", "markdown"},
      {"plan", v41, "--tp", "8", "--show-records"},
      {"check", v41, cfg("deepseek-v4-flash.json"), cfg("deepseek-v3.2.json"), "--tp", "8"},
      {"check", v41, "--tp", "8", cfg("deepseek-v4-flash.json"), "--format", "json"},
      {"check", v41, "--tp", "8", "--format", "github", "--max-global-bytes-per-token", "1"},
      {"check", v41, "--tp", "8", "--format", "markdown"},
      {"check", v41, "--matrix", "--tp", "1,8"},
      {"check", v41, "--matrix", "--tp", "1,8", "--json"},
      {"schedule", "--kernel", "sm90-sparse", "--num-sms", "132", "--h-q", "64", "--lengths", "128,4096"},
      {"schedule", "--kernel", "sm90-sparse", "--num-sms", "132", "--h-q", "64", "--lengths", "128,4096", "--json"},
      {"gpus"},
      {"gpus", "--json"},
      {"formats"},
      {"formats", "--json"},
      {"report", v41, "--tp", "8", "-o", (dir / "r.svg").string()},
  };
  for (const auto& args : commands) {
    e2e::RunOptions o;
    o.stdout_path = "/dev/full";
    const auto r = run(args, o);
    INFO(args.front() << " " << (args.size() > 1 ? args[1] : "") << " " << (args.size() > 2 ? args.back() : ""));
    CHECK(r.code == 7);
    CHECK(r.err.find("mla-plan: error: cannot write the output to standard output: No space left on device") !=
          std::string::npos);
    CHECK(r.err.back() == '\n');
    // one line of its own for the write error (a command that failed before may have said so first)
    CHECK(lines_of(r.err).size() <= 2);
  }
  // exit 7 wins over the command's own non-zero exit: check with a failing guard exits 4 otherwise
  e2e::RunOptions o;
  o.stdout_path = "/dev/full";
  const auto guard = run({"check", v41, "--tp", "8", "--max-global-bytes-per-token", "1"}, o);
  CHECK(guard.code == 7);
  CHECK_THAT(guard.err, Catch::Contains("(the command itself ended with exit 4)"));
  // the same command with a working stdout exits 4: the 7 above is the write error's
  CHECK(run({"check", v41, "--tp", "8", "--max-global-bytes-per-token", "1"}).code == 4);
}

TEST_CASE("e2e: a closed pipe is an error, with SIGPIPE ignored or not", "[e2e][output]") {
  const std::string v41 = cfg("deepseek-v4.1-flash.json");
  for (const auto& args : std::vector<std::vector<std::string>>{{v41, "--tp", "8"},
                                                                {"plan", v41, "--tp", "8", "--json"},
                                                                {"check", v41, "--tp", "8", "--format", "json"},
                                                                {"formats"}}) {
    INFO(args.back());
    e2e::RunOptions ignored;
    ignored.stdout_closed_pipe = true;
    ignored.ignore_sigpipe = true;
    const auto r = run(args, ignored);
    CHECK(r.code == 7);
    CHECK(r.err == "mla-plan: error: cannot write the output to standard output: Broken pipe\n");
    e2e::RunOptions fatal;
    fatal.stdout_closed_pipe = true;
    const auto k = run(args, fatal);
    CHECK(k.code == 128 + SIGPIPE);  // the ordinary end of a writer whose reader left
  }
}

TEST_CASE("e2e: report -o writes the file whole or leaves the earlier one untouched", "[e2e][output]") {
  const std::string v41 = cfg("deepseek-v4.1-flash.json");
  const auto dir = fresh_dir("report-atomic");
  const auto target = dir / "plan.svg";

  SECTION("a new file, then a replaced one keeps its mode; no temporary file is left") {
    auto r = run({"report", v41, "--tp", "8", "-o", target.string()});
    REQUIRE(r.code == 0);
    const std::string first = e2e::slurp(target);
    CHECK_THAT(first, Catch::StartsWith("<?xml") && Catch::EndsWith("</svg>\n"));
    CHECK(names_in(dir) == std::vector<std::string>{"plan.svg"});
    const auto mode_new = fs::status(target).permissions() & fs::perms::mask;
    const mode_t mask = ::umask(0);
    ::umask(mask);
    CHECK(static_cast<unsigned>(mode_new) == (0666u & ~static_cast<unsigned>(mask)));
    fs::permissions(target, fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read);
    r = run({"report", v41, "--tp", "8", "-o", target.string(), "--batch", "8"});
    REQUIRE(r.code == 0);
    CHECK(e2e::slurp(target) != first);
    CHECK((fs::status(target).permissions() & fs::perms::mask) ==
          (fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read));
    CHECK(names_in(dir) == std::vector<std::string>{"plan.svg"});
  }

  SECTION("a write that fails half-way (file size limit) leaves the earlier file and no temporary file") {
    const std::string earlier = "<svg>the earlier report</svg>\n";
    e2e::write_file("report-atomic/plan.svg", earlier);
    // SIGXFSZ ignored, so the write past the limit fails with EFBIG instead of killing the process
    const std::string cmd = "/bin/sh -c 'trap \"\" XFSZ; ulimit -f 8; exec \"$0\" \"$@\"' " +
                            std::string(MLAPLAN_BINARY) + " report " + v41 + " --tp 8 -o " + target.string() + " 2>" +
                            (dir / "err.txt").string() + " >/dev/null";
    const int status = std::system(cmd.c_str());
    REQUIRE(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 7);
    const std::string err = e2e::slurp(dir / "err.txt");
    CHECK_THAT(err, Catch::StartsWith("mla-plan: error: -o: cannot write '" + target.string() + "': File too large"));
    CHECK(lines_of(err).size() == 1);
    CHECK(e2e::slurp(target) == earlier);
    CHECK(names_in(dir) == (std::vector<std::string>{"err.txt", "plan.svg"}));
  }

  SECTION("a missing directory, a directory, a FIFO as the target: exit 7, nothing written, nothing blocks") {
    auto r = run({"report", v41, "--tp", "8", "-o", (dir / "no-such-dir" / "plan.svg").string()});
    CHECK(r.code == 7);
    CHECK_THAT(r.err, Catch::EndsWith("plan.svg': No such file or directory\n"));
    fs::create_directories(dir / "d.svg");
    r = run({"report", v41, "--tp", "8", "-o", (dir / "d.svg").string()});
    CHECK(r.code == 7);
    CHECK_THAT(r.err, Catch::Contains("d.svg': it is a directory; give the path of a file"));
    REQUIRE(::mkfifo((dir / "f.svg").c_str(), 0644) == 0);
    e2e::RunOptions o;
    o.timeout_s = 20;
    r = run({"report", v41, "--tp", "8", "-o", (dir / "f.svg").string()}, o);
    CHECK_FALSE(r.timed_out);
    CHECK(r.code == 7);
    CHECK_THAT(r.err, Catch::Contains("f.svg': it is a FIFO (named pipe)"));
    CHECK(names_in(dir) == (std::vector<std::string>{"d.svg", "f.svg"}));
  }

  SECTION("a symbolic link stays a link; the file it names gets the report") {
    e2e::write_file("report-atomic/real.svg", "old");
    fs::create_symlink(dir / "real.svg", dir / "link.svg");
    const auto r = run({"report", v41, "--tp", "8", "-o", (dir / "link.svg").string()});
    REQUIRE(r.code == 0);
    CHECK(fs::is_symlink(dir / "link.svg"));
    CHECK_THAT(e2e::slurp(dir / "real.svg"), Catch::StartsWith("<?xml") && Catch::EndsWith("</svg>\n"));
  }

  SECTION("a dangling symbolic link stays a link; the file it names is created") {
    fs::create_symlink("new.svg", dir / "dangling.svg");
    const auto r = run({"report", v41, "--tp", "8", "-o", (dir / "dangling.svg").string()});
    REQUIRE(r.code == 0);
    CHECK(fs::is_symlink(dir / "dangling.svg"));
    CHECK_THAT(e2e::slurp(dir / "new.svg"), Catch::StartsWith("<?xml") && Catch::EndsWith("</svg>\n"));
    CHECK(names_in(dir) == (std::vector<std::string>{"dangling.svg", "new.svg"}));
  }

  SECTION("names up to the longest the file system takes (NAME_MAX) are written, a new file and a replaced one") {
    const long name_max = ::pathconf(dir.c_str(), _PC_NAME_MAX);
    REQUIRE(name_max >= 16);
    for (const long len : {name_max - 12, name_max - 11, name_max}) {
      INFO("a name of " << len << " bytes");
      const std::string name = std::string(static_cast<std::size_t>(len) - 5, 'r') + ".html";
      for (int pass = 0; pass < 2; ++pass) {
        const auto r = run({"report", v41, "--tp", "8", "-o", (dir / name).string()});
        CHECK(r.code == 0);
        CHECK(r.err.empty());
        CHECK(names_in(dir) == std::vector<std::string>{name});
      }
      fs::remove(dir / name);
    }
  }
}

TEST_CASE("e2e: text from the input is inert in every output", "[e2e][output]") {
  // A config whose dtype holds NUL, ESC, a newline and a workflow command; a file name with them.
  std::string text = e2e::slurp(cfg("deepseek-v4.1-flash.json"));
  auto j = nlohmann::json::parse(text);
  j["dtype"] = std::string("bf\0\x1b[31mRED\n::error::x", 22);
  const auto bad = e2e::write_file("inert-dtype.json", j.dump(2));
  for (const auto& args : std::vector<std::vector<std::string>>{{bad.string()},
                                                                {"plan", bad.string(), "--format", "markdown"},
                                                                {"check", bad.string()},
                                                                {"check", bad.string(), "--format", "markdown"},
                                                                {"check", bad.string(), "--matrix"}}) {
    INFO(args.back());
    const auto r = run(args);
    CHECK(r.code == (args.back() == "--matrix" ? 0 : 3));  // the dtype is not bfloat16
    check_inert(r.out);
    check_inert(r.err);
  }
  const auto gh = run({"check", bad.string(), "--format", "github"});
  CHECK(gh.code == 3);
  check_inert(gh.out, true);
  check_inert(gh.err);
  // the value is shown quoted and escaped where the message names it
  const auto p = run({bad.string()});
  CHECK_THAT(p.err, Catch::Contains("model dtype 'bf\\x00\\x1b[31mRED\\n::error::x' is not supported"));
  // JSON carries the exact value, escaped by the JSON writer
  const auto js = run({"plan", bad.string(), "--json"});
  CHECK(js.code == 3);
  CHECK(js.out.find('\x1b') == std::string::npos);
  CHECK_NOTHROW(nlohmann::json::parse(js.out));

  // a file name with control characters and invalid UTF-8, in the message of a missing file
  const std::string name = (e2e::scratch() / "no\x1b[2J\nsuch\xff.json").string();
  for (const auto& args : std::vector<std::vector<std::string>>{{name}, {"check", name}, {"check", name, "--json"}}) {
    const auto r = run(args);
    CHECK(r.code == 2);
    check_inert(r.out);
    check_inert(r.err);
    if (args.size() == 3) CHECK_NOTHROW(nlohmann::json::parse(r.out));
  }
}
