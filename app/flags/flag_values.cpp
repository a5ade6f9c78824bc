#include "flags/flag_values.hpp"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <system_error>

#include "mlaplan/base/error.hpp"
#include "mlaplan/base/number_format.hpp"
#include "mlaplan/base/suggest.hpp"
#include "mlaplan/base/text.hpp"

namespace mlaplan::cli {

namespace {

bool decimal_integer_syntax(std::string_view s) {
  const std::size_t start = !s.empty() && s.front() == '-' ? 1 : 0;
  if (start == s.size()) return false;
  for (std::size_t i = start; i < s.size(); ++i) {
    if (s[i] < '0' || s[i] > '9') return false;
  }
  return true;
}

std::string real_text(double v) {
  if (std::isfinite(v) && v == std::floor(v) && std::fabs(v) < 1e15) return format_fixed(v, 0);
  std::string s = format_general(v);  // "1e+18": written "1e18"
  const auto plus = s.find("e+");
  if (plus != std::string::npos) s.erase(plus + 1, 1);
  return s;
}

/// The first long name of CLI11's "--tensor-parallel-size,--tp" (or the first name).
std::string flag_name(const std::string& names) {
  std::string first;
  std::size_t start = 0;
  while (start <= names.size()) {
    const auto comma = names.find(',', start);
    const std::string name = names.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (first.empty()) first = name;
    if (name.rfind("--", 0) == 0) return name;
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return first;
}

/// An option of exactly one value per occurrence, converted by `convert` when the parse reaches
/// its callback. Given twice, CLI11 throws ArgumentMismatch before `convert` runs.
template <typename Convert>
CLI::Option* add_converted(CLI::App& sub, const std::string& names, const std::string& help,
                           const std::string& type_name, Convert convert) {
  const std::string flag = flag_name(names);
  auto* opt = sub.add_option(
      names,
      [flag, convert](const CLI::results_t& values) {
        // One value: the multi-option policy (Throw) rejected more before this runs.
        convert(flag, values.empty() ? std::string() : values.front());
        return true;
      },
      help);
  opt->type_name(type_name);
  opt->expected(1);
  opt->allow_extra_args(false);
  opt->multi_option_policy(CLI::MultiOptionPolicy::Throw);
  return opt;
}

}  // namespace

std::string IntRange::text() const { return shown.empty() ? std::to_string(lo) + ".." + std::to_string(hi) : shown; }

std::string RealRange::text() const {
  const std::string low = min_one_byte ? "2^-30 (1 byte)" : (lo_open ? "above " : "") + real_text(lo);
  return low + " up to " + real_text(hi) + (unit.empty() ? "" : " " + unit);
}

std::int64_t parse_int_value(std::string_view flag, std::string_view text, const IntRange& range) {
  if (!decimal_integer_syntax(text)) {
    throw_usage(std::string(flag) + ": " + mlaplan::quoted(text) + " is not a decimal integer; allowed " +
                range.text());
  }
  std::int64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v, 10);
  if (ec == std::errc::result_out_of_range || (ec == std::errc() && (v < range.lo || v > range.hi))) {
    throw_usage(std::string(flag) + ": " + mlaplan::quoted(text) + " is out of range; allowed " + range.text());
  }
  if (ec != std::errc() || end != text.data() + text.size()) {
    throw_usage(std::string(flag) + ": " + mlaplan::quoted(text) + " is not a decimal integer; allowed " +
                range.text());
  }
  return v;
}

std::int64_t parse_size_value(std::string_view flag, std::string_view text, const IntRange& range) {
  // vLLM's human_readable_int (vllm/utils/argparse_utils.py): the value stripped of spaces, then
  // DIGITS[.DIGITS] with one suffix: k m g t decimal (1e3 ...: int(float(number) * 1e3)), K M G T
  // binary (2^10 ...: whole numbers only); anything else is a plain integer.
  std::string_view v = text;
  while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
  while (!v.empty() && (v.back() == ' ' || v.back() == '\t')) v.remove_suffix(1);
  const std::string allowed = range.text() + " (a size may end in k, m, g, t: 10^3.. or K, M, G, T: 2^10..)";
  if (v.size() >= 2) {
    const char suffix = v.back();
    const std::string_view number = v.substr(0, v.size() - 1);
    const std::string_view decimal_suffixes = "kmgt", binary_suffixes = "KMGT";
    const auto d = decimal_suffixes.find(suffix), b = binary_suffixes.find(suffix);
    if (d != std::string_view::npos || b != std::string_view::npos) {
      // DIGITS or DIGITS.DIGITS
      const auto dot = number.find('.');
      const std::string_view whole = number.substr(0, dot);
      const std::string_view frac = dot == std::string_view::npos ? std::string_view() : number.substr(dot + 1);
      const auto digits = [](std::string_view x) {
        return !x.empty() && std::all_of(x.begin(), x.end(), [](char c) { return c >= '0' && c <= '9'; });
      };
      if (digits(whole) && (dot == std::string_view::npos || digits(frac))) {
        if (b != std::string_view::npos && dot != std::string_view::npos) {
          throw_usage(std::string(flag) + ": " + mlaplan::quoted(text) +
                      ": decimals are not allowed with the binary suffix " + std::string(1, suffix) +
                      " (vLLM refuses it); did you mean " + std::string(number) +
                      static_cast<char>(suffix - 'A' + 'a') + "?");
        }
        long double value = 0;
        if (d != std::string_view::npos) {
          double n = 0;
          const auto r = std::from_chars(number.data(), number.data() + number.size(), n, std::chars_format::fixed);
          if (r.ec != std::errc() && r.ec != std::errc::result_out_of_range) {
            throw_usage(std::string(flag) + ": " + mlaplan::quoted(text) + " is not a size; allowed " + allowed);
          }
          // Python's int(float(number) * 1e3): a double product, truncated toward zero.
          const double mult = d == 0 ? 1e3 : d == 1 ? 1e6 : d == 2 ? 1e9 : 1e12;
          value = std::trunc(static_cast<long double>(n * mult));
        } else {
          std::int64_t n = 0;
          const auto r = std::from_chars(whole.data(), whole.data() + whole.size(), n, 10);
          value = r.ec == std::errc()
                      ? static_cast<long double>(n) * static_cast<long double>(std::int64_t{1} << (10 * (b + 1)))
                      : std::numeric_limits<long double>::infinity();
        }
        if (!(value >= static_cast<long double>(range.lo) && value <= static_cast<long double>(range.hi))) {
          throw_usage(std::string(flag) + ": " + mlaplan::quoted(text) + " is out of range; allowed " + allowed);
        }
        return static_cast<std::int64_t>(value);
      }
    }
  }
  if (!decimal_integer_syntax(v)) {
    throw_usage(std::string(flag) + ": " + mlaplan::quoted(text) + " is not a decimal integer or size; allowed " +
                allowed);
  }
  return parse_int_value(flag, v, range);
}

std::uint64_t parse_uint64_value(std::string_view flag, std::string_view text) {
  const std::string allowed = "0.." + std::to_string(std::numeric_limits<std::uint64_t>::max());
  if (!decimal_integer_syntax(text)) {
    throw_usage(std::string(flag) + ": " + mlaplan::quoted(text) + " is not a decimal integer; allowed " + allowed);
  }
  if (text.front() == '-') {
    // "-0" is 0; any other negative value is out of range.
    if (text.find_first_not_of('0', 1) != std::string_view::npos) {
      throw_usage(std::string(flag) + ": " + mlaplan::quoted(text) + " is out of range; allowed " + allowed);
    }
    return 0;
  }
  std::uint64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v, 10);
  if (ec == std::errc::result_out_of_range) {
    throw_usage(std::string(flag) + ": " + mlaplan::quoted(text) + " is out of range; allowed " + allowed);
  }
  if (ec != std::errc() || end != text.data() + text.size()) {
    throw_usage(std::string(flag) + ": " + mlaplan::quoted(text) + " is not a decimal integer; allowed " + allowed);
  }
  return v;
}

