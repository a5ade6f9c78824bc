// "Did you mean" (include/mlaplan/base/suggest.hpp).

#include "mlaplan/base/suggest.hpp"

#include <algorithm>
#include <utility>

namespace mlaplan {

namespace {

char lower_ascii(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

std::string lower(std::string_view s) {
  std::string o(s);
  for (auto& c : o) c = lower_ascii(c);
  return o;
}

}  // namespace

std::size_t edit_distance(std::string_view a, std::string_view b, bool ignore_case) {
  const auto eq = [ignore_case](char x, char y) { return ignore_case ? lower_ascii(x) == lower_ascii(y) : x == y; };
  // Three rows of the optimal-string-alignment table: i - 2, i - 1 and i.
  std::vector<std::size_t> before(b.size() + 1), prev(b.size() + 1), cur(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t sub = prev[j - 1] + (eq(a[i - 1], b[j - 1]) ? 0 : 1);
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, sub});
      if (i > 1 && j > 1 && eq(a[i - 1], b[j - 2]) && eq(a[i - 2], b[j - 1])) {
        cur[j] = std::min(cur[j], before[j - 2] + 1);  // two adjacent bytes swapped
      }
    }
    std::swap(before, prev);
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::vector<std::string> suggest(std::string_view word, const std::vector<std::string>& names,
                                 const SuggestRules& rules) {
  if (word.empty() || word.size() < rules.min_length || word.size() > kMaxSuggestWordBytes) return {};
  const std::string w = lower(word);
  std::vector<std::string> lowered;
  lowered.reserve(names.size());
  for (const auto& n : names) lowered.push_back(lower(n));
  // The names whose lowered spelling passes `pred`, each with its key (smaller is better); of
  // them the best ones (`only_best`) or all, by key and then in `names` order.
  auto tier = [&](auto pred, bool only_best) {
    std::vector<std::pair<std::size_t, std::size_t>> keyed;  // key, index
    for (std::size_t i = 0; i < names.size(); ++i) {
      std::size_t key = 0;
      if (pred(lowered[i], key)) keyed.emplace_back(key, i);
    }
    std::stable_sort(keyed.begin(), keyed.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
    std::vector<std::string> out;
    for (const auto& [key, i] : keyed) {
      if (only_best && key != keyed.front().first) break;
      out.push_back(names[i]);
    }
    return out;
  };
  std::vector<std::vector<std::string>> tiers;
  // 1. The same ignoring case.
  tiers.push_back(tier([&](const std::string& n, std::size_t&) { return n == w; }, true));
  // 2. Names the word begins, every one of them, shortest first ("gpu-mem" is either
  // --gpu-memory-gib or --gpu-memory-utilization).
  tiers.push_back(tier(
      [&](const std::string& n, std::size_t& key) {
        key = n.size();
        return n.size() > w.size() && n.compare(0, w.size(), w) == 0;
      },
      false));
  // 3. Names the word lies inside, shortest first.
  if (rules.substrings && w.size() >= 3) {
    tiers.push_back(tier(
        [&](const std::string& n, std::size_t& key) {
          key = n.size();
          return n.size() > w.size() && n.find(w) != std::string::npos;
        },
        false));
  }
  // 4. The nearest names within a few edits.
  const std::size_t limit = std::max<std::size_t>(1, std::min<std::size_t>(3, w.size() / 4));
  tiers.push_back(tier(
      [&](const std::string& n, std::size_t& key) {
        // Lengths further apart than the limit cannot be within it.
        const std::size_t gap = n.size() > w.size() ? n.size() - w.size() : w.size() - n.size();
        if (gap > limit) return false;
        key = edit_distance(w, n);
        return key <= limit;
      },
      true));
  // 5. The longest names that lie inside the word (the key: how much of the word is left over).
  if (rules.substrings) {
    tiers.push_back(tier(
        [&](const std::string& n, std::size_t& key) {
          key = w.size() - std::min(w.size(), n.size());
          return n.size() >= 3 && n.size() < w.size() && w.find(n) != std::string::npos;
        },
        true));
  }
  // The first tier that has names decides; too many equally good names say nothing.
  for (auto& t : tiers) {
    if (t.empty()) continue;
    if (t.size() > kMaxSuggestions) return {};
    return std::move(t);
  }
  return {};
}

std::string did_you_mean(const std::vector<std::string>& suggestions) {
  if (suggestions.empty()) return {};
  std::string s = "did you mean ";
  for (std::size_t i = 0; i < suggestions.size(); ++i) {
    if (i > 0) s += i + 1 == suggestions.size() ? " or " : ", ";
    s += "'" + suggestions[i] + "'";
  }
  return s + "?";
}

std::string did_you_mean_suffix(std::string_view word, const std::vector<std::string>& names,
                                const SuggestRules& rules) {
  const std::string s = did_you_mean(suggest(word, names, rules));
  return s.empty() ? s : "; " + s;
}

}  // namespace mlaplan
