// check's CONFIG arguments (folders of configs, --recursive, quoted globs), --gpu with several
// GPUs, the numbers of a PASS line, the line and column of an invalid config's field in --format
// github (docs/ci.md), and the error document of --json (docs/cli.md, "Errors as JSON").

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "cli_run.hpp"
#include "commands/check_inputs.hpp"
#include "output/error_json.hpp"
#include "temp_dir.hpp"

using testing_cli::config_file;
using testing_cli::run;
using testing_files::TempDir;

namespace {

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

/// V4-Flash's config with compress_ratios[3] = 7 (an invalid ratio), written indented.
std::string bad_ratio_config(const TempDir& dir, const std::string& name) {
  auto cfg = nlohmann::json::parse(read_text(config_file("deepseek-v4-flash.json")));
  cfg["compress_ratios"][3] = 7;
  return dir.write(name, cfg.dump(2));
}

/// A folder of configs: V4-Flash (a.json), a package.json, and small/ holding V3.2 (b.json) and
/// a model directory m/ (config.json).
void make_folder(const TempDir& dir) {
  namespace fs = std::filesystem;
  fs::create_directories(dir.path / "ci" / "small" / "m");
  fs::copy_file(config_file("deepseek-v4-flash.json"), dir.path / "ci" / "a.json");
  fs::copy_file(config_file("deepseek-v3.2.json"), dir.path / "ci" / "small" / "b.json");
  fs::copy_file(config_file("deepseek-v4-flash.json"), dir.path / "ci" / "small" / "m" / "config.json");
  dir.write("ci/package.json", R"({"name": "x", "version": "1.0.0"})");
  dir.write("ci/notes.txt", "not json");
}

std::size_t count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto p = text.find(what); p != std::string::npos; p = text.find(what, p + 1)) ++n;
  return n;
}

}  // namespace

TEST_CASE("check inputs: the rule for a *.json in a folder", "[check][inputs]") {
  using mlaplan::cli::check_inputs::looks_like_model_config;
  CHECK(looks_like_model_config(R"({"model_type": "deepseek_v4"})"));
  CHECK(looks_like_model_config(R"({"architectures": ["X"]})"));
  CHECK(looks_like_model_config(R"({"num_hidden_layers": 4})"));
  CHECK(looks_like_model_config(R"({"text_config": {}})"));
  CHECK(looks_like_model_config("{\"model_type\": \"x\",,}"));  // not JSON: checked, so that it fails
  CHECK(looks_like_model_config(""));
  CHECK_FALSE(looks_like_model_config(R"({"name": "x", "version": "1.0.0"})"));
  CHECK_FALSE(looks_like_model_config(R"({"bos_token_id": 0, "eos_token_id": 1})"));  // generation_config.json
  CHECK_FALSE(looks_like_model_config("[1, 2, 3]"));
  CHECK_FALSE(looks_like_model_config(R"({"weight_map": {"model_type": "x"}})"));  // only the top level counts
}