double parse_real_value(std::string_view flag, std::string_view text, const RealRange& range) {
  double v = 0;
  const char* first = text.data();
  const char* last = text.data() + text.size();
  // from_chars takes no leading '+' or space and, with `general`, no hex float; an empty value
  // fails as well.
  const auto [end, ec] = std::from_chars(first, last, v, std::chars_format::general);
  if ((ec != std::errc() && ec != std::errc::result_out_of_range) || end != last) {
    throw_usage(std::string(flag) + ": " + mlaplan::quoted(text) + " is not a decimal number; allowed " + range.text());
  }
  // NaN is low; so is a size of less than one byte (it would become 0 bytes: a value of 2^-30 GiB
  // or more is at least 1 byte however it is rounded).
  const bool low =
      (range.lo_open ? !(v > range.lo) : !(v >= range.lo)) || (range.min_one_byte && !(v * 1073741824.0 >= 1.0));
  if (ec == std::errc::result_out_of_range || low || !std::isfinite(v) || v > range.hi) {
    // A fraction given as a percent (--gpu-memory-utilization 92): say which fraction it means.
    const bool percent = range.lo == 0.0 && range.hi == 1.0 && range.unit.empty() && v >= 2.0 && v <= 100.0;
    throw_usage(std::string(flag) + ": " + mlaplan::quoted(text) + " is out of range; allowed " + range.text() +
                (percent ? " (a fraction, not a percent: " + real_text(v / 100.0) + " is " + std::string(text) + "%)"
                         : std::string()));
  }
  return v;
}

