// check at its limits: each file's result printed as soon as it is checked (in every format, and
// each config's table with --matrix), the JSON written piece by piece with the bytes of one dump,
// nothing more checked once the output has failed, and text from the input inert in every format.

#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <ostream>
#include <sstream>
#include <streambuf>
#include <string>
#include <vector>

#include "cli/cli.hpp"
#include "cli_run.hpp"
#include "output/json_out.hpp"
#include "mlaplan/base/error.hpp"
#include "mlaplan/base/text.hpp"
#include "mlaplan/version.hpp"
#include "temp_dir.hpp"

using namespace mlaplan;
namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;

using testing_files::TempDir;

namespace {

using testing_cli::Run;
using testing_cli::run;
std::string cfg(const std::string& rel) { return testing_cli::config_file(rel); }

/// A stream buffer that keeps what was written and, at every flush, a copy of everything written
/// so far: what a reader at the other end of a pipe has seen by then.
class SnapshotBuf : public std::stringbuf {
 public:
  std::vector<std::string> snapshots;

 protected:
  int sync() override {
    snapshots.push_back(str());
    return 0;
  }
};

/// A stream buffer that takes `limit` bytes and then fails every write, as a full disk or a
/// closed pipe (with SIGPIPE ignored) does.
class FailingBuf : public std::streambuf {
 public:
  explicit FailingBuf(std::size_t limit) : limit_(limit) {}
  std::string taken;

 protected:
  int_type overflow(int_type c) override {
    if (traits_type::eq_int_type(c, traits_type::eof())) return traits_type::not_eof(c);
    if (taken.size() >= limit_) return traits_type::eof();
    taken += traits_type::to_char_type(c);
    return c;
  }
  std::streamsize xsputn(const char* s, std::streamsize n) override {
    const auto room = static_cast<std::streamsize>(limit_ - std::min(limit_, taken.size()));
    const auto k = std::min(n, room);
    taken.append(s, static_cast<std::size_t>(k));
    return k;
  }

 private:
  std::size_t limit_;
};

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) lines.push_back(line);
  return lines;
}

/// The text a reader must be able to print as it is: every line printable UTF-8, no ESC or NUL,
/// and no line a workflow command other than check's own annotations.
void require_inert(const std::string& text, bool annotations) {
  CHECK(text.find('\x1b') == std::string::npos);
  CHECK(text.find('\0') == std::string::npos);
  CHECK(text.find('\r') == std::string::npos);
  for (const auto& line : lines_of(text)) {
    INFO(line);
    CHECK(is_printable_line(line));
    if (line.rfind("::", 0) == 0) {
      CHECK(annotations);
      CHECK_THAT(line, Catch::StartsWith("::error file=") || Catch::StartsWith("::warning file="));
    }
  }
}

const std::string kEvilDtype = "bf\\u0000\\u001b[31mRED\\n::error::x";

/// V4.1-Flash with its dtype replaced by one holding NUL, ESC, a newline and a workflow command.
std::string evil_config() {
  std::ifstream in(cfg("deepseek-v4.1-flash.json"), std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  std::string text = s.str();
  const std::string from = "\"dtype\": \"bfloat16\"";
  const auto at = text.find(from);
  REQUIRE(at != std::string::npos);
  text.replace(at, from.size(), "\"torch_dtype\": \"" + kEvilDtype + "\"");
  return text;
}

}  // namespace

