#pragma once
// Text that came from the input (a config's strings and keys, a flag's value, a file name) made
// inert before it is printed: one line of printable, valid UTF-8 of bounded length, whatever
// bytes the input held (docs/robustness.md, "Text from the input"). Every message and every
// output format prints such text through these.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace mlaplan {

/// The default bound of quoted(): bytes of a value from the input shown before it is cut.
inline constexpr std::size_t kQuotedMaxBytes = 80;
/// The bound for a file name: a path is shown whole up to this length (PATH_MAX is 4096; a real
/// one is rarely over 200 bytes).
inline constexpr std::size_t kQuotedPathMaxBytes = 1024;

/// `s` as printable text: printable ASCII and valid UTF-8 characters stay as they are; a
/// newline, carriage return and tab become \n, \r, \t; any other C0 control (NUL, ESC, ...) and
/// DEL become \xNN; C1 controls, line and paragraph separators, bidirectional controls and the
/// byte-order mark become \u{NNNN}; a byte that is not part of valid UTF-8 becomes \xNN. The
/// result never holds a control character. With `max_bytes`, at most that many bytes of `s` are
/// shown (cut at a character) and "... (N bytes)" says how long it was.
std::string printable(std::string_view s, std::size_t max_bytes = std::string_view::npos);

/// printable(s, max_bytes) between single quotes, with ' and \ inside escaped as \' and \\, so
/// the value's start and end are unambiguous: 'bf\x00\x1b[31mRED\n::error::x'. Call it as
/// mlaplan::quoted(): for a std::string argument, argument-dependent lookup also finds std::quoted.
std::string quoted(std::string_view s, std::size_t max_bytes = kQuotedMaxBytes);

/// printable() of every line of `text`, the newlines kept: the last guard of a text output, so
/// that no line of it can hold a control character whatever an input string put into it.
std::string printable_lines(std::string_view text);

/// A JSON text (as a JSON writer made it: control characters below 0x20 already escaped, valid
/// UTF-8) with the characters JSON allows raw in a string but printable() escapes (DEL, C1
/// controls, line and paragraph separators, bidirectional controls, the BOM) written as \uXXXX
/// escapes: the same JSON value, and every line of it printable. They can only occur inside
/// strings, where the escape means the same character.
std::string json_printable(std::string json_text);

/// True when `s` is valid UTF-8 without a control character, a line or paragraph separator, a
/// bidirectional control or a byte-order mark: what printable() returns. The oracle of the
/// tests and the fuzz targets for "one line of printable UTF-8".
bool is_printable_line(std::string_view s);

/// `text` with every occurrence of `token` replaced by `with` (left to right, not overlapping):
/// how the rules fill vLLM's message templates ("{d}", "{n}").
std::string replace_all(std::string_view text, std::string_view token, std::string_view with);

/// The most items of a list one message quotes (stages, layers, sizes that work, names); past it
/// the message says how many it left out (docs/robustness.md, "Messages stay bounded"). Every
/// message that joins a list whose length depends on the input goes through join_bounded().
inline constexpr std::size_t kMessageMaxItems = 16;

/// `count` items, `item(i)` the i-th, joined by `sep`: at most `max_items` of them, then
/// "..., (N more)" saying how many were left out ("0-0, 1-1, ... (4080 more)"). Only the items
/// shown are built, so a list of any length costs `max_items` items. `empty` when count is 0.
std::string join_bounded(std::size_t count, const std::function<std::string(std::size_t)>& item,
                         std::string_view sep = ", ", std::size_t max_items = kMessageMaxItems,
                         std::string_view empty = "");
/// The same for a list of strings (each used as it is: make input text printable first).
std::string join_bounded(const std::vector<std::string>& items, std::string_view sep = ", ",
                         std::size_t max_items = kMessageMaxItems, std::string_view empty = "");
/// The same for a list of integers.
std::string join_bounded(const std::vector<std::int64_t>& items, std::string_view sep = ", ",
                         std::size_t max_items = kMessageMaxItems, std::string_view empty = "");

}  // namespace mlaplan