std::vector<TypedFlag> typed_flags(const CLI::App& sub, const std::vector<std::string>& args) {
  std::vector<TypedFlag> typed;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--") break;
    std::string name, value;
    bool inline_value = false;
    if (a.size() > 2 && a.compare(0, 2, "--") == 0) {
      const auto eq = a.find('=');
      name = a.substr(0, eq);
      if (eq != std::string::npos) {
        value = a.substr(eq + 1);
        inline_value = true;
      }
    } else if (a.size() >= 2 && a[0] == '-' && !(a[1] >= '0' && a[1] <= '9') && a[1] != '.') {
      name = a.substr(0, 2);
      if (a.size() > 2) {
        value = a.substr(2);
        inline_value = true;
      }
    } else {
      continue;
    }
    const CLI::Option* opt = nullptr;
    for (const auto* o : sub.get_options()) {
      if (!o->get_positional() && o->check_name(name)) {
        opt = o;
        break;
      }
    }
    if (opt == nullptr || opt->get_lnames().empty()) continue;
    if (!inline_value && opt->get_items_expected_max() > 0 && i + 1 < args.size()) value = args[i + 1];
    const std::string canonical = "--" + opt->get_lnames().front();
    auto seen = std::find_if(typed.begin(), typed.end(), [&](const TypedFlag& t) { return t.canonical == canonical; });
    if (seen == typed.end()) {
      const std::string type = opt->get_type_name();
      typed.push_back(TypedFlag{canonical, name, value, type == "INT" || type.rfind("INT,...", 0) == 0,
                                type.rfind("SIZE", 0) == 0});
    } else if (seen->name != name && seen->name.find(" / " + name) == std::string::npos) {
      seen->name += " / " + name;  // given under two names: both are named
    }
  }
  return typed;
}