TEST_CASE("check prints each file's result as soon as it is checked", "[check][stream]") {
  const auto good = cfg("deepseek-v4.1-flash.json");
  const auto missing = cfg("no-such-config.json");
  const auto good2 = cfg("deepseek-v4-flash.json");
  for (const std::string format : {"text", "json", "github", "markdown"}) {
    INFO(format);
    SnapshotBuf buf;
    std::ostream out(&buf);
    std::ostringstream err;
    const int code = cli::run_cli({"check", good, missing, good2, "--tp", "8", "--format", format}, out, err);
    CHECK(code == 2);
    // Flushed once per file: the first file's result was out before the second was read.
    REQUIRE(buf.snapshots.size() >= 3);
    const std::string& first = buf.snapshots[0];
    const std::string& second = buf.snapshots[1];
    CHECK(first.find(missing) == std::string::npos);
    CHECK(second.find(missing) != std::string::npos);
    CHECK(second.find(good2) == std::string::npos);
    if (format == "github") {
      CHECK(first.empty());  // the first file passes: no annotation; the summary is on stderr
    } else {
      CHECK(first.find(good) != std::string::npos);
    }
    if (format == "text") {
      CHECK(first == "PASS " + good +
                         "  [deepseek_v41 on h200, fp8_ds_mla, TP 8] 31.30x requests of 1,048,576 tokens, 66.01 GiB "
                         "to spare\n");
    }
    if (format == "json") {
      CHECK_THAT(first, Catch::StartsWith(std::string("{\n  \"schema\": \"mla-plan/3\",\n  \"tool_version\": \"") +
                                          mlaplan::kVersion + "\",\n  \"files\": [\n"));
    }
    // Everything else comes after: each snapshot extends the one before.
    for (std::size_t i = 1; i < buf.snapshots.size(); ++i) {
      CHECK(buf.snapshots[i].compare(0, buf.snapshots[i - 1].size(), buf.snapshots[i - 1]) == 0);
    }
    CHECK(buf.str().compare(0, buf.snapshots.back().size(), buf.snapshots.back()) == 0);
  }

  SECTION("--matrix: each config's table") {
    for (const std::string format : {"text", "json", "markdown"}) {
      INFO(format);
      SnapshotBuf buf;
      std::ostream out(&buf);
      std::ostringstream err;
      CHECK(cli::run_cli({"check", good, missing, good2, "--matrix", "--tp", "1,8", "--format", format}, out, err) ==
            2);
      REQUIRE(buf.snapshots.size() >= 3);
      CHECK((format == "json" || buf.snapshots[0].find(good + "\n") != std::string::npos));
      CHECK(buf.snapshots[0].find("h200") != std::string::npos);
      CHECK(buf.snapshots[0].find(missing) == std::string::npos);
      CHECK(buf.snapshots[1].find(missing) != std::string::npos);
      CHECK(buf.snapshots[1].find(good2) == std::string::npos);
    }
  }
}

TEST_CASE("check: a flag that is wrong for a later file is that file's failure, for the first, the run's",
          "[check][stream]") {
  // --max-model-len 1048576 is past V3.2's max_position_embeddings (163840): a usage error, found
  // when the third file is planned. The first two files' results are already out, so the third
  // fails (exit 1) and the output stays whole.
  const std::vector<std::string> files = {cfg("deepseek-v4.1-flash.json"), cfg("deepseek-v4-flash.json"),
                                          cfg("deepseek-v3.2.json")};
  std::vector<std::string> args = {"check"};
  args.insert(args.end(), files.begin(), files.end());
  args.insert(args.end(), {"--max-model-len", "1048576", "--tp", "8"});
  const auto r = run(args);
  CHECK(r.code == 1);
  CHECK(r.err.empty());
  const std::string message =
      "--max-model-len: '1048576' is out of range; allowed 1..163840 (the model's "
      "max_position_embeddings is 163840)";
  CHECK(r.out == "PASS " + files[0] +
                     "  [deepseek_v41 on h200, fp8_ds_mla, TP 8] 31.30x requests of 1,048,576 tokens, 66.01 GiB to "
                     "spare\nPASS " +
                     files[1] +
                     "  [deepseek_v4 on h200, fp8_ds_mla, TP 8] 9.70x requests of 1,048,576 tokens, 87.54 GiB to "
                     "spare\nFAIL " +
                     files[2] + " (exit 1)\n  error [flag.invalid]: " + message + "\n2 of 3 configs passed\n");
  auto json = args;
  json.push_back("--json");
  const auto j = run(json);
  CHECK(j.code == 1);
  const auto doc = nlohmann::json::parse(j.out);
  CHECK(doc.at("exit_code") == 1);
  CHECK(doc.at("files").size() == 3);
  CHECK(doc.at("files").at(2).at("findings").at(0).at("id") == "flag.invalid");
  // The first file is wrong for the flag: the run stops there, one error line, and with --json the
  // error document in place of check's (docs/cli.md, "Errors as JSON").
  const auto only = run({"check", files[2], files[0], "--max-model-len", "1048576", "--tp", "8", "--json"});
  CHECK(only.code == 1);
  const auto only_doc = nlohmann::json::parse(only.out);
  CHECK(only_doc.at("command") == "check");
  CHECK(only_doc.at("error").at("message") == message);
  CHECK(only_doc.at("error").at("field") == "--max-model-len");
  CHECK(only.err == "mla-plan: error: " + message + "\n");
  const auto only_text = run({"check", files[2], files[0], "--max-model-len", "1048576", "--tp", "8"});
  CHECK(only_text.code == 1);
  CHECK(only_text.out.empty());
}

