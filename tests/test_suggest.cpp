// "Did you mean": edit_distance(), suggest() and did_you_mean() (include/mlaplan/base/suggest.hpp).

#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "mlaplan/base/suggest.hpp"

using mlaplan::did_you_mean;
using mlaplan::edit_distance;
using mlaplan::suggest;
using mlaplan::SuggestRules;
using Names = std::vector<std::string>;

TEST_CASE("edit_distance counts single-byte edits and adjacent swaps", "[suggest]") {
  CHECK(edit_distance("", "") == 0);
  CHECK(edit_distance("plan", "plan") == 0);
  CHECK(edit_distance("plna", "plan") == 1);  // a swap is one edit
  CHECK(edit_distance("lpan", "plan") == 1);
  CHECK(edit_distance("chek", "check") == 1);
  CHECK(edit_distance("h200", "") == 4);
  CHECK(edit_distance("", "h200") == 4);
  CHECK(edit_distance("kitten", "sitting") == 3);
  CHECK(edit_distance("ca", "abc") == 3);  // optimal string alignment: a swapped pair is not edited again
  CHECK(edit_distance("FP8", "fp8") == 2);
  CHECK(edit_distance("FP8", "fp8", true) == 0);
  CHECK(edit_distance("Plna", "plAn", true) == 1);
}

TEST_CASE("suggest: the tiers in order, and none when far or too many", "[suggest]") {
  const Names kv{"auto", "bfloat16", "fp8", "fp8_e4m3", "fp8_e5m2", "fp8_ds_mla", "nvfp4_ds_mla"};
  // 1. the same ignoring case
  CHECK(suggest("FP8", kv) == Names{"fp8"});
  CHECK(suggest("Auto", kv) == Names{"auto"});
  // 2. names it begins, shortest first; more than three equally good: none
  CHECK(suggest("nvfp4", kv) == Names{"nvfp4_ds_mla"});
  CHECK(suggest("NVFP", kv) == Names{"nvfp4_ds_mla"});
  CHECK(suggest("fp8_", kv) == Names{"fp8_e4m3", "fp8_e5m2", "fp8_ds_mla"});
  CHECK(suggest("fp", kv).empty());  // fp8, fp8_e4m3, fp8_e5m2, fp8_ds_mla
  CHECK(suggest("bf", kv) == Names{"bfloat16"});
  // 3. names it lies inside
  CHECK(suggest("e5m2", kv) == Names{"fp8_e5m2"});
  CHECK(suggest("DS_MLA", kv) == Names{"fp8_ds_mla", "nvfp4_ds_mla"});
  CHECK(suggest("e5", kv).empty());  // too short for a part
  // 4. a few edits, the nearest; swaps count one
  CHECK(suggest("fp9", kv) == Names{"fp8"});
  CHECK(suggest("fp8_ds_mlaa", kv) == Names{"fp8_ds_mla"});
  CHECK(suggest("fp8_sd_mla", kv) == Names{"fp8_ds_mla"});
  CHECK(suggest("bfloat61", kv) == Names{"bfloat16"});
  CHECK(suggest("jsn", {"text", "json", "markdown"}) == Names{"json"});
  CHECK(suggest("Offload", {"gpu", "offload"}) == Names{"offload"});
  CHECK(suggest("h300", {"h100", "h200", "h800", "h20", "b200"}) == Names{"h100", "h200", "h800"});
  CHECK(suggest("h900", {"h100", "h200", "h800", "h20", "b900", "a900"}).empty());  // four at one edit
  // 5. the longest names inside it
  CHECK(suggest("h200-sxm", {"h100", "h200", "h20"}) == Names{"h200"});
  CHECK(suggest("batch-size", {"block-size", "batch", "context-len"}) == Names{"batch"});
  // nothing near
  CHECK(suggest("xyz", kv).empty());
  CHECK(suggest("", kv).empty());
  CHECK(suggest("fp8", {}).empty());
  CHECK(suggest(std::string(200, 'a'), {std::string(200, 'a') + "b"}).empty());  // too long to tell
}

TEST_CASE("suggest: rules for commands and flags", "[suggest]") {
  const Names commands{"plan", "check", "schedule", "verify", "bench", "report", "gpus", "formats"};
  const SuggestRules command_rules{false, 2};
  CHECK(suggest("plna", commands, command_rules) == Names{"plan"});
  CHECK(suggest("chek", commands, command_rules) == Names{"check"});
  CHECK(suggest("schedul", commands, command_rules) == Names{"schedule"});
  CHECK(suggest("plan1", commands, command_rules) == Names{"plan"});
  CHECK(suggest("p", commands, command_rules).empty());  // shorter than min_length
  // Without substrings a word that holds a command's name is not that command.
  CHECK(suggest("my-plan-config", commands, command_rules).empty());
  CHECK(suggest("my-plan-config", commands) == Names{"plan"});
}

TEST_CASE("did_you_mean: one, two or three names", "[suggest]") {
  CHECK(did_you_mean({}).empty());
  CHECK(did_you_mean({"plan"}) == "did you mean 'plan'?");
  CHECK(did_you_mean({"a", "b"}) == "did you mean 'a' or 'b'?");
  CHECK(did_you_mean({"a", "b", "c"}) == "did you mean 'a', 'b' or 'c'?");
  CHECK(mlaplan::did_you_mean_suffix("jsn", {"text", "json"}) == "; did you mean 'json'?");
  CHECK(mlaplan::did_you_mean_suffix("xml", {"text", "json"}).empty());
}