TEST_CASE("check inputs: a folder of configs, with and without --recursive", "[check][inputs]") {
  const TempDir dir;
  make_folder(dir);
  const std::string ci = dir / "ci";
  SECTION("the folder's own *.json; the subdirectory and the non-config listed as skipped") {
    const auto r = run({"check", ci, "--tp", "8"});
    CHECK(r.code == 0);
    CHECK(r.out.find("PASS " + ci + "/a.json") != std::string::npos);
    CHECK(r.out.find("SKIP " + ci + "/package.json (not a model config: no model_type") != std::string::npos);
    CHECK(r.out.find("SKIP " + ci + "/small/ (a subdirectory: --recursive searches it)") != std::string::npos);
    CHECK(r.out.find("notes.txt") == std::string::npos);  // not *.json: not a candidate at all
    CHECK(r.out.find("1 of 1 configs passed, 2 files skipped") != std::string::npos);
  }
  SECTION("--recursive: a subdirectory's configs, a model directory as one model") {
    const auto r = run({"check", ci, "--recursive", "--tp", "8"});
    CHECK(r.code == 0);
    CHECK(r.out.find("PASS " + ci + "/small/b.json") != std::string::npos);
    CHECK(r.out.find("PASS " + ci + "/small/m ") != std::string::npos);
    CHECK(r.out.find("3 of 3 configs passed, 1 file skipped") != std::string::npos);
    // The order: a.json, then small/ in name order (b.json, m).
    CHECK(r.out.find("/a.json") < r.out.find("/small/b.json"));
    CHECK(r.out.find("/small/b.json") < r.out.find("/small/m "));
  }
  SECTION("hidden directories and links to directories are not searched") {
    std::filesystem::create_directories(dir.path / "ci" / ".git");
    std::filesystem::copy_file(config_file("deepseek-v3.2.json"), dir.path / "ci" / ".git" / "c.json");
    std::filesystem::create_directory_symlink(dir.path / "ci" / "small", dir.path / "ci" / "link");
    const auto flat = run({"check", ci, "--tp", "8"});
    CHECK(flat.out.find(".git") == std::string::npos);  // not even listed
    CHECK(flat.out.find("SKIP " + ci + "/link/ (a subdirectory: --recursive searches it)") != std::string::npos);
    const auto deep = run({"check", ci, "--recursive", "--tp", "8"});
    CHECK(deep.code == 0);
    CHECK(deep.out.find("SKIP " + ci + "/.git/ (a hidden directory: not searched)") != std::string::npos);
    CHECK(deep.out.find("SKIP " + ci + "/link/ (a symbolic link to a directory: not followed)") != std::string::npos);
    CHECK(deep.out.find("c.json") == std::string::npos);
    CHECK(deep.out.find("3 of 3 configs passed") != std::string::npos);
  }
  SECTION("--json lists the skipped files") {
    const auto r = run({"check", ci, "--tp", "8", "--json"});
    CHECK(r.code == 0);
    const auto doc = nlohmann::json::parse(r.out);
    REQUIRE(doc["files"].size() == 1);
    REQUIRE(doc["skipped"].size() == 2);
    CHECK(doc["skipped"][0]["path"] == ci + "/package.json");
    CHECK(doc["files"][0]["spare_bytes"].get<std::int64_t>() > 0);
  }
  SECTION("the skipped files in --format github (stderr) and markdown (under the table)") {
    const auto gh = run({"check", ci, "--tp", "8", "--format", "github"});
    CHECK(gh.code == 0);
    CHECK(gh.out.empty());  // no finding: no annotation
    CHECK(gh.err.find("mla-plan check: skipped " + ci + "/package.json (not a model config") != std::string::npos);
    CHECK(gh.err.find("mla-plan check: 1 passed, 0 failed, 2 files skipped\n") != std::string::npos);
    const auto md = run({"check", ci, "--tp", "8", "--format", "markdown"});
    CHECK(md.code == 0);
    CHECK(md.out.find("- skipped `" + ci + "/package.json`: not a model config") != std::string::npos);
    CHECK(md.out.find("TP 8") == std::string::npos);  // the row: family on target, dtype: the numbers
    CHECK(md.out.find("x requests of 1,048,576 tokens, ") != std::string::npos);
  }
  SECTION("a model directory keeps working as one model") {
    const auto r = run({"check", ci + "/small/m", "--tp", "8"});
    CHECK(r.code == 0);
    CHECK(r.out.find("PASS " + ci + "/small/m ") != std::string::npos);
    CHECK(r.out.find("SKIP") == std::string::npos);
  }
  SECTION("a folder without a model config fails, exit 2") {
    std::filesystem::create_directories(dir.path / "empty");
    dir.write("empty/package.json", "{}");
    const auto r = run({"check", dir / "empty", "--tp", "8"});
    CHECK(r.code == 2);
    CHECK(r.out.find("holds no config.json and no model config among its 1 *.json file") != std::string::npos);
    CHECK(r.out.find("SKIP " + (dir / "empty") + "/package.json") != std::string::npos);
  }
  SECTION("a broken *.json in a folder is checked, never skipped") {
    dir.write("ci/broken.json", "{\"model_type\": \"deepseek_v4\",,}");
    const auto r = run({"check", ci, "--tp", "8"});
    CHECK(r.code == 2);
    CHECK(r.out.find("FAIL " + ci + "/broken.json (exit 2)") != std::string::npos);
  }
}