TEST_CASE("check --format json written file by file has the bytes of one dump", "[check][stream][json]") {
  TempDir dir;
  const auto evil = dir.write("evil.json", evil_config());
  const std::vector<std::vector<std::string>> commands = {
      {"check", cfg("deepseek-v4.1-flash.json"), "--json"},
      {"check", cfg("deepseek-v4.1-flash.json"), cfg("small/v41-8layer-flat.json"), "nope.json", "\xff\xfe",
       cfg("deepseek-v3.2.json"), evil, "--json", "--min-concurrency", "40"},
      {"check", cfg("deepseek-v4-flash.json"), cfg("small/v41-6layer-reindex.json"), "--format", "json",
       "--max-global-bytes-per-token", "1800", "--dtype", "float16"},
      {"check", cfg("deepseek-v4.1-flash.json"), "nope.json", evil, "--matrix", "--tensor-parallel-size", "1,8",
       "--json"},
      {"check", "nope.json", "--matrix", "--json"},
  };
  for (const auto& args : commands) {
    INFO(args[1] << " ... " << args.back());
    const auto r = run(args);
    CHECK(r.code != 1);
    CHECK(r.code != 70);
    const auto j = ojson::parse(r.out);  // valid JSON, whatever bytes the inputs held
    CHECK(j.at("schema") == "mla-plan/3");
    CHECK(j.at("exit_code") == r.code);
    CHECK(r.out == cli::dump_json(j));
  }
}

TEST_CASE("json_document_head: the first lines of a json_document() dump", "[check][stream][json]") {
  ojson doc = cli::json_document();
  CHECK(doc.at("schema") == "mla-plan/3");
  CHECK(doc.at("tool_version") == mlaplan::kVersion);
  doc["files"] = ojson::array();
  CHECK(cli::json_document_head() + "  \"files\": []\n}\n" == cli::dump_json(doc));
}

TEST_CASE("dump_json_nested: a value written inside a larger document", "[check][stream][json]") {
  const ojson element = {
      {"a", 1}, {"b", ojson::array({1, 2})}, {"c", ojson::object()}, {"d", ojson::array()}, {"e", {{"f", "x\ny"}}}};
  const ojson whole = {{"schema", "s"}, {"files", ojson::array({element, element})}, {"n", 0}};
  const std::string pieces = "{\n  \"schema\": \"s\",\n  \"files\": [\n    " + cli::dump_json_nested(element, 2) +
                             ",\n    " + cli::dump_json_nested(element, 2) + "\n  ],\n  \"n\": 0\n}\n";
  CHECK(pieces == cli::dump_json(whole));
  CHECK(cli::dump_json_nested(element, 0) + "\n" == cli::dump_json(element));
  CHECK(cli::dump_json_nested(ojson("\xff"), 3) == "\"\xef\xbf\xbd\"");  // invalid UTF-8 replaced, no throw
}

