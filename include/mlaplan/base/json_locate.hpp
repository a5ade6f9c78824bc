#pragma once
// Where a JSON pointer's value starts in the text of a JSON document: the line (and column) an
// annotation or a message can point at. A hand-written scanner over the raw text (no JSON library,
// no recursion): one pass, linear in the text, with a bounded nesting depth, so any input, however
// malformed or large, is answered (or refused) without a crash or a hang.

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mlaplan {

/// Where a value starts in a text.
struct JsonTextLocation {
  std::size_t offset = 0;  ///< byte offset from the start of the text (0-based)
  std::size_t line = 1;    ///< 1-based; lines end at '\n' (as nlohmann's parse errors count them)
  std::size_t column = 1;  ///< 1-based, in bytes from the start of the line (as nlohmann's parse errors)
};

/// Nesting past this many open arrays and objects makes locate_json_value() answer nothing.
inline constexpr std::size_t kJsonLocateMaxDepth = 512;

/// The reference tokens of a JSON pointer (RFC 6901), with ~1 and ~0 decoded to '/' and '~':
/// "" -> {}, "/a~1b/0" -> {"a/b", "0"}, "/" -> {""}. Nothing for a pointer that does not start
/// with '/' (and is not ""), and for a '~' not followed by '0' or '1'.
std::optional<std::vector<std::string>> parse_json_pointer(std::string_view pointer);

/// Where the value `pointer` (RFC 6901) refers to starts in `json_text`: for an object member its
/// value (not its key), for an array element the element; for "" the document itself (its first
/// character after whitespace and a UTF-8 byte-order mark). Keys are compared after their escapes
/// are decoded (\", \\, \/, \b, \f, \n, \r, \t, \uXXXX with surrogate pairs). Of duplicate keys
/// the last one counts, as nlohmann's parser keeps it. An array index is "0" or a number without
/// leading zeros below the array's size ("-" refers to no element).
///
/// Nothing when the pointer is not a valid pointer or does not resolve, and when the text is not
/// one valid JSON value (RFC 8259: string escapes and UTF-8, number and literal grammar, nothing
/// but whitespace after the value) or nests deeper than kJsonLocateMaxDepth.
std::optional<JsonTextLocation> locate_json_value(std::string_view json_text, std::string_view pointer);

}  // namespace mlaplan
