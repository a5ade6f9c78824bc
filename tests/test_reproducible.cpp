// Reproducible output (docs/robustness.md): the same inputs give byte-identical text, JSON,
// Markdown, GitHub annotations, SVG and HTML, run after run, and whatever the process's C and C++
// locales are (no digit grouping, no decimal comma). Every command runs in process here; the
// end-to-end tests run the binary twice.

#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <clocale>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <locale>
#include <sstream>
#include <string>
#include <vector>

#include "cli/cli.hpp"

namespace fs = std::filesystem;

namespace {

struct Output {
  int code = -1;
  std::string out, err, file;  // file: the report written with -o, if any
  bool operator==(const Output&) const = default;
};

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

/// The bundled configs (configs/*.json, not the small test models), sorted.
std::vector<std::string> bundled_configs() {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(fs::path(MLAPLAN_SOURCE_DIR) / "configs")) {
    if (e.is_regular_file() && e.path().extension() == ".json") out.push_back(e.path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

/// Where the reports go; made on every call (a test case removes it when done).
fs::path report_dir() {
  const auto dir = fs::temp_directory_path() / ("mlaplan-repro-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  return dir;
}

/// Every command whose output must be reproducible: plan, check, schedule, formats, gpus and
/// report (SVG and HTML) over the bundled configs.
std::vector<std::vector<std::string>> commands() {
  std::vector<std::vector<std::string>> c;
  const auto configs = bundled_configs();
  REQUIRE(configs.size() == 3);
  for (const auto& cfg : configs) {
    c.push_back({"plan", cfg});
    c.push_back({"plan", cfg, "--json"});
    c.push_back({"plan", cfg, "--format", "markdown"});
    c.push_back({"plan", cfg, "--show-records", "--context-lens", "1,129,4096,70000,5", "--spec-tokens", "2"});
    c.push_back({"plan", cfg, "--gpu", "b200", "--tensor-parallel-size", "2", "--pipeline-parallel-size", "2",
                 "--kv-budget-gib", "7.25", "--json"});
    for (const std::string format : {"text", "json", "github", "markdown"})
      c.push_back({"check", cfg, "--format", format});
    c.push_back({"check", cfg, "--matrix", "--tensor-parallel-size", "1,8", "--json"});
    const std::string stem = fs::path(cfg).stem().string();
    c.push_back({"report", cfg, "-o", (report_dir() / (stem + ".svg")).string()});
    c.push_back({"report", cfg, "-o", (report_dir() / (stem + ".html")).string(), "--gpu-memory-utilization", "0.85"});
  }
  std::vector<std::string> all = {"check"};
  all.insert(all.end(), configs.begin(), configs.end());
  c.push_back(all);
  c.push_back({"check", configs[0], configs[1], "--max-global-bytes-per-token", "1800.5", "--format", "github"});
  c.push_back({"schedule", "--kernel", "sm90-sparse", "--num-sms", "132", "--h-q", "128", "--lengths",
               "2048,17,1,900000", "--extra-lengths", "512,3,0,8192", "--show-records"});
  c.push_back(
      {"schedule", "--kernel", "sm100-head64", "--num-sms", "148", "--h-q", "64", "--lengths", "300,5000", "--json"});
  for (const std::string info : {"formats", "gpus"}) {
    c.push_back({info});
    c.push_back({info, "--json"});
  }
  return c;
}

Output run(const std::vector<std::string>& args) {
  std::string written;
  for (std::size_t i = 0; i + 1 < args.size(); ++i) {
    if (args[i] == "-o") {
      written = args[i + 1];
      fs::remove(written);
    }
  }
  std::ostringstream out, err;
  Output o;
  o.code = mlaplan::cli::run_cli(args, out, err);
  o.out = out.str();
  o.err = err.str();
  if (!written.empty()) o.file = slurp(written);
  return o;
}

std::string joined(const std::vector<std::string>& args) {
  std::string s;
  for (const auto& a : args) s += (s.empty() ? "" : " ") + a;
  return s;
}

/// A C++ locale that groups digits and writes a decimal comma ("1.234,5").
struct CommaNumpunct : std::numpunct<char> {
  char do_decimal_point() const override { return ','; }
  char do_thousands_sep() const override { return '.'; }
  std::string do_grouping() const override { return "\3"; }
};

/// Sets the global C++ locale (and, for a named locale, the C locale) for a scope.
class GlobalLocale {
 public:
  explicit GlobalLocale(const std::locale& loc) : previous_(std::locale::global(loc)) {}
  ~GlobalLocale() {
    std::locale::global(previous_);
    std::setlocale(LC_ALL, "C");
  }
  GlobalLocale(const GlobalLocale&) = delete;
  GlobalLocale& operator=(const GlobalLocale&) = delete;

 private:
  std::locale previous_;
};

/// The first of these named locales the system has: decimal commas and digit grouping for the C
/// functions too (printf, strtod). Empty when none is installed.
std::string comma_locale_name() {
  for (const char* name : {"de_DE.UTF-8", "de_DE.utf8", "fr_FR.UTF-8", "fr_FR.utf8", "ru_RU.UTF-8", "nl_NL.UTF-8"}) {
    try {
      (void)std::locale(name);
      return name;
    } catch (const std::runtime_error&) {}
  }
  return {};
}

/// Runs every command once: each succeeds (0, or 3 / 4 for a plan the target cannot run) and says
/// something; a report is written.
std::vector<Output> run_all(const std::vector<std::vector<std::string>>& cmds) {
  std::vector<Output> outputs;
  for (const auto& c : cmds) {
    INFO(joined(c));
    outputs.push_back(run(c));
    const auto& o = outputs.back();
    CHECK((o.code == 0 || o.code == 3 || o.code == 4));
    CHECK_FALSE((o.out.empty() && o.err.empty()));
    if (std::find(c.begin(), c.end(), "-o") != c.end()) CHECK(o.file.size() > 1000);
  }
  return outputs;
}

void compare_all(const std::vector<std::vector<std::string>>& cmds, const std::vector<Output>& expected) {
  for (std::size_t i = 0; i < cmds.size(); ++i) {
    INFO(joined(cmds[i]));
    const Output again = run(cmds[i]);
    CHECK(again.code == expected[i].code);
    CHECK(again.err == expected[i].err);
    CHECK(again.out == expected[i].out);  // CHECK, not REQUIRE: report every command that differs
    CHECK(again.file == expected[i].file);
  }
}

}  // namespace

TEST_CASE("reproducible: every command twice gives byte-identical output", "[repro]") {
  const auto cmds = commands();
  const auto first = run_all(cmds);
  compare_all(cmds, first);
  fs::remove_all(report_dir());
}

TEST_CASE("reproducible: the same output under other locales", "[repro][locale]") {
  const auto cmds = commands();
  const auto classic = run_all(cmds);
  {
    INFO("a C++ global locale with digit grouping and a decimal comma");
    const GlobalLocale guard(std::locale(std::locale::classic(), new CommaNumpunct));
    std::ostringstream probe;  // in effect for every stream made from now on
    probe << 1234.5;
    REQUIRE(probe.str() == "1.234,5");
    compare_all(cmds, classic);
  }
  try {
    INFO("C.UTF-8");
    const GlobalLocale guard{std::locale("C.UTF-8")};
    compare_all(cmds, classic);
  } catch (const std::runtime_error&) {
    WARN("C.UTF-8 is not installed here; skipped");
  }
  if (const std::string name = comma_locale_name(); !name.empty()) {
    INFO(name);
    const GlobalLocale guard{std::locale(name)};  // a named locale: std::setlocale(LC_ALL) too
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f", 1.5);
    REQUIRE(std::string(buf) == "1,5");  // the C functions write decimal commas now
    compare_all(cmds, classic);
  } else {
    WARN("no locale with a decimal comma is installed here (de_DE.UTF-8, fr_FR.UTF-8, ...); skipped");
  }
  fs::remove_all(report_dir());
}
