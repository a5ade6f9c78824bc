#pragma once
// Numbers and lists on the command line, read as the user wrote them (docs/cli.md, "Flag values").
//
// - An integer is plain decimal: an optional leading '-' and the digits 0-9, nothing else (no
//   '+', no space, no "0x", no exponent, no digit separator); leading zeros are decimal ("010" is
//   10). The '-' is accepted on every integer flag so that a negative value gets the flag's range
//   in the message; no integer flag allows one.
// - A number (a float flag) is a decimal number as std::from_chars reads it (chars_format::general:
//   "0.9", ".5", "1e3", "inf", "nan"); no hex float, no '+', no space. Infinity and NaN are then
//   outside every flag's range.
// - A list is its items separated by ','; an empty item (a doubled or trailing comma) is an error
//   naming the item, --flag[i] with i counted from 0.
// - An empty value is an error, never the default.
//
// Each value is converted once, whole, with std::from_chars, and checked against the flag's
// static range (the bounds of include/mlaplan/base/limits.hpp) while the command line is parsed; a bad
// value is Error(usage) with one line: `--batch: '0x40' is not a decimal integer; allowed
// 1..65536`, `--batch: '18446744073709551616' is out of range; allowed 1..65536`. The library's
// own range checks (src/cache/decode.cpp, src/cache/layout.cpp, src/hardware/target.cpp) still run, for the bounds
// that depend on the config.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace CLI {
class App;
class Option;
class Validator;
}  // namespace CLI