TEST_CASE("check inputs: a quoted glob is expanded as the shell would", "[check][inputs]") {
  const TempDir dir;
  make_folder(dir);
  const std::string ci = dir / "ci";
  const auto r = run({"check", ci + "/*.json", "--tp", "8"});
  // As typed: package.json is a file named on the command line, so it is checked (and fails).
  CHECK(r.code == 2);
  CHECK(r.out.find("PASS " + ci + "/a.json") != std::string::npos);
  CHECK(r.out.find("FAIL " + ci + "/package.json (exit 2)") != std::string::npos);
  const auto none = run({"check", ci + "/*.yaml", "--tp", "8"});
  CHECK(none.code == 2);
  CHECK(none.out.find("no file matches the pattern") != std::string::npos);
}

TEST_CASE("check --gpu h200,b200: one verdict per GPU, the worst exit", "[check][inputs]") {
  const std::string v4 = config_file("deepseek-v4-flash.json");
  const auto r = run({"check", v4, "--gpu", "h200,b200", "--tp", "8"});
  CHECK(r.code == 0);
  CHECK(r.out.find("[deepseek_v4 on h200,") != std::string::npos);
  CHECK(r.out.find("[deepseek_v4 on b200,") != std::string::npos);
  CHECK(r.out.find("2 of 2 configs passed") != std::string::npos);
  // One GPU too small (a100: no sparse-MLA backend): that verdict fails and sets the exit code.
  const auto mixed = run({"check", v4, "--gpu", "h200,a100", "--tp", "8", "--format", "github"});
  CHECK(mixed.code == 3);
  CHECK(mixed.err.find("mla-plan check: PASS " + v4 + "  [deepseek_v4 on h200,") != std::string::npos);
  CHECK(mixed.out.find("(a100)::") != std::string::npos);  // the annotations' titles name the GPU
  CHECK(mixed.out.find("(h200)::") == std::string::npos);
  // Every GPU is a preset, checked before any file is read.
  const auto bad = run({"check", "missing.json", "--gpu", "h200,h2000"});
  CHECK(bad.code == 1);
  CHECK(bad.out.empty());
  // An unreadable file fails once, not once per GPU.
  const auto missing = run({"check", "missing.json", v4, "--gpu", "h200,b200", "--tp", "8"});
  CHECK(missing.code == 2);
  CHECK(count(missing.out, "FAIL missing.json") == 1);
}

TEST_CASE("check --format github: the numbers that passed, an invalid config's field located", "[check][inputs]") {
  const TempDir dir;
  const std::string bad = bad_ratio_config(dir, "bad.json");
  const std::string v4 = config_file("deepseek-v4-flash.json");
  const auto r = run({"check", bad, v4, "--tp", "8", "--format", "github"});
  CHECK(r.code == 2);
  // compress_ratios starts on its own line in the indented file; element 3 is 3 lines below.
  const std::string text = read_text(bad);
  const auto loc = mlaplan::locate_json_value(text, "/compress_ratios/3");
  REQUIRE(loc);
  CHECK(r.out.find("::error file=" + bad + ",line=" + std::to_string(loc->line) +
                   ",col=" + std::to_string(loc->column) + ",title=mla-plan config.invalid::") != std::string::npos);
  // stdout holds the annotations; what passed, with its numbers, is in the log on stderr.
  CHECK(r.out.find(v4) == std::string::npos);
  CHECK(r.err.find("mla-plan check: PASS " + v4 + "  [deepseek_v4 on h200, fp8_ds_mla, TP 8] ") != std::string::npos);
  CHECK(r.err.find("x requests of 1,048,576 tokens, ") != std::string::npos);
  CHECK(r.err.find(" GiB to spare\nmla-plan check: 1 passed, 1 failed\n") != std::string::npos);
  // --format json: the finding carries the field's pointer, as the rules' findings do.
  const auto j = nlohmann::json::parse(run({"check", bad, "--tp", "8", "--json"}).out);
  CHECK(j["files"][0]["findings"][0]["id"] == "config.invalid");
  CHECK(j["files"][0]["findings"][0]["path"] == "/compress_ratios/3");
  // The text PASS line has the same numbers.
  const auto t = run({"check", v4, "--tp", "8"});
  CHECK(t.out.find("x requests of 1,048,576 tokens, ") != std::string::npos);
  CHECK(t.out.find(" GiB to spare\n") != std::string::npos);
}