std::string as_typed(const std::string& message, const std::vector<TypedFlag>& typed) {
  // The subject: at the start, or after a subcommand's "name: " (a word of letters and '-').
  std::size_t at = 0;
  if (const auto colon = message.find(": ");
      colon != std::string::npos && colon > 0 &&
      std::all_of(message.begin(), message.begin() + static_cast<std::ptrdiff_t>(colon),
                  [](char c) { return (c >= 'a' && c <= 'z') || c == '-'; }) &&
      message[0] != '-') {
    at = colon + 2;
  }
  for (const auto& t : typed) {
    const std::size_t end = at + t.canonical.size();
    if (message.compare(at, t.canonical.size(), t.canonical) != 0 || end >= message.size()) continue;
    const char next = message[end];
    if (next != ':' && next != '[' && next != ' ') continue;
    std::string rest = message.substr(end);
    if (t.integer) {
      // "[i]" of a list: the i-th item of the typed value.
      std::string_view value = t.value;
      std::size_t pos = 0;
      bool item_ok = true;
      if (rest[0] == '[') {
        const auto close = rest.find(']');
        const std::string index = close == std::string::npos ? std::string() : rest.substr(1, close - 1);
        std::int64_t i = -1;
        if (decimal_integer_syntax(index) && index[0] != '-' && index.size() < 10) i = std::stoll(index);
        const std::vector<std::string_view> items = [&] {
          std::vector<std::string_view> v;
          std::size_t start = 0;
          while (true) {
            const auto comma = value.find(',', start);
            v.push_back(value.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start));
            if (comma == std::string_view::npos) break;
            start = comma + 1;
          }
          return v;
        }();
        item_ok = i >= 0 && static_cast<std::size_t>(i) < items.size();
        if (item_ok) value = items[static_cast<std::size_t>(i)];
        pos = close == std::string::npos ? rest.size() : close + 1;
      }
      std::int64_t v = 0;
      const auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), v, 10);
      const bool decimal =
          item_ok && decimal_integer_syntax(value) && ec == std::errc() && ptr == value.data() + value.size();
      const std::string shown = "'" + std::to_string(v) + "'";
      if (decimal && rest.compare(pos, 2, ": ") == 0 && rest.compare(pos + 2, shown.size(), shown) == 0 &&
          std::to_string(v) != value) {
        rest.replace(pos + 2, shown.size(), mlaplan::quoted(value));
      }
    }
    if (t.size && !t.value.empty() && !decimal_integer_syntax(t.value) && rest.compare(0, 2, ": ") == 0) {
      try {
        const std::int64_t v = parse_size_value(
            t.canonical, t.value,
            IntRange{std::numeric_limits<std::int64_t>::min(), std::numeric_limits<std::int64_t>::max(), {}});
        const std::string shown = "'" + std::to_string(v) + "'";
        if (rest.compare(2, shown.size(), shown) == 0) {
          rest.replace(2, shown.size(), mlaplan::quoted(t.value) + " (" + std::to_string(v) + ")");
        }
      } catch (const Error&) {
        // not a size after all: the message as it is
      }
    }
    return message.substr(0, at) + t.name + rest;
  }
  return message;
}