namespace mlaplan::cli {

/// The values an integer flag allows: lo..hi. Where the flag's real bound depends on the config
/// (checked once it is read), `shown` says it in words ("1..max_model_len minus --spec-tokens")
/// and lo..hi is the widest that bound can be.
struct IntRange {
  std::int64_t lo = 0;
  std::int64_t hi = 0;
  std::string shown;
  std::string text() const;  ///< `shown`, or "1..65536"
};

/// The values a float flag allows: lo..hi, lo excluded when `lo_open`; `unit` follows the bounds.
/// A size in GiB that becomes bytes (`min_one_byte`) is at least 2^-30, one byte: a smaller
/// positive value would become 0 bytes, which the flag does not allow.
struct RealRange {
  double lo = 0;
  double hi = 0;
  bool lo_open = false;
  std::string unit;
  bool min_one_byte = false;
  std::string text() const;  ///< "above 0 up to 1", "0 up to 1048576 GiB", "2^-30 (1 byte) up to 1048576 GiB"
};

/// The whole of `text` as a decimal integer in `range`, or Error(usage) naming `flag`.
std::int64_t parse_int_value(std::string_view flag, std::string_view text, const IntRange& range);
/// `text` as vLLM's human_readable_int reads it, in `range`: a decimal integer, or DIGITS[.DIGITS]
/// with k, m, g, t (10^3, 10^6, 10^9, 10^12: "128k" = 128000, "1.5k" = 1500) or whole DIGITS with
/// K, M, G, T (2^10 ...: "128K" = 131072); spaces around it are ignored. Error(usage) naming `flag`.
std::int64_t parse_size_value(std::string_view flag, std::string_view text, const IntRange& range);
/// The whole of `text` as a decimal integer in 0..2^64-1 (--seed), or Error(usage) naming `flag`.
std::uint64_t parse_uint64_value(std::string_view flag, std::string_view text);
/// The whole of `text` as a decimal number in `range`, or Error(usage) naming `flag`.
double parse_real_value(std::string_view flag, std::string_view text, const RealRange& range);
/// The items of a comma-separated list; an empty list or item is Error(usage) naming `flag`[i].
std::vector<std::string> split_list_value(std::string_view flag, std::string_view text);
/// split_list_value(), each item a decimal integer in `item`: Error(usage) naming `flag`[i].
std::vector<std::int64_t> parse_int_list_value(std::string_view flag, std::string_view text, const IntRange& item);
/// The integers of a list file (--context-lens @FILE): items separated by commas, line ends or
/// both; blank lines and the spaces, tabs and carriage returns around an item are ignored; each a
/// decimal integer in `item`, at most `max_items` of them, at least one. `where` names the file
/// ("--context-lens @lens.txt"); `lines` gets the line (1-based) of each item. Error(usage):
/// "WHERE: line 3: 'abc' is not a decimal integer; allowed ...", "WHERE: line 3: empty item in
/// '1,,2'; ...", "WHERE: more than 65536 items (the next on line 65537); allowed 1..65536",
/// "WHERE: no items (it is empty or only blank lines); ...".
std::vector<std::int64_t> parse_int_list_text(std::string_view where, std::string_view text, const IntRange& item,
                                              std::int64_t max_items, std::vector<std::int64_t>& lines);

/// A flag as the user typed it: which of its names, and its value's text. The checks name a flag
/// by its first long name (`canonical`, "--tensor-parallel-size") and quote the value they read
/// ('8'); messages are turned back to what was typed ("--tp: '08'") by as_typed().
struct TypedFlag {
  std::string canonical;  ///< the option's first long name
  std::string name;       ///< the name typed ("--tp"); two names typed: "--tensor-parallel-size / --tp"
  std::string value;      ///< the value's text as typed (of its first occurrence; "" when none)
  bool integer = false;   ///< an integer flag or integer list: a quoted decimal value is the typed text
  bool size = false;      ///< a size flag (vLLM's "128k", "2M"): a quoted value it reads to is the typed text
};

/// The options of `sub` among `args` (the arguments of the parse, in order; a lone "--" ends the
/// flags), each once, in the order first typed: "--name", "--name=value", "-n", "-nVALUE".
std::vector<TypedFlag> typed_flags(const CLI::App& sub, const std::vector<std::string>& args);

/// `message` with its subject as typed: a message that starts with a flag's canonical name
/// (optionally after "SUBCOMMAND: ") followed by ':', '[' or ' ' names the flag as typed, and, for
/// an integer flag, a value quoted right after it ("--batch: '10'", "--context-lens[1]: '7'")
/// that is the typed value (or item) read as a decimal is quoted as typed ('010'); for a size flag,
/// a value quoted right after it that the typed size reads to is quoted as typed with its number
/// ("--max-model-len: '2M' (2097152)"). Anything else is left as it is.
std::string as_typed(const std::string& message, const std::vector<TypedFlag>& typed);

/// verify's --device: "all" (every CUDA device), one index, or a comma-separated list of them
/// (an index may repeat: two runs on one GPU at once).
struct DeviceList {
  bool all = false;
  std::vector<int> indices;  ///< as listed; {0} by default
};
/// The allowed text of --device: "0..2147483647, a comma-separated list of them, or all".
std::string device_list_allowed();
/// `text` as a DeviceList: Error(usage) naming `flag` (one index, as --device N always was) or
/// `flag`[i] (an item of a list), with device_list_allowed() and, for a near miss, 'all'.
DeviceList parse_device_list_value(std::string_view flag, std::string_view text);

// Options bound through these take exactly one value (a list is one comma-separated argument);
// given twice, the parse fails (parse_errors.hpp names the flag and both values). `names` is
// CLI11's ("--tensor-parallel-size,--tp"); messages name the first long name.
CLI::Option* add_int_option(CLI::App& sub, const std::string& names, std::int64_t& into, const std::string& help,
                            IntRange range);
CLI::Option* add_int_option(CLI::App& sub, const std::string& names, std::optional<std::int64_t>& into,
                            const std::string& help, IntRange range);
/// An integer flag in vLLM's size syntax (parse_size_value()); with `auto_value`, "auto" (and
/// vLLM's -1) sets *auto_value and leaves `into` empty.
CLI::Option* add_size_option(CLI::App& sub, const std::string& names, std::optional<std::int64_t>& into,
                             const std::string& help, IntRange range, bool* auto_value = nullptr);
CLI::Option* add_int_option(CLI::App& sub, const std::string& names, int& into, const std::string& help,
                            IntRange range);
CLI::Option* add_seed_option(CLI::App& sub, const std::string& names, std::uint64_t& into, const std::string& help);
CLI::Option* add_real_option(CLI::App& sub, const std::string& names, std::optional<double>& into,
                             const std::string& help, RealRange range);
CLI::Option* add_int_list_option(CLI::App& sub, const std::string& names, std::vector<std::int64_t>& into,
                                 const std::string& help, IntRange item);
CLI::Option* add_list_option(CLI::App& sub, const std::string& names, std::vector<std::string>& into,
                             const std::string& help);
/// add_int_list_option() that also takes @FILE (@- for standard input): a list goes to `into`,
/// FILE to `file` (read when the command runs: parsing opens no file). "@" alone is Error(usage).
CLI::Option* add_int_list_or_file_option(CLI::App& sub, const std::string& names, std::vector<std::int64_t>& into,
                                         std::optional<std::string>& file, const std::string& help, IntRange item);
CLI::Option* add_device_list_option(CLI::App& sub, const std::string& names, DeviceList& into, const std::string& help);

/// --dtype: vLLM's (and SGLang's) model dtype choices (auto, half, float16, bfloat16, float,
/// float32); another value is a usage error listing them. "auto" is the config's dtype (rules).
CLI::Option* add_model_dtype_option(CLI::App& sub, std::optional<std::string>& into);

/// A CLI11 check that the value is one of `allowed`: "--format: 'xml' is not allowed; allowed:
/// text, json, markdown".
CLI::Validator one_of(std::vector<std::string> allowed);

}  // namespace mlaplan::cli
