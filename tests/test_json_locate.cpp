// locate_json_value(): where a JSON pointer's value starts in the raw text, checked by hand and
// against nlohmann's parser (which values exist, which texts are JSON).

#include <catch2/catch.hpp>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "mlaplan/base/json_locate.hpp"

namespace {

using mlaplan::locate_json_value;

/// "line:column" of the pointer's value, or "none".
std::string where(std::string_view text, std::string_view pointer) {
  const auto loc = locate_json_value(text, pointer);
  if (!loc) return "none";
  return std::to_string(loc->line) + ":" + std::to_string(loc->column);
}

const std::string kDoc =
    "{\n"                                    // 1
    "  \"model_type\": \"deepseek_v41\",\n"  // 2
    "  \"text_config\": {\n"                 // 3
    "    \"index_topk\": 512,\n"             // 4
    "    \"rope\": {\"factor\": 16}\n"       // 5
    "  },\n"                                 // 6
    "  \"compress_ratios\": [\n"             // 7
    "    0,\n"                               // 8
    "    2, 1,\n"                            // 9
    "    [true, null]\n"                     // 10
    "  ]\n"                                  // 11
    "}\n";

}  // namespace

TEST_CASE("json locate: members of nested objects and elements of arrays", "[json_locate]") {
  CHECK(where(kDoc, "/model_type") == "2:17");
  CHECK(where(kDoc, "/text_config") == "3:18");
  CHECK(where(kDoc, "/text_config/index_topk") == "4:19");
  CHECK(where(kDoc, "/text_config/rope/factor") == "5:24");
  CHECK(where(kDoc, "/compress_ratios") == "7:22");
  CHECK(where(kDoc, "/compress_ratios/0") == "8:5");
  CHECK(where(kDoc, "/compress_ratios/1") == "9:5");
  CHECK(where(kDoc, "/compress_ratios/2") == "9:8");
  CHECK(where(kDoc, "/compress_ratios/3") == "10:5");
  CHECK(where(kDoc, "/compress_ratios/3/1") == "10:12");
  const auto loc = locate_json_value(kDoc, "/text_config/index_topk");
  REQUIRE(loc);
  CHECK(kDoc.substr(loc->offset, 3) == "512");
  // one line: columns count bytes from the line's start
  CHECK(where(R"({"a":[10,20,{"b":"x"}]})", "/a/2/b") == "1:18");
  // CRLF line ends: a line still ends at '\n'
  CHECK(where("{\r\n\"a\":\r\n  1}", "/a") == "3:3");
}

TEST_CASE("json locate: the empty pointer is the document's first non-space character", "[json_locate]") {
  CHECK(where(kDoc, "") == "1:1");
  CHECK(where("\n\n  \t[1]", "") == "3:4");
  CHECK(where(" 42 ", "") == "1:2");
  CHECK(where("\xEF\xBB\xBF{}", "") == "1:4");  // after a UTF-8 byte-order mark (3 bytes)
  CHECK(where("   ", "") == "none");
  CHECK(where("", "") == "none");
}

TEST_CASE("json locate: escaped keys and the ~0 / ~1 escapes of a pointer", "[json_locate]") {
  const std::string doc = R"({"a/b": 1, "m~n": 2, "q\"k": 3, "\u00e9t\u00E9": 4, "\ud83d\ude00": 5, "x\/y": 6,
"": 7, "t\tab": 8, " ": 9, "\u007e1": 10})";
  CHECK(where(doc, "/a~1b") == "1:9");
  CHECK(where(doc, "/m~0n") == "1:19");
  CHECK(where(doc, "/q\"k") == "1:30");
  CHECK(where(doc, "/\xC3\xA9t\xC3\xA9") == "1:50");  // \u00e9 and \u00E9 are é
  CHECK(where(doc, "/\xF0\x9F\x98\x80") == "1:69");   // a surrogate pair
  CHECK(where(doc, "/x~1y") == "1:80");               // \/ in a key is '/'
  CHECK(where(doc, "/") == "2:5");                    // the empty key
  CHECK(where(doc, "/t\tab") == "2:17");
  CHECK(where(doc, "/ ") == "2:25");
  CHECK(where(doc, "/~01") == "2:39");  // the key "~1" (written \u007e1): the pointer escapes its '~'
  CHECK(where(doc, "/~1") == "none");   // is the key "/": there is none
  CHECK(where(doc, "/a/b") == "none");  // "a" then "b": not "a/b"
  CHECK(where(doc, "/m~n") == "none");  // a '~' must be ~0 or ~1: not a pointer
  CHECK(where(doc, "/m~2n") == "none");
  CHECK(where(doc, "/m~") == "none");
  CHECK(where(doc, "a~1b") == "none");  // a pointer starts with '/'

  CHECK(mlaplan::parse_json_pointer("/a~1b/~0/0/") == std::vector<std::string>{"a/b", "~", "0", ""});
  CHECK(mlaplan::parse_json_pointer("/~01") == std::vector<std::string>{"~1"});
  CHECK(mlaplan::parse_json_pointer("")->empty());
  CHECK_FALSE(mlaplan::parse_json_pointer("x"));
  CHECK_FALSE(mlaplan::parse_json_pointer("/~x"));
}