std::vector<std::string> split_list_value(std::string_view flag, std::string_view text) {
  std::vector<std::string> items;
  std::size_t start = 0;
  while (true) {
    const auto comma = text.find(',', start);
    const auto item = text.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    if (item.empty()) {
      throw_usage(std::string(flag) + "[" + std::to_string(items.size()) + "]: empty item in " + mlaplan::quoted(text) +
                  "; give the items separated by single commas, none empty");
    }
    items.emplace_back(item);
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return items;
}

std::vector<std::int64_t> parse_int_list_value(std::string_view flag, std::string_view text, const IntRange& item) {
  std::vector<std::int64_t> values;
  std::size_t start = 0;
  const std::string name(flag);
  while (true) {
    const auto comma = text.find(',', start);
    const auto part = text.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
    const std::string at = name + "[" + std::to_string(values.size()) + "]";
    if (part.empty()) {
      throw_usage(at + ": empty item in " + mlaplan::quoted(text) + "; every item is a decimal integer, allowed " +
                  item.text());
    }
    values.push_back(parse_int_value(at, part, item));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return values;
}

std::vector<std::int64_t> parse_int_list_text(std::string_view where, std::string_view text, const IntRange& item,
                                              std::int64_t max_items, std::vector<std::int64_t>& lines) {
  const std::string at(where);
  const auto blank = [](char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f'; };
  const auto trim = [&](std::string_view s) {
    while (!s.empty() && blank(s.front())) s.remove_prefix(1);
    while (!s.empty() && blank(s.back())) s.remove_suffix(1);
    return s;
  };
  std::vector<std::int64_t> values;
  lines.clear();
  std::int64_t line = 0;
  std::size_t start = 0;
  while (start < text.size()) {
    ++line;
    const auto nl = text.find('\n', start);
    const std::string_view row =
        trim(text.substr(start, nl == std::string_view::npos ? std::string_view::npos : nl - start));
    start = nl == std::string_view::npos ? text.size() : nl + 1;
    if (row.empty()) continue;
    const std::string where_line = at + ": line " + std::to_string(line);
    std::size_t from = 0;
    while (true) {
      const auto comma = row.find(',', from);
      const std::string_view part =
          trim(row.substr(from, comma == std::string_view::npos ? std::string_view::npos : comma - from));
      if (part.empty()) {
        throw_usage(where_line + ": empty item in " + mlaplan::quoted(row) +
                    "; every item is a decimal integer, allowed " + item.text());
      }
      if (static_cast<std::int64_t>(values.size()) >= max_items) {
        throw_usage(at + ": more than " + std::to_string(max_items) + " items (the next on line " +
                    std::to_string(line) + "); allowed 1.." + std::to_string(max_items));
      }
      values.push_back(parse_int_value(where_line, part, item));
      lines.push_back(line);
      if (comma == std::string_view::npos) break;
      from = comma + 1;
    }
  }
  if (values.empty()) {
    throw_usage(at +
                ": no items (it is empty or only blank lines); give one per line or separated by commas, "
                "each a decimal integer, allowed " +
                item.text());
  }
  return values;
}

CLI::Option* add_int_option(CLI::App& sub, const std::string& names, std::int64_t& into, const std::string& help,
                            IntRange range) {
  return add_converted(sub, names, help, "INT", [&into, range](const std::string& flag, const std::string& v) {
    into = parse_int_value(flag, v, range);
  });
}

CLI::Option* add_int_option(CLI::App& sub, const std::string& names, std::optional<std::int64_t>& into,
                            const std::string& help, IntRange range) {
  return add_converted(sub, names, help, "INT", [&into, range](const std::string& flag, const std::string& v) {
    into = parse_int_value(flag, v, range);
  });
}

CLI::Option* add_size_option(CLI::App& sub, const std::string& names, std::optional<std::int64_t>& into,
                             const std::string& help, IntRange range, bool* auto_value) {
  return add_converted(sub, names, help, auto_value ? "SIZE|auto" : "SIZE",
                       [&into, range, auto_value](const std::string& flag, const std::string& v) {
                         if (auto_value && (v == "auto" || v == "-1")) {  // vLLM: -1 is auto as well
                           *auto_value = true;
                           into.reset();
                           return;
                         }
                         into = parse_size_value(flag, v, range);
                       });
}

CLI::Option* add_int_option(CLI::App& sub, const std::string& names, int& into, const std::string& help,
                            IntRange range) {
  range.lo = std::max<std::int64_t>(range.lo, std::numeric_limits<int>::min());
  range.hi = std::min<std::int64_t>(range.hi, std::numeric_limits<int>::max());
  return add_converted(sub, names, help, "INT", [&into, range](const std::string& flag, const std::string& v) {
    into = static_cast<int>(parse_int_value(flag, v, range));
  });
}

CLI::Option* add_seed_option(CLI::App& sub, const std::string& names, std::uint64_t& into, const std::string& help) {
  return add_converted(sub, names, help, "INT",
                       [&into](const std::string& flag, const std::string& v) { into = parse_uint64_value(flag, v); });
}

CLI::Option* add_real_option(CLI::App& sub, const std::string& names, std::optional<double>& into,
                             const std::string& help, RealRange range) {
  return add_converted(sub, names, help, "NUMBER", [&into, range](const std::string& flag, const std::string& v) {
    into = parse_real_value(flag, v, range);
  });
}

CLI::Option* add_int_list_option(CLI::App& sub, const std::string& names, std::vector<std::int64_t>& into,
                                 const std::string& help, IntRange item) {
  return add_converted(sub, names, help, "INT,...", [&into, item](const std::string& flag, const std::string& v) {
    into = parse_int_list_value(flag, v, item);
  });
}

CLI::Option* add_int_list_or_file_option(CLI::App& sub, const std::string& names, std::vector<std::int64_t>& into,
                                         std::optional<std::string>& file, const std::string& help, IntRange item) {
  return add_converted(sub, names, help, "INT,...|@FILE",
                       [&into, &file, item](const std::string& flag, const std::string& v) {
                         if (!v.empty() && v.front() == '@') {
                           if (v.size() == 1) {
                             throw_usage(flag + ": '@' names no file; give @FILE, or @- for standard input");
                           }
                           file = v.substr(1);
                           return;
                         }
                         into = parse_int_list_value(flag, v, item);
                       });
}

CLI::Option* add_list_option(CLI::App& sub, const std::string& names, std::vector<std::string>& into,
                             const std::string& help) {
  return add_converted(sub, names, help, "TEXT,...",
                       [&into](const std::string& flag, const std::string& v) { into = split_list_value(flag, v); });
}

std::string device_list_allowed() {
  return "0.." + std::to_string(std::numeric_limits<int>::max()) + ", a comma-separated list of them, or all";
}

DeviceList parse_device_list_value(std::string_view flag, std::string_view text) {
  const IntRange range{0, std::numeric_limits<int>::max(), device_list_allowed()};
  DeviceList d;
  if (text == "all") {
    d.all = true;
    return d;
  }
  const bool list = text.find(',') != std::string_view::npos;
  const std::vector<std::string> items =
      list ? split_list_value(flag, text) : std::vector<std::string>{std::string(text)};
  for (std::size_t i = 0; i < items.size(); ++i) {
    const std::string at = list ? std::string(flag) + "[" + std::to_string(i) + "]" : std::string(flag);
    if (items[i] == "all") throw_usage(at + ": 'all' stands alone (--device all); allowed " + range.text());
    if (!decimal_integer_syntax(items[i])) {
      throw_usage(at + ": " + mlaplan::quoted(items[i]) + " is not a decimal integer; allowed " + range.text() +
                  did_you_mean_suffix(items[i], {"all"}));
    }
    d.indices.push_back(static_cast<int>(parse_int_value(at, items[i], range)));
  }
  return d;
}

CLI::Option* add_device_list_option(CLI::App& sub, const std::string& names, DeviceList& into,
                                    const std::string& help) {
  return add_converted(sub, names, help, "N|N,N,...|all", [&into](const std::string& flag, const std::string& v) {
    into = parse_device_list_value(flag, v);
  });
}

CLI::Option* add_model_dtype_option(CLI::App& sub, std::optional<std::string>& into) {
  return sub
      .add_option("--dtype", into,
                  "model dtype the engine runs: auto (the config's, the default), half, float16, bfloat16, float, "
                  "float32")
      ->check(one_of({"auto", "half", "float16", "bfloat16", "float", "float32"}));
}

CLI::Validator one_of(std::vector<std::string> allowed) {
  std::string list, set;
  for (const auto& a : allowed) {
    list += (list.empty() ? "" : ", ") + a;
    set += (set.empty() ? "" : ",") + a;
  }
  return CLI::Validator(
      [allowed, list](std::string& value) -> std::string {
        for (const auto& a : allowed) {
          if (value == a) return {};
        }
        return mlaplan::quoted(value) + " is not allowed; allowed: " + list + did_you_mean_suffix(value, allowed);
      },
      "{" + set + "}", "one_of");
}

}  // namespace mlaplan::cli