TEST_CASE("errors as JSON: one document on stdout, with the exit code of the run without --json", "[json][errors]") {
  const TempDir dir;
  const std::string bad = bad_ratio_config(dir, "bad.json");
  const std::string v41 = config_file("deepseek-v4.1-flash.json");
  struct Case {
    std::vector<std::string> args;
    int code;
    std::string command, kind, field;
    nlohmann::json value;
  };
  const std::vector<Case> cases = {
      {{bad, "--tp", "8", "--json"}, 2, "plan", "invalid_config", "/compress_ratios/3", 7},
      {{"plan", v41, "--json", "--batch", "0"}, 1, "plan", "usage", "--batch", "0"},
      {{v41, "--format", "json", "--bogus"}, 1, "plan", "usage", "--bogus", nullptr},
      {{v41, "--json", "--max-model-len", "99999999"}, 1, "plan", "usage", "--max-model-len", "99999999"},
      {{"verify", v41, "--json"}, 6, "verify", "no_gpu", "", nullptr},
      {{"bench", v41, "--json"}, 6, "bench", "no_gpu", "", nullptr},
      {{"bench", bad, "--json"}, 2, "bench", "invalid_config", "/compress_ratios/3", 7},
      {{"check", v41, "--tp", "1,2", "--json"}, 1, "check", "usage", "", nullptr},
      {{"schedule", "--json"}, 1, "schedule", "usage", "", nullptr},
      {{"gpus", "--json", "--x"}, 1, "gpus", "usage", "--x", nullptr},
      {{"plna", "--json"}, 1, "", "usage", "COMMAND", "plna"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.args);
    const auto r = run(c.args);
    CHECK(r.code == c.code);
    std::vector<std::string> plain;
    for (std::size_t i = 0; i < c.args.size(); ++i) {
      if (c.args[i] == "--json") continue;
      if (c.args[i] == "--format") {
        ++i;
        continue;
      }
      plain.push_back(c.args[i]);
    }
    const auto without = run(plain);
    CHECK(without.code == c.code);
    CHECK(without.out.empty());
    nlohmann::json doc;
    REQUIRE_NOTHROW(doc = nlohmann::json::parse(r.out));
    CHECK(doc["schema"] == "mla-plan/3");
    CHECK(doc["command"] == (c.command.empty() ? nlohmann::json(nullptr) : nlohmann::json(c.command)));
    CHECK(doc["exit_code"] == c.code);
    CHECK(doc["error"]["exit_code"] == c.code);
    CHECK(doc["error"]["kind"] == c.kind);
    CHECK(r.err == "mla-plan: error: " + doc["error"]["message"].get<std::string>() + "\n");
    if (!c.field.empty()) {
      CHECK(doc["error"]["field"] == c.field);
      CHECK(doc["error"]["value"] == c.value);
    }
  }
  // The invalid config's document names the file and where the field's value is.
  const auto r = run({bad, "--json"});
  const auto doc = nlohmann::json::parse(r.out);
  const auto loc = mlaplan::locate_json_value(read_text(bad), "/compress_ratios/3");
  REQUIRE(loc);
  CHECK(doc["error"]["file"] == bad);
  CHECK(doc["error"]["line"] == loc->line);
  CHECK(doc["error"]["column"] == loc->column);
  // A JSON syntax error: the parser's line and column.
  const std::string broken = dir.write("broken.json", "{\n  \"model_type\": \"deepseek_v4\",,\n}\n");
  const auto b = run({broken, "--json"});
  CHECK(b.code == 2);
  const auto bdoc = nlohmann::json::parse(b.out);
  CHECK(bdoc["error"]["file"] == broken);
  CHECK(bdoc["error"]["line"] == 2);
  CHECK(bdoc["error"]["field"].is_null());
  // A value --hf-overrides set: the message says so, and the document gives no line or value of the
  // file (which holds another value there).
  const std::string v41file = config_file("deepseek-v4.1-flash.json");
  for (const std::string& over : {std::string(R"({"text_config": {"sliding_window": 0}})"),
                                  std::string(R"({"text_config": {"compress_ratios": [0, 0, 7]}})")}) {
    CAPTURE(over);
    const auto o = run({v41file, "--tp", "8", "--hf-overrides", over, "--json"});
    CHECK(o.code == 2);
    const auto odoc = nlohmann::json::parse(o.out);
    CHECK(odoc["error"]["file"] == v41file);
    CHECK_THAT(odoc["error"]["message"].get<std::string>(),
               Catch::StartsWith(v41file + " (with --hf-overrides): /text_config/"));
    CHECK(odoc["error"]["field"].get<std::string>().rfind("/text_config/", 0) == 0);
    CHECK(odoc["error"]["value"].is_null());
    CHECK_FALSE(odoc["error"].contains("line"));
  }
  // A field the override did not touch still points into the file.
  const auto untouched = run({bad, "--hf-overrides", R"({"sliding_window": 128})", "--json"});
  CHECK(nlohmann::json::parse(untouched.out)["error"]["line"] == loc->line);
  // Without --json nothing changes: the line on stderr, nothing on stdout.
  const auto plain = run({bad});
  CHECK(plain.code == 2);
  CHECK(plain.out.empty());
  // A command that has its own document keeps it (plan that does not fit: exit 4, plan's document).
  const auto fit = run({v41, "--tp", "1", "--json"});
  CHECK(fit.code == 4);
  CHECK(nlohmann::json::parse(fit.out).contains("model"));
  // --json after `--` is an argument, not a request for JSON.
  CHECK_FALSE(mlaplan::cli::error_json::json_requested({"plan", "--", "--json"}));
  CHECK(mlaplan::cli::error_json::json_requested({"check", "x", "--format=json"}));
}