TEST_CASE("json locate: of duplicate keys the last counts, as nlohmann keeps it", "[json_locate]") {
  const std::string doc = "{\"a\": 1,\n \"b\": {\"c\": 2},\n \"a\": 3,\n \"b\": {\"d\": 4}}";
  CHECK(where(doc, "/a") == "3:7");
  CHECK(where(doc, "/b") == "4:7");
  CHECK(where(doc, "/b/d") == "4:13");
  CHECK(where(doc, "/b/c") == "none");  // only in the first "b", which the second replaces
  const auto j = nlohmann::json::parse(doc);
  CHECK(j.at("a") == 3);
  CHECK_FALSE(j.at("b").contains("c"));
  // a duplicate deeper down, inside the last of the outer duplicates
  CHECK(where(R"({"x": {"y": 1}, "x": {"y": 2, "y": [5]}})", "/x/y/0") == "1:37");
  // a later duplicate that is a scalar: nothing is under it
  CHECK(where(R"({"x": {"y": 1}, "x": 7})", "/x/y") == "none");
}

TEST_CASE("json locate: pointers that do not resolve", "[json_locate]") {
  CHECK(where(kDoc, "/missing") == "none");
  CHECK(where(kDoc, "/text_config/missing") == "none");
  CHECK(where(kDoc, "/model_type/0") == "none");              // into a string
  CHECK(where(kDoc, "/text_config/index_topk/x") == "none");  // into a number
  CHECK(where(kDoc, "/compress_ratios/4") == "none");         // past the end
  CHECK(where(kDoc, "/compress_ratios/-") == "none");         // the element after the last: none
  CHECK(where(kDoc, "/compress_ratios/01") == "none");        // a leading zero is no index
  CHECK(where(kDoc, "/compress_ratios/+1") == "none");
  CHECK(where(kDoc, "/compress_ratios/") == "none");
  CHECK(where(kDoc, "/compress_ratios/99999999999999999999999999") == "none");  // past SIZE_MAX
  CHECK(where(kDoc, "/compress_ratios/model_type") == "none");
  CHECK(where(R"({"0": 1})", "/0") == "1:7");  // a digit token names a key in an object
  CHECK(where("[]", "/0") == "none");
  CHECK(where("{}", "/") == "none");
}

TEST_CASE("json locate: malformed text locates nothing, and never crashes or hangs", "[json_locate]") {
  // the pointer's value is well before the fault: still nothing, the text is not JSON
  for (const std::string& bad : std::vector<std::string>{R"({"a": 1)",
                                                         R"({"a": 1,})",
                                                         R"({"a" 1})",
                                                         R"({"a": 1 "b": 2})",
                                                         R"({a: 1})",
                                                         R"({"a": 1}})",
                                                         R"({"a": 1} x)",
                                                         R"({"a": 1}{})",
                                                         R"({"a": [1,]})",
                                                         R"({"a": [1 2]})",
                                                         R"({"a": [,1]})",
                                                         R"({"a": 01})",
                                                         R"({"a": 1.})",
                                                         R"({"a": .5})",
                                                         R"({"a": 1e})",
                                                         R"({"a": -})",
                                                         R"({"a": +1})",
                                                         R"({"a": tru})",
                                                         R"({"a": True})",
                                                         R"({"a": nul})",
                                                         R"({"a": NaN})",
                                                         R"({"a": "x)",
                                                         R"({"a": "\x"})",
                                                         R"({"a": "\u12G4"})",
                                                         R"({"a": "\ud800"})",
                                                         R"({"a": "\udc00"})",
                                                         R"({"a": "\ud800\u0041"})",
                                                         "{\"a\": \"tab\there\"}",
                                                         "{\"a\": \"\xff\"}",
                                                         "{\"a\": \"\xC0\xAF\"}",
                                                         "{\"a\": \"\xED\xA0\x80\"}",
                                                         "{\"a\": \"\xE2\x82\"}",
                                                         std::string("{\"a\": 1}\0", 9),
                                                         "{\"a\": 1} // c",
                                                         "{\"a\": 1, \"b\": [}",
                                                         "\"a\": 1"}) {
    INFO(bad);
    CHECK(where(bad, "/a") == "none");
    CHECK(where(bad, "") == "none");
  }
  // valid: exponents, signs, escapes, UTF-8, literals
  CHECK(where(R"({"b": [-0, 1.5e+3, 2E-2, -12.0e5, true, false, null, "\"\\\/\b\f\n\r\t\u00ff"], "a": 1})", "/a") ==
        "1:86");
  CHECK(where("{\"b\": \"\xE2\x82\xAC \xF0\x9F\x98\x80\", \"a\": 1}", "/a") == "1:24");

  // Deep nesting: refused past kJsonLocateMaxDepth, in time linear in the text.
  const std::size_t max = mlaplan::kJsonLocateMaxDepth;
  const std::string ok = std::string(max, '[') + std::string(max, ']');
  CHECK(where(ok, "") == "1:1");
  CHECK(where(ok, "/0/0") == "1:3");
  const std::string deep = std::string(max + 1, '[') + std::string(max + 1, ']');
  CHECK(where(deep, "") == "none");
  const std::string huge_deep(4'000'000, '[');
  CHECK(where(huge_deep, "/0") == "none");
  const std::string huge_open = "[\"" + std::string(4'000'000, 'a');  // a string that never ends
  CHECK(where(huge_open, "/0") == "none");
  const std::string huge_escapes = "[\"" + std::string(4'000'000, '\\') + "\"]";  // 2,000,000 \\ escapes
  CHECK(where(huge_escapes, "/0") == "1:2");
  // A long flat array: the last element found in one pass.
  std::string big = "[";
  for (int i = 0; i < 200'000; ++i) big += "{\"k\": [1, 2, \"x\"]},\n";
  big += "7]";
  CHECK(where(big, "/200000") == "200001:1");
  CHECK(where(big, "/199999/k/2") == "200000:14");
}

