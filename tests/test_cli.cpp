// The CLI in process: argument handling, exit codes and the JSON contract of `plan`.

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "cli.hpp"

namespace {

struct Run {
  int code;
  std::string out;
  std::string err;
};

Run run(std::vector<std::string> args) {
  std::ostringstream out, err;
  const int code = mlaplan::cli::run_cli(args, out, err);
  return {code, out.str(), err.str()};
}

std::string cfg(const std::string& rel) { return std::string(MLAPLAN_SOURCE_DIR) + "/configs/" + rel; }

}  // namespace

TEST_CASE("help and version", "[cli]") {
  auto h = run({"--help"});
  CHECK(h.code == 0);
  CHECK_THAT(h.out, Catch::Contains("plan"));
  CHECK_THAT(h.out, Catch::Contains("Exit codes"));
  auto v = run({"--version"});
  CHECK(v.code == 0);
  CHECK_THAT(v.out, Catch::StartsWith("mla-plan "));
  auto ph = run({"plan", "--help"});
  CHECK(ph.code == 0);
  CHECK_THAT(ph.out, Catch::Contains("--json"));
}

TEST_CASE("usage errors exit 1", "[cli]") {
  auto none = run({});
  CHECK(none.code == 1);
  CHECK_THAT(none.err, Catch::StartsWith("mla-plan: error: "));
  auto flag = run({cfg("deepseek-v4.1-flash.json"), "--no-such-flag"});
  CHECK(flag.code == 1);
  CHECK_THAT(flag.err, Catch::Contains("--no-such-flag"));
  auto missing_arg = run({"plan"});
  CHECK(missing_arg.code == 1);
  CHECK_THAT(missing_arg.err, Catch::Contains("CONFIG is required"));
}

TEST_CASE("invalid config exits 2 with the file and JSON path", "[cli]") {
  auto r = run({cfg("does-not-exist.json")});
  CHECK(r.code == 2);
  CHECK(r.err == "mla-plan: error: cannot read '" + cfg("does-not-exist.json") + "': no such file or directory\n");
  CHECK(r.out.empty());
}

TEST_CASE("plan --json carries the contract keys", "[cli]") {
  // `mla-plan CONFIG` and `mla-plan plan CONFIG` are the same.
  auto a = run({cfg("deepseek-v4.1-flash.json"), "--json"});
  auto b = run({"plan", cfg("deepseek-v4.1-flash.json"), "--json"});
  REQUIRE(a.code == 0);
  CHECK(a.out == b.out);
  const auto j = nlohmann::json::parse(a.out);
  CHECK(j.at("schema") == "mla-plan/1");
  CHECK(j.at("config") == cfg("deepseek-v4.1-flash.json"));
  CHECK(j.at("model").at("family") == "deepseek_v41");
  CHECK(j.at("model").at("num_hidden_layers") == 40);
  CHECK(j.at("model").at("num_draft_layers") == 3);
  CHECK(j.at("model").at("num_attention_heads") == 64);
  CHECK(j.at("model").at("head_dim") == 512);
  CHECK(j.at("model").at("sliding_window") == 128);
  CHECK(j.at("model").at("index_topk") == 512);
  REQUIRE(j.at("layers").size() == 43);
  const auto& l2 = j.at("layers").at(2);
  CHECK(l2.at("index") == 2);
  CHECK(l2.at("compress_ratio") == 2);
  CHECK(l2.at("type") == "c2a");
  CHECK(l2.at("draft") == false);
  CHECK(l2.at("is_kv_source") == true);
  CHECK(l2.at("is_index_source") == true);
  CHECK(l2.at("kv_source") == 2);
  CHECK(j.at("layers").at(0).at("kv_source").is_null());
  CHECK(j.at("layers").at(5).at("kv_source") == 2);
  CHECK(j.at("layers").at(42).at("draft") == true);
  CHECK(j.at("layer_types") == nlohmann::json::array({"c1a", "c2a", "swaonly"}));
  CHECK(j.at("warnings").is_array());
  CHECK(j.at("findings").is_array());
}

TEST_CASE("plan text output names groups and sources", "[cli]") {
  auto r = run({cfg("deepseek-v4.1-flash.json")});
  REQUIRE(r.code == 0);
  CHECK_THAT(r.out, Catch::Contains("layers 2-7: c2a, read layer 2's cache"));
  CHECK_THAT(r.out, Catch::Contains("layers 20-39: c1a, read layer 20's cache, top-k from 20, 24, 28, 32, 36"));
  CHECK_THAT(r.out, Catch::Contains("layers 40-42: swaonly, draft (DSpark), window only"));
  CHECK_THAT(r.out, Catch::Contains("index sources: 2, 8, 14, 20 (publishing); 24, 28, 32, 36 (reindex)"));
  CHECK_THAT(r.out, Catch::Contains("candidate source: 20"));
  auto v4 = run({cfg("deepseek-v4-flash.json")});
  REQUIRE(v4.code == 0);
  CHECK_THAT(v4.out, Catch::Contains("layers 2-42 (every 2nd, 21 layers): c4a"));
  CHECK_THAT(v4.out, Catch::Contains("layers 3-41 (every 2nd, 20 layers): c128a"));
}