TEST_CASE("error facts: the field and value of the messages", "[json][errors]") {
  using mlaplan::cli::error_json::facts_of;
  const auto batch = facts_of(1, "--batch: '0x40' is not a decimal integer; allowed 1..65536");
  CHECK(batch.field == "--batch");
  CHECK(batch.value == "0x40");
  const auto item = facts_of(1, "--context-lens[1]: empty item in '1,,3'; every item is a decimal integer");
  CHECK(item.field == "--context-lens[1]");
  CHECK(item.value == "1,,3");
  const auto twice = facts_of(1, "--batch given twice ('8' and '16'); give it once");
  CHECK(twice.field == "--batch");
  CHECK(twice.value == "8");
  const auto unknown = facts_of(1, "plan: unknown flag '--tensor-parallel' (did you mean '--tensor-parallel-size'?)");
  CHECK(unknown.field == "--tensor-parallel");
  CHECK_FALSE(unknown.value);
  const auto needs = facts_of(1, "plan: --batch needs a value (a decimal integer); run 'mla-plan plan --help'");
  CHECK(needs.field == "--batch");
  CHECK_FALSE(needs.value);
  const auto config = facts_of(2, "missing.json: /compress_ratios/3: layer 3: bad");
  CHECK(config.field == "/compress_ratios/3");
  CHECK(config.file == "missing.json");
  CHECK_FALSE(config.value);  // the file cannot be read: no value
  const auto none = facts_of(6, "this mla-plan was built without CUDA: verify needs the project's kernels");
  CHECK(none.field.empty());
  CHECK(mlaplan::cli::error_json::kind_name(6) == "no_gpu");
  CHECK(mlaplan::cli::error_json::last_error_message("x\nmla-plan: error: one\nmla-plan: error: two\n") == "two");
}