TEST_CASE("json locate: agrees with nlohmann on which texts are JSON and where values are", "[json_locate]") {
  const std::string base = R"({
  "model_type": "deepseek_v41",
  "text_config": {"index_topk": 512, "heads": [1, 2, {"x": null}], "e": {}, "a": []},
  "compress_ratios": [0, 2, 1, -1.5e3, true, false, "s\n\u00e9"],
  "k~/": {"": "v"}
})";
  // Every value nlohmann holds is located, and the text there is that value.
  const auto j = nlohmann::json::parse(base);
  std::vector<nlohmann::json::json_pointer> pointers{nlohmann::json::json_pointer("")};
  for (std::size_t i = 0; i < pointers.size(); ++i) {
    const auto& v = j.at(pointers[i]);
    if (v.is_object()) {
      for (const auto& [k, _] : v.items()) pointers.push_back(pointers[i] / k);
    } else if (v.is_array()) {
      for (std::size_t e = 0; e < v.size(); ++e) pointers.push_back(pointers[i] / e);
    }
  }
  CHECK(pointers.size() == 21);
  for (const auto& p : pointers) {
    INFO(p.to_string());
    const auto loc = locate_json_value(base, p.to_string());
    REQUIRE(loc);
    const auto& v = j.at(p);
    const std::string_view at = std::string_view(base).substr(loc->offset);
    if (v.is_object()) CHECK(at.front() == '{');
    else if (v.is_array()) CHECK(at.front() == '[');
    else if (v.is_string()) CHECK(at.front() == '"');
    else if (v.is_number_float()) CHECK(at.substr(0, 6) == "-1.5e3");
    else CHECK(at.substr(0, v.dump().size()) == v.dump());
  }

  // Mutated texts: located exactly when nlohmann parses them (bytes from JSON's alphabet; no NUL,
  // which nlohmann's C-string input would take for the end).
  const std::string alphabet = "{}[]:,\"\\ \n01-.eE+tuaflsnr/~\xC3\xA9\xFF";
  std::uint64_t seed = 0x9E3779B97F4A7C15ull;
  const auto next = [&seed]() {
    seed ^= seed << 13;
    seed ^= seed >> 7;
    seed ^= seed << 17;
    return seed;
  };
  int parsed = 0, refused = 0;
  for (int round = 0; round < 3000; ++round) {
    std::string text = base;
    const auto edits = 1 + next() % 3;
    for (std::uint64_t e = 0; e < edits; ++e) {
      const auto at = next() % text.size();
      const char c = alphabet[next() % alphabet.size()];
      switch (next() % 3) {
        case 0: text[at] = c; break;
        case 1: text.insert(text.begin() + static_cast<std::ptrdiff_t>(at), c); break;
        default: text.erase(at, 1); break;
      }
    }
    const bool json_ok = nlohmann::json::accept(text);
    INFO(text);
    CHECK(locate_json_value(text, "").has_value() == json_ok);
    (json_ok ? parsed : refused) += 1;
    if (json_ok) {
      const auto m = nlohmann::json::parse(text);
      for (const std::string ptr : {"/text_config/index_topk", "/compress_ratios/2", "/k~0~1", "/model_type"}) {
        INFO(ptr);
        CHECK(locate_json_value(text, ptr).has_value() == m.contains(nlohmann::json::json_pointer(ptr)));
      }
    }
  }
  CHECK(parsed > 100);
  CHECK(refused > 100);
}