TEST_CASE("check stops once its output has failed", "[check][stream]") {
  // Two good files, then one the flags are wrong for: it fails with exit 1, which decides the exit
  // code of a healthy run (github: the guard's 4 for every file, and still 1 wins). A run that
  // stops after its output failed never gets there.
  const std::vector<std::string> args = {"check",
                                         cfg("deepseek-v4.1-flash.json"),
                                         cfg("deepseek-v4-flash.json"),
                                         cfg("deepseek-v3.2.json"),
                                         "--max-model-len",
                                         "1048576",
                                         "--tp",
                                         "8"};
  for (const std::string format : {"text", "json", "github", "markdown"}) {
    INFO(format);
    std::vector<std::string> a = args;
    a.insert(a.end(), {"--format", format});
    if (format == "github") a.insert(a.end(), {"--min-concurrency", "1000"});  // an annotation for every file
    cli::CommandLine command_line;
    std::ostringstream parse_out, parse_err;
    const auto& parsed = command_line.parse(a, parse_out, parse_err);
    REQUIRE(parsed.is("check"));
    {
      std::ostringstream out, err;
      CHECK(cli::run_check(parsed.get<mlaplan::cli::CheckOptions>("check"), out, err) ==
            1);  // it reaches the third file
      CHECK_THAT(out.str(), Catch::Contains("flag.invalid"));
    }
    FailingBuf buf(8);
    std::ostream out(&buf);
    std::ostringstream err;
    int code = -1;
    CHECK_NOTHROW(code = cli::run_check(parsed.get<mlaplan::cli::CheckOptions>("check"), out, err));
    CHECK(!out);
    CHECK(code == (format == "github" ? 4 : 0));  // the first file's code: nothing after it was checked
    CHECK(buf.taken.size() == 8);
    CHECK(err.str().empty());  // no summary either
  }
  SECTION("--matrix") {
    cli::CommandLine command_line;
    std::ostringstream parse_out, parse_err;
    const auto& parsed = command_line.parse(
        {"check", cfg("deepseek-v4.1-flash.json"), "nope.json", cfg("deepseek-v4-flash.json"), "--matrix", "--tp", "8"},
        parse_out, parse_err);
    REQUIRE(parsed.is("check"));
    FailingBuf buf(8);
    std::ostream out(&buf);
    std::ostringstream err;
    CHECK(cli::run_check(parsed.get<mlaplan::cli::CheckOptions>("check"), out, err) ==
          0);  // the missing file (exit 2) was never reached
    CHECK(!out);
  }
}

TEST_CASE("check: text from the input is inert in every format", "[check][stream][bad-input]") {
  TempDir dir;
  const auto evil = dir.write("evil.json", evil_config());
  // A file name with a newline, ESC and a workflow command of its own.
  const auto evil_name = dir.write("x\n::error::name\x1b[2J.json", evil_config());
  for (const auto& file : {evil, evil_name}) {
    for (const std::string format : {"text", "github", "markdown"}) {
      INFO(format << " " << printable(file));
      const auto r = run({"check", file, cfg("deepseek-v4.1-flash.json"), "--tp", "8", "--format", format});
      CHECK(r.code == 3);
      require_inert(r.out, format == "github");
      require_inert(r.err, false);
      // The dtype is shown, escaped: the reader sees what the config holds.
      CHECK_THAT(r.out, Catch::Contains(format == "markdown" ? "bf\\\\x00\\\\x1b\\[31mRED\\\\n::error::x"
                                                             : "bf\\x00\\x1b[31mRED\\n::error::x"));
      if (format == "github") {
        const auto lines = lines_of(r.out);
        CHECK(lines.size() == 1);  // one annotation: the dtype finding, on one line
      }
      const auto m = run({"check", file, "--matrix", "--format", format});
      CHECK(m.code == 0);
      require_inert(m.out, false);
    }
    // A flag value with control bytes and invalid UTF-8 is inert too (a usage error: not a dtype).
    const auto flag = run({"check", file, "--dtype", "\xff\x1b[1m\n::error::y", "--format", "github"});
    CHECK(flag.code == 1);
    require_inert(flag.out, true);
    require_inert(flag.err, false);
    // plan's Markdown goes through the same escaping.
    const auto plan = run({"plan", file, "--format", "markdown"});
    CHECK(plan.code == 3);
    require_inert(plan.out, false);
  }
}
